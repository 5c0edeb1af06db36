"""Benchmark: reading a generated spec of many node groups (default 10,000) from YAML.

    python3 bench/spec_load_speed.py [--groups 10000] [--runs 3] [--min-speedup 2.5]

Times the YAML step of `load_spec` (fmcluster.spec.yaml_source.read_yaml: libyaml's C parser where PyYAML has it,
duplicate keys refused) against PyYAML's pure-Python SafeLoader on the same text, then the whole `load_spec`, which
refuses a spec that large by its node-group limit: the point is that the refusal comes fast. Exit 1 when the YAML
step (best of the runs) is not at least MIN_SPEEDUP times faster than the pure-Python parser on the same machine
(a ratio, so a loaded machine does not fail it; on an idle 2-core machine about 2.7 s against 10 s).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def generated_spec(groups: int) -> str:
    lines = ["name: fm-bench", "region: us-east-1", "availability_zone: us-east-1a", "tags: {team: bench}",
             "node_groups:"]
    for i in range(groups):
        lines += [f"  - name: g{i:05d}", "    instance_type: p5.48xlarge", "    count: 2",
                  "    capacity: {type: on-demand}", "    placement: {strategy: cluster}"]
    return "\n".join(lines) + "\n"


def best(fn: Callable[[], object], runs: int) -> List[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def main() -> int:
    import yaml

    from fmcluster.registry import load_spec
    from fmcluster.spec import SpecError
    from fmcluster.spec.yaml_source import loader_class, read_yaml

    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--min-speedup", type=float, default=2.5)
    args = ap.parse_args()
    text = generated_spec(args.groups)
    ours = best(lambda: read_yaml(text, "bench"), args.runs)
    pure = best(lambda: yaml.load(text, Loader=yaml.SafeLoader), 1)  # noqa: S506 - the safe loader
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.yaml"
        path.write_text(text)

        def load() -> None:
            try:
                load_spec(path)
            except SpecError:
                pass

        whole = best(load, args.runs)
    print(f"{args.groups} node groups, {len(text) / 1e6:.1f} MB of YAML")
    speedup = pure[0] / min(ours)
    print(f"read_yaml ({loader_class().__mro__[2].__name__}): best {min(ours):.2f}s, median {statistics.median(ours):.2f}s")
    print(f"PyYAML pure-Python SafeLoader: {pure[0]:.2f}s ({speedup:.1f}x slower; at least {args.min_speedup}x wanted)")
    print(f"load_spec (YAML, then the spec's answer): best {min(whole):.2f}s")
    return 0 if speedup >= args.min_speedup else 1


if __name__ == "__main__":
    sys.exit(main())
