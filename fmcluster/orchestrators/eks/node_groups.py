"""EKS managed node groups: one per spec node group, launched from the same EFA launch template the other kinds use
(card layout, efa-only interfaces, IMDSv2, encrypted root, placement group, capacity targeting), adjusted
to the launch-template rules of managed node groups, plus a small system node group for cluster services.

EKS user guide, "Customize managed nodes with launch templates": no SubnetId and no instance profile in the template,
security groups on the interfaces (then EKS adds no cluster security group: the EFA group is also the control plane's
additional group, so nodes and control plane share it), no ImageId so EKS picks the AMI of the AMI type and merges its
own bootstrap part into our MIME user data. https://docs.aws.amazon.com/eks/latest/userguide/launch-templates.html
"""

from __future__ import annotations

import json
from typing import Dict, Optional, Sequence, cast

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster import catalog
from fmcluster.constructs.launch_template import LaunchTemplateProps, NodeLaunchTemplate
from fmcluster.constructs.node_bootstrap import mime_user_data
from fmcluster.constructs.node_group import Ec2NodeGroup
from fmcluster.constructs.node_role import NodeRole
from fmcluster.nag import acknowledge
from fmcluster.orchestrators.context import OrchestrationContext
from fmcluster.orchestrators.eks.settings import SYSTEM_GROUP, EksOrchestrator
from fmcluster.platforms.ec2.node_builder import NodeImage, construct_id
from fmcluster.platforms.kubernetes import autoscaler, labels
from fmcluster.platforms.kubernetes.node_checks import EKS_DISABLED_CHECKS, EKS_OPTIONAL
from fmcluster.platforms.storage.instance_nvme.tier import NVME
from fmcluster.profiles import mounts
from fmcluster.runtime.node_setup.storage import mount_unit_name
from fmcluster.runtime.observability import EFA_TEXTFILE_TIMER_UNIT
from fmcluster.runtime.profile import NodeProfile
from fmcluster.spec import ClusterSpec, NodeGroup

# Amazon Linux 2023 boots from /dev/xvda (the DLAMI's Ubuntu from /dev/sda1).
AL2023_ROOT_DEVICE = "/dev/xvda"
# The image EKS boots (its AL2023 AMI types), as the stores' clients name it (`NodeClient.install`): it ships no
# storage client, so each store installs its own before the mount.
EKS_IMAGE = "eks-al2023"
# nodeadm's localStorage RAID0 strategy assembles the instance NVMe into one xfs array mounted here and bind-mounts
# kubelet, containerd and pod logs onto it (amazon-eks-ami, nodeadm API "LocalStorageOptions";
# templates/al2023/runtime/bin/setup-local-disks).
K8S_DISKS = "/mnt/k8s-disks/0"
# The instance NVMe tier's path (`NVME.path`, where every other kind's image mounts the instance store) shows this
# directory of the array, bound by a systemd mount unit: kept apart from the kubelet's, containerd's and the pod logs'
# directories there, so a job that empties its tier cannot reach them. nodeadm's mountPath moves the array only below
# a directory of its own (<mountPath>/0), never onto the tier path itself.
NVME_ON_ARRAY = f"{K8S_DISKS}/nvme"
NODE_CONFIG = "application/node.eks.aws"
# On the AL2023 AMI nodeadm sets up the local disks and starts kubelet in its run phase, in nodeadm-run.service, which
# is ordered After=cloud-final.service: after our user data has ended (docs/eks.md, "Boot order on AL2023"). The boot
# validation therefore runs as a unit ordered after it (constructs/node_bootstrap.py deferred_validation).
VALIDATE_AFTER = ("nodeadm-run.service", "kubelet.service")

# The version floors are this AMI's (amazon-eks-ami CHANGELOG: kmod-nvidia-latest-dkms 580.159.03); the
# per-image-family floors of the runtime's version tables will replace these overrides.
EKS_MIN_VERSIONS: Dict[str, Optional[str]] = {"driver": "580.65.06", "cuda": None, "efa_installer": None,
                                              "libfabric": None, "aws_ofi_nccl": None, "dcgm": None}
# The newest EKS AL2023 NVIDIA AMI fmcluster knows (amazon-eks-ami CHANGELOG, release v20260714): a node behind it
# warns. CUDA, libfabric, aws-ofi-nccl and NCCL come with the job's container, not the AMI.
EKS_KNOWN_GOOD: Dict[str, str] = {"driver": "580.159.03"}

