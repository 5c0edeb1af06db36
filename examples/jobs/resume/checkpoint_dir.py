"""Complete checkpoints in a directory: commit one (marker, then rename), find the newest, copy one to another tier,
prune old ones. Python 3.9+, standard library only: it runs on the nodes and inside training images alike.

Layout under a checkpoint root (the tier's directory, docs/checkpoints.md):

    <root>/step-00001200/COMPLETE         a complete checkpoint: its files, then the marker, then the rename
    <root>/.partial-step-00001300/        being written (or left by a crash): never read, pruned later

A writer fills ``.partial-step-N``, then `commit` writes and fsyncs the ``COMPLETE`` marker and renames the directory
to ``step-N`` (rename within one file system is atomic, POSIX rename(); FSx for Lustre is POSIX-compliant), so a
directory named ``step-N`` always holds a whole checkpoint and a crash at any point leaves only a partial one.

    python3 checkpoint_dir.py latest ROOT            # prints the newest complete checkpoint's path, or nothing
    python3 checkpoint_dir.py commit STAGING         # STAGING is ROOT/.partial-step-N
    python3 checkpoint_dir.py persist CKPT ROOT      # copies a complete checkpoint below another root, then commits
    python3 checkpoint_dir.py prune ROOT --keep 3    # keeps the newest 3 complete ones; drops stale partials

Exit status: 0 done, 2 bad arguments or an unreadable root (the message names it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import List, Optional

MARKER = "COMPLETE"
PREFIX = "step-"
PARTIAL = ".partial-"
STEP_DIGITS = 8
COMPLETE_NAME = re.compile(r"^step-(\d+)$")
PARTIAL_NAME = re.compile(r"^\.partial-step-(\d+)$")
STALE_PARTIAL_S = 6 * 3600  # a partial older than this belongs to no running writer (prune)


class CheckpointError(Exception):
    """A checkpoint directory cannot be read, written or committed as asked."""


def name(step: int) -> str:
    if step < 0:
        raise CheckpointError(f"step {step}: must be 0 or more")
    return f"{PREFIX}{step:0{STEP_DIGITS}d}"


def staging(root: Path, step: int) -> Path:
    """Where step `step` is written before its commit."""
    return root / f"{PARTIAL}{name(step)}"


def step_of(path: Path) -> Optional[int]:
    m = COMPLETE_NAME.match(path.name)
    return int(m.group(1)) if m else None


def complete(root: Path) -> List[Path]:
    """The complete checkpoints under `root`, oldest first: named step-N and holding the marker."""
    try:
        entries = list(root.iterdir())
    except FileNotFoundError:
        return []
    except OSError as e:
        raise CheckpointError(f"{root}: cannot list ({e.strerror})") from None
    found = [p for p in entries if step_of(p) is not None and (p / MARKER).is_file()]
    return sorted(found, key=lambda p: step_of(p) or 0)


def latest(root: Path) -> Optional[Path]:
    done = complete(root)
    return done[-1] if done else None


def _fsync_dir(path: Path) -> None:
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit(stage: Path) -> Path:
    """Mark `stage` (ROOT/.partial-step-N) complete and rename it to ROOT/step-N; returns the new path."""
    m = PARTIAL_NAME.match(stage.name)
    if not m or not stage.is_dir():
        raise CheckpointError(f"{stage}: not a staging directory named {PARTIAL}{PREFIX}N")
    final = stage.with_name(name(int(m.group(1))))
    if final.exists():
        raise CheckpointError(f"{final}: exists already; a step is committed once")
    for f in stage.rglob("*"):  # the files reach the disk before the marker says they are there
        if f.is_file():
            with open(f, "rb+") as fh:
                os.fsync(fh.fileno())
    marker = stage / MARKER
    with open(marker, "w", encoding="utf-8") as fh:
        json.dump({"step": int(m.group(1)), "host": socket.gethostname(), "time": time.time()}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    _fsync_dir(stage)
    os.rename(stage, final)
    _fsync_dir(final.parent)
    return final


def persist(checkpoint: Path, root: Path) -> Path:
    """Copy a complete checkpoint below `root` (another tier) and commit it there; a step already there is kept."""
    step = step_of(checkpoint)
    if step is None or not (checkpoint / MARKER).is_file():
        raise CheckpointError(f"{checkpoint}: not a complete checkpoint (step-N holding {MARKER})")
    target = root / name(step)
    if (target / MARKER).is_file():
        return target
    stage = staging(root, step)
    shutil.rmtree(stage, ignore_errors=True)  # left by an interrupted copy of the same step
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(checkpoint, stage, ignore=shutil.ignore_patterns(MARKER))
    return commit(stage)


def prune(root: Path, keep: int, now: Optional[float] = None) -> List[Path]:
    """Remove all but the newest `keep` complete checkpoints, and partials older than STALE_PARTIAL_S."""
    if keep < 1:
        raise CheckpointError(f"--keep {keep}: keep at least 1")
    now = time.time() if now is None else now
    removed = complete(root)[:-keep]
    for p in root.iterdir() if root.is_dir() else []:
        if PARTIAL_NAME.match(p.name) and now - p.stat().st_mtime > STALE_PARTIAL_S:
            removed.append(p)
    for p in removed:
        shutil.rmtree(p)
    return removed


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="checkpoint_dir.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("latest").add_argument("root", type=Path)
    sub.add_parser("commit").add_argument("staging", type=Path)
    p = sub.add_parser("persist")
    p.add_argument("checkpoint", type=Path)
    p.add_argument("root", type=Path)
    p = sub.add_parser("prune")
    p.add_argument("root", type=Path)
    p.add_argument("--keep", type=int, required=True)
    args = ap.parse_args(argv)
    try:
        if args.command == "latest":
            found = latest(args.root)
            if found is not None:
                print(found)
        elif args.command == "commit":
            print(commit(args.staging))
        elif args.command == "persist":
            print(persist(args.checkpoint, args.root))
        else:
            for removed in prune(args.root, args.keep):
                print(f"removed {removed}")
    except (CheckpointError, OSError) as e:
        print(f"checkpoint_dir.py {args.command}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
