"""NVLink error counters per GPU architecture, chosen from the catalog's gpu_arch. Hopper's
CRC totals are N/A (NVIDIA/DCGM issue 173) and Blackwell's NVLink5 has its own counter family; each node collects its
architecture's fields and each NVLink alert has a branch that matches them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fmcluster import catalog
from fmcluster import observability as obs
from fmcluster.observability import metrics
from fmcluster.runtime import observability as rt
from fmcluster.runtime.observability import dcgm_fields

GPU_ARCHS = sorted({t.gpu_arch for t in catalog.all_types().values() if t.gpu_arch})
NVLINK_ALERTS = ("NvlinkErrors", "NvlinkReplaysRising")


def alert_expr(name: str) -> str:
    [rule] = [r for _, r in obs.iter_rules() if r.get("alert") == name]
    return rule["expr"]


def test_every_gpu_architecture_of_the_catalog_has_its_fields():
    assert GPU_ARCHS == ["blackwell", "hopper"]
    assert set(GPU_ARCHS) <= set(obs.dcgm_arch_files())


@pytest.mark.parametrize("arch", GPU_ARCHS)
@pytest.mark.parametrize("alert", NVLINK_ALERTS)
def test_each_nvlink_alert_reads_a_counter_every_architecture_collects(arch: str, alert: str):
    collected = set(obs.dcgm_fields(arch))
    assert metrics.metric_names(alert_expr(alert)) & collected, f"{alert} reads nothing a {arch} node collects"


def test_the_architectures_collect_their_own_nvlink_counters():
    hopper, blackwell = set(obs.dcgm_fields("hopper")), set(obs.dcgm_fields("blackwell"))
    # N/A on Hopper HGX (NVIDIA/DCGM issue 173): not collected, not alerted on
    assert not {f for f in hopper | blackwell if "NVLINK_CRC" in f}
    assert not {f for f in blackwell if f.startswith("DCGM_FI_DEV_NVLINK_") and f.endswith("_COUNT_TOTAL")}
    assert not {f for f in hopper if f.startswith("DCGM_FI_DEV_NVLINK_COUNT_")}  # NVLink5+ only
    assert "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL" in hopper and "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL" not in blackwell
    for alert in NVLINK_ALERTS:
        assert "NVLINK_CRC" not in alert_expr(alert)


def node_root(tmp_path: Path, instance_type: str) -> Path:
    dmi = tmp_path / "root/sys/devices/virtual/dmi/id"
    dmi.mkdir(parents=True)
    (dmi / "product_name").write_text(instance_type + "\n")
    return tmp_path / "root"


@pytest.mark.parametrize("instance_type, arch", [
    ("p5.48xlarge", "hopper"), ("p5en.48xlarge", "hopper"), ("p6-b200.48xlarge", "blackwell"),
    ("p6e-gb200.36xlarge", "blackwell"), ("m5.xlarge", None),
])
def test_the_node_writes_its_architectures_field_list(tmp_path: Path, capsys, instance_type: str, arch) -> None:
    out = tmp_path / "dcgm-counters.csv"
    assert dcgm_fields.main(["--root", str(node_root(tmp_path, instance_type)), "--out", str(out)]) == 0
    written = obs._csv_fields(out)
    assert written == obs.dcgm_fields(arch)
    if arch is None:
        assert "NVLink error counters are not collected" in capsys.readouterr().err


def test_install_sh_writes_the_field_list_per_node():
    text = (Path(rt.__file__).parent / "install.sh").read_text()
    assert 'python3 -m fmcluster.runtime.observability.dcgm_fields --out "$ETC/dcgm-counters.csv"' in text
    assert "-f /etc/dcgm-exporter/fmcluster.csv" in text
