"""The spec's shared file system as the CLI's commands read it: the store that declares it and its section, so job
paths, links to S3 and messages come from the store, never from its name."""

from __future__ import annotations

from typing import Any, Optional, Tuple


def file_system(spec: Any) -> Optional[Tuple[Any, Any]]:
    """(`Store`, its section) of the spec's shared file system (`Storage.file_system`), or None."""
    found = spec.storage.file_system()
    if found is None:
        return None
    key, section = found
    return next(s for s in spec.stores if s.spec_key == key), section


def file_system_key(spec: Any) -> str:
    """``storage.<key>``: where a spec gets a shared file system, given or not (``storage`` where no store offers
    one)."""
    key = type(spec.storage).file_system_key()
    return f"storage.{key}" if key is not None else "storage"
