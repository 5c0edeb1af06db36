"""orch.slurm_node, storage.lustre_imports and hw.pcie_link on fixture nodes, healthy and broken."""

from __future__ import annotations

import time

import pytest

from fmcluster.platforms.storage.fsx_lustre.node.checks import parse_imports, parse_lnet_nets
from fmcluster.runtime.probes.pci import _gts, _lanes
from fmcluster.runtime.profile import NodeProfile, ProfileError

from .conftest import TYPES, copy_node

EFA_MOUNT = [{"path": "/fsx", "fstype": "lustre", "efa": True}]
REASON_LINE = "   CurrentWatts=0 AveWatts=0\n"


def set_slurm_state(node, state: str, reason: str = "") -> None:
    node.edit_tool("scontrol", "   State=IDLE ", f"   State={state} ")
    if reason:
        node.edit_tool("scontrol", REASON_LINE, f"{REASON_LINE}   Reason={reason}\n")


# ---- orch.slurm_node ------------------------------------------------------------------------------------

@pytest.mark.parametrize("itype", TYPES)
def test_slurm_node_idle_passes_with_one_scontrol_call(tmp_path, itype):
    node = copy_node(tmp_path, itype)
    res = node.run()
    assert res.status("orch.slurm_node") == "pass"
    assert "State=IDLE" in res.check("orch.slurm_node")["observed"]


def test_slurm_node_drained_by_someone_else_fails(p5):
    set_slurm_state(p5, "IDLE+DRAIN", "Kill task failed [root@2026-09-20T08:12:23]")
    res = p5.run()
    assert res.rc == 1
    assert res.not_passing() == {"orch.slurm_node": "fail"}
    c = res.check("orch.slurm_node")
    assert "State=IDLE+DRAIN" in c["observed"] and "Reason=Kill task failed [root@2026-09-20T08:12:23]" in c["observed"]
    assert "state=resume" in c["remedy"]


def test_drain_policy_keeps_someone_elses_drain_and_reason(p5):
    log = p5.base / "scontrol-updates.log"
    p5.edit_tool("scontrol", "#!/bin/sh\n", f'#!/bin/sh\n[ "$1" = update ] && {{ echo "$@" >> {log}; exit 0; }}\n', 1)
    set_slurm_state(p5, "IDLE+DRAIN", "Kill task failed [root@2026-09-20T08:12:23]")
    res = p5.run("--policy", "drain", "--node-name", "ip-10-1-2-3")
    assert res.rc == 1 and not log.exists()
    assert res.report["action"]["result"].startswith("none (already out of service: ip-10-1-2-3: State=IDLE+DRAIN")


def test_the_node_name_given_is_the_one_looked_up(p5):
    log = p5.base / "scontrol-args.log"
    p5.edit_tool("scontrol", "#!/bin/sh\n", f'#!/bin/sh\necho "$@" >> {log}\n', 1)
    p5.run("--node-name", "gpu-st-p5-1")
    assert "show node gpu-st-p5-1" in log.read_text()


def test_slurm_node_drained_by_fmcluster_passes_so_revalidation_can_pass(p5):
    set_slurm_state(p5, "IDLE+DRAIN", "fmcluster validate: hw.xid [root@2026-09-20T08:12:23]")
    res = p5.run()
    assert res.rc == 0, res.stdout
    c = res.check("orch.slurm_node")
    assert c["status"] == "pass" and "Reason=fmcluster validate: hw.xid" in c["observed"]
    assert "does not resume it" in c["detail"]


def test_fmcluster_reason_does_not_excuse_down(p5):
    set_slurm_state(p5, "DOWN+DRAIN", "fmcluster validate: hw.xid [root@2026-09-20T08:12:23]")
    assert p5.run().status("orch.slurm_node") == "fail"


