"""A shared store's Kubernetes volume (`fmcluster.platforms.storage.forms.KubernetesVolume`) as a static PersistentVolume
pre-bound to its ReadWriteMany claim in a namespace: the form every store's CSI driver takes for static provisioning
(volumeHandle and volumeAttributes as the store gives them)."""

from __future__ import annotations

from typing import Any, Dict, List

from fmcluster.platforms.storage.forms import KubernetesVolume


def volume_name(cluster: str, volume: KubernetesVolume) -> str:
    return f"{cluster}-{volume.name}"


def static_volume(*, cluster: str, namespace: str, volume: KubernetesVolume) -> List[Dict[str, Any]]:
    """The PersistentVolume (retained: the storage stack owns the data) bound to its claim, and the claim."""
    name = volume_name(cluster, volume)
    storage = f"{volume.capacity_gib}Gi"
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": storage},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": list(volume.mount_options),
            "claimRef": {"namespace": namespace, "name": volume.claim},
            "csi": {"driver": volume.driver, "volumeHandle": volume.handle,
                    "volumeAttributes": dict(volume.attributes)},
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": volume.claim, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": name,
            "resources": {"requests": {"storage": storage}},
        },
    }
    return [pv, pvc]


def namespace(name: str) -> Dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
