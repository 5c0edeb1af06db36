"""What HyperPod on EKS nodes are made of, rendered from the spec: the instance groups (labels, taints, EBS volume,
deep health checks, EFA, training plans), the lifecycle's parameters and entry scripts (platforms/hyperpod/
node/on_create_eks.sh), the NodeProfile the boot validator checks, and the values of HyperPod's dependency chart."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from fmcluster.orchestrators.hyperpod_eks.settings import (
    SYSTEM_GROUP,
    HyperPodEksOrchestrator,
    deep_health_checked,
)
from fmcluster.orchestrators.hyperpod_eks.versions import CERT_MANAGER_NAMESPACE
from fmcluster.platforms.hyperpod.cluster import HyperPodInstanceGroup
from fmcluster.platforms.hyperpod.mounts import EKS_IMAGE, lifecycle_mounts
from fmcluster.platforms.kubernetes import labels
from fmcluster.platforms.kubernetes.node_checks import EKS_DISABLED_CHECKS, EKS_OPTIONAL
from fmcluster.platforms.storage import Mounts
from fmcluster.profiles import mounts
from fmcluster.runtime.contract import EKS_ENTRY_SCRIPT, LIFECYCLE_PARAMETERS_VERSION, ml_type
from fmcluster.runtime.profile import NodeProfile
from fmcluster.spec import ClusterSpec, NodeGroup

# HyperPod's taint while its deep health checks run (SageMaker guide, "Getting started with Amazon EKS support in
# SageMaker HyperPod"); per-node agents of ours tolerate it, as the HyperPod chart's device plugins do.
HEALTH_STATUS = "sagemaker.amazonaws.com/node-health-status"
HEALTH_TOLERATION: Dict[str, str] = {"key": HEALTH_STATUS, "operator": "Exists", "effect": "NoSchedule"}
# The node labels HyperPod sets for its health checks (SageMaker guide, "Resilience-related Kubernetes labels by
# SageMaker HyperPod"), which kube-state-metrics exports for the alerts in rules.hyperpod.yaml.
HEALTH_LABELS = (HEALTH_STATUS, "sagemaker.amazonaws.com/deep-health-check-status", "sagemaker.amazonaws.com/fault-type",
                 "sagemaker.amazonaws.com/fault-reason")
# Container-side components are the job images' (as on EKS): no floors for them on the host; the driver keeps the
# catalog's floor for the type (HyperPod's EKS AMI is not the EKS-optimized one, so the EKS floors do not apply).
MIN_VERSIONS: Dict[str, Optional[str]] = {"cuda": None, "efa_installer": None, "libfabric": None, "aws_ofi_nccl": None,
                                          "dcgm": None}


def entry_script(group: str) -> str:
    return EKS_ENTRY_SCRIPT.format(group=group)


def group_names(spec: ClusterSpec) -> List[str]:
    return [g.name for g in spec.node_groups] + [SYSTEM_GROUP]


def gated(spec: ClusterSpec) -> bool:
    """Whether the node gate runs: under taint and report (under fail a failed node never joins)."""
    return spec.validation_policy in ("taint", "replace", "report")


def node_labels(group: NodeGroup) -> Dict[str, str]:
    """The eks kind's labels (group, type, EFA interfaces, GPU present), the HyperPod chart's EFA device plugin."""
    return labels.node_labels(group, efa_device="plugin")


def node_taints(spec: ClusterSpec, group: NodeGroup) -> List[Dict[str, str]]:
    """The validation gate's pending taint at registration, where HyperPod accepts custom taints (not on groups with
    deep health checks: there HyperPod's own taint holds the node and the gate adopts it, kube_gate.py --adopt). No
    GPU taint: HyperPod refuses it on deep-health-checked GPU groups too, so system pods are kept to the system group
    by node selectors instead."""
    if not gated(spec) or deep_health_checked(spec, group):
        return []
    return [dict(labels.VALIDATION_TAINT)]


def instance_groups(spec: ClusterSpec) -> List[HyperPodInstanceGroup]:
    """One instance group per node group, then the system group; every group runs its own OnCreate entry."""
    hp = HyperPodEksOrchestrator.of(spec).hyperpod
    groups = [
        HyperPodInstanceGroup(
            name=g.name,
            instance_type=ml_type(g.instance_type),
            # HyperPod's Karpenter owns an elastic group's size, from 0 (SageMaker guide, "Create a NodeClass")
            count=0 if g.elastic else g.count,
            node_type=None,
            threads_per_core=hp.threads_per_core,
            ebs_volume_gib=hp.volume_gib,
            deep_health_checks=deep_health_checked(spec, g),
            training_plan_arn=g.capacity.training_plan_arn,
            efa_only=True if g.efa_enabled else None,
            kubernetes_labels=node_labels(g),
            kubernetes_taints=tuple(node_taints(spec, g)),
            entry_script=entry_script(g.name),
        )
        for g in spec.node_groups
    ]
    groups.append(HyperPodInstanceGroup(
        name=SYSTEM_GROUP, instance_type=hp.system_instance_type, count=hp.system_count, node_type=None,
        threads_per_core=hp.threads_per_core, ebs_volume_gib=hp.volume_gib,
        kubernetes_labels={labels.GROUP: SYSTEM_GROUP}, entry_script=entry_script(SYSTEM_GROUP)))
    return groups


def node_profile(spec: ClusterSpec, group: NodeGroup) -> NodeProfile:
    """The group's NodeProfile as HyperPod on EKS nodes check it at creation: kubelet as the agent (it starts after
    the lifecycle script, so the validator skips its check), the shared file system mounted, the container-side
    stack left to the images; the instance store is the lifecycle's concern (it moves containerd and the kubelet
    there). Policy report on the node: the node gate or the lifecycle's exit status acts."""
    return NodeProfile.from_catalog(
        group.instance_type,
        mounts=mounts(spec, group),
        exporters=[],  # the exporters run as pods once the node joins
        group=group.name,
        orchestrator=spec.orchestrator_kind.nodes.agent,
        policy="fail" if spec.validation_policy == "fail" else "report",
        level=spec.validation.level,
        instance_store=None,
        min_versions={**MIN_VERSIONS, **spec.validation.min_versions},
        known_good={},
        pinned_versions=dict(spec.validation.pinned_versions),
        optional=list(EKS_OPTIONAL),
        disabled_checks=sorted(set(EKS_DISABLED_CHECKS) | set(spec.validation.skip_checks)),
    )


