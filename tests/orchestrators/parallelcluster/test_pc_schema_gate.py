"""The schema gate: every ParallelCluster example's rendered configuration, as the template carries it, passes
ParallelCluster's own schema and offline validators (aws-parallelcluster in .venv-pcluster); a configuration that
breaks ParallelCluster's rules fails the same gate."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from helpers.parallelcluster import (
    ROOT,
    configuration,
    pcluster_update_check,
    pcluster_update_check_script,
    pcluster_validate,
    pcluster_validate_script,
    references,
    with_placeholders,
)
from helpers.storage import fsx_mounts

from fmcluster.orchestrators.parallelcluster.config import ClusterInputs, cluster_configuration
from fmcluster.orchestrators.parallelcluster.settings import PCLUSTER_VERSION, cluster_name
from fmcluster.platforms.storage import PARALLELCLUSTER
from fmcluster.registry import load_spec

EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.yaml")
                  if load_spec(p).orchestrator.type == "parallelcluster")


def test_there_are_parallelcluster_examples_with_and_without_a_capacity_block():
    assert "parallelcluster-p5" in EXAMPLES and "parallelcluster-p5en-capacity-block" in EXAMPLES


def test_the_lock_meets_aws_parallelclusters_own_requirements(pcluster_python):
    """Each package the lock pins satisfies aws-parallelcluster's Requires-Dist for it (read from the installed
    distribution's metadata): the gate must run ParallelCluster with dependencies it accepts."""
    import subprocess

    from packaging.requirements import Requirement

    out = subprocess.run([str(pcluster_python), "-c", "import importlib.metadata as m; "
                          "print('\\n'.join(m.requires('aws-parallelcluster') or []))"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    wanted = {}
    for line in out.stdout.splitlines():
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate():
            wanted.setdefault(req.name.lower().replace("_", "-"), []).append(req.specifier)
    pins = {}
    for line in (ROOT / "requirements-pcluster.lock").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower()] = version.strip()
    outside = {name: (pins[name], [str(s) for s in specs]) for name, specs in wanted.items()
               if name in pins and not all(s.contains(pins[name], prereleases=True) for s in specs)}
    assert outside == {}


def test_the_gate_runs_the_pinned_parallelcluster(pcluster_python):
    lock = (ROOT / "requirements-pcluster.lock").read_text()
    assert f"aws-parallelcluster=={PCLUSTER_VERSION}\n" in lock
    import subprocess

    out = subprocess.run([str(pcluster_python), "-c", "import importlib.metadata as m; "
                          "print(m.version('aws-parallelcluster'))"], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == PCLUSTER_VERSION, out.stderr


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_passes_parallelclusters_own_schema(example, synth_example, pcluster_python, tmp_path):
    spec = load_spec(ROOT / "examples" / f"{example}.yaml")
    config = configuration(synth_example(example)[spec.stack_name("cluster")])
    assert references(config), "the configuration carries CloudFormation references, not copied ids"
    code, report = pcluster_validate(pcluster_python, with_placeholders(config), cluster_name(spec), tmp_path)
    assert code == 0 and report["valid"], report["errors"]
    # nothing to warn about either: every ParallelCluster recommendation is followed
    assert [f for f in report["findings"] if f["level"] != "INFO"] == [], report["findings"]
    assert set(report["blocked_aws_calls"]) <= {"ec2.DescribeCapacityReservations"}


def as_cloudformation_delivers(value: Any) -> Any:
    """CloudFormation hands a custom resource's properties to its function with every scalar as a string."""
    if isinstance(value, dict):
        return {k: as_cloudformation_delivers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_cloudformation_delivers(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, (int, float)) else value


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_configuration_as_the_provider_receives_it_passes_too(example, synth_example, pcluster_python, tmp_path):
    spec = load_spec(ROOT / "examples" / f"{example}.yaml")
    config = with_placeholders(configuration(synth_example(example)[spec.stack_name("cluster")]))
    delivered = as_cloudformation_delivers(config)
    assert delivered["HeadNode"]["Networking"]["ElasticIp"] == "false"
    code, report = pcluster_validate(pcluster_python, delivered, cluster_name(spec), tmp_path)
    assert code == 0 and report["valid"], report["errors"]


def _placeholder_inputs() -> ClusterInputs:
    return ClusterInputs(subnet_id="subnet-0123456789abcdef0", security_group_id="sg-0123456789abcdef0",
                         head_node_policy_arn="arn:aws:iam::123456789012:policy/parallelcluster-h",
                         compute_policy_arn="arn:aws:iam::123456789012:policy/parallelcluster-c",
                         placement_groups={"gpu": "pg-gpu"})


def test_the_gate_fails_a_capacity_block_with_fewer_static_nodes(pcluster_python, tmp_path):
    """ParallelCluster's ComputeResourceSizeValidator, not our own rule, refuses MinCount < MaxCount here."""
    spec = load_spec(ROOT / "examples" / "parallelcluster-p5en-capacity-block.yaml")
    config = cluster_configuration(spec, _placeholder_inputs())
    broken = copy.deepcopy(config)
    broken["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["MinCount"] = 2
    code, report = pcluster_validate(pcluster_python, broken, "pc-p5en", tmp_path)
    assert code == 1 and not report["valid"]
    assert any("ComputeResourceSizeValidator" in e for e in report["errors"]["_validators"]), report["errors"]


def test_the_gate_fails_an_efa_queue_without_a_placement_choice(pcluster_python, tmp_path):
    spec = load_spec(ROOT / "examples" / "parallelcluster-p5.yaml")
    config = cluster_configuration(spec, _placeholder_inputs())
    del config["Scheduling"]["SlurmQueues"][0]["Networking"]["PlacementGroup"]
    code, report = pcluster_validate(pcluster_python, config, "pc-p5", tmp_path)
    assert code == 1
    assert any("EfaPlacementGroupValidator" in e for e in report["errors"]["_validators"]), report["errors"]


def test_the_gate_fails_a_reference_left_in_place(pcluster_python, synth_example, tmp_path):
    """Why the placeholders: ParallelCluster's schema reads ids, not CloudFormation intrinsics."""
    spec = load_spec(ROOT / "examples" / "parallelcluster-p5.yaml")
    config = with_placeholders(configuration(synth_example("parallelcluster-p5")[spec.stack_name("cluster")]))
    config["HeadNode"]["Networking"]["SubnetId"] = {"Fn::ImportValue": "pc-p5-network:Subnet"}
    code, report = pcluster_validate(pcluster_python, config, "pc-p5", tmp_path)
    assert code == 1 and "HeadNode" in report["errors"], report["errors"]


def test_the_gate_process_the_tests_share_answers_as_the_scripts_do(pcluster_python, tmp_path):
    """The tests ask one long-lived scripts/pcluster_serve.py; the scripts run one configuration per process. The
    same configurations, one refused between two accepted, answer the same both ways (no state carried over)."""
    spec = load_spec(ROOT / "examples" / "parallelcluster-p5.yaml")
    good = cluster_configuration(spec, _placeholder_inputs())
    bad = copy.deepcopy(good)
    del bad["Scheduling"]["SlurmQueues"][0]["Networking"]["PlacementGroup"]
    served = [pcluster_validate(pcluster_python, c, "pc-p5", tmp_path) for c in (good, bad, good)]
    assert [rc for rc, _ in served] == [0, 1, 0]
    assert served[0] == served[2]
    assert served[:2] == [pcluster_validate_script(pcluster_python, c, "pc-p5", tmp_path) for c in (good, bad)]
    newer = copy.deepcopy(good)
    newer["Scheduling"]["SlurmQueues"][0]["ComputeResources"][0]["MaxCount"] += 1
    assert pcluster_update_check(pcluster_python, good, newer, "pc-p5", tmp_path) == \
        pcluster_update_check_script(pcluster_python, good, newer, "pc-p5", tmp_path)


def test_the_gate_fails_an_invalid_cluster_name(pcluster_python, tmp_path: Path):
    spec = load_spec(ROOT / "examples" / "parallelcluster-p5.yaml")
    code, report = pcluster_validate(pcluster_python, cluster_configuration(spec, _placeholder_inputs()),
                                     "9-starts-with-a-digit", tmp_path)
    assert code == 1 and any("ClusterNameValidator" in e for e in report["errors"]["_validators"])


def test_an_odcr_cluster_passes_with_only_the_warning_parallelcluster_expects_for_reservations(pcluster_python, tmp_path):
    """An ODCR made in a placement group launches into it (placement.existing_group);
    an open one gets no placement group at all, never one of fmcluster's (ParallelCluster warns about a reservation
    in an unrelated group). The only finding is ParallelCluster's EFA note that a disabled placement group "is
    expected when using a capacity reservation"."""
    import yaml

    from fmcluster.app import build_stacks
    from fmcluster.registry import parse_spec

    data = yaml.safe_load((ROOT / "examples" / "parallelcluster-p5.yaml").read_text())
    data["orchestrator"]["parallelcluster"].pop("queues", None)
    data["node_groups"] = [
        {"name": "pinned", "instance_type": "p5.48xlarge", "count": 2, "placement": {"existing_group": "odcr-pg"},
         "capacity": {"type": "odcr", "reservation_id": "cr-0a1b2c3d4e5f60718"}},
        {"name": "open", "instance_type": "p5.48xlarge", "count": 2,
         "capacity": {"type": "odcr", "reservation_id": "cr-0fedcba9876543210"}},
    ]
    spec = parse_spec(data)
    stacks = build_stacks(spec, outdir=str(tmp_path / "out"))
    template = stacks.app.synth().get_stack_by_name(spec.stack_name("cluster")).template
    assert not [r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::PlacementGroup"]
    config = configuration(template)
    pinned, open_ = config["Scheduling"]["SlurmQueues"]
    assert pinned["Networking"]["PlacementGroup"] == {"Enabled": True, "Name": "odcr-pg"}
    assert open_["Networking"]["PlacementGroup"] == {"Enabled": False}
    code, report = pcluster_validate(pcluster_python, with_placeholders(config), cluster_name(spec), tmp_path)
    assert code == 0 and report["valid"], report["errors"]
    (warning,) = [f for f in report["findings"] if f["level"] != "INFO"]
    assert warning["validator"] == "EfaPlacementGroupValidator" and "'open'" in warning["message"]
    assert "expected when using a capacity reservation" in warning["message"]


def test_the_gate_fails_a_shared_mount_dir_over_the_nodes_instance_storage(pcluster_python, tmp_path):
    """ParallelCluster mounts instance storage at /scratch (EphemeralVolume.MountDir): a shared file system inside
    it overlaps it (an error), one at /scratch itself clashes with it (a warning), online and now offline too."""
    import dataclasses

    spec = load_spec(ROOT / "examples" / "parallelcluster-p5.yaml")
    def at(mount_point: str) -> ClusterInputs:
        (fsx,) = fsx_mounts(file_system_id="fs-0123456789abcdef0", mount_point=mount_point)
        return dataclasses.replace(_placeholder_inputs(), shared_storage=[fsx.services[PARALLELCLUSTER]])

    inputs = at("/fsx")
    assert pcluster_validate(pcluster_python, cluster_configuration(spec, inputs), "pc-p5", tmp_path)[0] == 0
    inside = at("/scratch/shared")
    code, report = pcluster_validate(pcluster_python, cluster_configuration(spec, inside), "pc-p5", tmp_path)
    assert code == 1
    assert any("OverlappingMountDirValidator" in e and "/scratch" in e for e in report["errors"]["_validators"])
    same = at("/scratch")
    code, report = pcluster_validate(pcluster_python, cluster_configuration(spec, same), "pc-p5", tmp_path)
    assert "DuplicateMountDirValidator" in [f["validator"] for f in report["findings"] if f["level"] == "WARNING"]


@pytest.mark.parametrize("script", ["/opt/fmcluster/on_node_configured.sh", "file:///opt/x.sh", "s3://bucket-only"])
def test_the_gate_fails_a_custom_action_script_parallelcluster_cannot_fetch(script, pcluster_python, tmp_path):
    spec = load_spec(ROOT / "examples" / "parallelcluster-p5.yaml")
    config = cluster_configuration(spec, _placeholder_inputs())
    config["Scheduling"]["SlurmQueues"][0]["CustomActions"] = {"OnNodeConfigured": {"Script": script}}
    code, report = pcluster_validate(pcluster_python, config, "pc-p5", tmp_path)
    assert code == 1
    assert any("UrlValidator (re-stated)" in e and script in e for e in report["errors"]["_validators"]), report
