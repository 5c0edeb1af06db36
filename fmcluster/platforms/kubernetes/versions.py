"""Every version the eks kind pins, in one place, each with its public source (docs/eks.md has the detail).

Plain data (spec layer): the settings validate against it, the renderers and constructs install from it, and
preflight checks it against the account (DescribeAddonVersions). Refresh it when a chart or add-on moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

# Kubernetes minor versions an EKS cluster may run: EKS upgrades one minor at a time, so three minors are offered, and
# the kubectl/Helm Lambda layer of each comes from its own PyPI package (aws-cdk.lambda-layer-kubectl-vNN). The
# default is the newest that both EKS and SageMaker HyperPod on EKS support (hyperpod_eks/versions.py
# HYPERPOD_KUBERNETES_VERSIONS: the HyperPod EKS prerequisites list 1.28-1.34, not 1.35), so a spec moves between the
# eks and hyperpod-eks kinds without a version change; a test keeps the two in step.
# https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html
# https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html
KUBERNETES_VERSIONS: Tuple[str, ...] = ("1.33", "1.34", "1.35")
DEFAULT_KUBERNETES_VERSION = "1.34"
# The day each offered minor leaves EKS standard support (UTC): from the start of that day a cluster on it bills extended
# support, 12 months more, at a higher rate per cluster-hour (`support.control_plane_service`). EKS's release
# calendar (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html, "Amazon EKS Kubernetes release
# calendar", 1.33 in awsdocs/amazon-eks-user-guide at 8596db85) and https://endoflife.date/amazon-eks (1.34, 1.35).
END_OF_STANDARD_SUPPORT: Dict[str, str] = {"1.33": "2026-07-29", "1.34": "2026-12-02", "1.35": "2027-03-27"}
# The EFA DRA driver needs DRA's resource.k8s.io/v1 API, GA in Kubernetes 1.34 (EKS user guide, "Manage EFA devices").
# https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html
DRA_MIN_KUBERNETES_VERSION = "1.34"

# kubectl/Helm Lambda layer per cluster version: PyPI package -> module and class (kubectl supports one minor of skew;
# each package matches its cluster version exactly). https://pypi.org/project/aws-cdk.lambda-layer-kubectl-v35/
KUBECTL_LAYERS: Dict[str, Tuple[str, str]] = {
    v: (f"aws_cdk.lambda_layer_kubectl_v{v.split('.')[1]}", f"KubectlV{v.split('.')[1]}Layer")
    for v in KUBERNETES_VERSIONS
}


@dataclass(frozen=True)
class AddonPin:
    """An EKS add-on: its name and, per Kubernetes version, the pinned version (None: EKS installs the default
    version for the cluster's Kubernetes version, which `fmcluster preflight` reports)."""

    name: str
    versions: Dict[str, str]
    source: str

    def version_for(self, kubernetes_version: str) -> Optional[str]:
        return self.versions.get(kubernetes_version)


# The add-ons every cluster gets. Version strings confirmed in the EKS user guide's tables are pinned; the others
# are left to EKS's default for the cluster version (the tables move every few weeks and an eksbuild string that
# does not exist fails the deploy).
ADDONS: Dict[str, AddonPin] = {
    "vpc-cni": AddonPin("vpc-cni", {}, "https://docs.aws.amazon.com/eks/latest/userguide/managing-vpc-cni.html"),
    "coredns": AddonPin("coredns", {"1.35": "v1.13.2-eksbuild.4"},
                        "https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html"),
    "kube-proxy": AddonPin("kube-proxy", {"1.35": "v1.35.3-eksbuild.13", "1.34": "v1.34.6-eksbuild.13"},
                           "https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html"),
    "eks-pod-identity-agent": AddonPin("eks-pod-identity-agent", {},
                                       "https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html"),
    "eks-node-monitoring-agent": AddonPin("eks-node-monitoring-agent", {},
                                          "https://docs.aws.amazon.com/eks/latest/userguide/node-health.html"),
}


@dataclass(frozen=True)
class ChartPin:
    """A Helm chart at a pinned version. For OCI charts the CDK kubectl handler pulls ``repository`` itself, so it
    names the chart (``oci://.../<chart>``); ``chart`` is the chart's name either way."""

    chart: str
    repository: str
    version: str
    source: str


CHARTS: Dict[str, ChartPin] = {
    # 0.19.0-0.19.2 turned MOFED/GDS/GDRCopy on by default (uverbs mounted into GPU pods, clashing with the EFA
    # device plugin); 0.19.3 reverted it. We pin 0.20.0 and still set mofedEnabled: false, as the EKS guide does.
    "nvidia-device-plugin": ChartPin(
        "nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.20.0",
        "https://github.com/NVIDIA/k8s-device-plugin/blob/v0.20.0/CHANGELOG.md"),
    "aws-efa-k8s-device-plugin": ChartPin(
        "aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts", "0.5.30",
        "https://github.com/aws/eks-charts/tree/master/stable/aws-efa-k8s-device-plugin"),
    "aws-dranet": ChartPin(
        "aws-dranet", "https://aws.github.io/eks-charts", "1.0.0",
        "https://github.com/aws/eks-charts/tree/master/stable/aws-dranet"),
    "kueue": ChartPin(
        "kueue", "oci://registry.k8s.io/kueue/charts/kueue", "0.19.2",
        "https://kueue.sigs.k8s.io/docs/installation/#install-via-helm"),
    "volcano": ChartPin(
        "volcano", "https://volcano-sh.github.io/helm-charts", "1.15.1",
        "https://github.com/volcano-sh/volcano/releases/tag/v1.15.1"),
    "kai-scheduler": ChartPin(
        "kai-scheduler", "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", "v0.17.0",
        "https://github.com/kai-scheduler/KAI-Scheduler/releases/tag/v0.17.0"),
    # Ray's operator on every Kubernetes cluster (docs/post-training.md): RayJob/RayCluster for veRL. Its four CRDs
    # (0.8-1.4 MB each) sit in the chart's crds/ folder, which Helm creates, never client-side applies, so no
    # last-applied annotation limit applies, and CloudFormation's template carries only the chart's name and version.
    "kuberay-operator": ChartPin(
        "kuberay-operator", "https://ray-project.github.io/kuberay-helm/", "1.7.0",
        "https://github.com/ray-project/kuberay/blob/v1.7.0/helm-chart/kuberay-operator/README.md"),
    # Installed only when a spec has elastic node groups; its image is set per Kubernetes minor (below), as the
    # chart's appVersion (1.35.0) fits one minor only.
    "cluster-autoscaler": ChartPin(
        "cluster-autoscaler", "https://kubernetes.github.io/autoscaler", "9.59.0",
        "https://github.com/kubernetes/autoscaler/releases/tag/cluster-autoscaler-chart-9.59.0"),
    # Installed by the eks kind only when a spec has a serving section (docs/serving.md): NVIDIA Dynamo's operator and
    # CRDs, and KEDA for the scalers.
    "dynamo-platform": ChartPin(
        "dynamo-platform", "https://helm.ngc.nvidia.com/nvidia/ai-dynamo", "1.6.2",
        "https://docs.nvidia.com/dynamo/v1.6.0/reference/releases"),
    "keda": ChartPin(
        "keda", "https://kedacore.github.io/charts", "2.20.2", "https://github.com/kedacore/charts/releases/tag/v2.20.2"),
}

# Cluster Autoscaler's versions follow Kubernetes minors exactly, and the project recommends the one meant for the
# control plane's version (cluster-autoscaler/README.md, "Releases"); the newest patch release of each minor, from the
# project's release tags (https://github.com/kubernetes/autoscaler/releases/tag/cluster-autoscaler-1.34.5 and -1.33.6,
# -1.35.2).
CLUSTER_AUTOSCALER_IMAGE = "registry.k8s.io/autoscaling/cluster-autoscaler"
CLUSTER_AUTOSCALER_TAGS: Dict[str, str] = {"1.33": "v1.33.6", "1.34": "v1.34.5", "1.35": "v1.35.2"}

# The node gate and the team-objects Deployment run standard-library scripts (platforms/kubernetes/node/) in the
# Docker official Python image, pulled from its Amazon ECR Public mirror (no Docker Hub rate limits). Minor-pinned tag.
# https://gallery.ecr.aws/docker/library/python
GATE_IMAGE = "public.ecr.aws/docker/library/python:3.13-alpine"


def minor(version: str) -> Tuple[int, int]:
    major, _, rest = version.partition(".")
    return int(major), int(rest.split(".")[0])

# In-cluster exporters the AMP managed scraper collects from (docs/eks.md, "Observability"). node_exporter and
# dcgm-exporter are the versions the other orchestrators' nodes run (fmcluster/runtime/observability/install.sh pins
# them; a test keeps the two equal); dcgm-exporter is pulled by digest.
NODE_EXPORTER_IMAGE = "quay.io/prometheus/node-exporter:v1.8.2"
DCGM_EXPORTER_IMAGE = ("nvcr.io/nvidia/k8s/dcgm-exporter:4.4.1-4.6.0-ubuntu22.04"
                       "@sha256:b7a4241c608253aa829041cc3575ea57082491251a4a626bcdddc68eaf9a3101")
# https://github.com/kubernetes/kube-state-metrics/releases/tag/v2.13.0 (newer 2.x releases exist; its
# compatibility matrix covers the Kubernetes versions above through client-go's stable APIs)
KUBE_STATE_METRICS_IMAGE = "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.13.0"
