"""Each task-governance team's claim of the shared file system, without CloudFormation waiting for the team's namespace.

Task governance creates `hyperpod-ns-<team>` for the team's compute quota, when AWS does not say; a waiter in the
stack would have to give up within the kubectl provider's 15 minutes and roll the stack back. So:

- the team's PersistentVolume (cluster-scoped, pre-bound to the claim by `claimRef`) is applied at once, in the
  manifest that held the volume and the claim before (same construct id, so an existing stack updates it in place),
  with CDK's pruning off: an update applies the volume alone and leaves the claim in the namespace untouched;
- the claims (exactly `volumes.fsx_volume`'s) are created by the platform's team-objects Deployment (platforms/
  kubernetes/team_objects.py) from inside the cluster, whenever each namespace appears.

docs/hyperpod-eks.md ("The teams' namespaces") has the detail and what is left behind when a team goes."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

from aws_cdk import aws_eks_v2 as eks
from constructs import IConstruct

from fmcluster.platforms.ec2.node_builder import construct_id
from fmcluster.platforms.kubernetes import volumes
from fmcluster.platforms.kubernetes.charts import ClusterObjects
from fmcluster.platforms.storage import SharedFileSystem


def team_volumes(*, cluster: str, teams: Mapping[str, str], file_system: SharedFileSystem, file_system_id: str,
                 capacity_gib: int) -> Dict[str, List[Dict[str, Any]]]:
    """team -> [PersistentVolume, PersistentVolumeClaim], as `volumes.fsx_volume` renders them (`teams`: team ->
    namespace)."""
    return {team: volumes.fsx_volume(cluster=f"{cluster}-{team}", namespace=namespace, file_system_id=file_system_id,
                                     dns_name=file_system.dns_name, mount_name=file_system.mount_name,
                                     capacity_gib=capacity_gib)
            for team, namespace in teams.items()}


def install(objects: ClusterObjects, *, per_team: Mapping[str, List[Dict[str, Any]]],
            after: Sequence[IConstruct]) -> List[Dict[str, Any]]:
    """The teams' volumes, each after `after` (the FSx CSI driver). Returns the teams' claims, for the team-objects
    Deployment to create."""
    for team, (pv, _pvc) in per_team.items():
        mid = f"{construct_id(team)}SharedFileSystem"
        # prune off: CDK's `kubectl apply --prune` on update would delete the claim this manifest used to hold
        manifest = eks.KubernetesManifest(objects, mid, cluster=objects.cluster, manifest=[pv], overwrite=True,
                                          prune=False)
        for dependency in after:
            manifest.node.add_dependency(dependency)
        objects.manifests[mid] = manifest
    return [pvc for _pv, pvc in per_team.values()]
