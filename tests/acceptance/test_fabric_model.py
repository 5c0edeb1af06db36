"""The fabric model `fmcluster accept` judges against (fmcluster/acceptance/fabric_model.py): every published run lies
within its error band, the pass line sits between the healthy runs and the same runs at half bandwidth, and on every
P5/P6 type of the catalog a healthy run passes and the same run at half bandwidth fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import nccl_logs

from fmcluster import catalog
from fmcluster.acceptance import calibration, fabric_model, nccl_output, references
from fmcluster.acceptance.verdict import Thresholds
from fmcluster.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures"
P5_RUN = FIXTURES / "p5-2node-all_reduce.log"
P_TYPES = [t for t in catalog.gpu_types() if t.startswith(("p5", "p6"))]
RUNS = calibration.runs()


def _ratio(run: calibration.PublishedRun) -> float:
    model = fabric_model.expect(run.fabric, run.collective, run.hosts, run.ranks_per_host)
    return run.peak_gbs / model.expected_gbs


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.label)
def test_every_published_run_lies_within_the_models_error_band(run):
    low, high = fabric_model.ERROR_BAND
    assert low <= _ratio(run) <= high, f"{run.label}: {_ratio(run):.3f} of the model ({run.source})"


def test_the_pass_line_sits_between_healthy_runs_and_the_same_runs_at_half_bandwidth():
    t = Thresholds()
    ratios = [_ratio(r) for r in RUNS]
    assert min(ratios) >= t.warn_below, "every healthy published run passes"
    assert max(ratios) / 2 < t.fail_below, "every one of them at half bandwidth fails"
    low, high = fabric_model.ERROR_BAND
    assert low >= t.warn_below and high / 2 < t.fail_below, "and so does any run inside the band"


def test_the_model_overlaps_nvlink_and_efa_where_the_plan_added_them():
    """2 x p5 all_reduce: the NVLink ring (450 GB/s one way, 8 per node) bounds it at 482 GB/s; EFA (400 GB/s per
    node) carries half the buffer each way, 750 GB/s of busbw at line rate, 600 at NCCL's 80 %."""
    p5 = fabric_model.Fabric.of(catalog.get("p5.48xlarge"))
    two = fabric_model.expect(p5, "all_reduce", 2, 8)
    assert two.nvlink_gbs == pytest.approx(450 * 15 / 16 * 8 / 7) and two.efa_gbs == pytest.approx(750)
    assert two.bound_by == "NVLink" and two.expected_gbs == pytest.approx(482.14, abs=0.01)
    assert two.limit_gbs == pytest.approx(750), "EFA at line rate; NVLink with in-switch reduction allows 844"
    many = fabric_model.expect(p5, "all_reduce", 32, 8)
    assert many.bound_by == "EFA" and many.expected_gbs == pytest.approx(0.8 * 400 * (255 / 256) / (31 / 32))


def test_an_ultraserver_keeps_its_hosts_in_one_nvlink_domain():
    gb200 = fabric_model.Fabric.of(catalog.get("p6e-gb200.36xlarge"))
    inside = fabric_model.expect(gb200, "all_reduce", 18, 4)
    assert (inside.domains, inside.ranks_per_domain, inside.efa_gbs, inside.bound_by) == (1, 72, None, "NVLink")
    across = fabric_model.expect(gb200, "all_reduce", 36, 4)
    assert (across.domains, across.ranks_per_domain) == (2, 72) and across.efa_gbs is not None


def _accept(capsys, log: Path, instance_type: str):
    code = main(["accept", str(log), "--instance-type", instance_type, "--json"])
    return code, json.loads(capsys.readouterr().out)["runs"][0]


def _half(text: str) -> str:
    """Every busbw and algbw of a log halved (13 columns, after srun's `0: ` label where there is one)."""
    lines = []
    for line in text.splitlines():
        words = line.split()
        label = words[:1] if words[:1] and words[0].endswith(":") else []
        columns = words[len(label):]
        if len(columns) == 13 and columns[0].isdigit():
            for i in (6, 7, 10, 11):
                columns[i] = f"{float(columns[i]) / 2:.2f}"
            line = "  ".join(label + columns)
        lines.append(line)
    return "\n".join(lines) + "\n"


def _healthy(instance_type: str) -> str:
    """The published run for this type (AWS's 2 x p5), or, where nobody published one, that run's shape at this type's
    modelled speed on 2 nodes: no substitute for a measurement, the check that the model and the pass line agree."""
    if instance_type == "p5.48xlarge":
        return P5_RUN.read_text()
    (p5_run,) = nccl_output.parse(P5_RUN.read_text())
    t = catalog.get(instance_type)
    p5 = fabric_model.expect(fabric_model.Fabric.of(catalog.get("p5.48xlarge")), "all_reduce", 2, 8).expected_gbs
    this = fabric_model.expect(fabric_model.Fabric.of(t), "all_reduce", 2, t.gpus).expected_gbs
    rows = [(r.size, r.busbw * this / p5) for r in p5_run.rows]
    return nccl_logs.log("all_reduce", ["ip-10-0-0-1", "ip-10-0-0-2"], t.gpus, f"NVIDIA {t.gpu}", rows)


@pytest.mark.parametrize("instance_type", P_TYPES)
def test_on_every_p5_and_p6_type_a_healthy_run_passes_and_half_its_bandwidth_fails(tmp_path, capsys, instance_type):
    healthy = tmp_path / "healthy.log"
    healthy.write_text(_healthy(instance_type))
    code, run = _accept(capsys, healthy, instance_type)
    assert code == 0 and run["verdict"] == "pass" and run["model"]["verdict"] == "pass", run["problems"]
    half = tmp_path / "half.log"
    half.write_text(_half(healthy.read_text()))
    code, run = _accept(capsys, half, instance_type)
    assert code == 1 and run["verdict"] == "fail" and run["model"]["verdict"] == "fail"


@pytest.mark.parametrize("key", sorted(references.PUBLISHED), ids=lambda k: f"{k[1]}-{k[2]}-nodes")
def test_every_published_series_passes_and_fails_at_half_bandwidth(tmp_path, capsys, key):
    instance_type, collective, nodes = key
    ref = references.PUBLISHED[key]
    hosts = [f"p5-st-gpu-{i}" for i in range(1, nodes + 1)]
    healthy = tmp_path / "healthy.log"
    healthy.write_text(nccl_logs.log(collective, hosts, 8, "NVIDIA H100 80GB HBM3", list(ref.points)))
    code, run = _accept(capsys, healthy, instance_type)
    assert code == 0 and run["verdict"] == "pass", run
    half = tmp_path / "half.log"
    half.write_text(_half(healthy.read_text()))
    code, run = _accept(capsys, half, instance_type)
    assert code == 1 and run["model"]["verdict"] == "fail" and run["verdict"] == "fail"
