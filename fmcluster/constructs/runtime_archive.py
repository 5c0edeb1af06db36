"""The node runtime as one deterministic ZIP, and a staging directory CDK can ship it from as an asset.

Same files, same bytes: the archive's sha256 names it (``runtime/<sha256>.zip``), and nodes check what they fetched
against that digest before they unpack it.

What it holds: ``fmcluster/runtime/`` at its root, and every platform's, kind's and store's node folder
(``fmcluster/<platforms|orchestrators>/<name>/node/``, ``fmcluster/platforms/storage/<store>/node/``, found by
layout, never by name) at its path in the package::

    node_bootstrap.sh, validate.py, node_setup/, ...   fmcluster/runtime/
    platforms/hyperpod/node/on_init_complete.sh         fmcluster/platforms/hyperpod/node/on_init_complete.sh
    platforms/storage/<store>/node/checks.py            fmcluster/platforms/storage/<store>/node/checks.py

Nodes unpack it as ``pkg/fmcluster/runtime``: launch templates' user data does (constructs/boot_pointer.py), and it
must stay byte-identical across releases, so the root cannot move. A node folder's scripts therefore sit at
``pkg/fmcluster/runtime/<its path in the package>`` on the node and run as shell scripts; the Python they call is the
runtime's (``python3 -m fmcluster.runtime...``), so no node imports a platform's or kind's package. A store's node
folder holds Python the runtime finds by the same layout (fmcluster/runtime/stores.py): on the node it imports as
``fmcluster.runtime.platforms.storage.<store>.node``, namespace packages below the runtime's."""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List, Sequence

# A ZIP's earliest timestamp: every entry gets it, so the archive depends on the files' contents only.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
# Runtime objects are content-addressed: a key never names two contents, so none is overwritten, and a pointer or a
# running node that names one can always fetch it.
KEY_PREFIX = "runtime/"
PACKAGE_DIR = Path(__file__).resolve().parent.parent
# Who may own a node folder, and its name: fmcluster/<owner>/<name>/node/; a store's is one level deeper, below the
# storage platform: fmcluster/platforms/storage/<store>/node/.
NODE_FOLDER_OWNERS = ("platforms", "orchestrators")
NODE_FOLDER = "node"
STORES = "platforms/storage"


def object_key(sha256: str) -> str:
    return f"{KEY_PREFIX}{sha256}.zip"


def node_folders(package_dir: Path = PACKAGE_DIR) -> List[Path]:
    """Every ``<owner>/<name>/node/`` and ``platforms/storage/<store>/node/`` folder of the package: the node-side
    code a platform, kind or store ships."""
    globs = [(package_dir / owner).glob(f"*/{NODE_FOLDER}") for owner in NODE_FOLDER_OWNERS]
    globs.append((package_dir / STORES).glob(f"*/{NODE_FOLDER}"))
    return sorted(d for found in globs for d in found if d.is_dir())


def archive_path(folder: Path) -> str:
    """Where a node folder sits in the archive (and under ``pkg/fmcluster/runtime/`` on the node): its path in the
    package, ``<owner>/<name>/node`` or ``platforms/storage/<store>/node``."""
    if "/".join(folder.parts[-4:-2]) == STORES and folder.name == NODE_FOLDER:
        return f"{STORES}/{folder.parts[-2]}/{NODE_FOLDER}"
    owner, name, leaf = folder.parts[-3:]
    if owner not in NODE_FOLDER_OWNERS or leaf != NODE_FOLDER:
        raise ValueError(f"{folder}: a node folder is <{'|'.join(NODE_FOLDER_OWNERS)}>/<name>/{NODE_FOLDER} or "
                         f"{STORES}/<store>/{NODE_FOLDER}")
    return f"{owner}/{name}/{leaf}"


def _files(directory: Path) -> List[Path]:
    return [p for p in directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]


def archive_members(runtime_dir: Path, *, with_folders: Sequence[Path] = ()) -> Dict[str, Path]:
    """Archive name -> file: the runtime directory at the root, each of `with_folders` at its `archive_path`."""
    members = {f.relative_to(runtime_dir).as_posix(): f for f in _files(runtime_dir)}
    for owner in NODE_FOLDER_OWNERS:
        if with_folders and (runtime_dir / owner).exists():
            raise ValueError(f"{runtime_dir / owner}: the runtime may not hold {owner}/, where node folders go")
    for folder in with_folders:
        prefix = archive_path(folder)
        members.update({f"{prefix}/{f.relative_to(folder).as_posix()}": f for f in _files(folder)})
    return members


def runtime_archive(runtime_dir: Path, *, with_folders: Sequence[Path] = ()) -> bytes:
    """The runtime directory and `with_folders` (node_folders()) as one deterministic ZIP: entries sorted, fixed
    timestamps and modes, stored (no compression, whose bytes could differ between zlib builds), caches left out.
    Same files, same bytes."""
    members = archive_members(runtime_dir, with_folders=with_folders)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name in sorted(members):
            f = members[name]
            info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
            info.create_system = 3  # Unix
            info.external_attr = 0o644 << 16
            archive.writestr(info, f.read_bytes())
    return buffer.getvalue()


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def staged(data: bytes, name: str) -> Path:
    """A directory holding only `data` as `name`, named after its digest: the asset a BucketDeployment extracts, so
    the object lands under exactly `name`. Written by rename, so a concurrent synth never sees half a file."""
    stage = Path(tempfile.gettempdir()) / f"fmcluster-stage-{sha256_of(data)[:24]}-{sha256_of(name.encode())[:8]}"
    target = stage / name
    if not target.exists() or target.read_bytes() != data:
        stage.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=stage)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    return stage
