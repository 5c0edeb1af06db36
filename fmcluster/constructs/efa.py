"""EFA fabric pieces: the security group every EFA interface shares, UltraCluster placement
groups, and launch templates with the per-instance network-card layout."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from fmcluster.catalog import InstanceType

# IMDSv2 only; two hops so containers on the node (Slurm pyxis/enroot, docker) reach it.
IMDS_HOP_LIMIT = 2


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


class UltraClusterPlacementGroup(Construct):
    """A placement group in the nodes' AZ: ``cluster`` packs instances onto the
    low-latency UltraCluster fabric; ``partition`` spreads very large fleets over racks.
    Never used with Capacity Blocks (AWS places those itself)."""

    def __init__(self, scope: Construct, id: str, *, strategy: str = "cluster", partitions: Optional[int] = None) -> None:
        super().__init__(scope, id)
        if strategy not in ("cluster", "partition"):
            raise ValueError(f"placement strategy {strategy!r}: expected cluster or partition")
        self.resource = ec2.CfnPlacementGroup(
            self, "Resource", strategy=strategy, partition_count=partitions if strategy == "partition" else None
        )

    @property
    def group_name(self) -> str:
        return self.resource.ref


def efa_interface_layout(instance: InstanceType, *, efa: bool) -> List[Dict[str, object]]:
    """(NetworkCardIndex, DeviceIndex, InterfaceType) of every interface, per the EC2 guide.

    Card 0 device 0 is the ENA ``interface`` (the node's one IP). Where card 0 carries EFA,
    card 0 device 1 is ``efa-only``; every other EFA card gets ``efa-only`` on device 0.
    ``efa-only`` interfaces take no IP address. Cards without EFA (p6-b300 card 0, the
    even GB200 cards) get nothing.
    """
    layout: List[Dict[str, object]] = [{"card": 0, "device": 0, "type": "interface"}]
    if efa:
        for card in instance.efa_cards:
            layout.append({"card": card, "device": 1 if card == 0 else 0, "type": "efa-only"})
    return layout


def network_interfaces(
    instance: InstanceType, *, efa: bool, security_group_ids: Sequence[str], subnet_id: str
) -> List[ec2.CfnLaunchTemplate.NetworkInterfaceProperty]:
    """Launch-template interfaces: the EFA security group on every one, no public IPs."""
    return [
        ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
            network_card_index=slot["card"],  # type: ignore[arg-type]
            device_index=slot["device"],  # type: ignore[arg-type]
            interface_type=slot["type"],  # type: ignore[arg-type]
            groups=list(security_group_ids),
            subnet_id=subnet_id,
            delete_on_termination=True,
            associate_public_ip_address=False if slot["card"] == 0 and slot["device"] == 0 else None,
        )
        for slot in efa_interface_layout(instance, efa=efa)
    ]