# IMDS answers only the host and host-network pods: everything of ours that calls AWS from a node runs on the host
# (user data, boot validation) or in the host network (VPC CNI, kube-proxy, Pod Identity agent, the storage CSI node
# plugins, exporters), and workloads get their credentials from EKS Pod Identity (docs/eks.md, "Credentials on the nodes").
IMDS_HOP_LIMIT = 1

# How a change that must reach the nodes (a new launch template version, AMI release) rolls through a managed node
# group: one node at a time, drained within its pods' PodDisruptionBudgets. Without force update, a pod that cannot be
# evicted within 15 minutes fails the update, which stops instead of killing the job (EKS user guide, "Understand
# each phase of node updates"; docs/changes.md). Routine changes (a new fmcluster runtime, validation settings) do not
# reach here: they change the boot pointer, not the launch template.
ROLLING_UPDATE = {"force_update": False, "max_unavailable": 1}


def scaling_config(group: NodeGroup) -> Dict[str, int]:
    """The managed node group's sizes: min_count, count and max_count (a static group: count three times), which
    Cluster Autoscaler moves within for an elastic group.

    A Capacity Block group (always static: the spec refuses a range on it) asks for its whole count from creation, as
    the EKS user guide documents for a node group created before its block is active: the Auto Scaling group reports
    launch errors until the block starts, then launches the nodes, with no step by hand. Its template's desired size
    is then what the block runs, so a later update never sends a smaller one over the running nodes (CloudFormation
    sends the whole ScalingConfig when any size changes). Its minimum is 0 so that EKS's own scale-down before the
    block ends, and the size 0 AWS asks for while such a group is upgraded, stay possible
    (docs/eks.md, "Capacity Blocks")."""
    if group.capacity.type == "capacity-block":
        return {"min_size": 0, "desired_size": group.count, "max_size": group.count}
    return {"min_size": group.min_size, "desired_size": group.count, "max_size": group.max_size}


def ami_type(instance: catalog.InstanceType) -> eks.NodegroupAmiType:
    """The managed node group's AL2023 AMI type for the instance's architecture and accelerator: EKS refuses an
    instance type whose architecture differs from the AMI type's (EKS API reference, Nodegroup amiType)."""
    arm = instance.architecture == "arm64"
    if instance.is_gpu:
        return eks.NodegroupAmiType.AL2023_ARM_64_NVIDIA if arm else eks.NodegroupAmiType.AL2023_X86_64_NVIDIA
    return eks.NodegroupAmiType.AL2023_ARM_64_STANDARD if arm else eks.NodegroupAmiType.AL2023_X86_64_STANDARD


def eks_node_profile(spec: ClusterSpec, group: NodeGroup) -> NodeProfile:
    """The group's NodeProfile as EKS nodes check it: the AL2023 NVIDIA AMI's stack, the instance NVMe at the tier's
    path (bound onto nodeadm's array before the validator runs), kubelet as the agent, the report left to the node
    gate (policy report on the node)."""
    has_nvme = NVME.size(group.instance) is not None
    return NodeProfile.from_catalog(
        group.instance_type,
        mounts=mounts(spec, group),
        exporters=[],  # the exporters run as pods (observability), after the node joins
        group=group.name,
        orchestrator=spec.orchestrator_kind.nodes.agent,
        policy="report",
        level=spec.validation.level,
        instance_store=NVME.path if has_nvme else None,
        min_versions={**EKS_MIN_VERSIONS, **spec.validation.min_versions},
        known_good=dict(EKS_KNOWN_GOOD),
        pinned_versions=dict(spec.validation.pinned_versions),
        optional=list(EKS_OPTIONAL),
        disabled_checks=sorted(set(EKS_DISABLED_CHECKS) | set(spec.validation.skip_checks)),
    )


