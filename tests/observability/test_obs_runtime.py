"""Node side: install.sh (pins, checksum refusal; bash -n and shellcheck in tests/test_quality.py), the collector
configuration and the EFA and Slurm textfile collectors (fixture trees, promtool)."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster import observability as obs
from fmcluster.observability import metrics
from fmcluster.runtime import observability as rt
from fmcluster.runtime.observability import collector_config, efa_textfile, shutdown_mark, slurm_textfile

RUNTIME_DIR = Path(rt.__file__).parent
INSTALL = RUNTIME_DIR / "install.sh"
URL = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-0123abcd-4567-89ef-0123-456789abcdef/api/v1/remote_write"

# EFA hw counter names as documented (EC2 user guide, "Monitor an EFA"; rdma -p statistic show)
EFA_DOC_COUNTERS = """tx_bytes tx_pkts rx_bytes rx_pkts rx_drops send_bytes send_wrs recv_bytes recv_wrs rdma_read_wrs
rdma_read_bytes rdma_read_wr_err rdma_read_resp_bytes rdma_write_wrs rdma_write_bytes rdma_write_wr_err retrans_bytes
retrans_pkts retrans_timeout_events unresponsive_remote_events impaired_remote_conn_events""".split()


# --- install.sh -------------------------------------------------------------------------------------------


def test_install_script_is_executable():
    assert os.access(INSTALL, os.X_OK)


def test_every_download_is_pinned_with_a_sha256_for_both_architectures():
    text = INSTALL.read_text()
    pins = dict(re.findall(r'^([A-Z_]+_SHA256_(?:amd64|arm64))="([^"]*)"', text, re.M))
    assert set(pins) == {f"{c}_SHA256_{a}" for c in ("NODE_EXPORTER", "PROMETHEUS") for a in ("amd64", "arm64")}
    assert all(re.fullmatch(r"[0-9a-f]{64}", v) for v in pins.values())
    assert re.search(r'^NODE_EXPORTER_VERSION="\d+\.\d+\.\d+"$', text, re.M)
    assert re.search(r'^PROMETHEUS_VERSION="\d+\.\d+\.\d+"$', text, re.M)
    assert re.search(r'^DCGM_EXPORTER_DIGEST="sha256:[0-9a-f]{64}"$', text, re.M)
    image = r'^DCGM_EXPORTER_IMAGE="nvcr\.io/nvidia/k8s/dcgm-exporter:[0-9.]+-[0-9.]+-[a-z0-9.]+"$'
    assert re.search(image, text, re.M)
    assert "latest" not in text


def test_exporters_listen_on_loopback_only():
    text = INSTALL.read_text()
    assert "--web.listen-address=127.0.0.1:9100" in text
    assert "--web.listen-address=127.0.0.1:9090" in text
    assert "-p 127.0.0.1:9400:9400" in text
    assert "--collector.textfile.directory=$TEXTFILE_DIR" in text
    assert f'TEXTFILE_DIR="{metrics.TEXTFILE_DIR}"' in text


def test_dcgm_exporter_counts_xids_over_the_window_the_rules_assume():
    """GpuXidError says "in the last 10 minutes": the host collectors' exporter (install.sh) and every Kubernetes
    DaemonSet of it (dcgm-exporter's own default is 5 minutes) count over that window."""
    from fmcluster.platforms.kubernetes import metrics as k8s_metrics

    assert rt.XID_COUNT_WINDOW_MS == 10 * 60 * 1000
    assert "10 minutes" in next(r for _, r in obs.iter_rules() if r.get("alert") == "GpuXidError")["annotations"]["description"]
    text = INSTALL.read_text()
    assert re.search(rf"^XID_COUNT_WINDOW_MS={rt.XID_COUNT_WINDOW_MS}$", text, re.M)
    assert "--xid-count-window-size $XID_COUNT_WINDOW_MS" in text
    daemonsets = [o for o in k8s_metrics.dcgm_exporter(["p5.48xlarge", "p6-b200.48xlarge"]) if o["kind"] == "DaemonSet"]
    assert len(daemonsets) == 2
    for ds in daemonsets:
        args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--xid-count-window-size") + 1] == str(rt.XID_COUNT_WINDOW_MS), ds["metadata"]["name"]
    counters = (RUNTIME_DIR / "dcgm-counters.csv").read_text()
    assert re.search(r"^DCGM_EXP_XID_ERRORS_COUNT, gauge,", counters, re.M)  # a windowed count, not a counter
    assert not re.search(r"^DCGM_FI_DEV_XID_ERRORS\b", counters, re.M)  # the latched last value is not collected


@pytest.mark.parametrize(
    "pinned, ok, message",
    [("good", True, "ok"), ("0" * 64, False, "checksum mismatch"), ("", False, "refusing")],
)
def test_verify_refuses_a_wrong_or_missing_checksum(tmp_path, pinned, ok, message):
    f = tmp_path / "archive.tar.gz"
    f.write_bytes(b"release bytes")
    sha = hashlib.sha256(b"release bytes").hexdigest() if pinned == "good" else pinned
    out = subprocess.run(["bash", str(INSTALL), "verify", str(f), sha], capture_output=True, text=True)
    assert (out.returncode == 0) is ok
    assert message in out.stderr


def test_install_without_arguments_prints_usage():
    out = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True)
    assert out.returncode == 2 and "--remote-write-url" in out.stderr


