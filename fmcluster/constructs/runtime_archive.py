"""The node runtime as one deterministic ZIP, and a staging directory CDK can ship it from as an asset.

Same files, same bytes: the archive's sha256 names it (``runtime/<sha256>.zip``), and nodes check what they fetched
against that digest before they unpack it."""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import zipfile
from pathlib import Path

# A ZIP's earliest timestamp: every entry gets it, so the archive depends on the files' contents only.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
# Runtime objects are content-addressed: a key never names two contents, so none is overwritten, and a pointer or a
# running node that names one can always fetch it.
KEY_PREFIX = "runtime/"


def object_key(sha256: str) -> str:
    return f"{KEY_PREFIX}{sha256}.zip"


def runtime_archive(runtime_dir: Path) -> bytes:
    """The runtime directory as one deterministic ZIP: entries sorted, fixed timestamps and modes, stored (no
    compression, whose bytes could differ between zlib builds), caches left out. Same files, same bytes."""
    files = sorted(p for p in runtime_dir.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for f in files:
            info = zipfile.ZipInfo(f.relative_to(runtime_dir).as_posix(), date_time=ZIP_EPOCH)
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
