"""The security group every EFA interface of the cluster's nodes shares."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct


class EfaSecurityGroup(Construct):
    """The one security group on every interface of EFA nodes.

    EFA requires a group that allows all traffic from AND to itself (EC2 user guide);
    a missing self-referencing egress rule, or several groups on one interface, is the
    classic cause of failing EFA health checks. Egress beyond the group is HTTPS and
    HTTP only (AWS APIs, package mirrors, container registries); nothing comes in from
    outside the group.
    """

    def __init__(self, scope: Construct, id: str, *, vpc: ec2.IVpc, description: str = "") -> None:
        super().__init__(scope, id)
        self.security_group = ec2.SecurityGroup(
            self,
            "Group",
            vpc=vpc,
            description=description or "EFA nodes: all traffic within the group; HTTPS/HTTP egress",
            allow_all_outbound=False,
        )
        sg = self.security_group
        sg.add_ingress_rule(sg, ec2.Port.all_traffic(), "EFA and node-to-node traffic from the group")
        sg.add_egress_rule(sg, ec2.Port.all_traffic(), "EFA and node-to-node traffic to the group")
        sg.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS to AWS APIs and registries")
        sg.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(80), "HTTP to OS package mirrors")

    @property
    def connections(self) -> ec2.Connections:
        return self.security_group.connections

    @property
    def security_group_id(self) -> str:
        return self.security_group.security_group_id