# --- collector configuration ------------------------------------------------------------------------------


def _node_root(tmp_path: Path, gpu: bool = True) -> Path:
    root = tmp_path / "root"
    dmi = root / "sys/devices/virtual/dmi/id"
    dmi.mkdir(parents=True)
    (dmi / "product_name").write_text("p5.48xlarge\n")
    (dmi / "board_asset_tag").write_text("i-0123456789abcdef0\n")
    (root / "dev").mkdir()
    if gpu:
        (root / "dev/nvidia0").write_text("")
    return root


def _config(tmp_path: Path, *extra: str, gpu: bool = True) -> dict:
    out = tmp_path / "agent.yml"
    rc = collector_config.main(
        ["--cluster", "demo", "--region", "us-east-1", "--remote-write-url", URL, "--scrape-interval", "30",
         "--node-group", "gpu", "--root", str(_node_root(tmp_path, gpu)), "--out", str(out), *extra]
    )
    assert rc == 0
    return json.loads(out.read_text())


def test_collector_config_scrapes_our_exporters_and_remote_writes_with_sigv4(tmp_path):
    cfg = _config(tmp_path)
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert set(jobs) == {"node", "dcgm", "collector", "ray"}
    assert jobs["node"]["static_configs"][0]["targets"] == ["127.0.0.1:9100"]
    assert jobs["dcgm"]["static_configs"][0]["targets"] == ["127.0.0.1:9400"]
    # Ray's metrics agent on a GPU node, at the port `fmcluster job rl` starts every Ray node with
    assert jobs["ray"]["static_configs"][0]["targets"] == ["127.0.0.1:8080"]
    labels = jobs["dcgm"]["static_configs"][0]["labels"]
    assert labels["instance_id"] == "i-0123456789abcdef0"
    assert labels["instance_type"] == "p5.48xlarge"
    assert labels["node_group"] == "gpu" and labels["node"]
    assert set(labels) <= set(metrics.TARGET_LABELS)
    assert cfg["global"]["external_labels"] == {"cluster": "demo"}
    assert cfg["global"]["scrape_interval"] == "30s"
    (rw,) = cfg["remote_write"]
    assert rw["url"] == URL and rw["sigv4"] == {"region": "us-east-1"}


