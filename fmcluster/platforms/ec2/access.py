"""How a user reaches EC2 instances fmcluster launched: Session Manager (no SSH port, no public IP), finding the
instance by the tags every launch template puts on it (``fmcluster:cluster``, ``fmcluster:node-group``).

Session Manager needs the agent on the instance (on the DLAMI and Amazon Linux 2023 images), the agent's actions
on its role (`fmcluster.constructs.node_role`), a route to the SSM endpoints (the NAT gateway), and the Session
Manager plugin beside the AWS CLI on the user's machine (Systems Manager user guide, "Install the Session Manager
plugin for the AWS CLI"; "Start a session").
"""

from __future__ import annotations

CLUSTER_TAG, GROUP_TAG = "fmcluster:cluster", "fmcluster:node-group"


def find_instance_command(*, region: str, cluster: str, group: str) -> str:
    """An AWS CLI command printing the id of one running instance of `group`."""
    return (f"aws ec2 describe-instances --region {region} --filters Name=tag:{CLUSTER_TAG},Values={cluster} "
            f"Name=tag:{GROUP_TAG},Values={group} Name=instance-state-name,Values=running "
            "--query 'Reservations[0].Instances[0].InstanceId' --output text")


def session_command(*, region: str, cluster: str, group: str) -> str:
    """A shell on one running instance of `group`, through Session Manager."""
    instance = find_instance_command(region=region, cluster=cluster, group=group)
    return f"aws ssm start-session --region {region} --target $({instance})"
