"""The ParallelCluster cluster configuration a spec renders, as the mapping `Custom::PclusterCluster` takes.

Pure: references (subnet, security group, shared storage, policies, placement groups, scripts) come in as
`ClusterInputs` (CDK tokens or plain ids alike), so the same function feeds the custom resource and the offline
schema check. Keys and values follow ParallelCluster 3.16's configuration reference
(https://docs.aws.amazon.com/parallelcluster/latest/ug/cluster-configuration-file-v3.html); the reasons for each
choice are in docs/parallelcluster.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from fmcluster.orchestrators.parallelcluster.settings import (
    ParallelClusterOrchestrator,
    compute_resource_name,
    head_node_instance_type,
    min_count,
)
from fmcluster.platforms.storage.instance_nvme.tier import NVME
from fmcluster.runtime import health_check
from fmcluster.spec import ClusterSpec, NodeGroup

# How long creation waits for the head node's bootstrap, which holds the static compute nodes' launch and bootstrap
# (ParallelCluster's HeadNodeWaitCondition; its default is NODE_BOOTSTRAP_TIMEOUT, 2,100 s, pcluster/constants.py).
# DevSettings/Timeouts/HeadNodeBootstrapTimeout sets it (added in aws/aws-parallelcluster pull request 3753; the
# schema takes any integer from 1; the user guide does not list DevSettings). 3,000 s holds a compute node's whole
# 2,100 s ResumeTimeout after about 15 minutes of the head node's own bootstrap, and ends inside the provider
# custom resource's one-hour wait, so a fleet that never comes up fails with ParallelCluster's reason rather than
# CloudFormation's timeout. Never change it on a live cluster: the setting's update policy is UNSUPPORTED (adding
# the DevSettings section to an existing cluster is an update ParallelCluster accepts; changing it is not).
HEAD_NODE_BOOTSTRAP_TIMEOUT_S = 3000
# Slurm's HealthCheckProgram on ParallelCluster: the shim the head node's custom action writes under ParallelCluster's
# shared /opt/slurm (node/on_node_configured.sh), which runs each compute node's own program.
HEALTH_CHECK_SHIM = "/opt/slurm/etc/scripts/fmcluster_health_check.sh"


@dataclass(frozen=True)
class ClusterInputs:
    """What the configuration references, resolved by CloudFormation at deploy time.

    :param placement_groups: node group name -> the placement group its queue launches into (only the groups
        that get one of fmcluster's; an existing group comes from the spec's placement.existing_group).
    :param shared_storage: ``SharedStorage`` entries, as each store gives them (the storage contract's ParallelCluster
        form).
    :param head_node_actions, compute_actions: ``CustomActions`` sections (compute: by node group name).
    """

    subnet_id: str
    security_group_id: str
    head_node_policy_arn: str
    compute_policy_arn: str
    placement_groups: Mapping[str, str] = field(default_factory=dict)
    shared_storage: Sequence[Mapping[str, Any]] = ()
    head_node_actions: Optional[Mapping[str, Any]] = None
    compute_actions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)


def cluster_configuration(spec: ClusterSpec, inputs: ClusterInputs) -> Dict[str, Any]:
    settings = ParallelClusterOrchestrator.of(spec).parallelcluster
    image: Dict[str, Any] = {"Os": settings.os}
    if settings.custom_ami:
        image["CustomAmi"] = settings.custom_ami
    config: Dict[str, Any] = {
        "Image": image,
        "Imds": {"ImdsSupport": "v2.0"},
        "HeadNode": head_node(spec, inputs),
        "Scheduling": {
            "Scheduler": "slurm",
            "SlurmSettings": {
                "ScaledownIdletime": settings.scaledown_idle_minutes,
                "QueueUpdateStrategy": settings.queue_update_strategy,
            },
            "SlurmQueues": [queue(spec, g, inputs) for g in spec.node_groups],
        },
        "Monitoring": {
            "DetailedMonitoring": False,
            "Logs": {"CloudWatch": {"Enabled": True, "RetentionInDays": settings.log_retention_days,
                                    "DeletionPolicy": "Retain"}},
            "Dashboards": {"CloudWatch": {"Enabled": True}},
        },
    }
    if settings.health_check:
        hc = health_check.slurm_settings(HEALTH_CHECK_SHIM, settings.health_check_interval_seconds)
        config["Scheduling"]["SlurmSettings"]["CustomSlurmSettings"] = [{k: v} for k, v in hc.items()]
    if inputs.shared_storage:
        config["SharedStorage"] = [dict(entry) for entry in inputs.shared_storage]
    if inputs.tags:
        config["Tags"] = [{"Key": k, "Value": v} for k, v in sorted(inputs.tags.items())]
    # the compute nodes keep ParallelCluster's default ComputeNodeBootstrapTimeout (Slurm's ResumeTimeout), which the
    # OnNodeConfigured action budgets against; validation.level deep is refused (settings.spec_rules) so it fits
    config["DevSettings"] = {"Timeouts": {"HeadNodeBootstrapTimeout": HEAD_NODE_BOOTSTRAP_TIMEOUT_S}}
    return config


def head_node(spec: ClusterSpec, inputs: ClusterInputs) -> Dict[str, Any]:
    settings = ParallelClusterOrchestrator.of(spec).parallelcluster
    node: Dict[str, Any] = {
        "InstanceType": head_node_instance_type(spec),
        # our node security group replaces ParallelCluster's: all traffic within it, nothing from outside
        "Networking": {"SubnetId": inputs.subnet_id, "SecurityGroups": [inputs.security_group_id], "ElasticIp": False},
        "LocalStorage": {"RootVolume": {"Size": settings.head_node_root_volume_gib, "Encrypted": True,
                                        "VolumeType": "gp3", "DeleteOnTermination": True}},
        "Iam": {"AdditionalIamPolicies": [{"Policy": inputs.head_node_policy_arn}]},
        "Imds": {"Secured": True},
    }
    if settings.ssh_key_name:
        node["Ssh"] = {"KeyName": settings.ssh_key_name}
    if inputs.head_node_actions:
        node["CustomActions"] = dict(inputs.head_node_actions)
    return node


def placement_group(spec: ClusterSpec, group: NodeGroup, inputs: ClusterInputs) -> Optional[Dict[str, Any]]:
    """The queue's PlacementGroup section: a Capacity Block never gets one (AWS places its instances); a group
    launched into an existing placement group (``placement.existing_group``, e.g. the one an ODCR was made in) names
    it; any other ODCR gets none (an open reservation only fits worse in a new group: ParallelCluster's
    PlacementGroupCapacityReservationValidator warns about a reservation in an unrelated group); otherwise
    fmcluster's own group when the spec's placement asks for one. EFA queues always say which (ParallelCluster
    requires an explicit choice for EFA)."""
    if group.capacity.type == "capacity-block":
        return {"Enabled": False}
    existing = group.existing_placement_group
    if existing is not None:
        return {"Enabled": True, "Name": existing}
    if group.capacity.type == "odcr":
        return {"Enabled": False}
    name = inputs.placement_groups.get(group.name)
    if name is not None:
        return {"Enabled": True, "Name": name}
    return {"Enabled": False} if group.efa_enabled else None


def queue(spec: ClusterSpec, group: NodeGroup, inputs: ClusterInputs) -> Dict[str, Any]:
    networking: Dict[str, Any] = {"SubnetIds": [inputs.subnet_id], "SecurityGroups": [inputs.security_group_id]}
    pg = placement_group(spec, group, inputs)
    if pg is not None:
        networking["PlacementGroup"] = pg
    storage: Dict[str, Any] = {"RootVolume": {"Size": group.root_volume_gib, "Encrypted": True, "VolumeType": "gp3"}}
    if NVME.size(group.instance) is not None:
        # ParallelCluster mounts the instance store (RAID 0 across disks) at the tier's path, as every kind has it
        storage["EphemeralVolume"] = {"MountDir": NVME.path}
    section: Dict[str, Any] = {
        "Name": group.name,
        "CapacityType": "CAPACITY_BLOCK" if group.capacity.type == "capacity-block" else "ONDEMAND",
        "Networking": networking,
        "ComputeSettings": {"LocalStorage": storage},
        "Iam": {"AdditionalIamPolicies": [{"Policy": inputs.compute_policy_arn}]},
        "ComputeResources": [compute_resource(spec, group)],
    }
    if group.instance.is_gpu:
        # Slurm partition OverSubscribe=EXCLUSIVE: a job gets its nodes whole, so no second job shares a node's GPUs,
        # EFA interfaces or NVMe with a training job that did not ask for --exclusive (SlurmQueues/
        # JobExclusiveAllocation; update policy SUPPORTED in ParallelCluster's schema)
        section["JobExclusiveAllocation"] = True
    if group.ami_id:
        section["Image"] = {"CustomAmi": group.ami_id}
    actions = inputs.compute_actions.get(group.name)
    if actions:
        section["CustomActions"] = dict(actions)
    return section


def compute_resource(spec: ClusterSpec, group: NodeGroup) -> Dict[str, Any]:
    resource: Dict[str, Any] = {
        "Name": compute_resource_name(group),
        "InstanceType": group.instance_type,
        "MinCount": min_count(spec, group),
        "MaxCount": group.max_size,
    }
    if group.efa_enabled:
        # GPUDirect RDMA is on wherever the type and OS have it; GdrSupport records the intent
        resource["Efa"] = {"Enabled": True, "GdrSupport": group.instance.is_gpu}
    if group.capacity.reservation_id:
        resource["CapacityReservationTarget"] = {"CapacityReservationId": group.capacity.reservation_id}
    return resource


def queue_names(config: Mapping[str, Any]) -> List[str]:
    return [q["Name"] for q in config["Scheduling"]["SlurmQueues"]]
