"""Benchmark: `fmcluster synth` of the default example and of the EKS example vs a one-bucket CDK app.

Target: within 2x of the one-bucket app in the same environment (both pay the same
jsii/node start-up); the EKS example's kubectl/Helm layer adds assets (copied), not
synthesis work. Also reports template size at 2 and 512 nodes: counts are
properties, so the size must not grow with the node count.

    .venv/bin/python bench/synth_speed.py [--runs 3]
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

ROOT = Path(__file__).resolve().parent.parent
ONE_BUCKET_APP = """
import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
app = cdk.App(outdir={outdir!r})
s3.Bucket(cdk.Stack(app, "OneBucket"), "Bucket")
app.synth()
"""


def timed(argv: list) -> float:
    env = dict(os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20")
    start = time.perf_counter()
    subprocess.run(argv, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def template_bytes(count: int, out: str) -> int:
    spec = (ROOT / "examples" / "default.yaml").read_text().replace("count: 2", f"count: {count}")
    path = Path(out) / f"spec-{count}.yaml"
    path.write_text(spec)
    target = Path(out) / f"synth-{count}"
    subprocess.run([sys.executable, "-m", "fmcluster", "synth", str(path), "--out", str(target)], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20"))
    return sum(len(json.dumps(json.loads(p.read_text()))) for p in target.glob("*.template.json"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        baseline = [timed([sys.executable, "-c", ONE_BUCKET_APP.format(outdir=f"{tmp}/b{i}")]) for i in range(args.runs)]
        ours = [timed([sys.executable, "-m", "fmcluster", "synth", "examples/default.yaml", "--out", f"{tmp}/f{i}"])
                for i in range(args.runs)]
        eks = [timed([sys.executable, "-m", "fmcluster", "synth", "examples/eks-p5.yaml", "--out", f"{tmp}/e{i}"])
               for i in range(args.runs)]
        sizes = {n: template_bytes(n, tmp) for n in (2, 512)}
    b, f, e = statistics.median(baseline), statistics.median(ours), statistics.median(eks)
    print(f"one-bucket app: {b:.2f} s   fmcluster synth default: {f:.2f} s   ratio {f / b:.2f} (target <= 2.0)")
    print(f"fmcluster synth eks-p5: {e:.2f} s   ratio {e / b:.2f} (target <= 2.0)")
    print(f"template bytes: 2 nodes {sizes[2]}, 512 nodes {sizes[512]} (target: equal up to a few digits)")
    ok = f / b <= 2.0 and e / b <= 2.0 and abs(sizes[2] - sizes[512]) < 64
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
