"""validation.policy replace on a Slurm node (SageMaker HyperPod): a hardware fault puts the node in state fail with
the reason HyperPod replaces a node for; any other failure drains it, since a new instance would fail the same way."""

from __future__ import annotations

from fmcluster.runtime import actions
from fmcluster.runtime.checks import all_checks


def test_a_hardware_fault_asks_hyperpod_for_a_new_instance():
    out = actions.act("replace", False, ["hw.xid", "versions.nccl"], "ip-10-1-2-3", timeout=1.0, env={"PATH": ""})
    assert out["argv"] == ["scontrol", "update", "nodename=ip-10-1-2-3", "state=fail", "reason=Action:Replace"]
    assert out["result"].startswith("FAILED"), "no scontrol here: the failure is reported, not raised"


def test_a_software_fault_drains_with_the_failing_checks():
    out = actions.act("replace", False, ["versions.nccl"], "ip-10-1-2-3", timeout=1.0, env={"PATH": ""})
    assert out["argv"][:4] == ["scontrol", "update", "nodename=ip-10-1-2-3", "state=drain"]
    assert out["argv"][4] == "reason=fmcluster validate: versions.nccl"


def test_a_healthy_node_is_left_alone():
    assert actions.act("replace", True, [], "ip-10-1-2-3") == {"policy": "replace", "result": "none (healthy)"}


def test_every_hardware_fault_is_a_real_hardware_check():
    hardware = {c.id for c in all_checks() if c.layer == "hardware"}
    assert actions.HARDWARE_FAULTS <= hardware