@pytest.mark.parametrize("state, status", [
    ("ALLOCATED", "pass"), ("MIXED", "pass"), ("IDLE+COMPLETING", "pass"), ("MIXED+COMPLETING", "pass"),
    ("IDLE+CLOUD+POWERING_UP", "pass"),
    ("MIXED+DRAIN", "fail"), ("DOWN", "fail"), ("DOWN+NOT_RESPONDING", "fail"), ("IDLE+NOT_RESPONDING", "fail"),
    ("IDLE+FAIL", "fail"), ("ALLOCATED+FAIL", "fail"), ("DOWN*", "fail"), ("DRAINED", "fail"), ("DRAINING", "fail"),
])
def test_slurm_node_states(p5, state, status):
    set_slurm_state(p5, state)
    assert p5.run().status("orch.slurm_node") == status


def test_down_before_slurmd_runs_is_a_skip_not_a_fail(p5):
    """At boot the validator runs before slurmd: the controller still shows the node DOWN / not responding."""
    set_slurm_state(p5, "DOWN+NOT_RESPONDING", "Not responding [slurm@2026-09-20T08:12:23]")
    p5.edit_tool("systemctl", "for u in \"$@\"; do echo active; done",
                 "for u in \"$@\"; do [ \"$u\" = slurmd ] && echo inactive || echo active; done")
    res = p5.run("--skip", "orch.agent")
    c = res.check("orch.slurm_node")
    assert c["status"] == "skip" and "slurmd is inactive" in c["observed"]
    assert res.rc == 0, res.stdout


def test_drain_before_slurmd_runs_still_fails(p5):
    set_slurm_state(p5, "IDLE+DRAIN", "bad GPU [admin@2026-09-20T08:12:23]")
    p5.edit_tool("systemctl", "for u in \"$@\"; do echo active; done",
                 "for u in \"$@\"; do [ \"$u\" = slurmd ] && echo inactive || echo active; done")
    assert p5.run("--skip", "orch.agent").status("orch.slurm_node") == "fail"


def test_scontrol_missing_is_a_skip(p5):
    (p5.bin / "scontrol").unlink()
    res = p5.run()
    assert res.rc == 0, res.stdout
    c = res.check("orch.slurm_node")
    assert c["status"] == "skip" and "scontrol not installed" in c["observed"]


def test_node_not_yet_known_to_the_controller_is_a_skip(p5):
    p5.tool("scontrol", 'echo "Node $3 not found"; exit 1\n')
    res = p5.run()
    assert res.rc == 0, res.stdout
    c = res.check("orch.slurm_node")
    assert c["status"] == "skip" and "not known to the Slurm controller" in c["observed"]


def test_controller_unreachable_and_garbage_are_errors(p5):
    p5.tool("scontrol", "echo 'slurm_load_node error: Unable to contact slurm controller (connect failure)' >&2; "
                        "exit 1\n")
    res = p5.run()
    assert res.status("orch.slurm_node") == "error"
    assert "Unable to contact slurm controller" in res.check("orch.slurm_node")["observed"]
    p5.tool("scontrol", "echo '%%%%'\n")
    res = p5.run()
    assert res.status("orch.slurm_node") == "error"
    assert "not understood" in res.check("orch.slurm_node")["observed"]


def test_slurm_node_needs_slurm(p5):
    res = p5.run(profile=p5.profile(orchestrator=None))
    assert res.status("orch.slurm_node") == "skip"


# ---- storage.lustre_imports -----------------------------------------------------------------------------

def test_lustre_imports_full_pass(any_node):
    res = any_node.run()
    c = res.check("storage.lustre_imports")
    assert c["status"] == "pass" and c["observed"] == "3 imports (FULL)"


def test_ost_import_disconnected_fails_naming_the_target(p5):
    p5.edit_tool("lctl", "    state: FULL\n", "    state: DISCONN\n", 1)
    res = p5.run()
    assert res.rc == 1
    assert res.not_passing() == {"storage.lustre_imports": "fail"}
    c = res.check("storage.lustre_imports")
    assert c["observed"] == "6cz4zbev-OST0000_UUID DISCONN"
    assert "FSx" in c["remedy"]


def test_idle_import_is_healthy(p5):
    """Lustre >= 2.12 idle-disconnects OSC imports without traffic (osc.*.idle_timeout): state IDLE is normal."""
    p5.edit_tool("lctl", "    state: FULL\n", "    state: IDLE\n", 2)
    res = p5.run()
    assert res.status("storage.lustre_imports") == "pass"
    assert res.check("storage.lustre_imports")["observed"] == "3 imports (FULL, IDLE)"


