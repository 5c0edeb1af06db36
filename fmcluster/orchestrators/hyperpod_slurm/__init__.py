"""SageMaker HyperPod with Slurm: resilient clusters HyperPod launches, places and heals, built on the HyperPod
platform (instance role, lifecycle bucket, instance groups, health checks) that hyperpod-eks shares."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping

from fmcluster.orchestrators.hyperpod_slurm import settings
from fmcluster.orchestrators.kind import ExtraInstance, NodeTraits, OrchestratorKind, StorageTraits, ValidationTraits
from fmcluster.spec import checkpoints
from fmcluster.spec.orchestrator import DLAMI_NCCL_TESTS, JobImage

if TYPE_CHECKING:
    from constructs import Construct

    from fmcluster.aws.context import PreflightCheck
    from fmcluster.aws.status import Describer
    from fmcluster.orchestrators.context import Orchestration, OrchestrationContext
    from fmcluster.spec.base import Problem
    from fmcluster.spec.cluster import ClusterSpec
    from fmcluster.spec.node_units import NodeUnit, Resources


# AWS announced managed tiered checkpointing "for SageMaker HyperPod clusters using the EKS orchestrator"
# (What's New, 2025-09-08) and its setup guide requires an EKS HyperPod cluster.
HYPERPOD_SLURM_NO_MANAGED_TIER = (
    "SageMaker HyperPod offers managed tiered checkpointing on clusters orchestrated by Amazon EKS only, not with "
    "Slurm (https://aws.amazon.com/about-aws/whats-new/2025/09/managed-tiered-checkpointing-amazon-sagemaker-hyperpod"
    f"; {checkpoints.MANAGED_SETUP_URL})")


# AWS, "Using an external accounting database with SageMaker HyperPod Slurm clusters": "By default, SageMaker HyperPod
# deploys MariaDB on your cluster's controller instance, so accounting works with no database for you to manage."
ACCOUNTING_GUIDE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html"


class HyperPodSlurm(OrchestratorKind[settings.HyperPodSlurmOrchestrator]):
    def plan_notes(self, spec: ClusterSpec) -> List[str]:
        return [f"Slurm accounting (sacct, sreport): HyperPod's slurmdbd with MariaDB on the controller, set up by "
                f"HyperPod ({ACCOUNTING_GUIDE}); the history lives on the controller and goes with a replaced one. An "
                "external database (Orchestrator.Slurm.AccountingDatabase) needs continuous provisioning and cannot be "
                "detached again: not built by fmcluster (docs/hyperpod-slurm.md)"]

    def spec_rules(self, spec: ClusterSpec) -> List[Problem]:
        return settings.spec_rules(spec)

    def extra_instances(self, spec: ClusterSpec) -> List[ExtraInstance]:
        return settings.extra_instances(spec)

    def way_in(self, spec: ClusterSpec) -> List[str]:
        from fmcluster.platforms.hyperpod.access import session_command

        group = settings.LOGIN_GROUP if self.settings_of(spec).hyperpod.login_instance_type else settings.CONTROLLER_GROUP
        return [f"# a shell on the {group} node (sbatch, squeue, sinfo), through Session Manager:",
                session_command(region=spec.region, cluster=spec.name, group=group)]

    def node_units(self, stack: str, logical_id: str, resource: Dict[str, Any], resources: Resources) -> List[NodeUnit]:
        from fmcluster.platforms.hyperpod.node_units import node_units

        return node_units(stack, logical_id, resource, resources)

    def bind(self, scope: Construct, context: OrchestrationContext) -> Orchestration:
        from fmcluster.orchestrators.context import Orchestration
        from fmcluster.orchestrators.hyperpod_slurm.construct import HyperPodSlurmOrchestration

        hyperpod = HyperPodSlurmOrchestration(scope, "HyperPod", context=context)
        return Orchestration(hyperpod, hyperpod.grantee)

    def preflight_checks(self, spec: ClusterSpec) -> List[PreflightCheck]:
        from fmcluster.platforms.hyperpod.preflight import checks

        return checks(spec)

    def status_describers(self) -> Mapping[str, Describer]:
        from fmcluster.platforms.hyperpod.status import DESCRIBERS

        return DESCRIBERS


KIND = HyperPodSlurm(
    name="hyperpod-slurm",
    summary="SageMaker HyperPod with Slurm",
    settings=settings.HyperPodSlurmOrchestrator,
    nodes=NodeTraits(
        resource_types=("AWS::SageMaker::Cluster",),  # fmcluster diff reads its nodes there
        agent="slurm",
        # HyperPod reserves capacity through SageMaker training plans, not EC2 reservations
        capacity_types=frozenset({"on-demand", "training-plan"}),
        elastic_note="HyperPod's autoscaling (managed Karpenter) serves EKS-orchestrated clusters only; a Slurm cluster's "
        "instance groups change size through UpdateCluster "
        "(https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-eks-autoscaling.html)",
        in_account=False,
        places_instances=False,  # HyperPod places its instances; the templates create no placement group
        image_family=False,
    ),
    validation=ValidationTraits(
        policies=("drain", "replace", "fail", "report"),
        policy_note="taint is Kubernetes': drain keeps a failed node out of Slurm, with the reason; replace "
        "asks HyperPod for a new instance when a hardware check failed (state fail, reason Action:Replace) and drains "
        "otherwise",
    ),
    storage=StorageTraits(
        # HyperPod itself, else the lifecycle scripts: a store's own entry, or its boot lines in the list of mounts
        mount_forms=(frozenset({"sagemaker-hyperpod"}), frozenset({"lifecycle"}), frozenset({"boot"})),
        checkpoint_tier_note=HYPERPOD_SLURM_NO_MANAGED_TIER,
    ),
    # HyperPod's release notes publish no NCCL or nccl-tests for its Slurm AMI (docs/validation.md, "Each
    # orchestrator's default AMI"): the Deep Learning AMI's place is looked at, and without a build there the job
    # builds one on the shared file system
    job_image=JobImage(name="the SageMaker HyperPod AMI for Slurm", nccl_tests=DLAMI_NCCL_TESTS,
                       source="https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-release-ami-slurm.html"),
)
