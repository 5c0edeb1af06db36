"""`<name>-network`: the VPC the nodes live in and the EFA security group. Long-lived: its resources and exports
are the same under every orchestrator kind and node count (docs/network.md), so a switch or a scale-up keeps them."""

from __future__ import annotations

import ipaddress
from typing import List, Optional

from aws_cdk import CfnOutput, Stack, Tags, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from fmcluster.constructs.efa_security_group import EfaSecurityGroup
from fmcluster.constructs.kms import ClusterKey, logs_key_conditions
from fmcluster.nag import cfn_lint_ignore
from fmcluster.spec import ClusterSpec, ExistingVpc, NewVpc

PUBLIC_SUBNET_PREFIX = 26  # NAT gateway only; nothing else is public
# Shared file systems and other stateful endpoints live in their own subnet, allocated before the node subnet, so
# resizing the node subnet for more nodes never moves (replaces) it.
STORAGE_SUBNET_PREFIX = 26
# Load-balancer subnet discovery tags (EKS user guide, "network-reqs": subnets need no tags for nodes; the AWS Load
# Balancer Controller discovers subnets by these). aws-eks-v2's Cluster adds them to every private and public subnet
# of the VPC it is given, with no option to opt out, which changed this stack's subnets with the orchestrator: the
# stack carries them under every kind instead, so an EKS control plane adds nothing here.
PRIVATE_LOAD_BALANCER_TAG, PUBLIC_LOAD_BALANCER_TAG = "kubernetes.io/role/internal-elb", "kubernetes.io/role/elb"

# The second-AZ subnet every orchestrator gets (an EKS control plane and the AMP managed scraper need two AZs; EKS
# places 2-4 control-plane ENIs in its subnets and recommends small dedicated ones, /28 being enough): a /27 from
# the second half of the VPC's first /24. The public and storage /26s take the first half, and the node subnet
# (/24 or larger) starts at the next /24 boundary at the earliest, so this range stays free whatever its size.
EXTRA_SUBNET_PREFIX = 27
EXTRA_SUBNET_OFFSET = 128
# Gateway endpoints a store may ask for (StoreSettings.gateway_endpoints), beside S3's: the construct id of each.
GATEWAY_SERVICES = {"s3express": ec2.GatewayVpcEndpointAwsService.S3_EXPRESS}
GATEWAY_ENDPOINT_IDS = {"s3express": "S3Express"}


