"""Healthy fixture nodes pass; every fault variant is caught by the right check."""

from __future__ import annotations

import json
import time

import pytest

from .conftest import TYPES, copy_node


@pytest.mark.parametrize("level", ["fast", "standard"])
def test_healthy_nodes_pass(any_node, level):
    # the boot level as a node starts it (a process of its own, a bare environment); the other in this process
    res = any_node.run_cli("--level", level) if level == "standard" else any_node.run("--level", level)
    assert res.rc == 0, res.stdout
    assert res.not_passing() == {}
    rep = res.report
    assert rep["verdict"] == "pass" and rep["level"] == level and rep["instance_type"] == any_node.itype
    for c in rep["checks"]:
        assert set(c) >= {"id", "layer", "status", "observed", "expected", "duration_s", "remedy", "required"}
        assert c["status"] in ("pass", "fail", "warn", "skip", "error")
    ran = {c["layer"] for c in rep["checks"] if c["status"] == "pass"}
    assert {"hardware", "accelerator", "communication", "distributed", "storage"} <= ran


def test_fast_level_runs_no_command(p5):
    p5.tool("nvidia-smi", "echo called >> \"$HOME/calls\"; exit 1\n")
    for t in ("fi_info", "systemctl", "lfs", "dcgmi"):
        (p5.bin / t).unlink()
    res = p5.run("--level", "fast")
    assert res.rc == 0, res.stdout
    assert not (p5.base / "calls").exists()


def test_deep_level_on_healthy_node(make_node):
    node = make_node("p5.48xlarge")
    res = node.run("--level", "deep", env={"FMCLUSTER_TORCH_PYTHON": "torch-python"})
    assert res.rc == 0, res.stdout
    for cid in ("deep.dcgm_diag", "deep.gemm", "deep.hbm", "deep.nccl_allreduce", "deep.efa_loopback"):
        assert res.status(cid) == "pass", res.check(cid)


def test_deep_gemm_below_catalog_peak_fails(p5):
    p5.edit_tool("torch-python", '"bf16_tflops": 740.0', '"bf16_tflops": 300.0', 1)
    res = p5.run("--level", "deep", env={"FMCLUSTER_TORCH_PYTHON": "torch-python"})
    assert res.status("deep.gemm") == "fail"
    assert res.status("deep.hbm") == "pass"


# ---- faults ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("itype", TYPES)
def test_efa_device_missing(tmp_path, itype):
    node = copy_node(tmp_path, itype)
    devs = sorted(p.name for p in (node.root / "sys/class/infiniband").iterdir() if p.name.startswith("rdmap"))
    gone = devs[-1]
    node.remove(f"/sys/class/infiniband/{gone}")
    node.edit_tool("fi_info", f"provider: efa\n    fabric: efa\n    domain: {gone}-rdm\n    version: 206.0\n"
                              "    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n", "")
    res = node.run()
    assert res.rc == 1
    assert res.status("efa.devices") == "fail"
    assert res.status("efa.domains") == "fail"
    assert "hw.gpu.pci" not in res.not_passing()


def test_nvlink_ibp_devices_are_not_counted_as_efa(make_node):
    node = make_node("p6-b200.48xlarge")
    assert any(p.name.startswith("ibp") for p in (node.root / "sys/class/infiniband").iterdir())
    res = node.run("--level", "fast")
    assert res.check("efa.devices")["observed"] == 8


def test_gpu_fallen_off_the_bus(p5):
    p5.remove("/proc/driver/nvidia/gpus/0000:ca:00.0")
    p5.append("/dev/kmsg", "3,2001,1843308145,-;NVRM: The NVIDIA GPU 0000:ca:00.0\n"
                           "3,2002,1843308146,-;NVRM: (PCI ID: 10de:2330) installed in this system has\n"
                           "3,2003,1843308147,-;NVRM: fallen off the bus and is not responding to commands.\n")
    p5.edit_tool("nvidia-smi", "7, NVIDIA H100 80GB HBM3, 00000000:CA:00.0, 595.91.07, Enabled, Enabled, 0, No, No, "
                               "Disabled, Completed, Success\n",
                 "Unable to determine the device handle for GPU0000:CA:00.0: Unknown Error\n")
    res = p5.run()
    assert res.rc == 1
    failing = res.not_passing()
    assert failing["hw.gpu.driver"] == "fail"
    assert failing["hw.xid"] == "fail"
    assert failing["hw.smi.gpus"] == "fail"
    assert "reboot" in res.check("hw.xid")["remedy"]


