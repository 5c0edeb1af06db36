"""GPU-to-job attribution on Slurm nodes and the profiling pause: the prolog writes dcgm-exporter's job-mapping
files, the epilog removes them, neither ever fails the job; install.sh runs the exporter on that directory; the
pause frees the counters without paging."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fmcluster.runtime.observability import slurm_hostlist, slurm_job_map, slurm_textfile

ROOT = Path(__file__).resolve().parents[2]
OBS = ROOT / "fmcluster" / "runtime" / "observability"


def gpu_devices(tmp_path, n=8):
    dev = tmp_path / "dev"
    dev.mkdir()
    for i in range(n):
        (dev / f"nvidia{i}").touch()
    (dev / "nvidiactl").touch()
    (dev / "nvidia-uvm").touch()
    return dev


def run(action, env, tmp_path, dev):
    return slurm_job_map.main([action, "--dir", str(tmp_path / "map"), "--dev", str(dev)], env=env)


def test_the_prolog_maps_the_jobs_gpus_and_the_epilog_unmaps_them(tmp_path):
    dev = gpu_devices(tmp_path)
    assert run("prolog", {"SLURM_JOB_ID": "4123", "SLURM_JOB_GPUS": "0,1,2,3"}, tmp_path, dev) == 0
    assert run("prolog", {"SLURM_JOB_ID": "4124", "SLURM_JOB_GPUS": "4,5,6,7"}, tmp_path, dev) == 0
    files = {p.name: p.read_text() for p in (tmp_path / "map").iterdir()}
    assert files == {**{str(i): "4123\n" for i in range(4)}, **{str(i): "4124\n" for i in range(4, 8)}}
    assert run("epilog", {"SLURM_JOB_ID": "4123"}, tmp_path, dev) == 0
    assert sorted(p.name for p in (tmp_path / "map").iterdir()) == ["4", "5", "6", "7"]


def test_without_gpu_gres_the_job_gets_every_gpu_of_the_node(tmp_path):
    dev = gpu_devices(tmp_path)
    run("prolog", {"SLURM_JOB_ID": "77"}, tmp_path, dev)
    assert sorted(int(p.name) for p in (tmp_path / "map").iterdir()) == list(range(8))


def test_it_never_fails_the_job(tmp_path, capsys):
    dev = gpu_devices(tmp_path)
    assert run("prolog", {"SLURM_JOB_ID": "not-a-job"}, tmp_path, dev) == 0
    assert "not a job id" in capsys.readouterr().err and not (tmp_path / "map").exists()
    (tmp_path / "map").write_text("a file where the directory should be")
    assert run("prolog", {"SLURM_JOB_ID": "5", "SLURM_JOB_GPUS": "0"}, tmp_path, dev) == 0
    assert "prolog for job 5" in capsys.readouterr().err


def run_hook(path, env):
    # Slurm runs a prolog with its own environment and no PATH
    return subprocess.run([str(path)], env=env, capture_output=True, text=True, timeout=60)


def test_the_hooks_slurm_runs_write_and_clear_the_map_without_a_path(tmp_path):
    hooks, mapped = tmp_path / "hooks", tmp_path / "map"
    assert slurm_job_map.main(["hooks", "--hook-dir", str(hooks), "--dir", str(mapped)]) == 0
    assert all(os.access(hooks / f"{a}.sh", os.X_OK) for a in ("prolog", "epilog"))
    assert run_hook(hooks / "prolog.sh", {"SLURM_JOB_ID": "812", "SLURM_JOB_GPUS": "2,3"}).returncode == 0
    assert {p.name: p.read_text() for p in mapped.iterdir()} == {"2": "812\n", "3": "812\n"}
    assert run_hook(hooks / "epilog.sh", {"SLURM_JOB_ID": "812"}).returncode == 0
    assert list(mapped.iterdir()) == []


def test_a_hook_whose_interpreter_is_gone_still_lets_the_job_run(tmp_path):
    hooks = tmp_path / "hooks"
    slurm_job_map.write_hooks(str(hooks), python=str(tmp_path / "no-python"), directory=str(tmp_path / "map"))
    assert run_hook(hooks / "prolog.sh", {"SLURM_JOB_ID": "9"}).returncode == 0
    assert not (tmp_path / "map").exists()


def test_a_shim_runs_the_nodes_hook_and_succeeds_on_a_node_without_one(tmp_path):
    hooks, shared, mapped = tmp_path / "hooks", tmp_path / "prolog.d", tmp_path / "map"
    shim = shared / "80_fmcluster_dcgm_job_map"
    slurm_job_map.write_hooks(str(hooks), directory=str(mapped), shims=[str(shim), str(tmp_path / "epilog-shim")])
    assert run_hook(shim, {"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "0"}).returncode == 0
    assert (mapped / "0").read_text() == "7\n"
    (hooks / "prolog.sh").unlink()
    assert run_hook(shim, {"SLURM_JOB_ID": "8", "SLURM_JOB_GPUS": "1"}).returncode == 0
    assert not (mapped / "1").exists()


def test_registering_in_slurm_conf_adds_only_what_is_missing_once():
    conf = "ClusterName=c\nPrologFlags=Alloc,Contain\nPrologSlurmctld=/x\n  epilog = /site/epilog\n"
    text, kept = slurm_job_map.registered(conf)
    assert kept == ["Epilog"]
    assert text == conf + slurm_job_map.REGISTERED + "\nProlog=/opt/fmcluster/slurm/prolog.sh\n"
    assert slurm_job_map.registered(text) == (text, [])
    both = "Prolog=/a\nEpilog=/b"
    assert slurm_job_map.registered(both) == (both, ["Epilog", "Prolog"])


def test_install_writes_the_hooks_before_anything_is_downloaded():
    text = (OBS / "install.sh").read_text()
    main = text[text.index("main() {"):]
    assert main.index("slurm_job_map hooks") < main.index("install_release node_exporter")


def test_install_runs_the_exporter_on_the_job_map(tmp_path):
    text = (OBS / "install.sh").read_text()
    assert f"JOB_MAP_DIR={slurm_job_map.JOB_MAP_DIR}" in text
    assert "--hpc-job-mapping-dir $JOB_MAP_DIR" in text and "-v $JOB_MAP_DIR:$JOB_MAP_DIR:ro" in text


def fake_systemctl(tmp_path, rc):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "systemctl").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path}/calls\nexit {rc}\n")
    (bin_ / "systemctl").chmod(0o755)
    text = tmp_path / "textfile"
    text.mkdir()
    env = {"PATH": f"{bin_}:{os.environ['PATH']}", "FMCLUSTER_TEXTFILE_DIR": str(text)}
    return env, text


def pause(action, env):
    return subprocess.run([str(OBS / "profiling_pause.sh"), action], env=env, capture_output=True, text=True,
                          timeout=30)


def test_the_pause_stops_the_exporter_and_marks_the_node_until_resumed(tmp_path):
    env, text = fake_systemctl(tmp_path, 0)
    assert pause("pause", env).returncode == 0
    mark = (text / "fmcluster_profiling_paused.prom").read_text()
    assert 'fmcluster_gpu_metrics_unavailable{reason="profiling-paused"} 1' in mark
    assert pause("resume", env).returncode == 0
    assert not (text / "fmcluster_profiling_paused.prom").exists()
    assert (tmp_path / "calls").read_text().split("\n")[:2] == ["stop fmcluster-dcgm-exporter.service",
                                                                  "start fmcluster-dcgm-exporter.service"]


def test_a_failed_resume_keeps_the_mark_and_says_so(tmp_path):
    env, text = fake_systemctl(tmp_path, 1)
    (text / "fmcluster_profiling_paused.prom").write_text("x")
    r = pause("resume", env)
    assert r.returncode == 1 and "could not start" in r.stderr
    assert (text / "fmcluster_profiling_paused.prom").exists()
    assert pause("sideways", env).returncode == 2


# --- job -> nodes from the Slurm collector's squeue (no job mapping needed) -----------------------------------------


def test_slurm_host_lists_expand_as_scontrol_show_hostnames_does():
    assert slurm_hostlist.expand("gpu-st-p5-[1-3,7]") == ["gpu-st-p5-1", "gpu-st-p5-2", "gpu-st-p5-3", "gpu-st-p5-7"]
    assert slurm_hostlist.expand("ip-10-1-2-[08-10],login1") == ["ip-10-1-2-08", "ip-10-1-2-09", "ip-10-1-2-10",
                                                                 "login1"]
    assert slurm_hostlist.expand("a[1-2]-b[1-2]") == ["a1-b1", "a1-b2", "a2-b1", "a2-b2"]
    for bad in ("a[1-2", "a]1[", "a[2-1]", "a[x]", "a[1-1000000]"):
        with pytest.raises(slurm_hostlist.HostlistError):
            slurm_hostlist.expand(bad)


def test_squeue_lines_name_the_nodes_of_each_running_job():
    jobs = slurm_textfile.parse_squeue("4123|p5-st-gpu-[1-2]\n4124_3|p5-st-gpu-3\ngarbled\n4125|p5-[\n")
    assert jobs == {"4123": ["p5-st-gpu-1", "p5-st-gpu-2"], "4124_3": ["p5-st-gpu-3"]}


def test_a_hung_squeue_writes_no_job_series_but_keeps_the_node_states(tmp_path):
    sinfo = tmp_path / "sinfo"
    sinfo.write_text("#!/bin/sh\necho 'gpu-1|allocated'\n")
    squeue = tmp_path / "squeue"
    squeue.write_text("#!/bin/sh\nsleep 5\n")
    for f in (sinfo, squeue):
        f.chmod(0o755)
    out = tmp_path / "slurm.prom"
    assert slurm_textfile.main(["--sinfo", str(sinfo), "--timeout", "0.5", "--out", str(out)]) == 0
    text = out.read_text()
    assert "fmcluster_slurm_collector_success 1" in text and "fmcluster_slurm_job_node" not in text
