"""Benchmark: every command loads only what it uses.

Times `fmcluster validate` and `fmcluster plan` on the default example (and validate on a HyperPod one) in a fresh
interpreter against a bare `import pydantic, yaml` (the floor any spec command pays), and lists which heavy packages
each command imported (boto3, aws_cdk). Target: each command within 3x the floor and none imports boto3 or aws_cdk.

    .venv/bin/python bench/command_startup.py [--runs 5] [--target 3.0]
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOOR = [sys.executable, "-c", "import pydantic, yaml"]
COMMANDS = {
    "validate": [sys.executable, "-m", "fmcluster", "validate", "examples/default.yaml"],
    "plan": [sys.executable, "-m", "fmcluster", "plan", "examples/default.yaml", "--model", "llama3-8b"],
    # a HyperPod spec checks its instance types against the SageMaker API's list (a file, not botocore's model)
    "validate hyperpod": [sys.executable, "-m", "fmcluster", "validate", "examples/hyperpod-slurm-p5.yaml"],
}
HEAVY = ("boto3", "aws_cdk")


def median_seconds(cmds: dict, runs: int) -> dict:
    """Median wall time of each command, run in turn (floor, validate, plan, ...) `runs` times, so a machine that
    slows down or speeds up during the measurement moves every command alike and the ratios stay comparable."""
    times: dict = {name: [] for name in cmds}
    for _ in range(runs):
        for name, cmd in cmds.items():
            start = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, capture_output=True, check=False, timeout=120)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def heavy_imports(cmd: list) -> list:
    r = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], cwd=ROOT, capture_output=True, text=True, timeout=120)
    names = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    return [h for h in HEAVY if h in names]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--target", type=float, default=3.0)
    args = ap.parse_args()
    # An installed package starts from bytecode (pip compiles at install); an editable checkout compiles on first
    # import, and never caches it where PYTHONDONTWRITEBYTECODE is set, which would time the compiler, not the command.
    compileall.compile_dir(ROOT / "fmcluster", quiet=1)
    medians = median_seconds({"floor": FLOOR, **COMMANDS}, args.runs)
    floor = medians.pop("floor")
    print(f"import pydantic, yaml: {floor:.2f}s (median of {args.runs})")
    ok = True
    for name, took in medians.items():
        heavy = heavy_imports(COMMANDS[name])
        ratio = took / floor
        ok = ok and ratio <= args.target and not heavy
        print(f"{name}: {took:.2f}s = {ratio:.1f}x the floor (target {args.target}x); heavy imports: "
              f"{', '.join(heavy) or 'none'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