def test_xid_79_in_kernel_log(p5):
    p5.append("/dev/kmsg", "4,2100,5000000000,-;NVRM: Xid (PCI:0000:53:00): 79, pid='<unknown>', name=<unknown>, "
                           "GPU has fallen off the bus.\n")
    res = p5.run("--level", "fast")
    assert res.rc == 1
    assert res.not_passing() == {"hw.xid": "fail"}
    assert "Xid 79" in res.check("hw.xid")["observed"]


def test_application_xid_is_a_warning_only(p5):
    p5.append("/dev/kmsg", "4,2100,5000000000,-;NVRM: Xid (PCI:0000:53:00): 13, pid=1234, name=python, "
                           "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)\n")
    res = p5.run("--level", "fast")
    assert res.rc == 0
    assert res.status("hw.xid") == "warn"


def test_fabric_manager_down(p5):
    p5.tool("systemctl", 'shift; for u in "$@"; do [ "$u" = nvidia-fabricmanager ] && echo failed || echo active;'
                         " done; exit 3\n")
    res = p5.run()
    assert res.rc == 1
    assert res.not_passing() == {"hw.fabricmanager": "fail"}


def test_fabric_in_progress_is_retried_to_a_deadline(p5):
    p5.edit_tool("nvidia-smi", "Completed, Success", "In Progress, N/A")
    start = time.monotonic()
    res = p5.run(profile=p5.profile(fabric_wait_s=1.0))
    assert time.monotonic() - start < 10
    assert res.rc == 1
    assert res.status("hw.fabric") == "fail"
    assert "In Progress" in res.check("hw.fabric")["observed"]


def test_lustre_not_mounted(p5):
    mounts = (p5.root / "proc/mounts").read_text()
    p5.write("/proc/mounts", "".join(ln + "\n" for ln in mounts.splitlines() if " /fsx " not in ln))
    res = p5.run()
    assert res.rc == 1
    assert res.status("storage.mounts") == "fail"
    assert res.status("storage.lustre_answers") == "skip"


def test_lustre_not_answering(p5):
    p5.tool("lfs", "echo 'lfs df: /fsx: Resource temporarily unavailable' >&2; exit 11\n")
    res = p5.run()
    assert res.not_passing() == {"storage.lustre_answers": "fail"}


@pytest.mark.parametrize("itype", TYPES)
def test_incompatible_aws_ofi_nccl(tmp_path, itype):
    node = copy_node(tmp_path, itype)
    node.write("/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so", "stand-in: aws-ofi-nccl 1.12.0\n")
    res = node.run("--level", "fast")
    assert res.rc == 1
    # p5's floor is 1.7.3 (a warning: behind the known-good bundle); p5en's 1.13.0 and p6-b200's 1.15.0 fail
    assert res.status("ofi.plugin") == ("warn" if itype == "p5.48xlarge" else "fail")
    assert res.status("dist.compat") == "fail"  # but 1.12.0 is known bad with EFA installer >= 1.35
    assert "1.35" in res.check("dist.compat")["detail"]


def test_ofi_needs_newer_libfabric(p5):
    pk = (p5.root / "opt/amazon/efa_installed_packages").read_text()
    p5.write("/opt/amazon/efa_installed_packages", pk.replace("2.6.0amzn1.0", "1.21.0amzn1.0"))
    p5.edit_tool("fi_info", "2.6.0amzn1.0", "1.21.0amzn1.0")
    res = p5.run(profile=p5.profile(min_versions={"libfabric": None}))
    assert res.status("dist.compat") == "fail"
    assert "libfabric >= 1.22" in res.check("dist.compat")["detail"]


def test_hung_nvidia_smi_is_an_error_not_a_hang(p5):
    p5.tool("nvidia-smi", "sleep 30\n")
    start = time.monotonic()
    res = p5.run("--tool-timeout", "1")
    assert time.monotonic() - start < 8
    assert res.rc == 1
    for cid in ("hw.smi.gpus", "hw.nvlink", "hw.topology", "hw.fabric"):
        assert res.status(cid) == "error"
    assert "timed out" in res.check("hw.smi.gpus")["observed"]
    assert res.status("efa.domains") == "pass"  # the rest still ran


def test_garbage_nvidia_smi_output(p5):
    p5.tool("nvidia-smi", "printf '\\x00\\x7fgarbage %s\\n' \"$*\"\n")
    res = p5.run()
    assert res.rc == 1
    assert res.status("hw.smi.gpus") == "error"
    assert "not understood" in res.check("hw.smi.gpus")["observed"]


def test_garbage_fi_info_and_missing_tools(p5):
    p5.tool("fi_info", "echo '%%%%'\n")
    (p5.bin / "lfs").unlink()
    res = p5.run()
    assert res.status("efa.domains") == "error"
    assert res.status("storage.lustre_answers") == "error"
    assert "not found on PATH" in res.check("storage.lustre_answers")["observed"]