def node_config(group: NodeGroup) -> str:
    """nodeadm NodeConfig merged with the one EKS injects: instance NVMe as RAID0 for kubelet and containerd."""
    spec = {"instance": {"localStorage": {"strategy": "RAID0"}}} if group.instance.nvme_disks else {}
    return json.dumps({"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}, indent=1)


# The EFA counters textfile (runtime/observability/efa_textfile.py) on a timer, as install.sh sets it up on the other
# kinds' nodes; the node-exporter pods read the textfile directory (metrics.py). No host agent: AMP's managed scraper
# collects. The units come from the runtime the node fetched (the HyperPod on EKS lifecycle writes the same ones), so a
# collector change is a runtime change and leaves the launch template alone. The command keeps the node-setup tool's
# earlier name (runtime/lifecycle/node.py), which launch templates already carry: a new name would change them.
EFA_TEXTFILE_UNITS = (
    "PYTHONPATH=/opt/fmcluster/pkg timeout 60 python3 -m fmcluster.runtime.lifecycle.node efa-units "
    f"--unit-dir /etc/systemd/system >/dev/null && timeout 60 systemctl daemon-reload && "
    f"timeout 60 systemctl enable --now {EFA_TEXTFILE_TIMER_UNIT} || echo 'fmcluster: EFA textfile timer not started'\n"
)


def pre_validation_steps(spec: ClusterSpec, group: NodeGroup) -> str:
    """Shell lines before the mounts and the validator, in the boot-validation unit (after nodeadm-run.service): with
    observability the EFA counters' textfile timer, a short wait for nodeadm's RAID0 mount (nodeadm-run.service
    mounts it before it starts kubelet, so it is normally there), then the tier's path bound onto it by a mount unit
    that later boots mount again after the array's (training pods wait for the node gate, which waits for this
    validation). The stores' clients follow, each before its mount (the image has none: `EKS_IMAGE`). Every command
    under a timeout."""
    lines = ""
    if spec.observability.enabled and group.efa_enabled:
        lines += EFA_TEXTFILE_UNITS
    if group.instance.nvme_disks:
        lines += (f"for i in $(seq 24); do timeout 10 mountpoint -q {K8S_DISKS} && break; sleep 5; done\n"
                  f"timeout 10 mountpoint -q {K8S_DISKS} || echo 'fmcluster: {K8S_DISKS} not mounted after 2 min'\n"
                  "PYTHONPATH=/opt/fmcluster/pkg timeout 60 python3 -m fmcluster.runtime.node_setup bind-unit "
                  f"--unit-dir /etc/systemd/system --source {NVME_ON_ARRAY} --target {NVME.path} --requires {K8S_DISKS} "
                  f">/dev/null && timeout 60 systemctl daemon-reload && timeout 120 systemctl enable --now "
                  f"{mount_unit_name(NVME.path)} || echo 'fmcluster: {NVME.path} not bound to the instance NVMe'\n")
    return lines


class EksNodeGroups(Construct):
    """The node role (EKS worker policies named below, SSM agent, runtime asset), and per spec node group an
    `Ec2NodeGroup` (placement group + EFA launch template) and an EKS managed node group; plus the system group.

    Exposes ``node_role``, ``node_groups`` (spec group name -> `Ec2NodeGroup`, as the cluster stack outputs them),
    ``managed`` (name -> eks.Nodegroup, the system group included) and ``grantee``.
    """

    def __init__(self, scope: Construct, id: str, *, context: OrchestrationContext, cluster: eks.ICluster) -> None:
        super().__init__(scope, id)
        spec = context.spec
        settings = EksOrchestrator.of(spec).eks
        self.node_role = NodeRole(self, "NodeRole", description=f"fmcluster {spec.name} EKS nodes",
                                  instance_profile=False)  # the managed node groups make their own
        # EKS user guide, "Amazon EKS node IAM role": a managed node group's role needs AmazonEKSWorkerNodePolicy and
        # AmazonEC2ContainerRegistryPullOnly (the CNI's policy goes to the vpc-cni add-on's own pod identity role).
        for name in ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly"):
            self.node_role.role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(name))
        acknowledge(self.node_role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                    "AmazonEKSWorkerNodePolicy]", "EKS requires it on a managed node group's role (EKS user guide, "
                    "'Amazon EKS node IAM role'): kubelet's cluster and EC2 reads, Pod Identity credentials.")
        acknowledge(self.node_role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                    "AmazonEC2ContainerRegistryPullOnly]", "EKS requires image pulls from ECR on a managed node "
                    "group's role (EKS user guide, 'Amazon EKS node IAM role'); pull only, no push.")
        self.runtime = context.node_builder.runtime(self)
        self.runtime.grant_read(self.node_role.role, groups=[g.name for g in spec.node_groups])
        self.runtime.grant_report(self.node_role.role, groups=[g.name for g in spec.node_groups])
        subnets = context.subnets
        self.node_groups: Dict[str, Ec2NodeGroup] = {}
        self.managed: Dict[str, eks.Nodegroup] = {}
        for group in spec.node_groups:
            self.node_groups[group.name] = self._launch_template(context, group)
            # a Capacity Block launches in its reservation's AZ: one subnet (EKS user guide, "Capacity Blocks for ML")
            self.managed[group.name] = self._managed(
                cluster, group, subnets[:1] if group.capacity.type == "capacity-block" else subnets,
                settings.efa_device)
        self.managed[SYSTEM_GROUP] = self._system(context, cluster, subnets)

    @property
    def grantee(self) -> iam.IGrantable:
        return self.node_role.role

    def _launch_template(self, context: OrchestrationContext, group: NodeGroup) -> Ec2NodeGroup:
        spec = context.spec
        profile = eks_node_profile(spec, group)
        shell = context.node_builder.bootstrap_shell(
            self, group, profile_json=profile.to_json(indent=None), policy="report", collectors=False,
            before_mount=pre_validation_steps(spec, group), after_units=VALIDATE_AFTER, image=EKS_IMAGE)
        image = NodeImage(image_id=None, user_data=mime_user_data(shell, [(NODE_CONFIG, node_config(group))]),
                          root_device_name=AL2023_ROOT_DEVICE)
        # the instance type goes in the template (Capacity Blocks require it there, EKS user guide "Capacity Blocks
        # for ML"), so the node group names none
        return context.node_builder.build(self, group, in_subnet=False, image=image, imds_hop_limit=IMDS_HOP_LIMIT)

    def _managed(self, cluster: eks.ICluster, group: NodeGroup, subnets: Sequence[ec2.ISubnet],
                 efa_device: str) -> eks.Nodegroup:
        lt = self.node_groups[group.name].launch_template
        block = group.capacity.type == "capacity-block"
        ng = eks.Nodegroup(
            self,
            f"{construct_id(group.name)}NodeGroup",
            cluster=cluster,
            nodegroup_name=group.name,
            ami_type=ami_type(group.instance),
            capacity_type=eks.CapacityType.CAPACITY_BLOCK if block else eks.CapacityType.ON_DEMAND,
            launch_template_spec=eks.LaunchTemplateSpec(id=lt.launch_template_id, version=lt.latest_version),
            **scaling_config(group),
            subnets=ec2.SubnetSelection(subnets=list(subnets)),
            node_role=self.node_role.role,
            labels=labels.node_labels(group, efa_device=efa_device),
            taints=[eks.TaintSpec(key=t["key"], value=t["value"], effect=eks.TaintEffect.NO_SCHEDULE)
                    for t in labels.node_taints(group)],
            enable_node_auto_repair=True,
            # what Cluster Autoscaler cannot read from a node it has not seen: the GPUs and EFA interfaces
            tags=autoscaler.node_template_tags(group, efa_device=efa_device) if group.elastic else None,
            **ROLLING_UPDATE,
        )
        # GPU capacity is scarce or reserved: replace a node before launching its successor, so an update never asks
        # for instances the reservation cannot supply (UpdateStrategy MINIMAL, EKS API NodegroupUpdateConfig).
        cast(eks.CfnNodegroup, ng.node.default_child).add_property_override("UpdateConfig.UpdateStrategy", "MINIMAL")
        return ng

    def _system(self, context: OrchestrationContext, cluster: eks.ICluster, subnets: Sequence[ec2.ISubnet]
                ) -> eks.Nodegroup:
        system = EksOrchestrator.of(context.spec).eks.system_nodes
        instance = catalog.get(system.instance_type)
        lt = NodeLaunchTemplate(self, "SystemLaunchTemplate", props=LaunchTemplateProps(
            instance=instance,
            efa=False,
            security_group_ids=context.security_group_ids,
            subnet_id=None,
            image_id=None,
            user_data=mime_user_data("#!/bin/bash\necho 'fmcluster system node'\n"),
            instance_type=system.instance_type,
            root_volume_gib=100,
            root_device_name=AL2023_ROOT_DEVICE,
            tags={**context.instance_tags, "fmcluster:node-group": SYSTEM_GROUP},
            imds_hop_limit=IMDS_HOP_LIMIT,
        ))
        return eks.Nodegroup(
            self,
            "SystemNodeGroup",
            cluster=cluster,
            nodegroup_name=SYSTEM_GROUP,
            ami_type=ami_type(instance),  # arm64 system types (m7g) get the ARM AMI
            capacity_type=eks.CapacityType.ON_DEMAND,
            launch_template_spec=eks.LaunchTemplateSpec(id=lt.launch_template_id, version=lt.latest_version),
            min_size=system.count,
            desired_size=system.count,
            max_size=system.count,
            subnets=ec2.SubnetSelection(subnets=list(subnets)),
            node_role=self.node_role.role,
            labels={labels.GROUP: SYSTEM_GROUP},
            enable_node_auto_repair=True,
            **ROLLING_UPDATE,  # DEFAULT strategy: new system nodes first, they are plentiful
        )

