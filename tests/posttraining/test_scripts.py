"""The post-training shell scripts run, with srun, scontrol, ssh and sleep replaced by fakes that record what they are
asked to run: Ray's head starts on the first node and a worker on every other, and the driver each node is handed is
the job's command word for word (after the shell quoting of Slurm, Docker or Pyxis, and SSH), never a word of it run
on the machine that starts the job. Nothing runs on this machine but the script and the fakes."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
from pathlib import Path
from typing import List, Tuple

import pytest

from fmcluster.cli.posttraining_command import render_rl, render_sft
from fmcluster.posttraining import trl, verl, verl_keys
from fmcluster.registry import load_spec

HEAD_IP = "10.0.0.1"
NODES = ["n1", "n2", "n3", "n4"]

FAKES = {
    # scontrol show hostnames LIST: the allocation's nodes
    "scontrol": 'printf "%s\\n" ' + " ".join(NODES),
    # srun: the head's address for `hostname --ip-address`, Pyxis's option in --help where PYXIS=1, else a record
    "srun": f'''case " $* " in
  *" --help "*) [ "${{PYXIS:-0}}" = 1 ] && echo "      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH"; exit 0;;
  *" hostname --ip-address "*) echo "{HEAD_IP} fe80::1"; exit 0;;
esac
n=$(mktemp "$LOG/srun.XXXXXX"); printf "%s\\0" "$@" > "$n"''',
    # ssh HOST COMMAND: the head's address, else a record of the command string the node's shell would read
    "ssh": f'''if [ "$2" = hostname ]; then echo "{HEAD_IP}"; exit 0; fi
case "$2" in "cat > "*) cat > "$LOG/written"; exit 0;; esac
n=$(mktemp "$LOG/ssh.XXXXXX"); printf "%s\\0%s" "$1" "$2" > "$n"''',
    "sleep": "exit 0",
}


def args(**kw) -> argparse.Namespace:
    base = {"group": None, "nodes": None, "model": None, "image": None, "rollout_tp": None, "dataset": None}
    return argparse.Namespace(**{**base, **kw})


def execute(tmp_path: Path, text: str, **env: str) -> Tuple[subprocess.CompletedProcess, List[List[str]]]:
    """Run `text` with the fakes first on PATH: how it ended, and each recorded call's words (in no particular
    order)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "log"
    bin_dir.mkdir()
    log.mkdir()
    for name, body in FAKES.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    script = tmp_path / "job.sh"
    script.write_text(text)
    full = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log), "HOME": str(tmp_path), **env}
    r = subprocess.run(["bash", str(script)], env=full, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    calls = []
    for path in sorted(log.iterdir()):
        if path.name == "written":
            continue
        words = path.read_text().split("\0")
        if path.name.startswith("ssh."):  # the node's shell reads the command string: its words
            calls.append([words[0], *shlex.split(words[1])])
        else:
            calls.append(words[:-1])
    return r, calls


def run_script(tmp_path: Path, text: str, **env: str) -> List[List[str]]:
    r, calls = execute(tmp_path, text, **env)
    assert r.returncode == 0, r.stderr
    return calls


def after(words: List[str], marker: str) -> List[str]:
    return words[words.index(marker) + 1:]


def check_driver(driver: str) -> None:
    """The driver the head node runs: valid bash, preparing once and then veRL with only its release's keys."""
    subprocess.run(["bash", "-n", "-c", driver], check=True, timeout=30)
    train = driver.rsplit("; ", 1)[1]
    words = shlex.split(train)
    assert words[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    keys = [w.split("=", 1)[0] for w in words[3:]]
    assert keys and set(keys) <= verl_keys.KEYS and "trainer.logger=[console]" in words


@pytest.mark.parametrize("pyxis", [False, True], ids=["docker", "pyxis"])
def test_slurm_rl_starts_ray_across_the_allocation_and_hands_the_head_the_driver(tmp_path, pyxis):
    spec = load_spec("examples/hyperpod-slurm-p5.yaml")
    text = render_rl(spec, args(), "spec.yaml")
    calls = run_script(tmp_path, text, SLURM_JOB_ID="7", SLURM_JOB_NODELIST="n[1-4]", PYXIS="1" if pyxis else "0")
    starts = [c for c in calls if "--overlap" not in c]
    (driver_call,) = [c for c in calls if "--overlap" in c]
    heads = [c for c in starts if "--head" in c[-1]]
    assert len(heads) == 1 and after(heads[0], "-w")[0] == NODES[0]
    assert f"--node-ip-address={HEAD_IP}" in heads[0][-1] and "--metrics-export-port 8080" in heads[0][-1]
    workers = sorted(after(c, "-w")[0] for c in starts if c not in heads)
    assert workers == NODES[1:]
    assert all(f"--address={HEAD_IP}:6379" in c[-1] for c in starts if c not in heads)
    assert after(driver_call, "-w")[0] == NODES[0]
    assert driver_call[-5:-1] == ["env", f"RAY_ADDRESS={HEAD_IP}:6379", "bash", "-c"]
    check_driver(driver_call[-1])
    for call in calls:  # every Ray node and the driver in the job's image, by Pyxis or Docker
        if pyxis:
            assert f"--container-image={verl.IMAGE}" in call and "docker" not in call
        else:
            assert call[call.index("docker"):call.index("docker") + 3] == ["docker", "run", "--rm"]
            assert verl.IMAGE in call


def test_the_host_file_script_hands_each_node_the_same_words_over_ssh(tmp_path):
    spec = load_spec("examples/default.yaml")
    text = render_rl(spec, args(), "spec.yaml")
    hosts = tmp_path / "hosts"
    hosts.write_text("# the nodes\nh1\n\nh2 slots=8\n")
    calls = run_script(tmp_path, text, HOSTFILE=str(hosts))
    (head,) = [c for c in calls if "--head" in c[-1]]
    (worker,) = [c for c in calls if "--address=" in c[-1] and c is not head]
    (driver,) = [c for c in calls if "env" in c]
    assert head[0] == driver[0] == "h1" and worker[0] == "h2"
    assert head[1:3] == ["docker", "run"] and verl.IMAGE in head and "HF_HOME=/fsx/posttraining/hf" in head
    assert f"--node-ip-address={HEAD_IP}" in head[-1] and f"--address={HEAD_IP}:6379" in worker[-1]
    assert driver[-5:-1] == ["env", f"RAY_ADDRESS={HEAD_IP}:6379", "bash", "-c"]
    check_driver(driver[-1])
    # the same driver as the job's own command: prepare, then train
    assert driver[-1].startswith("set -euo pipefail; [ -f /fsx/posttraining/models/Qwen/Qwen2.5-0.5B-Instruct/")


def test_the_rayjob_entrypoint_is_one_bash_command_of_the_driver():
    import yaml

    (job,) = yaml.safe_load_all(render_rl(load_spec("examples/eks-p5.yaml"), args(), "spec.yaml"))
    words = shlex.split(job["spec"]["entrypoint"])
    assert words[:2] == ["bash", "-c"] and len(words) == 3
    check_driver(words[2])


def test_slurm_sft_writes_its_config_once_and_runs_one_trl_per_node_with_its_rank(tmp_path):
    spec = load_spec("examples/hyperpod-slurm-p5.yaml")
    mount = tmp_path / "fsx"  # the shared file system, here a folder: the script writes the config there
    fsx = spec.storage.fsx.model_copy(update={"mount_point": str(mount)})
    spec = spec.model_copy(update={"storage": spec.storage.model_copy(update={"fsx": fsx})})
    text = render_sft(spec, args(), "spec.yaml")
    (run,) = run_script(tmp_path, text, SLURM_JOB_ID="7", SLURM_JOB_NODELIST="n[1-4]")
    assert "--kill-on-bad-exit=1" in run and run[-3:-1] == ["bash", "-c"]
    command = run[-1]
    assert command.startswith(trl.install_line() + " && trl sft --config ")
    assert "--machine_rank $SLURM_NODEID" in command and f"--main_process_ip {HEAD_IP}" in command
    assert "--num_processes 32" in command and "--num_machines 4" in command
    import yaml

    config = yaml.safe_load((mount / "posttraining" / "trl-sft.yaml").read_text())
    trl.check_keys(config)
    assert config["model_name_or_path"] == trl.MODEL and config["output_dir"].startswith(str(mount))


def test_the_host_file_sft_writes_its_config_through_the_first_host_and_runs_one_trl_per_host(tmp_path):
    import yaml

    spec = load_spec("examples/default.yaml")
    text = render_sft(spec, args(), "spec.yaml")
    hosts = tmp_path / "hosts"
    hosts.write_text("h1\nh2\n")
    calls = run_script(tmp_path, text, HOSTFILE=str(hosts))
    assert ["h1", "mkdir", "-p", "/fsx/posttraining"] in calls
    config = yaml.safe_load((tmp_path / "log" / "written").read_text())
    trl.check_keys(config)
    runs = sorted((c for c in calls if "trl" in c[-1]), key=lambda c: c[0])
    assert [c[0] for c in runs] == ["h1", "h2"]
    for rank, call in enumerate(runs):
        assert call[1:3] == ["docker", "run"] and trl.IMAGE in call and call[-3:-1] == ["bash", "-c"]
        assert f"--machine_rank {rank} --main_process_ip {HEAD_IP}" in call[-1]
        assert "--num_machines 2" in call[-1] and "--num_processes 16" in call[-1]


@pytest.mark.parametrize("job", ["rl", "sft"])
def test_a_host_file_of_another_size_stops_before_anything_runs(tmp_path, job):
    spec = load_spec("examples/default.yaml")
    text = (render_rl if job == "rl" else render_sft)(spec, args(), "spec.yaml")
    hosts = tmp_path / "hosts"
    hosts.write_text("h1\nh2\nh3\n")
    r, calls = execute(tmp_path, text, HOSTFILE=str(hosts))
    assert r.returncode == 2 and calls == []
    assert f"HOSTFILE names 3 hosts; this job is written for 2: fmcluster job {job} spec.yaml --nodes 3" in r.stderr
