"""SageMaker HyperPod with Amazon EKS orchestration: the Kubernetes platform's control plane and in-cluster layers
(add-ons, exporters, the AMP managed scraper, the teams' claims and checkpoint service accounts, the node gate) and
the HyperPod platform's parts (instance role, lifecycle bucket, instance groups, health checks), plus what HyperPod
on EKS needs before its cluster exists (its dependency Helm chart, task governance) and task governance from the spec.
docs/hyperpod-eks.md says how and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from fmcluster.orchestrators.hyperpod_eks import settings
from fmcluster.orchestrators.hyperpod_eks.versions import KUBERNETES_VERSIONS
from fmcluster.orchestrators.kind import (
    BilledService,
    ExtraInstance,
    NodeTraits,
    OrchestratorKind,
    Scaffold,
    SpecWarning,
    StorageTraits,
    ValidationTraits,
)
from fmcluster.platforms.kubernetes import job_image
from fmcluster.platforms.kubernetes.addresses import POD_ADDRESSES_PER_NODE
from fmcluster.platforms.kubernetes.support import (
    PRICE_KEYS,
    billed_services,
    version_for_a_new_cluster,
    version_warnings,
)
from fmcluster.spec import checkpoints

if TYPE_CHECKING:
    from constructs import Construct

    from fmcluster.aws.context import PreflightCheck
    from fmcluster.aws.status import Describer
    from fmcluster.orchestrators.context import Orchestration, OrchestrationContext
    from fmcluster.platforms.kubernetes.job_placement import JobPlacement
    from fmcluster.platforms.kubernetes.load_test import ServingEndpoint
    from fmcluster.spec.base import Problem
    from fmcluster.spec.cluster import ClusterSpec
    from fmcluster.spec.node_group import NodeGroup
    from fmcluster.spec.node_units import NodeUnit, Resources
    from fmcluster.spec.serving import Deployment


class HyperPodEks(OrchestratorKind[settings.HyperPodEksOrchestrator]):
    def spec_rules(self, spec: ClusterSpec) -> List[Problem]:
        return settings.spec_rules(spec)

    def extra_instances(self, spec: ClusterSpec) -> List[ExtraInstance]:
        return settings.extra_instances(spec)

    def billed_services(self, spec: ClusterSpec) -> List[BilledService]:
        return billed_services(spec, self.settings_of(spec).eks.kubernetes_version)

    def spec_warnings(self, spec: ClusterSpec) -> List[SpecWarning]:
        return version_warnings(self.settings_of(spec).eks, path="orchestrator.eks.kubernetes_version",
                                versions=KUBERNETES_VERSIONS, kind=self.name)

    def plan_notes(self, spec: ClusterSpec) -> List[str]:
        return settings.plan_notes(spec)

    def scaffold(self, request: Scaffold) -> Dict[str, Any]:
        from fmcluster import catalog
        from fmcluster.runtime.contract import ec2_type

        if not request.admins:
            raise ValueError("--admin: an EKS cluster needs the IAM role or user ARN that administers it "
                             "(arn:aws:iam::ACCOUNT:role/NAME; the role you deploy and run kubectl as)")
        gpus = catalog.get(ec2_type(request.instance_type)).gpus * request.count
        # one team owning every GPU of the group: jobs go through its queue; add teams as they come
        return {"type": self.name, "eks": {"kubernetes_version": version_for_a_new_cluster(KUBERNETES_VERSIONS),
                                             "admins": list(request.admins)},
                "task_governance": {"teams": [{"name": "ml", "gpus": {request.group: gpus}}]}}

    def way_in(self, spec: ClusterSpec) -> List[str]:
        from fmcluster.platforms.hyperpod.access import ssm_target
        from fmcluster.platforms.kubernetes.access import way_in

        node = ssm_target(region=spec.region, cluster=spec.name, group=settings.SYSTEM_GROUP)
        return way_in(region=spec.region, cluster=spec.name, public=self.settings_of(spec).eks.endpoint.public,
                      target=node)

    def job_placement(self, spec: ClusterSpec, group: NodeGroup) -> Optional[JobPlacement]:
        from fmcluster.orchestrators.hyperpod_eks.job_placement import placement

        return placement(spec, group)

    def fabric_job(self, spec: ClusterSpec, group: NodeGroup, *, image: Optional[str], spec_file: str) -> Optional[str]:
        from fmcluster.orchestrators.hyperpod_eks.first_job import manifests

        return manifests(spec, group, image=image, spec_file=spec_file)

    def serving_endpoint(self, spec: ClusterSpec, deployment: Deployment) -> Optional[ServingEndpoint]:
        from fmcluster.orchestrators.hyperpod_eks.serving import endpoint

        return endpoint(spec, deployment)

    def node_units(self, stack: str, logical_id: str, resource: Dict[str, Any], resources: Resources) -> List[NodeUnit]:
        from fmcluster.platforms.hyperpod.node_units import node_units

        return node_units(stack, logical_id, resource, resources)

    def bind(self, scope: Construct, context: OrchestrationContext) -> Orchestration:
        from fmcluster.orchestrators.context import Orchestration
        from fmcluster.orchestrators.hyperpod_eks.construct import HyperPodEksOrchestration

        hyperpod = HyperPodEksOrchestration(scope, "HyperPodEks", context=context)
        return Orchestration(hyperpod, hyperpod.grantee)

    def node_profile_json(self, spec: ClusterSpec, group: NodeGroup) -> str:
        from fmcluster.orchestrators.hyperpod_eks.nodes import node_profile

        return node_profile(spec, group).to_json(indent=None)

    def preflight_checks(self, spec: ClusterSpec) -> List[PreflightCheck]:
        from fmcluster.orchestrators.hyperpod_eks.preflight import checks

        return checks(spec)

    def status_describers(self) -> Mapping[str, Describer]:
        from fmcluster.orchestrators.hyperpod_eks.status import DESCRIBERS

        return DESCRIBERS


KIND = HyperPodEks(
    name="hyperpod-eks",
    summary="SageMaker HyperPod on Amazon EKS with health checks, node recovery and task governance",
    settings=settings.HyperPodEksOrchestrator,
    nodes=NodeTraits(
        resource_types=("AWS::SageMaker::Cluster",),  # fmcluster diff reads its nodes there
        agent="kubernetes",
        # HyperPod reserves capacity through SageMaker training plans, not EC2 reservations
        capacity_types=frozenset({"on-demand", "training-plan"}),
        elastic=True,  # HyperPod's managed Karpenter (AutoScaling, with continuous provisioning); spec rules limit it
        in_account=False,
        places_instances=False,  # HyperPod places its instances; the templates create no placement group
        image_family=False,  # HyperPod runs its own EKS AMI
        # pods take VPC addresses on the instance's one ENI, as on EKS managed nodes (same VPC CNI settings)
        addresses=POD_ADDRESSES_PER_NODE,
    ),
    validation=ValidationTraits(
        policies=settings.POLICIES,
        policy_note="drain is Slurm's. taint: the node gate keeps a failed node out of work, with the reason; "
        "fail: the lifecycle script fails and HyperPod provisions another instance; replace: as taint, and a hardware "
        "fault labels the node for HyperPod's replacement",
    ),
    storage=StorageTraits(
        # the lifecycle scripts (a store's own entry, or its boot lines in the list of mounts), and one volume per team
        mount_forms=(frozenset({"lifecycle", "kubernetes"}), frozenset({"boot", "kubernetes"})),
        # managed tiered checkpointing: HyperPod on EKS's own (TieredStorageConfig), besides the node-local tier and
        # every store section's (honoured by every kind that mounts the store)
        checkpoint_tiers=checkpoints.DEFAULT_TIERS | {checkpoints.MANAGED},
    ),
    price_keys=PRICE_KEYS,  # the control plane (standard or extended support) and the AMP collector
    job_image=job_image.CONTAINER,  # the MPIJob's pods run AWS's nccl-tests image
    rule_groups=("hyperpod",),
)