class NetworkStack(Stack):
    """A new VPC in the GPU availability zone (private node subnet sized for the nodes'
    IP-consuming interfaces, public subnet for NAT, S3 gateway endpoint, encrypted flow
    logs) or an existing VPC imported by ids with no lookups. Either way it owns the EFA
    security group.

    Exposes ``vpc``, ``node_subnets``, ``storage_subnet``, ``extra_subnets`` (the second-AZ subnet;
    ``existing_vpc.extra_subnet_ids`` with an existing VPC) and ``node_security_group`` (the `EfaSecurityGroup` on
    every node interface) for the other stacks. Each of them is exported whether or not this spec's orchestrator
    imports it, so the exports never depend on the orchestrator kind: CloudFormation refuses to remove an export
    another stack imports, which made a switch fail half-way.
    """

    def __init__(self, scope: Construct, id: str, *, spec: ClusterSpec, **kwargs: object) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        self.spec = spec
        self._nat: Optional[ec2.NatProvider] = None
        existing = spec.network.existing_vpc
        if existing is not None:
            self.vpc = self._import_vpc(existing)
        else:
            self.vpc = self._new_vpc(spec.network.new_vpc or NewVpc())
        if existing is None:
            self.node_subnets: List[ec2.ISubnet] = list(self.vpc.select_subnets(subnet_group_name="Nodes").subnets)
            self.storage_subnet = self.vpc.select_subnets(subnet_group_name="Storage").subnets[0]
            self.extra_subnets: List[ec2.ISubnet] = self._extra_subnets([spec.second_availability_zone])
        else:
            self.node_subnets = list(self.vpc.private_subnets)
            self.storage_subnet = self.node_subnets[0]
            self.extra_subnets = [ec2.Subnet.from_subnet_id(self, f"ExtraSubnet{i + 1}", sid)
                                  for i, sid in enumerate(existing.extra_subnet_ids)]
        self.node_security_group = EfaSecurityGroup(self, "EfaSecurityGroup", vpc=self.vpc)

        CfnOutput(self, "VpcId", value=self.vpc.vpc_id)
        CfnOutput(self, "NodeSubnetIds", value=",".join(s.subnet_id for s in self.node_subnets))
        CfnOutput(self, "EfaSecurityGroupId", value=self.node_security_group.security_group_id)
        CfnOutput(self, "StorageSubnetId", value=self.storage_subnet.subnet_id)
        if self.extra_subnets:
            CfnOutput(self, "ExtraSubnetIds", value=",".join(s.subnet_id for s in self.extra_subnets))
        for value in dict.fromkeys(self._shared_values()):
            if Token.is_unresolved(value):  # ids of an existing VPC are plain strings: nothing to export
                # the name CDK gives the automatic reference, so a deployed importer keeps its export
                self.export_value(value)

    def _shared_values(self) -> List[str]:
        """Every value of this stack another stack may reference, under any orchestrator kind."""
        return [self.vpc.vpc_id, *(s.subnet_id for s in self.node_subnets), self.storage_subnet.subnet_id,
                *(s.subnet_id for s in self.extra_subnets), self.node_security_group.security_group_id]

    def _new_vpc(self, new: NewVpc) -> ec2.Vpc:
        self._nat = ec2.NatProvider.gateway() if new.nat_gateway else None
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(new.cidr),
            availability_zones=[self.spec.availability_zone],
            nat_gateways=1 if new.nat_gateway else 0,
            nat_gateway_provider=self._nat,
            restrict_default_security_group=True,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=PUBLIC_SUBNET_PREFIX,
                    map_public_ip_on_launch=False,
                ),
                ec2.SubnetConfiguration(
                    name="Storage", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=STORAGE_SUBNET_PREFIX,
                ),
                ec2.SubnetConfiguration(
                    name="Nodes",
                    subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS if new.nat_gateway else ec2.SubnetType.PRIVATE_ISOLATED,
                    cidr_mask=self.spec.node_subnet_prefix,
                ),
            ],
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3),
            },
        )
        for service in self._store_endpoints():
            vpc.add_gateway_endpoint(GATEWAY_ENDPOINT_IDS[service], service=GATEWAY_SERVICES[service])
        for subnets, tag in ((vpc.private_subnets, PRIVATE_LOAD_BALANCER_TAG), (vpc.public_subnets, PUBLIC_LOAD_BALANCER_TAG)):
            for subnet in subnets:
                Tags.of(subnet).add(tag, "1")
        for subnet in vpc.public_subnets + vpc.private_subnets + vpc.isolated_subnets:
            cfn_lint_ignore(
                subnet, ["W3010"], "the spec names the one AZ the GPU capacity and placement group live in"
            )
        key = ClusterKey(
            self,
            "FlowLogsKey",
            description=f"{self.spec.name}: VPC flow logs",
            service_principals={
                f"logs.{self.region}.amazonaws.com": logs_key_conditions(self.region, self.account),
            },
        )
        log_group = logs.LogGroup(
            self,
            "FlowLogs",
            encryption_key=key.key,
        )
        log_group.node.default_child.retention_in_days = self.spec.network.flow_logs_retention_days  # type: ignore[union-attr]
        vpc.add_flow_log(
            "FlowLog",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(log_group),
            traffic_type=ec2.FlowLogTrafficType.ALL,
            max_aggregation_interval=ec2.FlowLogMaxAggregationInterval.ONE_MINUTE,
        )
        return vpc

    def _extra_subnets(self, zones: List[str]) -> List[ec2.ISubnet]:
        """A private /27 per AZ in `zones`, routed through the GPU AZ's NAT gateway (the EKS kubectl handler runs
        in every control-plane subnet and pulls Helm charts from the internet)."""
        if len(zones) > 4:
            raise ValueError(f"extra availability zones: at most 4, got {len(zones)}")
        base = ipaddress.IPv4Network((self.spec.network.new_vpc or NewVpc()).cidr)
        found: List[ec2.ISubnet] = []
        for i, zone in enumerate(zones):
            start = base.network_address + EXTRA_SUBNET_OFFSET + i * 2 ** (32 - EXTRA_SUBNET_PREFIX)
            subnet = ec2.PrivateSubnet(
                self,
                f"Extra{zone[-1].upper()}Subnet",
                vpc_id=self.vpc.vpc_id,
                availability_zone=zone,
                cidr_block=f"{start}/{EXTRA_SUBNET_PREFIX}",
                map_public_ip_on_launch=False,
            )
            if self._nat is not None:
                subnet.add_default_nat_route(self._nat.configured_gateways[0].gateway_id)
            cfn_lint_ignore(subnet, ["W3010"], "the orchestrator's second AZ, named in the spec (or its default)")
            found.append(subnet)
        return found

    def _import_vpc(self, existing: ExistingVpc) -> ec2.IVpc:
        vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Vpc",
            vpc_id=existing.vpc_id,
            availability_zones=[self.spec.availability_zone] * len(existing.subnet_ids),
            private_subnet_ids=existing.subnet_ids,
            private_subnet_route_table_ids=existing.route_table_ids or None,
        )
        if existing.route_table_ids:
            ec2.CfnVPCEndpoint(
                self,
                "S3Endpoint",
                vpc_id=existing.vpc_id,
                service_name=f"com.amazonaws.{self.region}.s3",
                vpc_endpoint_type="Gateway",
                route_table_ids=existing.route_table_ids,
            )
            for service in self._store_endpoints():
                ec2.CfnVPCEndpoint(self, f"{GATEWAY_ENDPOINT_IDS[service]}Endpoint", vpc_id=existing.vpc_id,
                                   service_name=f"com.amazonaws.{self.region}.{service}", vpc_endpoint_type="Gateway",
                                   route_table_ids=existing.route_table_ids)
        return vpc

    def _store_endpoints(self) -> List[str]:
        """The gateway endpoints the spec's store sections ask for beyond S3's, which every VPC here has."""
        found: List[str] = []
        for _, section in self.spec.storage.store_sections():
            found += [s for s in section.gateway_endpoints() if s not in found and s != "s3"]
        unknown = set(found) - set(GATEWAY_SERVICES)
        if unknown:
            raise ValueError(f"storage: no gateway endpoint for {', '.join(sorted(unknown))}")
        return found

