"""The shared file system as the orchestrators' nodes see it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional


@dataclass(frozen=True)
class SharedFileSystem:
    """The storage stack's FSx for Lustre file system, as nodes mount it (``file_system_id`` for orchestrators that
    mount it themselves, by id)."""

    dns_name: str
    mount_name: str
    mount_point: str
    efa: bool
    file_system_id: Optional[str] = None  # what a Kubernetes PersistentVolume names (volumeHandle)

    def parameters(self) -> Dict[str, Any]:
        return {"dns_name": self.dns_name, "mount_name": self.mount_name, "mount_point": self.mount_point,
                "efa": self.efa}
