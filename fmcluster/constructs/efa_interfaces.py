"""The network interfaces of an EFA node: the per-instance network-card layout of the EC2 user guide."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from aws_cdk import aws_ec2 as ec2

from fmcluster.catalog import InstanceType


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
    instance: InstanceType, *, efa: bool, security_group_ids: Sequence[str], subnet_id: Optional[str]
) -> List[ec2.CfnLaunchTemplate.NetworkInterfaceProperty]:
    """Launch-template interfaces: the EFA security group on every one, no public IPs. `subnet_id` None leaves
    the subnet to the service launching from the template (EKS managed node groups refuse one there)."""
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