def test_hung_lctl_is_an_error_within_the_tool_timeout(p5):
    p5.tool("lctl", "sleep 30\n")
    start = time.monotonic()
    res = p5.run("--tool-timeout", "1")
    assert time.monotonic() - start < 8
    assert res.rc == 1
    c = res.check("storage.lustre_imports")
    assert c["status"] == "error" and "timed out" in c["observed"]
    assert res.status("storage.lustre_answers") == "pass"


def test_garbled_or_missing_lctl_is_an_error(p5):
    p5.tool("lctl", "printf '\\x00garbage\\n'\n")
    res = p5.run()
    assert res.status("storage.lustre_imports") == "error"
    assert "printed no import" in res.check("storage.lustre_imports")["observed"]
    (p5.bin / "lctl").unlink()
    res = p5.run()
    assert res.status("storage.lustre_imports") == "error"
    assert "not found on PATH" in res.check("storage.lustre_imports")["observed"]


def test_no_lustre_mounted_skips_imports(p5):
    mounts = (p5.root / "proc/mounts").read_text()
    p5.write("/proc/mounts", "".join(ln + "\n" for ln in mounts.splitlines() if " /fsx " not in ln))
    res = p5.run(profile=p5.profile(mounts=EFA_MOUNT))
    assert res.status("storage.mounts") == "fail"
    assert res.status("storage.lustre_imports") == "skip"


@pytest.mark.parametrize("itype", TYPES)
def test_efa_mount_with_lnet_on_efa_passes(tmp_path, itype):
    node = copy_node(tmp_path, itype)
    res = node.run(profile=node.profile(mounts=EFA_MOUNT))
    assert res.rc == 0, res.stdout
    c = res.check("storage.lustre_imports")
    assert c["status"] == "pass" and "efa NIs up: 8 of 8" in c["observed"]


def test_efa_mount_without_kefalnd_fails(p5):
    p5.remove("/sys/module/kefalnd")
    res = p5.run(profile=p5.profile(mounts=EFA_MOUNT))
    assert res.rc == 1
    assert res.not_passing() == {"storage.lustre_imports": "fail"}
    c = res.check("storage.lustre_imports")
    assert "kefalnd" in c["observed"]
    assert "python3 -m fmcluster.runtime.lustre mount --efa" in c["remedy"]
    assert res.status("storage.lustre_answers") == "pass"  # the mount itself answers (over TCP)


def test_efa_mount_with_lnet_on_tcp_only_fails(p5):
    text = (p5.bin / "lnetctl").read_text()
    p5.tool("lnetctl", text[text.index("\n") + 1:text.index("    - net type: efa\n")] + "EOF\n  ;;\nesac\n")
    res = p5.run(profile=p5.profile(mounts=EFA_MOUNT))
    c = res.check("storage.lustre_imports")
    assert c["status"] == "fail" and "no efa net" in c["observed"]
    assert "--efa" in c["remedy"]


def test_efa_nis_down_fail_and_lnet_down_fails(p5):
    p5.edit_tool("lnetctl", "@efa\n          status: up", "@efa\n          status: down")
    res = p5.run(profile=p5.profile(mounts=EFA_MOUNT))
    c = res.check("storage.lustre_imports")
    assert c["status"] == "fail" and "no efa NI is up" in c["observed"]
    p5.tool("lnetctl", "printf 'show:\\n    - net:\\n          errno: -100\\n          descr: \"Network is down\"\\n' >&2;"
                       " exit 1\n")
    res = p5.run(profile=p5.profile(mounts=EFA_MOUNT))
    assert res.status("storage.lustre_imports") == "fail"
    assert "LNet is down" in res.check("storage.lustre_imports")["observed"]


def test_efa_mount_with_lnetctl_missing_is_an_error(p5):
    (p5.bin / "lnetctl").unlink()
    res = p5.run(profile=p5.profile(mounts=EFA_MOUNT))
    assert res.status("storage.lustre_imports") == "error"


