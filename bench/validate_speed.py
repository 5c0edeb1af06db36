"""Benchmark: the standard level on a healthy fixture node, with every tool taking DELAY seconds to answer.

    python3 bench/validate_speed.py [--type p5.48xlarge] [--delay 1.0] [--budget 5.0]

Wraps each fake command of tests/fixtures/nodes/<type>-healthy/bin in a script that sleeps DELAY first, runs the
validator CLI at the standard level, and reports wall time, the commands called and how often. Exit 1 when the run
is slower than the budget, a tool was called twice, or the node did not pass.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--type", default="p5.48xlarge")
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--budget", type=float, default=5.0)
    args = ap.parse_args()
    fixture = os.path.join(REPO, "tests", "fixtures", "nodes", f"{args.type}-healthy")
    with tempfile.TemporaryDirectory() as tmp:
        wrapped, log = os.path.join(tmp, "bin"), os.path.join(tmp, "calls.log")
        os.mkdir(wrapped)
        for name in os.listdir(os.path.join(fixture, "bin")):
            real = os.path.join(fixture, "bin", name)
            path = os.path.join(wrapped, name)
            with open(path, "w") as fh:
                fh.write(f'#!/bin/sh\necho "{name} $*" >> {log}\nsleep {args.delay}\nexec {real} "$@"\n')
            os.chmod(path, 0o755)
        sys.path.insert(0, REPO)
        from fmcluster.runtime.profile import NodeProfile

        profile = os.path.join(tmp, "profile.json")
        with open(profile, "w") as fh:
            fh.write(NodeProfile.from_catalog(args.type, mounts=[{"path": "/fsx", "fstype": "lustre"}],
                                              orchestrator="slurm").to_json())
        env = {"PATH": f"{wrapped}:/usr/bin:/bin", "PYTHONPATH": REPO}
        cmd = [sys.executable, "-m", "fmcluster.runtime.validate", "--profile", profile, "--root",
               os.path.join(fixture, "root"), "--level", "standard", "--format", "json"]
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        wall = time.monotonic() - start
        calls = collections.Counter(open(log).read().splitlines()) if os.path.exists(log) else collections.Counter()
    report = json.loads(proc.stdout)
    slowest = sorted(report["checks"], key=lambda c: -c["duration_s"])[:3]
    print(f"{args.type} standard level, each tool delayed {args.delay}s: {wall:.2f}s wall (budget {args.budget}s), "
          f"exit {proc.returncode}, verdict {report['verdict']}")
    print(f"commands: {sum(calls.values())} calls, {len(calls)} distinct; repeated: "
          f"{[c for c, n in calls.items() if n > 1] or 'none'}")
    print("slowest checks: " + ", ".join(f"{c['id']} {c['duration_s']:.2f}s" for c in slowest))
    ok = wall <= args.budget and proc.returncode == 0 and all(n == 1 for n in calls.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
