"""`fmcluster job nccl SPEC`: the fabric acceptance job written for the spec's cluster (nodes, GPUs per node, the
Slurm partition), the same script as examples/jobs/nccl-tests.sbatch, checked the way that example is."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fmcluster.cli import main
from fmcluster.cli.job_command import fabric_group
from fmcluster.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SHELL_KINDS = sorted(p.name for p in EXAMPLES.glob("*.yaml")
                     if load_spec(p).orchestrator_kind.nodes.agent != "kubernetes")
KUBERNETES = sorted(p.name for p in EXAMPLES.glob("*.yaml")
                    if load_spec(p).orchestrator_kind.nodes.agent == "kubernetes")
FAKE_MPIRUN = '#!/bin/bash\necho "$*" >> "$MPIRUN_ARGS"\n'


def test_the_packaged_script_is_the_example_job():
    packaged = ROOT / "fmcluster" / "acceptance" / "nccl-tests.sbatch"
    assert packaged.read_text() == (EXAMPLES / "jobs" / "nccl-tests.sbatch").read_text()


def generate(tmp_path, capsys, example, *extra):
    out = tmp_path / "nccl.sbatch"
    assert main(["job", "nccl", str(EXAMPLES / example), "--out", str(out), *extra]) == 0
    capsys.readouterr()
    return out


@pytest.mark.parametrize("example", SHELL_KINDS)
def test_the_job_asks_for_the_groups_nodes_and_gpus_and_parses_clean(tmp_path, capsys, example):
    spec = load_spec(EXAMPLES / example)
    group = fabric_group(spec, None)
    out = generate(tmp_path, capsys, example)
    assert os.access(out, os.X_OK)
    lines = out.read_text().splitlines()
    directives = [ln.split()[1] for ln in lines if ln.startswith("#SBATCH")]
    assert f"--nodes={group.count}" in directives and f"--ntasks-per-node={group.instance.gpus}" in directives
    slurm = spec.orchestrator_kind.nodes.agent == "slurm"
    assert (f"--partition={group.name}" in directives) == slurm
    assert f'GPUS_PER_NODE="${{GPUS_PER_NODE:-{group.instance.gpus}}}"' in lines
    assert subprocess.run(["bash", "-n", str(out)]).returncode == 0
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck missing: make setup installs it"
    r = subprocess.run([shellcheck, str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_under_slurm_the_generated_job_runs_one_rank_per_gpu_of_every_node(tmp_path, capsys):
    example = next(e for e in SHELL_KINDS if load_spec(EXAMPLES / e).orchestrator_kind.nodes.agent == "slurm")
    group = fabric_group(load_spec(EXAMPLES / example), None)
    out = generate(tmp_path, capsys, example)
    tests = tmp_path / "nccl-tests"
    tests.mkdir()
    for name in ("all_reduce_perf", "alltoall_perf"):
        (tests / name).write_text("#!/bin/sh\n")
        (tests / name).chmod(0o755)
    mpirun = tmp_path / "mpirun"
    mpirun.write_text(FAKE_MPIRUN)
    mpirun.chmod(0o755)
    env = {"PATH": os.environ["PATH"], "NCCL_TESTS_DIR": str(tests), "MPIRUN": str(mpirun),
           "MPIRUN_ARGS": str(tmp_path / "args"), "SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": str(group.count)}
    r = subprocess.run(["bash", str(out)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    gpus = group.instance.gpus
    calls = (tmp_path / "args").read_text().splitlines()
    assert len(calls) == 2 and all(f"-n {group.count * gpus} -N {gpus} " in c for c in calls)


@pytest.mark.parametrize("example", KUBERNETES)
def test_kubernetes_clusters_get_the_script_inside_an_mpijob_over_every_gpu_and_efa_interface(tmp_path, capsys, example):
    spec = load_spec(EXAMPLES / example)
    group = fabric_group(spec, None)
    out = tmp_path / "nccl.yaml"
    assert main(["job", "nccl", str(EXAMPLES / example), "--out", str(out)]) == 0
    config_map, job = yaml.safe_load_all(out.read_text())
    assert config_map["data"]["nccl-tests.sh"] == (EXAMPLES / "jobs" / "nccl-tests.sbatch").read_text()
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert 2 <= worker["replicas"] <= group.count and job["spec"]["slotsPerWorker"] == group.instance.gpus
    (container,) = worker["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == group.instance.gpus


def test_an_image_in_the_clusters_region_replaces_the_public_one_and_is_refused_where_nodes_use_their_own(
        tmp_path, capsys):
    image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/nccl-tests:mine"
    assert main(["job", "nccl", str(EXAMPLES / KUBERNETES[0]), "--image", image]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    images = {c["image"] for r in docs[1]["spec"]["mpiReplicaSpecs"].values() for c in r["template"]["spec"]["containers"]}
    assert images == {image}
    assert main(["job", "nccl", str(EXAMPLES / SHELL_KINDS[0]), "--image", image]) == 2
    assert "--image" in capsys.readouterr().err


def test_a_missing_group_or_a_single_node_is_refused_with_the_option(tmp_path, capsys):
    example = SHELL_KINDS[0]
    assert main(["job", "nccl", str(EXAMPLES / example), "--group", "nope"]) == 2
    assert "--group: no node group 'nope'" in capsys.readouterr().err
    spec = tmp_path / "one.yaml"
    spec.write_text("name: one\nregion: us-east-1\navailability_zone: us-east-1a\n"
                    "node_groups: [{name: gpu, instance_type: p5.48xlarge, count: 1}]\n")
    assert main(["job", "nccl", str(spec)]) == 2
    assert "has 1 node; the fabric test needs at least 2" in capsys.readouterr().err


def test_stdout_by_default_and_never_a_half_written_file(tmp_path, capsys):
    assert main(["job", "nccl", str(EXAMPLES / SHELL_KINDS[0])]) == 0
    out = capsys.readouterr().out
    assert out.startswith("#!/bin/bash\n# This job covers all ") and "\n# Generated by `fmcluster job nccl" in out
    assert main(["job", "nccl", str(EXAMPLES / SHELL_KINDS[0]), "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_the_slurm_job_says_how_it_reaches_an_ssm_only_cluster_and_how_its_output_comes_back(tmp_path, capsys):
    """Through S3 and the shared file system where an association imports and one exports (the job is submitted from
    the exported directory, where sbatch writes its output); else over the Session Manager session itself."""
    text = generate(tmp_path, capsys, "parallelcluster-p5.yaml").read_text()
    assert "#   1. your machine: aws s3 cp nccl-tests.sbatch s3://<data bucket>/datasets/jobs/nccl-tests.sbatch" in text
    assert ("#   2. the node of the way in: mkdir -p /fsx/checkpoints/jobs && cd /fsx/checkpoints/jobs && "
            "sbatch /fsx/datasets/jobs/nccl-tests.sbatch") in text
    assert "#   3. your machine: aws s3 cp s3://<data bucket>/checkpoints/jobs/nccl-tests_<jobid>.out ." in text
    assert "#SBATCH --output=%x_%j.out" in text, "the output lands in the directory sbatch runs in"
    without = generate(tmp_path, capsys, "pcs-p5.yaml").read_text()  # no file system associations
    assert "over the session itself" in without and "AWS-StartInteractiveCommand" in without
