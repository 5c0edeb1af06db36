"""The fabric acceptance jobs: one script for every orchestrator (sbatch on pcs, hyperpod-slurm and parallelcluster;
a hostfile under none; the MPIJob launcher on eks and hyperpod-eks), run here against stand-ins for mpirun and the
nccl-tests binaries so its output is what `fmcluster accept` reads; the Kubernetes manifests are valid objects,
ask for every GPU and EFA interface of a node and are admitted through the cluster's queue."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers.jobs import objects

from fmcluster.acceptance import nccl_output

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "examples" / "jobs"
SCRIPT = JOBS / "nccl-tests.sbatch"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# A stand-in mpirun: records its arguments and prints the fixture run of the binary it was asked to start.
FAKE_MPIRUN = """#!/bin/bash
echo "$*" >> "$MPIRUN_ARGS"
for arg in "$@"; do case "$arg" in *_perf) binary="$(basename "$arg")" ;; esac; done
case "$binary" in
  all_reduce_perf) sed -n '/nThread/,$p' "$FIXTURE_ALL_REDUCE" ;;
  alltoall_perf) exit "${ALLTOALL_RC:-0}" ;;
esac
"""


def run_script(tmp_path, **env):
    tests = tmp_path / "nccl-tests"
    tests.mkdir()
    for name in ("all_reduce_perf", "alltoall_perf"):
        (tests / name).write_text("#!/bin/sh\n")
        (tests / name).chmod(0o755)
    mpirun = tmp_path / "mpirun"
    mpirun.write_text(FAKE_MPIRUN)
    mpirun.chmod(0o755)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("ip-10-1-60-27 slots=8\nip-10-1-88-154 slots=8\n")
    base = {"PATH": os.environ["PATH"], "NCCL_TESTS_DIR": str(tests), "MPIRUN": str(mpirun),
            "HOSTFILE": str(hostfile), "MPIRUN_ARGS": str(tmp_path / "args"),
            "FIXTURE_ALL_REDUCE": str(FIXTURES / "p5-2node-all_reduce.log")}
    r = subprocess.run(["bash", str(SCRIPT)], env={**base, **env}, capture_output=True, text=True, timeout=60)
    args = tmp_path / "args"
    return r, args.read_text().splitlines() if args.exists() else []


def test_the_script_parses_and_is_shellcheck_clean():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck missing: make setup installs it"
    r = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_the_sbatch_header_asks_for_whole_nodes_with_a_time_limit():
    directives = [line.split()[1] for line in SCRIPT.read_text().splitlines() if line.startswith("#SBATCH")]
    assert "--exclusive" in directives and "--ntasks-per-node=8" in directives
    assert any(d.startswith("--time=") for d in directives) and any(d.startswith("--output=") for d in directives)


def test_without_slurm_it_runs_both_collectives_over_efa_on_every_gpu_of_the_hostfile(tmp_path):
    r, calls = run_script(tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(calls) == 2
    for call, binary in zip(calls, ("all_reduce_perf", "alltoall_perf")):
        assert "-n 16 -N 8 " in call and "--hostfile" in call and "FI_PROVIDER=efa" in call
        assert f"/{binary} -b 8 -e 16G -f 2 -g 1 -c 1 -n 20" in call
    runs = nccl_output.parse(r.stdout)
    assert runs[0].collective == "all_reduce" and runs[0].complete and len(runs[0].hosts) == 2


def test_under_slurm_mpirun_takes_the_allocation(tmp_path):
    r, calls = run_script(tmp_path, SLURM_JOB_ID="42", SLURM_JOB_NUM_NODES="4", HOSTFILE="")
    assert r.returncode == 0, r.stderr
    assert all("-n 32 -N 8 " in c and "--hostfile" not in c for c in calls)


def test_a_failing_collective_fails_the_job_and_says_so(tmp_path):
    r, _ = run_script(tmp_path, ALLTOALL_RC="1")
    assert r.returncode == 1
    assert "== fmcluster nccl-tests: alltoall_perf exited 1 ==" in r.stdout


def test_missing_binaries_are_a_clear_error(tmp_path):
    r = subprocess.run(["bash", str(SCRIPT)], env={"PATH": os.environ["PATH"], "NCCL_TESTS_DIR": str(tmp_path),
                                                    "HOSTFILE": "/dev/null"}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "set NCCL_TESTS_DIR" in r.stderr


@pytest.mark.parametrize("name", ["nccl-tests-eks.yaml", "nccl-tests-hyperpod.yaml"])
def test_the_launcher_runs_the_same_script_with_the_operators_hostfile(name):
    objs = objects(name)
    assert objs["ConfigMap"]["data"]["nccl-tests.sh"] == SCRIPT.read_text()
    launcher = objs["MPIJob"]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in launcher["env"]}
    assert env["HOSTFILE"] == "/etc/mpi/hostfile" and launcher["command"][-1] == "/scripts/nccl-tests.sh"
    assert objs["MPIJob"]["spec"]["runPolicy"]["suspend"] is True


# --- covering every node: pairs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_pairs_run_every_node_with_two_partners_in_the_order_cover_plans(tmp_path, count):
    from fmcluster.acceptance import cover

    hosts = [f"h{i}" for i in range(count)]
    (tmp_path / "pair-hosts").write_text("# the MPI operator's form\n" + "".join(f"{h} slots=8\n" for h in hosts))
    r, calls = run_script(tmp_path, COVER="pairs", HOSTFILE=str(tmp_path / "pair-hosts"))
    assert r.returncode == 0, r.stderr
    ran = [tuple(h.split(":")[0] for h in c.split("--host ")[1].split()[0].split(",")) for c in calls]
    assert ran == cover.pairs(hosts)
    assert all("-n 16 -N 8 " in c and "/all_reduce_perf -b 1G -e 16G " in c for c in calls), "large messages only"
    partners = {h: {p for pair in ran if h in pair for p in pair if p != h} for h in hosts}
    assert all(len(p) == min(2, count - 1) for p in partners.values()), partners
    assert f"== fmcluster nccl-tests: all_reduce_perf on 2 node(s): {hosts[0]} {hosts[1]} ==" in r.stdout


def test_an_unknown_cover_mode_is_refused(tmp_path):
    r, calls = run_script(tmp_path, COVER="some")
    assert r.returncode == 2 and "COVER=some: use all or pairs" in r.stderr and calls == []


def test_the_job_says_what_it_covers_and_how_long_it_takes(tmp_path, capsys):
    from fmcluster.cli import main

    spec = str(ROOT / "examples" / "pcs-p5.yaml")  # 4 x p5.48xlarge
    assert main(["job", "nccl", spec, "--cover", "pairs"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[1].startswith("# This job covers all 4 nodes of group h100 (--cover pairs): all_reduce_perf on 4 pairs")
    assert "about 2 min" in lines[1] and lines[1][2:] in err
    # twice the estimate plus an hour for a first build of nccl-tests on shared storage, at least two hours
    assert 'COVER="${COVER:-pairs}"' in lines and "#SBATCH --time=02:00:00" in lines
    assert main(["job", "nccl", str(ROOT / "examples" / "eks-p5.yaml"), "--cover", "pairs"]) == 0
    config_map, _ = yaml.safe_load_all(capsys.readouterr().out)
    assert 'COVER="${COVER:-pairs}"' in config_map["data"]["nccl-tests.sh"].splitlines()


def test_the_estimate_grows_with_the_nodes_and_sets_the_slurm_time_limit():
    from fmcluster import catalog
    from fmcluster.acceptance import cover, fabric_model

    p5 = fabric_model.Fabric.of(catalog.get("p5.48xlarge"))
    small, large = cover.estimate(p5, "pairs", 4), cover.estimate(p5, "pairs", 256)
    assert (small.runs, large.runs) == (4, 256)
    assert large.minutes > 100 * small.minutes / 2 and large.minutes == pytest.approx(256 * small.minutes / 4)
    assert cover.estimate(p5, "all", 256).runs == 2
