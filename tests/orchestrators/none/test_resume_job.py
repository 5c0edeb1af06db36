"""examples/jobs/resume-train-none.sh on examples/default.yaml (no orchestrator): with no scheduler, the script on each
node starts training again until the replaced node rejoins, resuming from the newest complete checkpoint; the managed
tier needs a HyperPod cluster on EKS and is refused."""

from __future__ import annotations

import shutil
import subprocess

from helpers.resume_jobs import JOBS, RESUME, ROOT, checkpoint, expected_settings, problems_with_checkpoints, run, shell_defaults

from fmcluster.registry import load_spec

SCRIPT = JOBS / "resume-train-none.sh"


def test_its_checkpoint_defaults_are_the_specs():
    spec = load_spec(ROOT / "examples" / "default.yaml")
    defaults = shell_defaults(SCRIPT)
    for key, value in expected_settings(spec).items():
        assert defaults[key] == value, key


def test_it_starts_training_again_after_a_failed_attempt_and_resumes_each_time(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("ip-10-1-0-5\nip-10-1-0-6\n")
    checkpoint(tmp_path / "fsx" / "llama", 30)
    failing_once = tmp_path / "torchrun-once"
    # a torchrun stand-in that fails its first rendezvous (a peer died) and succeeds the second time
    failing_once.write_text('#!/bin/bash\necho "torchrun $*" >> "$CALLS"\n'
                            '[ -e "$CALLS.failed" ] && exit 0\ntouch "$CALLS.failed"\nexit 1\n')
    failing_once.chmod(0o755)
    result, calls = run(SCRIPT, tmp_path, (), env={
        "HOSTFILE": str(hosts), "RUN": "llama", "DURABLE_ROOT": str(tmp_path / "fsx"), "LOCAL_ROOT": str(tmp_path / "nvme"),
        "RESUME_DIR": str(RESUME), "TORCHRUN": str(failing_once), "PAUSE_S": "0"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(f"resuming from {tmp_path}/fsx/llama/step-00000030") == 2
    assert len(calls) == 2 and "--rdzv-endpoint=ip-10-1-0-5:29500 --rdzv-id=llama" in calls[0]
    assert "--nnodes=2 " in calls[0] and calls[0].endswith(f"--local {tmp_path}/nvme/llama")


def test_it_gives_up_after_max_attempts(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("a\n")
    result, calls = run(SCRIPT, tmp_path, ("torchrun",), env={
        "HOSTFILE": str(hosts), "RUN": "r", "DURABLE_ROOT": str(tmp_path), "RESUME_DIR": str(RESUME), "STUB_RC": "1",
        "MAX_ATTEMPTS": "3", "PAUSE_S": "0"})
    assert result.returncode == 1 and "gave up after 3 attempts" in result.stderr and len(calls) == 3


def test_the_script_is_shellcheck_clean():
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck missing: make setup installs it"
    r = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout


def test_the_managed_tier_is_refused_with_its_source():
    (problem,) = problems_with_checkpoints("default", tier="managed", memory_percent=20)
    assert problem.startswith("checkpoints.tier: orchestrator none cannot honour tier managed:")
