"""Refit `fmcluster plan --rl`'s two constants (planner/rl.py TAIL and TRAIN_SHARE) on the dense runs of
planner/data/rl.json (on-policy colocated and one-step-off split alike): a grid search of the summed squared log error,
deterministic. Prints the fit and each run's error; copy the constants into rl.py when they move.
`--leave-one-out` also refits without each run in turn and prints that run's error under the other runs' fit: the
error to expect on a run the constants were not fitted on (docs/post-training.md, "Calibration").

    python scripts/fit_rl.py [--leave-one-out]
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's fmcluster

from fmcluster.planner import rl  # noqa: E402


def fit(rows: List[Dict[str, Any]]) -> Tuple[float, float]:
    best = None
    for tail in [x / 10 for x in range(10, 61)]:
        for share in [x / 100 for x in range(20, 121)]:
            rl.TAIL, rl.TRAIN_SHARE = tail, share
            loss = sum(math.log(rl.predicted(r) / r["step_s"]) ** 2 for r in rows)
            if best is None or loss < best[0]:
                best = (loss, tail, share)
    assert best is not None
    return best[1], best[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leave-one-out", action="store_true", help="refit without each run; print its error")
    args = parser.parse_args()
    rows = rl.calibration_runs()
    tail, share = fit(rows)
    if args.leave_one_out:
        for held in rows:
            rl.TAIL, rl.TRAIN_SHARE = fit([r for r in rows if r is not held])
            error = rl.predicted(held) / held["step_s"] - 1
            print(f"left out {held['id']:48} TAIL {rl.TAIL} TRAIN_SHARE {rl.TRAIN_SHARE} error {error:+.0%}")
    rl.TAIL, rl.TRAIN_SHARE = tail, share
    print(f"TAIL = {rl.TAIL}\nTRAIN_SHARE = {rl.TRAIN_SHARE}")
    for row in rl.calibration():
        print(f"{row['id']:48} {row['set']:8} measured {row['measured_s']:7.1f} s predicted {row['predicted_s']:7.1f} s "
              f"error {row['error']:+.0%}")


if __name__ == "__main__":
    main()
