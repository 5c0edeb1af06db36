"""What fmcluster installs into the cluster through CDK's kubectl provider (Helm charts and manifests, applied by
CloudFormation): the device plugins, the scheduler and its queue objects, the shared file system's volume and the
node gate. The objects themselves are rendered by plain functions (kueue.py, devices.py, volumes.py, gate.py), which
the tests validate against the Kubernetes and CRD schemas."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from aws_cdk import Duration
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from fmcluster.platforms.kubernetes.versions import CHARTS

# Helm's own --timeout for a chart CloudFormation waits on. It runs inside the kubectl provider's handler Lambda,
# which aws-cdk-lib's aws_eks_v2 KubectlProvider gives 15 minutes (and HelmChart refuses a timeout above that), so
# Helm must give up first and report why (which pods are not ready) rather than the Lambda being killed mid-install.
HELM_TIMEOUT = Duration.minutes(12)
KUBECTL_HANDLER_TIMEOUT = Duration.minutes(15)


def _id(name: str) -> str:
    return "".join(p.capitalize() for p in name.replace("_", "-").split("-"))


class ClusterObjects(Construct):
    """Adds charts (at their pinned versions) and manifests to one cluster, in order.

    :param cluster: the EKS cluster (with a kubectl provider).
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster) -> None:
        super().__init__(scope, id)
        self.cluster = cluster
        self.charts: Dict[str, eks.HelmChart] = {}
        self.manifests: Dict[str, eks.KubernetesManifest] = {}

    def chart(self, name: str, *, namespace: str, values: Dict[str, Any], release: Optional[str] = None,
              wait: bool = False, after: Sequence[IConstruct] = ()) -> eks.HelmChart:
        """Install chart `name` from `versions.CHARTS`. With `wait`, CloudFormation waits until its pods are ready
        (needed before objects its webhooks admit), for at most HELM_TIMEOUT."""
        if name not in CHARTS:
            raise ValueError(f"name: {name!r} is not a pinned chart ({', '.join(CHARTS)})")
        pin = CHARTS[name]
        chart = eks.HelmChart(
            self,
            _id(name),
            cluster=self.cluster,
            chart=pin.chart,
            repository=pin.repository,
            version=pin.version,
            namespace=namespace,
            create_namespace=True,
            release=release or name,
            values=values,
            wait=wait,
            timeout=HELM_TIMEOUT if wait else None,
        )
        for dependency in after:
            chart.node.add_dependency(dependency)
        self.charts[name] = chart
        return chart

    def manifest(self, id: str, objects: List[Dict[str, Any]], *, after: Sequence[IConstruct] = ()
                 ) -> eks.KubernetesManifest:
        """Apply `objects` (kubectl apply, in list order); removed with the stack."""
        if not objects:
            raise ValueError(f"objects: {id} has none")
        manifest = eks.KubernetesManifest(self, id, cluster=self.cluster, manifest=objects, overwrite=True)
        for dependency in after:
            manifest.node.add_dependency(dependency)
        self.manifests[id] = manifest
        return manifest
