"""Each task-governance team's claim of every shared store, without CloudFormation waiting for the team's namespace.

Task governance creates `hyperpod-ns-<team>` for the team's compute quota, when AWS does not say; a waiter in the
stack would have to give up within the kubectl provider's 15 minutes and roll the stack back. So:

- the team's PersistentVolume (cluster-scoped, pre-bound to the claim by `claimRef`) is applied at once, in the
  manifest that held the volume and the claim before (same construct id, so an existing stack updates it in place),
  with CDK's pruning off: an update applies the volume alone and leaves the claim in the namespace untouched;
- the claims (exactly `volumes.static_volume`'s) are created by the platform's team-objects Deployment (platforms/
  kubernetes/team_objects.py) from inside the cluster, whenever each namespace appears.

docs/hyperpod-eks.md ("The teams' namespaces") has the detail and what is left behind when a team goes."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

from aws_cdk import aws_eks_v2 as eks
from constructs import IConstruct

from fmcluster.platforms.ec2.node_builder import construct_id
from fmcluster.platforms.kubernetes import volumes
from fmcluster.platforms.kubernetes.charts import ClusterObjects
from fmcluster.platforms.storage.forms import KubernetesVolume


def team_volumes(*, cluster: str, teams: Mapping[str, str], volume: KubernetesVolume) -> Dict[str, List[Dict[str, Any]]]:
    """team -> [PersistentVolume, PersistentVolumeClaim], as `volumes.static_volume` renders them (`teams`: team ->
    namespace)."""
    return {team: volumes.static_volume(cluster=f"{cluster}-{team}", namespace=namespace, volume=volume)
            for team, namespace in teams.items()}


def install(objects: ClusterObjects, *, mount_id: str, per_team: Mapping[str, List[Dict[str, Any]]],
            after: Sequence[IConstruct]) -> List[Dict[str, Any]]:
    """The teams' volumes of one mount (construct id ``<Team><mount id>``), each after `after` (the store's CSI
    driver). Returns the teams' claims, for the team-objects Deployment to create."""
    for team, (pv, _pvc) in per_team.items():
        mid = f"{construct_id(team)}{mount_id}"
        # prune off: CDK's `kubectl apply --prune` on update would delete the claim this manifest used to hold
        manifest = eks.KubernetesManifest(objects, mid, cluster=objects.cluster, manifest=[pv], overwrite=True,
                                          prune=False)
        for dependency in after:
            manifest.node.add_dependency(dependency)
        objects.manifests[mid] = manifest
    return [pvc for _pv, pvc in per_team.values()]