def test_import_and_lnet_parsers_read_both_layouts():
    named = ("osc.fs-OST0000-osc-ffff.import=\nimport:\n    name: fs-OST0000-osc-ffff\n    target: fs-OST0000_UUID\n"
             "    state: EVICTED\n    connection:\n       failover_nids: [ 10.0.1.5@tcp ]\n")
    assert parse_imports(named) == [("fs-OST0000_UUID", "EVICTED")]
    flush = ("net:\n-     net type: tcp\n      local NI(s):\n      -     nid: 10.244.0.10@tcp\n            status: up\n"
             "            interfaces:\n                  0: eth0\n")
    assert parse_lnet_nets(flush) == {"tcp": [{"nid": "10.244.0.10@tcp", "status": "up", "interfaces": ["eth0"]}]}


def test_profile_mount_efa_must_be_a_bool():
    assert NodeProfile.from_catalog("p5.48xlarge", mounts=EFA_MOUNT).mounts[0]["efa"] is True
    with pytest.raises(ProfileError):
        NodeProfile.from_catalog("p5.48xlarge", mounts=[{"path": "/fsx", "efa": "yes"}])


# ---- hw.pcie_link ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("itype", TYPES)
def test_gpu_at_x8_of_x16_fails(tmp_path, itype):
    node = copy_node(tmp_path, itype)
    gpu = sorted(p.name for p in (node.root / "sys/bus/pci/devices").iterdir()
                 if (p / "class").exists() and (p / "class").read_text().startswith("0x0302"))[-1]
    node.write(f"/sys/bus/pci/devices/{gpu}/current_link_width", "8\n")
    res = node.run("--level", "fast")
    assert res.rc == 1
    assert res.not_passing() == {"hw.pcie_link": "fail"}
    c = res.check("hw.pcie_link")
    assert c["observed"] == f"GPU {gpu} x8 of x16 at 32.0 GT/s PCIe"
    assert "degraded PCIe link" in c["remedy"]


def test_efa_device_at_lower_speed_warns(p5):
    p5.write("/sys/class/infiniband/rdmap79s0/device/current_link_speed", "8.0 GT/s PCIe\n")
    res = p5.run("--level", "fast")
    assert res.rc == 0, res.stdout
    c = res.check("hw.pcie_link")
    assert c["status"] == "warn"
    assert c["observed"] == "EFA rdmap79s0 (0000:4f:00.0) 8.0 GT/s PCIe of 16.0 GT/s PCIe (x8)"
    assert "idle" in c["remedy"]


def test_idle_gpu_at_lower_speed_is_fine(p5):
    """GPUs drop their link speed when idle to save power: only the width is judged for a GPU."""
    for bdf in ("0000:53:00.0", "0000:ca:00.0"):
        p5.write(f"/sys/bus/pci/devices/{bdf}/current_link_speed", "2.5 GT/s PCIe\n")
    res = p5.run("--level", "fast")
    assert res.status("hw.pcie_link") == "pass"
    assert res.check("hw.pcie_link")["observed"] == "40 of 40 links at full width"


def test_devices_without_link_attributes_are_not_faults(p5):
    p5.write("/sys/class/infiniband/rdmap80s0/device/current_link_width", "0\n")
    p5.write("/sys/class/infiniband/rdmap81s0/device/current_link_speed", "Unknown\n")
    p5.remove("/sys/bus/pci/devices/0000:53:00.0/max_link_width")
    res = p5.run("--level", "fast")
    c = res.check("hw.pcie_link")
    assert c["status"] == "pass", c
    assert c["observed"] == "38 of 38 links at full width; 2 without link attributes"
    assert "rdmap80s0" in c["detail"] and "0000:53:00.0" in c["detail"]


def test_link_value_formats():
    assert _gts("32.0 GT/s PCIe") == 32.0 and _gts("16 GT/s") == 16.0 and _gts("Unknown") == 0.0
    assert _lanes("16\n") == 16 and _lanes("0") == 0 and _lanes("") == 0
