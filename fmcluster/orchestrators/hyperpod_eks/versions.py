"""Every version and name the hyperpod-eks kind pins, in one place, each with its public source (docs/hyperpod-eks.md
has the detail). Plain data (spec layer): the settings validate against it, the constructs install from it, preflight
checks it against the account."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from fmcluster.platforms.kubernetes.versions import ADDONS as EKS_ADDONS
from fmcluster.platforms.kubernetes.versions import KUBERNETES_VERSIONS as EKS_KUBERNETES_VERSIONS
from fmcluster.platforms.kubernetes.versions import AddonPin

# "SageMaker HyperPod supports Kubernetes versions ..." (HyperPod EKS prerequisites). The list moves with each release:
# the copies read list 1.28-1.32, 1.28-1.33 and, the newest, 1.28-1.34. No public copy found lists 1.35, so 1.35 is not
# offered for HyperPod (a HyperPod cluster refused on an EKS version would fail after the control plane and add-ons
# are up); add it here, with the page's wording, once the page lists it. fmcluster builds the versions both support,
# and defaults to the newest of them.
# https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-prerequisites.html
HYPERPOD_KUBERNETES_VERSIONS: Tuple[str, ...] = ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34")
KUBERNETES_VERSIONS: Tuple[str, ...] = tuple(v for v in EKS_KUBERNETES_VERSIONS if v in HYPERPOD_KUBERNETES_VERSIONS)
DEFAULT_KUBERNETES_VERSION = KUBERNETES_VERSIONS[-1]
# Same page: "SageMaker HyperPod requires the Amazon VPC CNI plug-in version 1.18.3 or later" (the only CNI it supports).
VPC_CNI_MIN_VERSION = "1.18.3"


@dataclass(frozen=True)
class ChartSource:
    """A Helm chart that is published nowhere but in a Git repository, installed at deploy time from the repository's
    archive at one commit (the content of a commit never changes), never copied into this repository.

    :param repository: GitHub ``owner/name``.
    :param commit: the full commit id.
    :param path: the chart's directory in the repository.
    :param tree: the Git tree id of ``path`` at ``commit`` (``git rev-parse <commit>:<path>``): the installer
        recomputes it from the files it downloaded and refuses anything else.
    :param release: the Helm release name; ``namespace``: the release's namespace.
    """

    repository: str
    commit: str
    path: str
    tree: str
    release: str
    namespace: str
    source: str

    @property
    def archive_url(self) -> str:
        return f"https://github.com/{self.repository}/archive/{self.commit}.tar.gz"


# HyperPod's dependency chart (health monitoring agent, deep health check, job auto-restart, Kubeflow training
# operator, MPI operator, NVIDIA and EFA device plugins, HyperPod patching), in aws/sagemaker-hyperpod-cli under
# helm_chart/HyperPodHelmChart; its Chart.yaml version (0.1.0) never moves, so the commit is the pin. Commit of
# 2026-06-22 ("Add space getting-started reference (#432)"); the chart itself last changed on 2026-06-19 (#430).
# Release name and namespace as the SageMaker guide installs it ("helm install hyperpod-dependencies ... --namespace
# kube-system"). https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-install-packages-using-helm-chart.html
HYPERPOD_CHART = ChartSource(
    repository="aws/sagemaker-hyperpod-cli",
    commit="011ca927123e02b35a399935bbb3ab1905fe33c7",
    path="helm_chart/HyperPodHelmChart",
    tree="1dbdb6e41774ff5d699348a132cd08c3b2d24daf",
    release="hyperpod-dependencies",
    namespace="kube-system",
    source="https://github.com/aws/sagemaker-hyperpod-cli/tree/011ca927123e02b35a399935bbb3ab1905fe33c7/helm_chart",
)
# cert-manager's namespace when the chart installs it (the chart's values.yaml: cert-manager.namespace and
# cert-manager.global.leaderElection.namespace, "namespace specifies which name space cert-manager should be installed",
# helm_chart/readme.md). cert-manager's own chart (v1.18.2, the pinned sub-chart) puts every object in that namespace
# (its "cert-manager.namespace" helper) and has no Namespace template, nor has any template of HyperPodHelmChart: the
# installer creates it before helm runs. https://github.com/cert-manager/cert-manager/tree/v1.18.2/deploy/charts/cert-manager
CERT_MANAGER_NAMESPACE = "cert-manager"
# The namespace HyperPod's agents run in (the chart's namespace.name; "The aws-hyperpod namespace name cannot be
# modified", SageMaker guide, "Installing packages on the Amazon EKS cluster using Helm").
HYPERPOD_NAMESPACE = "aws-hyperpod"

TASK_GOVERNANCE = "amazon-sagemaker-hyperpod-taskgovernance"
TRAINING_OPERATOR = "amazon-sagemaker-hyperpod-training-operator"
INFERENCE_OPERATOR = "amazon-sagemaker-hyperpod-inference"
INFERENCE_SOURCE = ("https://github.com/aws/sagemaker-hyperpod-cli/blob/a00b22d17ea928a6e39a43bd2efdafe01b1005ea/"
                    "helm_chart/HyperPodHelmChart/charts/inference-operator/migration/helm_to_addon.sh")
# The EKS add-ons of a HyperPod on EKS cluster: the eks kind's (versions pinned there, same sources) without the EKS
# node monitoring agent (HyperPod's health monitoring agent watches HyperPod nodes; EKS node auto repair applies to
# managed node groups only), plus HyperPod's task governance (managed Kueue; v1.6.0-eksbuild.1 packages Kueue 0.19.2)
# and, when the spec asks for it, the HyperPod training operator. Versions left to EKS's default for the cluster
# version, as for the eks kind's unconfirmed pins; `fmcluster preflight` reports what EKS offers.
ADDONS: Dict[str, AddonPin] = {
    **{name: pin for name, pin in EKS_ADDONS.items() if name != "eks-node-monitoring-agent"},
    TASK_GOVERNANCE: AddonPin(
        TASK_GOVERNANCE, {},
        "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-operate-console-ui-governance-setup.html"),
    TRAINING_OPERATOR: AddonPin(
        TRAINING_OPERATOR, {}, "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-operator-install.html"),
    # Serving (docs/serving.md): the HyperPod Inference Operator's add-on and its dependencies, at the versions AWS's
    # migration script installs (aws/sagemaker-hyperpod-cli helm_chart/HyperPodHelmChart/charts/inference-operator/
    # migration/helm_to_addon.sh); metrics-server at EKS's default.
    INFERENCE_OPERATOR: AddonPin(INFERENCE_OPERATOR, {v: "v1.0.0-eksbuild.1" for v in HYPERPOD_KUBERNETES_VERSIONS},
                                 INFERENCE_SOURCE),
    "cert-manager": AddonPin("cert-manager", {v: "v1.18.2-eksbuild.2" for v in HYPERPOD_KUBERNETES_VERSIONS},
                             INFERENCE_SOURCE),
    "metrics-server": AddonPin("metrics-server", {},
                               "https://docs.aws.amazon.com/eks/latest/userguide/metrics-server.html"),
    "aws-mountpoint-s3-csi-driver": AddonPin(
        "aws-mountpoint-s3-csi-driver", {v: "v1.14.1-eksbuild.1" for v in HYPERPOD_KUBERNETES_VERSIONS},
        INFERENCE_SOURCE),
}
# Add-ons whose pin above takes its credentials through IRSA only: the Mountpoint for S3 CSI driver v1 (EKS Pod
# Identity came with v2: awslabs/mountpoint-s3-csi-driver README). The kind installs them on an IRSA role (irsa.py),
# shared by a store's volumes and serving's S3 weights.
S3_CSI = "aws-mountpoint-s3-csi-driver"
IRSA_ADDONS = (S3_CSI,)
# The Kubernetes versions the training operator's page lists ("Using the HyperPod training operator", Supported
# versions: 1.28-1.33), narrower than HyperPod's own; preflight asks EKS which versions it offers the add-on for.
# https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-eks-operator.html
TRAINING_OPERATOR_KUBERNETES_VERSIONS = ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33")
# The training operator's controller and the policy its Pod Identity role holds (SageMaker guide, "Installing the
# training operator": a Pod Identity association in aws-hyperpod for this service account).
TRAINING_OPERATOR_SERVICE_ACCOUNT = "hp-training-operator-controller-manager"
TRAINING_OPERATOR_POLICY = "AmazonSageMakerHyperPodTrainingOperatorAccess"
