"""Benchmark: `fmcluster synth` and `fmcluster diff` against a one-bucket CDK app, as ratios measured in one run.

    .venv/bin/python bench/synth_speed.py [--runs 3]

Targets (docs/architecture.md, "Synthesis cost"):
  default example            <= 1.5x the one-bucket app
  largest EKS example        <= 2.0x
  largest HyperPod-on-EKS    <= 2.0x
  diff of two EKS specs      <= 1.3x one synth of the larger spec
  template bytes             equal at 2 and 128 nodes (counts are properties, not resources)

The one-bucket app is what aws-cdk-lib synthesizes by default, its built-in CloudFormation validation included (the
floor the targets were set against). fmcluster's apps turn that validation off (docs/architecture.md, "Synthesis
cost"), so the same app with it off is timed too and the ratios against it are printed: they isolate fmcluster's own
work. Each command runs in turn in every round, so a machine that slows down mid-run slows them alike; medians are
compared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
ONE_BUCKET_APP = """
import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
app = cdk.App(outdir={outdir!r}, builtin_cloud_formation_validation={validation})
s3.Bucket(cdk.Stack(app, "OneBucket"), "Bucket")
app.synth()
"""
ENV = dict(os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20")
EKS, HYPERPOD_EKS = "examples/eks-p5.yaml", "examples/hyperpod-eks-p5.yaml"


def timed(argv: List[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def template_bytes(count: int, out: str) -> int:
    spec = (ROOT / "examples" / "default.yaml").read_text().replace("count: 2", f"count: {count}")
    path = Path(out) / f"spec-{count}.yaml"
    path.write_text(spec)
    target = Path(out) / f"synth-{count}"
    subprocess.run([sys.executable, "-m", "fmcluster", "synth", str(path), "--out", str(target)], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL, env=ENV)
    return sum(len(json.dumps(json.loads(p.read_text()))) for p in target.glob("*.template.json"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    fm = [sys.executable, "-m", "fmcluster"]
    times: Dict[str, List[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        changed = Path(tmp) / "eks-p5-changed.yaml"
        changed.write_text((ROOT / EKS).read_text().replace("count: 4", "count: 6", 1))
        commands = {
            "floor": [sys.executable, "-c", ONE_BUCKET_APP.format(outdir=f"{tmp}/floor", validation=False)],
            "floor with validation": [sys.executable, "-c", ONE_BUCKET_APP.format(outdir=f"{tmp}/fv", validation=True)],
            "default": fm + ["synth", "examples/default.yaml", "--out", f"{tmp}/default"],
            "eks": fm + ["synth", EKS, "--out", f"{tmp}/eks"],
            "hyperpod-eks": fm + ["synth", HYPERPOD_EKS, "--out", f"{tmp}/hpeks"],
            "diff": fm + ["diff", EKS, str(changed)],
        }
        for _ in range(args.runs):
            for name, argv in commands.items():
                times.setdefault(name, []).append(timed(argv))
                # --out replaces only what an earlier synth wrote: each round starts from its own output
                subprocess.run(["rm", "-rf", f"{tmp}/default", f"{tmp}/eks", f"{tmp}/hpeks"], check=True)
        sizes = {n: template_bytes(n, tmp) for n in (2, 128)}
    med = {k: statistics.median(v) for k, v in times.items()}
    floor, bare = med["floor with validation"], med["floor"]
    rows = [("default example / one-bucket app", med["default"] / floor, 1.5),
            ("eks-p5 / one-bucket app", med["eks"] / floor, 2.0),
            ("hyperpod-eks-p5 / one-bucket app", med["hyperpod-eks"] / floor, 2.0),
            ("diff of two eks-p5 specs / synth of eks-p5", med["diff"] / med["eks"], 1.3)]
    print("medians: " + ", ".join(f"{k} {v:.2f} s" for k, v in med.items()))
    for label, ratio, target in rows:
        print(f"{label}: {ratio:.2f}x (target <= {target}x) {'ok' if ratio <= target else 'OVER'}")
    print("against the one-bucket app with the validation off too (fmcluster's own work): " + ", ".join(
        f"{k} {med[k] / bare:.2f}x" for k in ("default", "eks", "hyperpod-eks")))
    flat = sizes[128] / sizes[2]
    print(f"template bytes: 2 nodes {sizes[2]}, 128 nodes {sizes[128]}: x{flat:.3f} (target x1.000)")
    ok = all(r <= t for _, r, t in rows) and abs(sizes[128] - sizes[2]) < 64
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
