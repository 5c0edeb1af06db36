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
    return r, (tmp_path / "args").read_text().splitlines()


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
