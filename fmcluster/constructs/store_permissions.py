"""A store's `Permission`s as IAM statements on a principal: what the cluster stack grants the nodes' principal, and
what a kind grants a principal of its own that also mounts the stores (ParallelCluster's head node policy)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.nag import acknowledge_wildcards

if TYPE_CHECKING:
    from fmcluster.platforms.storage.forms import Permission


def grant_permissions(grantee: iam.IGrantable, permissions: Iterable[Permission], *, stack: Stack) -> None:
    """Each permission as one statement (its sid, its actions named one by one, its ARNs completed with `stack`'s
    partition, Region and account, its conditions), and cdk-nag's wildcard finding acknowledged with its ``why``."""
    for p in permissions:
        resources = p.arns(partition=stack.partition, region=stack.region, account=stack.account)
        grantee.grant_principal.add_to_principal_policy(iam.PolicyStatement(
            sid=p.sid, actions=list(p.actions), resources=resources, conditions=dict(p.conditions) or None))
        if isinstance(grantee.grant_principal, Construct):
            acknowledge_wildcards(grantee.grant_principal, resources, p.why)