def lifecycle_parameters(spec: ClusterSpec, region: str, mounts: Mounts, observability: bool) -> Dict[str, Any]:
    """fmcluster_parameters.json for on_create_eks.sh (the layout runtime/contract.py names): the nodes mount every
    store (their pods reach it through its volume)."""
    return {
        "version": LIFECYCLE_PARAMETERS_VERSION,
        "workload_manager": "eks",
        "cluster_name": spec.name,
        "region": region,
        "system_group": SYSTEM_GROUP,
        "worker_groups": [{"instance_group_name": g.name, "instance_type": ml_type(g.instance_type),
                           "gpu": g.instance.is_gpu, "efa": g.efa_enabled,
                           "instance_store": bool(g.instance.nvme_disks)} for g in spec.node_groups],
        **lifecycle_mounts(mounts, mounts.mounted_by_nodes(), image=EKS_IMAGE),
        "validation": {"level": spec.validation.level, "policy": spec.validation_policy},
        "observability": {"efa_textfile": True} if observability else None,
    }


def chart_values(spec: ClusterSpec) -> Dict[str, Any]:
    """Values of HyperPod's dependency chart: its defaults (health monitoring agent, deep health check, job
    auto-restart, Kubeflow training operator, MPI operator, NVIDIA and EFA device plugins, HyperPod patching) with the
    Region named (the health monitoring agent's image is regional; the chart otherwise guesses it), the Neuron
    plugin off (fmcluster's catalog has no Trainium), and cert-manager on when the HyperPod training operator is
    installed (its prerequisite), in its own namespace as the chart's defaults have it (named here, so that
    `chart_namespaces` and the values cannot disagree)."""
    return {
        "global": {"region": spec.region},
        "neuron-device-plugin": {"devicePlugin": {"enabled": False}},
        # cert-manager's chart runs a post-install hook Job (startupapicheck) that Helm waits for: it could never run
        # before the HyperPod cluster brings nodes, so it is off
        "cert-manager": {"enabled": HyperPodEksOrchestrator.of(spec).hyperpod.training_operator,
                         "namespace": CERT_MANAGER_NAMESPACE,
                         "global": {"leaderElection": {"namespace": CERT_MANAGER_NAMESPACE}},
                         "startupapicheck": {"enabled": False}},
        "trainingOperators": {"enabled": True},
        "mpi-operator": {"enabled": True},
        "health-monitoring-agent": {"enabled": True},
        "deep-health-check": {"enabled": True},
        "job-auto-restart": {"enabled": True},
    }


def chart_namespaces(spec: ClusterSpec) -> List[str]:
    """The namespaces the chart, with `chart_values`, puts objects in and no template of it creates: the installer
    creates them before helm runs (helm creates none but the release's own with --create-namespace, and kube-system
    exists). The chart's other namespaces come with their sub-charts' Namespace templates (aws-hyperpod: deep health
    check; kubeflow: training operators; mpi-operator)."""
    values = chart_values(spec)
    cert_manager = values["cert-manager"]
    return [cert_manager["namespace"]] if cert_manager["enabled"] else []
