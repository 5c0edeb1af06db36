"""How a user reaches a HyperPod node: Session Manager with the target ``sagemaker-cluster:<cluster-id>_<instance
group>-<instance-id>`` (SageMaker HyperPod developer guide, "Access your SageMaker HyperPod cluster nodes"; the
cluster id is the last part of the cluster ARN, the instance id comes from ``list-cluster-nodes``)."""

from __future__ import annotations


def node_instance_command(*, region: str, cluster: str, group: str) -> str:
    """An AWS CLI command printing the instance id of one node of instance group `group`."""
    return (f"aws sagemaker list-cluster-nodes --region {region} --cluster-name {cluster} "
            f"--instance-group-name-contains {group} --query 'ClusterNodeSummaries[0].InstanceId' --output text")


def ssm_target(*, region: str, cluster: str, group: str, cluster_id: str = "") -> str:
    """The Session Manager target of one node of `group`, as shell; `cluster_id` when known (a stack output),
    else looked up with describe-cluster."""
    cid = cluster_id or (f"$(aws sagemaker describe-cluster --region {region} --cluster-name {cluster} "
                         "--query ClusterArn --output text | cut -d/ -f2)")
    return f'"sagemaker-cluster:{cid}_{group}-$({node_instance_command(region=region, cluster=cluster, group=group)})"'


def session_command(*, region: str, cluster: str, group: str, cluster_id: str = "") -> str:
    return (f"aws ssm start-session --region {region} --target "
            f"{ssm_target(region=region, cluster=cluster, group=group, cluster_id=cluster_id)}")