def test_errors_fail_open_when_the_profile_says_so(p5):
    p5.tool("nvidia-smi", "sleep 30\n")
    res = p5.run("--tool-timeout", "1", profile=p5.profile(errors_fail=False))
    assert res.rc == 0
    assert res.status("hw.smi.gpus") == "error"


def test_wrong_instance_type(p5):
    p5.write("/sys/devices/virtual/dmi/id/product_name", "p5en.48xlarge\n")
    res = p5.run("--level", "fast")
    assert res.not_passing() == {"hw.instance_type": "fail"}


def test_driver_below_minimum_and_userspace_mismatch(p5):
    p5.write("/sys/module/nvidia/version", "570.133.20\n")
    res = p5.run()
    assert res.status("hw.driver.version") == "fail"
    assert res.status("hw.smi.driver_match") == "fail"


def test_blackwell_needs_open_module(make_node):
    node = make_node("p6-b200.48xlarge")
    node.write("/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  595.91.07  "
                                              "Thu Aug 27 12:00:00 UTC 2026\n")
    res = node.run("--level", "fast")
    assert res.status("hw.driver.version") == "fail"
    assert "open kernel modules" in res.check("hw.driver.version")["detail"]


def test_row_remapping_pending(p5):
    p5.edit_tool("nvidia-smi", "Enabled, Enabled, 0, No, No", "Enabled, Enabled, 2, Yes, No", 1)
    res = p5.run()
    assert res.not_passing() == {"hw.ecc": "fail"}


def test_nvlink_link_down(p5):
    p5.edit_tool("nvidia-smi", "\t Link 17: 26.562 GB/s\n", "\t Link 17: <inactive>\n", 1)
    p5.edit_tool("nvidia-smi", "\tNV18\t", "\tNV17\t", 1)
    res = p5.run()
    assert res.status("hw.nvlink") == "fail"
    assert res.status("hw.topology") == "fail"


def test_instance_store_missing_disk(p5):
    p5.remove("/sys/class/nvme/nvme8")
    res = p5.run("--level", "fast")
    assert res.not_passing() == {"storage.instance_store": "fail"}


def test_instance_store_of_the_catalog_size_passes_and_says_its_size(p5):
    res = p5.run("--level", "fast")
    check = res.check("storage.instance_store")
    assert check["status"] == "pass" and "/opt/dlami/nvme mounted (ext4" in check["observed"]
    assert "29,914 GB" in check["observed"] and "of the catalog's 30,400 GB" in check["expected"]


def test_instance_store_smaller_than_the_catalog_says_fails(p5):
    """Seven of the eight 3,800 GB disks in the array (one left out when it was assembled): 26.2 TB of 30.4."""
    p5.edit_tool("df", "size=29914365718528", "size=26175070003200")
    res = p5.run("--level", "fast")
    assert res.not_passing() == {"storage.instance_store": "fail"}
    assert "26,175 GB" in res.check("storage.instance_store")["observed"]


def test_instance_store_on_another_volume_fails(p5):
    """A 100 GiB EBS volume mounted at the path instead of the array."""
    p5.edit_tool("df", "size=29914365718528", "size=107374182400")
    assert p5.run("--level", "fast").not_passing() == {"storage.instance_store": "fail"}


def test_instance_store_size_unreadable_is_an_error_not_a_pass(p5):
    p5.tool("df", 'echo "df: /opt/dlami/nvme: Input/output error" >&2; exit 1\n')
    res = p5.run("--level", "fast")
    assert res.status("storage.instance_store") == "error"
    p5.tool("df", 'printf "     1B-blocks Mounted on\\n29914365718528 /\\n"\n')  # the root's: not mounted there
    assert p5.run("--level", "fast").status("storage.instance_store") == "error"
    p5.tool("df", 'printf "     1B-blocks Mounted on\\n29914365718528 /opt/dlami/nvme\\n"\n')
    no_size = p5.profile()
    profile = json.loads(no_size.read_text())
    profile["facts"]["nvme_gb"] = 0  # disks without a size: the size check cannot run, which is no pass
    no_size.write_text(json.dumps(profile))
    assert p5.run("--level", "fast", profile=no_size).status("storage.instance_store") == "error"


def test_slurmd_inactive(p5):
    p5.tool("systemctl", 'shift; for u in "$@"; do [ "$u" = slurmd ] && echo inactive || echo active; done; exit 3\n')
    res = p5.run()
    assert res.not_passing() == {"orch.agent": "fail"}
