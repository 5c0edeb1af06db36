"""Amazon EKS: a private control plane, GPU managed node groups launched from the EFA launch templates, device
plugins, Kueue (or Volcano / KAI) for gang and topology-aware scheduling, the shared stores as PersistentVolumes, and
a node gate that keeps a node tainted until its boot validation passes. docs/eks.md says how and why."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional

from fmcluster.orchestrators.eks import settings
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
from fmcluster.platforms.kubernetes.versions import KUBERNETES_VERSIONS

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


class Eks(OrchestratorKind[settings.EksOrchestrator]):
    def describe(self, spec: ClusterSpec) -> str:
        scheduler = settings.SCHEDULER_NAMES[self.settings_of(spec).eks.scheduler]
        return f"Amazon EKS with GPU managed node groups, {scheduler} and a boot-validation node gate"

    def spec_rules(self, spec: ClusterSpec) -> List[Problem]:
        return settings.spec_rules(spec)

    def extra_instances(self, spec: ClusterSpec) -> List[ExtraInstance]:
        return settings.extra_instances(spec)

    def billed_services(self, spec: ClusterSpec) -> List[BilledService]:
        return billed_services(spec, self.settings_of(spec).eks.kubernetes_version)

    def spec_warnings(self, spec: ClusterSpec) -> List[SpecWarning]:
        from fmcluster.spec.placement_advice import on_demand_together

        return version_warnings(self.settings_of(spec).eks, path="orchestrator.eks.kubernetes_version",
                                versions=KUBERNETES_VERSIONS, kind=self.name) + on_demand_together(
            spec, {g.name: g.count for g in spec.node_groups},
            "the managed node group's Auto Scaling group launches them and retries the launches that fail for "
            "capacity, and EKS reports those as the group's AsgInstanceLaunchFailures health issue "
            "(https://docs.aws.amazon.com/eks/latest/APIReference/API_Issue.html); whether CloudFormation then fails the "
            "node group, rolling the cluster stack back, or completes it short of nodes is unverified, and a job for "
            "all of them waits until they are there")

    def scaffold(self, request: Scaffold) -> Dict[str, Any]:
        if not request.admins:
            raise ValueError("--admin: an EKS cluster needs the IAM role or user ARN that administers it "
                             "(arn:aws:iam::ACCOUNT:role/NAME; the role you deploy and run kubectl as)")
        return {"type": self.name, "eks": {"kubernetes_version": version_for_a_new_cluster(KUBERNETES_VERSIONS),
                                             "admins": list(request.admins)}}

    def way_in(self, spec: ClusterSpec) -> List[str]:
        from fmcluster.platforms.ec2.access import find_instance_command
        from fmcluster.platforms.kubernetes.access import way_in

        node = f"$({find_instance_command(region=spec.region, cluster=spec.name, group=settings.SYSTEM_GROUP)})"
        return way_in(region=spec.region, cluster=spec.name, public=self.settings_of(spec).eks.endpoint.public,
                      target=node)

    def node_arrival(self, spec: ClusterSpec, group: NodeGroup) -> str:
        if group.capacity.type == "capacity-block":
            return (f"launch when the Capacity Block {group.capacity.reservation_id} starts, by themselves: the node "
                    "group asks for them from creation, so deploy before or after the start; pods wait (Pending) "
                    "until they have booted and passed validation (docs/eks.md, Capacity Blocks)")
        return super().node_arrival(spec, group)

    def job_placement(self, spec: ClusterSpec, group: NodeGroup) -> Optional[JobPlacement]:
        from fmcluster.orchestrators.eks.job_placement import placement

        return placement(spec, group)

    def fabric_job(self, spec: ClusterSpec, group: NodeGroup, *, image: Optional[str], spec_file: str) -> Optional[str]:
        from fmcluster.orchestrators.eks.first_job import manifests

        return manifests(spec, group, image=image, spec_file=spec_file)

    def serving_endpoint(self, spec: ClusterSpec, deployment: Deployment) -> Optional[ServingEndpoint]:
        from fmcluster.orchestrators.eks.serving import endpoint

        return endpoint(spec, deployment)

    def node_units(self, stack: str, logical_id: str, resource: Dict[str, Any], resources: Resources) -> List[NodeUnit]:
        from fmcluster.orchestrators.eks.node_units import node_units

        return node_units(stack, logical_id, resource, resources)

    def bind(self, scope: Construct, context: OrchestrationContext) -> Orchestration:
        from fmcluster.orchestrators.context import Orchestration
        from fmcluster.orchestrators.eks.construct import EksOrchestration

        eks = EksOrchestration(scope, "Eks", context=context)
        return Orchestration(eks, eks.grantee, eks.node_groups, node_principal=eks.nodes.grantee)

    def node_profile_json(self, spec: ClusterSpec, group: NodeGroup) -> str:
        from fmcluster.orchestrators.eks.node_groups import eks_node_profile

        return eks_node_profile(spec, group).to_json(indent=None)

    def preflight_checks(self, spec: ClusterSpec) -> List[PreflightCheck]:
        from fmcluster.orchestrators.eks.preflight import checks

        return checks(spec)

    def status_describers(self) -> Mapping[str, Describer]:
        from fmcluster.platforms.kubernetes.status import DESCRIBERS

        return DESCRIBERS


KIND = Eks(
    name="eks",
    summary="Amazon EKS with GPU managed node groups, Kueue (or Volcano/KAI) and a boot-validation node gate",
    settings=settings.EksOrchestrator,
    nodes=NodeTraits(
        resource_types=("AWS::EKS::Nodegroup",),  # fmcluster diff reads its nodes there
        agent="kubernetes",
        capacity_types=frozenset({"on-demand", "odcr", "capacity-block"}),
        # Cluster Autoscaler scales the elastic managed node groups, keeping their launch templates, EFA interfaces and
        # placement groups (docs/resilience.md says why not Karpenter); Capacity Block groups stay static (spec rule).
        elastic=True,
        image_family=False,  # EKS picks the AL2023 NVIDIA AMI from the node group's AMI type
        addresses=POD_ADDRESSES_PER_NODE,
    ),
    validation=ValidationTraits(
        policies=settings.POLICIES,
        policy_note="drain is Slurm's, and fail cannot stop provisioning: EKS joins a node whatever its user "
        "data returns. taint: the node gate keeps a failed node tainted, with the reason. replace is HyperPod's: EKS node "
        "auto-repair acts on the node monitoring agent's conditions, not on a taint or label of ours",
    ),
    storage=StorageTraits(
        mount_forms=(frozenset({"boot", "kubernetes"}),),  # node user data and a volume in the training namespace
    ),
    price_keys=PRICE_KEYS,  # the control plane (standard or extended support) and the AMP collector
    job_image=job_image.CONTAINER,  # the MPIJob's pods run AWS's nccl-tests image
)
