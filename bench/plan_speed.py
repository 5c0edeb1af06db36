"""Benchmark: `plan` must answer in under a second for any spec (it never imports aws_cdk).

Times `python -m fmcluster.planner.cli plan SPEC --model M --json` in a fresh interpreter,
the way a user runs it, for each example and a few models, plus a 2048-node spec (the
largest count the spec allows). Exits 1 when the slowest median is over the target.

    .venv/bin/python bench/plan_speed.py [--runs 3] [--target 1.0]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ("examples/default.yaml", "llama3-405b"),  # does not fit 16 H100: the exit-2 path is timed too
    ("examples/default.yaml", "llama3-70b"),
    ("examples/default.yaml", "llama3-8b"),
    ("examples/fabric-matrix.yaml", "mixtral-8x7b"),
    ("examples/hyperpod-p6-b200-training-plan.yaml", "llama3-405b"),
    ("examples/pcs-p5en-capacity-block.yaml", "deepseek-v3"),
]
BIG = """name: big
region: us-east-1
availability_zone: us-east-1a
network: {new_vpc: {cidr: 10.0.0.0/16}}
node_groups:
  - {name: gpu, instance_type: p5.48xlarge, count: 2048}
"""


def timed(argv: list) -> float:
    start = time.perf_counter()
    r = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if r.returncode not in (0, 2):
        raise SystemExit(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--target", type=float, default=1.0, help="seconds")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.yaml"
        big.write_text(BIG)
        cases = CASES + [(str(big), "deepseek-v3")]
        worst = 0.0
        for spec, model in cases:
            argv = [sys.executable, "-m", "fmcluster.planner.cli", "plan", spec, "--model", model, "--json"]
            median = statistics.median(timed(argv) for _ in range(args.runs))
            worst = max(worst, median)
            print(f"{median:6.3f} s  plan {Path(spec).name} --model {model}")
    ok = worst <= args.target
    print(f"slowest {worst:.3f} s (target <= {args.target:g} s): {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
