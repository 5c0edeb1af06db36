"""The storage stack's FSx for Lustre file system as a static PersistentVolume and a ReadWriteMany claim in the
training namespace (FSx CSI driver, static provisioning: volumeHandle is the file system id, volumeAttributes its DNS
and mount names). https://github.com/kubernetes-sigs/aws-fsx-csi-driver/tree/master/examples/kubernetes/static_provisioning
"""

from __future__ import annotations

from typing import Any, Dict, List

DRIVER = "fsx.csi.aws.com"
CLAIM = "fsx"  # the claim pods mount, in the training namespace


def volume_name(cluster: str) -> str:
    return f"{cluster}-fsx"


def fsx_volume(*, cluster: str, namespace: str, file_system_id: str, dns_name: str, mount_name: str,
               capacity_gib: int) -> List[Dict[str, Any]]:
    """The PersistentVolume (retained: the storage stack owns the data) bound to its claim, and the claim."""
    name = volume_name(cluster)
    storage = f"{capacity_gib}Gi"
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
            "mountOptions": ["noatime", "flock"],
            "claimRef": {"namespace": namespace, "name": CLAIM},
            "csi": {"driver": DRIVER, "volumeHandle": file_system_id,
                    "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name}},
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": CLAIM, "namespace": namespace},
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
