"""Where `fmcluster synth --out DIR` may write, and the swap that replaces an earlier synth's output.

An existing DIR is replaced only when it is a CDK cloud assembly an earlier synth wrote and holds nothing else: a
``manifest.json`` with a ``version`` beside a ``cdk.out`` file, and no entry but those the manifest names (templates,
asset manifests, metadata, the construct tree, nested assemblies), the assets its asset manifests list, and the files
CDK keeps beside them (cloud assembly layout: https://github.com/aws/aws-cdk-cli/tree/main/packages/%40aws-cdk/
cloud-assembly-schema). Anything else in it, even one named like CDK output (``x.template.json``, ``asset.y``), is a
user's and makes the command refuse (exit 2), as do the working directory, a folder above it and a folder that holds
the spec. A symlinked DIR is followed: its target is judged and replaced, the link stays.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator, List, Optional, Set

from fmcluster.cli.errors import UsageError

# What CDK writes into an assembly besides what its manifest names: the manifest, the assembly's version file, the
# policy validation report (cdk-nag's findings), and the CDK CLI's lock files while it reads the folder.
BOOKKEEPING = re.compile(r"^(manifest\.json|cdk\.out|validation-report\.json|synth\.lock|read\.[\w.-]+\.lock)$")
# A manifest larger than this is not one a synth wrote (four stacks' is about 40 KB); it is not read.
MAX_MANIFEST_BYTES = 32 * 1024 * 1024


def _is_within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _json(path: Path) -> Any:
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise ValueError(f"{path.name} is larger than a synth writes")
    return json.loads(path.read_text(encoding="utf-8"))


def _strings(data: Any, *keys: str) -> Iterator[str]:
    """data[keys[0]][keys[1]]... where each step is a mapping and the end a string ('*': every value)."""
    if not keys:
        if isinstance(data, str):
            yield data
        return
    if isinstance(data, dict):
        for v in (data.values() if keys[0] == "*" else [data.get(keys[0])]):
            yield from _strings(v, *keys[1:])


def named_by_manifest(folder: Path) -> Optional[Set[str]]:
    """The entries of `folder` its synth wrote, as its manifests name them; None when it is no cloud assembly."""
    manifest = _json(folder / "manifest.json")
    if not (isinstance(manifest, dict) and "version" in manifest and (folder / "cdk.out").is_file()):
        return None
    names: Set[str] = set()
    for path in (("artifacts", "*", "properties", "templateFile"), ("artifacts", "*", "properties", "file"),
                 ("artifacts", "*", "properties", "directoryName"), ("artifacts", "*", "additionalMetadataFile")):
        names.update(_strings(manifest, *path))
    for name in [n for n in names if n.endswith(".assets.json") and os.path.basename(n) == n]:
        if (folder / name).is_file():
            assets = _json(folder / name)
            names.update(_strings(assets, "files", "*", "source", "path"))
            names.update(_strings(assets, "dockerImages", "*", "source", "directory"))
    return {n for n in names if os.path.basename(n) == n and n not in ("", ".", "..")}


def foreign_entries(folder: Path) -> List[str]:
    """Entries of `folder` an earlier synth did not write (all of them when it has no cloud assembly manifest)."""
    names = sorted(os.listdir(folder))
    if not names:
        return []
    try:
        ours = named_by_manifest(folder)
    except (OSError, ValueError):
        ours = None
    if ours is None:
        return names
    return [n for n in names if n not in ours and not BOOKKEEPING.match(n)]


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
        raise UsageError(f"--out {out}: not the output of an earlier synth (it holds {shown}, which no synth manifest "
                         "there names); synth replaces only its own output: remove those, or name an empty or new "
                         "folder")
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