def test_collector_config_passes_promtool(tmp_path, promtool):
    _config(tmp_path)
    out = subprocess.run([promtool, "check", "config", str(tmp_path / "agent.yml")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_collector_config_without_gpus_has_no_dcgm_job(tmp_path):
    cfg = _config(tmp_path, gpu=False)
    assert not {"dcgm", "ray"} & {j["job_name"] for j in cfg["scrape_configs"]}


@pytest.mark.parametrize(
    "args",
    [
        ["--region", "us-east-1", "--remote-write-url", "http://example.com/write"],
        ["--region", "us-west-2", "--remote-write-url", URL],
        ["--region", "nowhere", "--remote-write-url", URL],
        ["--region", "us-east-1", "--remote-write-url", URL, "--scrape-interval", "5"],
    ],
)
def test_collector_config_rejects_bad_arguments(tmp_path, capsys, args):
    assert collector_config.main(["--cluster", "demo", *args, "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err
    assert not (tmp_path / "x").exists()


# --- EFA textfile -----------------------------------------------------------------------------------------


def _efa_tree(tmp_path: Path) -> Path:
    root = tmp_path / "efa"
    drivers = root / "sys/bus/pci/drivers"
    for drv in ("efa", "mlx5_core"):
        (drivers / drv).mkdir(parents=True)
    devices = (("rdmap79s0", "efa", "4: ACTIVE"), ("rdmap80s0", "efa", "1: DOWN"), ("ibp3s0", "mlx5_core", "4: ACTIVE"))
    for dev, drv, state in devices:
        d = root / "sys/class/infiniband" / dev
        (d / "device").mkdir(parents=True)
        (d / "device/driver").symlink_to(drivers / drv)
        port = d / "ports/1"
        (port / "hw_counters").mkdir(parents=True)
        (port / "state").write_text(state + "\n")
        for i, c in enumerate(EFA_DOC_COUNTERS):
            (port / "hw_counters" / c).write_text(f"{i}\n")
    return root


def test_efa_collector_reads_efa_devices_only(tmp_path):
    count, ports, counters = efa_textfile.collect(str(_efa_tree(tmp_path)))
    assert count == 2
    assert sorted((s[0]["device"], s[1]) for s in ports) == [("rdmap79s0", 1), ("rdmap80s0", 0)]
    assert {s[0]["counter"] for s in counters} == set(EFA_DOC_COUNTERS)
    assert set(metrics.EFA_ERROR_COUNTERS) <= set(EFA_DOC_COUNTERS)
    assert all(s[0]["device"] != "ibp3s0" for s in counters)


def test_efa_textfile_is_valid_exposition_with_catalog_names(tmp_path, promtool):
    out = tmp_path / "efa.prom"
    assert efa_textfile.main(["--root", str(_efa_tree(tmp_path)), "--out", str(out)]) == 0
    text = out.read_text()
    lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    names = set(re.findall(r"^([a-z_]+)[{ ]", text, re.M))
    want = {m.name for m in metrics.CATALOG if m.exporter == metrics.EFA_COLLECTOR}
    assert names == want
    assert 'fmcluster_efa_hw_stat_total{counter="rx_drops",device="rdmap79s0",port="1"} 4' in text


def test_efa_collector_on_a_node_without_efa(tmp_path):
    assert efa_textfile.collect(str(tmp_path)) == (0, [], [])


# --- Slurm textfile ---------------------------------------------------------------------------------------

SINFO = """gpu-1|drained
gpu-1|drained
gpu-2|mixed
gpu-3|idle*
gpu-4|down*
gpu-5|draining
cpu-1|allocated+
"""


def test_slurm_states_are_parsed_with_suffixes(tmp_path):
    nodes = slurm_textfile.parse_sinfo(SINFO)
    assert {n: (st.base, st.responding) for n, st in nodes.items()} == {
        "gpu-1": ("drained", True), "gpu-2": ("mixed", True), "gpu-3": ("idle", False),
        "gpu-4": ("down", False), "gpu-5": ("draining", True), "cpu-1": ("allocated+", True),
    }
    assert not any(st.powered_down for st in nodes.values())


def test_slurm_power_saving_states_are_powered_down():
    """~ (powered off) and % (powering off) are Slurm's power saving, as ParallelCluster stops idle
    dynamic nodes; # (powering up) and ! (power down pending) still run."""
    nodes = slurm_textfile.parse_sinfo("a|idle~\nb|idle%\nc|idle#\nd|idle!\ne|down~*\nf|idle\n")
    assert {n: st.powered_down for n, st in nodes.items()} == {
        "a": True, "b": True, "c": False, "d": False, "e": True, "f": False}
    assert nodes["e"] == slurm_textfile.NodeState("down", False, True)
    text = slurm_textfile.render(nodes)
    assert 'fmcluster_slurm_node_powered_down{slurm_node="a"} 1' in text
    assert 'fmcluster_slurm_node_powered_down{slurm_node="f"} 0' in text


def _fake_sinfo(tmp_path: Path, body: str) -> str:
    script = tmp_path / "sinfo"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_slurm_textfile_from_a_fake_sinfo(tmp_path, promtool):
    sinfo = _fake_sinfo(tmp_path, f"cat <<'EOF'\n{SINFO}EOF\n")
    squeue = tmp_path / "squeue"  # beside sinfo, as in every Slurm install
    squeue.write_text("#!/bin/sh\necho '4123|gpu-[1-2]'\n")
    squeue.chmod(0o755)
    out = tmp_path / "slurm.prom"
    assert slurm_textfile.main(["--sinfo", sinfo, "--out", str(out)]) == 0
    text = out.read_text()
    lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "fmcluster_slurm_collector_success 1" in text
    assert 'fmcluster_slurm_node_state{slurm_node="gpu-1",state="drained"} 1' in text
    assert 'fmcluster_slurm_node_responding{slurm_node="gpu-4"} 0' in text
    assert 'fmcluster_slurm_nodes{state="drained"} 1' in text
    assert 'fmcluster_slurm_job_node{job_id="4123",slurm_node="gpu-2"} 1' in text
    names = set(re.findall(r"^([a-z_]+)[{ ]", text, re.M))
    assert names == {m.name for m in metrics.CATALOG if m.exporter == metrics.SLURM_COLLECTOR}


@pytest.mark.parametrize("body", ["sleep 5\n", "echo broken >&2; exit 1\n"])
def test_slurm_textfile_reports_a_hung_or_failing_sinfo(tmp_path, body):
    sinfo = _fake_sinfo(tmp_path, body)
    out = tmp_path / "slurm.prom"
    assert slurm_textfile.main(["--sinfo", sinfo, "--timeout", "0.5", "--out", str(out)]) == 0
    text = out.read_text()
    assert "fmcluster_slurm_collector_success 0" in text
    assert "fmcluster_slurm_node_state{" not in text


def test_slurm_textfile_without_sinfo(tmp_path):
    out = tmp_path / "slurm.prom"
    assert slurm_textfile.main(["--sinfo", str(tmp_path / "missing"), "--out", str(out)]) == 0
    assert "fmcluster_slurm_collector_success 0" in out.read_text()


# --- runtime rules: stdlib only, textfile dir agreed -------------------------------------------------------


def test_runtime_observability_imports_only_the_standard_library():
    stdlib = set(sys.stdlib_module_names)
    for path in RUNTIME_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            else:
                continue
            for mod in mods:
                top = mod.split(".")[0]
                assert top in stdlib or mod.startswith("fmcluster.runtime"), f"{path.name} imports {mod}"


def test_textfile_directory_is_agreed():
    assert rt.TEXTFILE_DIR == metrics.TEXTFILE_DIR
    assert rt.VALIDATOR_PROM_FILE.startswith(rt.TEXTFILE_DIR + "/") and rt.VALIDATOR_PROM_FILE.endswith(".prom")


# --- the shutdown mark (NodeStoppedReporting leaves out a node that shut down on purpose) ----------------------


def test_a_clean_shutdown_marks_the_node_and_waits_for_the_agent_to_send_it(tmp_path, promtool):
    out = tmp_path / "fmcluster_node_shutting_down.prom"
    waited = []
    assert shutdown_mark.stop(str(out), 45, state=lambda: "stopping", sleep=waited.append) == 0
    assert waited == [45]
    text = out.read_text()
    assert "fmcluster_node_shutting_down 1\n" in text and "fmcluster_node_shutting_down" in metrics.BY_NAME
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert shutdown_mark.start(str(out)) == 0 and not out.exists(), "the next boot clears it"
    assert shutdown_mark.start(str(out)) == 0, "nothing to clear is fine"


@pytest.mark.parametrize("state", ["running", "degraded", ""])
def test_a_restart_of_the_unit_on_a_running_node_writes_no_mark(tmp_path, state):
    out = tmp_path / "mark.prom"
    assert shutdown_mark.stop(str(out), 45, state=lambda: state, sleep=lambda s: None) == 0
    assert not out.exists()


def test_install_orders_the_shutdown_unit_after_the_collector_and_never_restarts_it():
    text = INSTALL.read_text()
    unit = text[text.index("write_unit fmcluster-shutdown-mark.service"):]
    unit = unit[:unit.index("\nEOF\n")]
    assert "After=fmcluster-collector.service fmcluster-node-exporter.service" in unit  # stopped before them
    assert "shutdown_mark stop --wait $((interval + 15))" in unit and "TimeoutStopSec=$((interval + 45))" in unit
    assert 'systemctl restart "${units[@]}"' in text and "systemctl start fmcluster-shutdown-mark.service" in text
    assert rt.SHUTDOWN_PROM_FILE == metrics.TEXTFILE_DIR + "/fmcluster_node_shutting_down.prom"
