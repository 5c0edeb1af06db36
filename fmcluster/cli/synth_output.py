"""Where `fmcluster synth --out DIR` may write, and the swap that replaces an earlier synth's output.

An existing DIR is replaced only when it is a CDK cloud assembly an earlier synth wrote: a ``manifest.json`` with a
``version`` beside a ``cdk.out`` file, and nothing but the entries a synth writes (cloud assembly layout:
https://github.com/aws/aws-cdk-cli/tree/main/packages/%40aws-cdk/cloud-assembly-schema). Anything else in it is
a user's and makes the command refuse (exit 2), as do the working directory, a folder above it and a folder that
holds the spec. A symlinked DIR is followed: its target is judged and replaced, the link stays.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import List

from fmcluster.cli.errors import UsageError

# What `cdk synth` and cdk-nag write into an output folder (the CDK CLI adds its lock files).
SYNTH_ENTRY = re.compile(
    r"^(manifest\.json|cdk\.out|tree\.json|validation-report\.json|synth\.lock|read\.[\w.-]+\.lock"
    r"|.+\.(template|assets|metadata)\.json|asset\.[\w.-]+|assembly-[\w.-]+|[\w.-]+-NagReport\.(csv|json))$"
)


def _is_within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def foreign_entries(folder: Path) -> List[str]:
    """Entries of `folder` an earlier synth did not write (all of them when it has no cloud assembly manifest)."""
    names = sorted(os.listdir(folder))
    if not names:
        return []
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        recognised = isinstance(manifest, dict) and "version" in manifest and (folder / "cdk.out").is_file()
    except (OSError, ValueError):
        recognised = False
    if not recognised:
        return names
    return [n for n in names if not SYNTH_ENTRY.match(n)]


def target_of(out: Path, spec_file: Path) -> Path:
    """The folder to replace for `--out out` (a symlink's target), or UsageError when it is not ours to replace."""
    target = Path(os.path.realpath(out))
    cwd = Path(os.path.realpath(os.getcwd()))
    if _is_within(cwd, target):
        raise UsageError(f"--out {out}: is the working directory or a folder above it; name a folder of its own, "
                         "e.g. cdk.out")
    if _is_within(Path(os.path.realpath(spec_file)), target):
        raise UsageError(f"--out {out}: holds the spec {spec_file}; name another folder, e.g. cdk.out")
    if not target.exists():
        return target
    if not target.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    try:
        foreign = foreign_entries(target)
    except OSError as e:
        raise UsageError(f"--out {out}: cannot read it ({e.strerror or e})") from None
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise UsageError(f"--out {out}: not the output of an earlier synth (it holds {shown}); synth replaces only "
                         "its own output: name an empty or new folder")
    return target


def staging_beside(target: Path) -> Path:
    """A fresh folder next to `target` (same file system, so the swap is a rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".fmcluster-synth-", dir=target.parent))


def swap_in(staging: Path, target: Path) -> None:
    """Put `staging` where `target` is; the earlier output is removed only once the new one is in place."""
    if not target.exists():
        staging.rename(target)
        return
    old = Path(tempfile.mkdtemp(prefix=".fmcluster-old-", dir=target.parent))
    old.rmdir()
    target.rename(old)
    try:
        staging.rename(target)
    except OSError:
        old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)
