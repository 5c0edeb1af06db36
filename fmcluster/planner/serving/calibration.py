"""The published serving runs `plan --serve` is calibrated against (data/serving_calibration.json), and how the replica
model (fmcluster/spec/serving_sizing.py) does on each figure they printed (docs/serving.md, "Calibration")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple

from fmcluster.planner.models import DATA
from fmcluster.spec import serving_models, serving_sizing
from fmcluster.spec.serving_sizing import Load, Replica

METRICS = {"output_tps": "output tokens/s", "total_tps": "total tokens/s", "tpot_ms": "TPOT ms", "ttft_ms": "TTFT ms"}
# The calibration's error band: at least 80% of the published figures within it, all within twice it
# (tests/planner/test_serving_calibration.py holds the table to it).
ERROR_BAND = 0.25


@dataclass(frozen=True)
class Run:
    id: str
    engine: str
    replica: Replica
    prompt: float
    output: float
    concurrency: Optional[int]
    prompts: int
    published: Dict[str, float]
    source: str


@lru_cache(maxsize=1)
def _data() -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads((DATA / "serving_calibration.json").read_text(encoding="utf-8"))
    return data


def _run(r: Dict[str, Any]) -> Run:
    replica = Replica(serving_models.get(r["model"]), serving_sizing.gpu(r["instance_type"]), r["tp"], r["pp"],
                      r["weights"], r["kv"], float(r.get("utilization", serving_sizing.UTILIZATION)))
    return Run(r["id"], r["engine"], replica, float(r["prompt"]), float(r["output"]), r["concurrency"],
               int(r["prompts"]), dict(r["published"]),
               f"{r['source']['url']} ({r['source']['where']})")


@lru_cache(maxsize=1)
def runs() -> Tuple[Run, ...]:
    return tuple(_run(r) for r in _data()["runs"])


def excluded() -> List[Dict[str, str]]:
    return list(_data()["excluded"])


def predict(run: Run) -> Load:
    """The replica model on the run's own setup: its concurrency (or every prompt at once, as far as the cache and the
    engine's sequence limit take them) and its memory share."""
    concurrency = run.concurrency if run.concurrency is not None else run.prompts
    return run.replica.load(run.prompt, run.output, concurrency)


def figure(load: Load, metric: str) -> float:
    return {"output_tps": load.output_tps, "total_tps": load.total_tps, "tpot_ms": load.tpot_s * 1e3,
            "ttft_ms": load.ttft_s * 1e3}[metric]


@dataclass(frozen=True)
class Point:
    run: Run
    metric: str
    published: float
    predicted: float

    @property
    def error(self) -> float:
        """Predicted over published, less one: +0.10 is 10% optimistic for a throughput, 10% pessimistic for a
        latency."""
        return self.predicted / self.published - 1


def points() -> List[Point]:
    out = []
    for run in runs():
        load = predict(run)
        for metric, value in run.published.items():
            out.append(Point(run, metric, float(value), figure(load, metric)))
    return out


def summary() -> Dict[str, Any]:
    pts = points()
    errors = sorted(abs(p.error) for p in pts)
    return {
        "runs": len(runs()), "figures": len(pts), "band": ERROR_BAND,
        "within_band": sum(e <= ERROR_BAND for e in errors), "largest": errors[-1] if errors else 0.0,
        "median": errors[len(errors) // 2] if errors else 0.0,
        "constants": {"ETA_HBM": serving_sizing.ETA_HBM, "ETA_MM": serving_sizing.ETA_MM,
                      "STEP_S": serving_sizing.STEP_S, "ALLREDUCE_S": serving_sizing.ALLREDUCE_S},
        "points": [{"run": p.run.id, "metric": p.metric, "published": p.published, "predicted": round(p.predicted, 2),
                    "error": round(p.error, 3)} for p in pts],
    }
