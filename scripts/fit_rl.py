"""Refit `fmcluster plan --rl`'s two constants (planner/rl.py TAIL and TRAIN_SHARE) on the dense runs of
planner/data/rl.json (on-policy colocated and one-step-off split alike): a grid search of the summed squared log error,
deterministic. Prints the fit and each run's error; copy the constants into rl.py when they move.

    python scripts/fit_rl.py
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's fmcluster

from fmcluster.planner import rl  # noqa: E402


def main() -> None:
    rows = rl.calibration_runs()
    best = None
    for tail in [x / 10 for x in range(10, 61)]:
        for share in [x / 100 for x in range(20, 121)]:
            rl.TAIL, rl.TRAIN_SHARE = tail, share
            loss = sum(math.log(rl.predicted(r) / r["step_s"]) ** 2 for r in rows)
            if best is None or loss < best[0]:
                best = (loss, tail, share)
    assert best is not None
    _, rl.TAIL, rl.TRAIN_SHARE = best
    print(f"TAIL = {rl.TAIL}\nTRAIN_SHARE = {rl.TRAIN_SHARE}")
    for row in rl.calibration():
        print(f"{row['id']:48} {row['set']:8} measured {row['measured_s']:7.1f} s predicted {row['predicted_s']:7.1f} s "
              f"error {row['error']:+.0%}")


if __name__ == "__main__":
    main()
