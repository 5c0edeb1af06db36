"""What fmcluster adds to a ParallelCluster node role, as a customer managed policy the cluster configuration
attaches (``Iam.AdditionalIamPolicies``): ParallelCluster creates the node roles itself, inside its own stack.

The policy is also a principal, so the storage and observability stacks grant to it as to any role. Its name
starts with ``parallelcluster``: the provider's default Lambda role may attach only such customer managed
policies (https://docs.aws.amazon.com/parallelcluster/latest/ug/cfn-provider-stack.html)."""

from __future__ import annotations

import re
from typing import Optional

import jsii
from aws_cdk import Stack, Token
from aws_cdk import aws_iam as iam
from constructs import Construct

from fmcluster.constructs.node_role import SSM_AGENT_ACTIONS
from fmcluster.nag import acknowledge

NAME_PREFIX = "parallelcluster"
NAME = re.compile(r"^parallelcluster[\w+=,.@-]{0,112}$")


@jsii.implements(iam.IPrincipal)
class NodePolicy(Construct):
    """A managed policy named ``parallelcluster-...`` holding the SSM agent's actions and whatever is granted to it.

    :param name: the policy name; must start with ``parallelcluster`` (at most 128 characters).
    :param description: the policy's description.

    Exposes ``policy`` (the `iam.ManagedPolicy`) and ``policy_arn``; grant to it like a role (`grant_principal`).
    It is no principal of a resource policy: it stands for the ParallelCluster roles that attach it.
    """

    def __init__(self, scope: Construct, id: str, *, name: str, description: Optional[str] = None) -> None:
        super().__init__(scope, id)
        if not Token.is_unresolved(name) and not NAME.match(name):
            raise ValueError(f"name: {name!r} must start with {NAME_PREFIX!r} and be at most 128 characters of "
                             "letters, digits and +=,.@_-")
        self.policy = iam.ManagedPolicy(self, "Resource", managed_policy_name=name, description=description)
        # People reach nodes through SSM Session Manager: the agent's actions, named one by one.
        self.policy.add_statements(iam.PolicyStatement(sid="SsmAgent", actions=sorted(SSM_AGENT_ACTIONS),
                                                       resources=["*"]))
        acknowledge(
            self,
            "AwsSolutions-IAM5[Resource::*]",
            "The SSM agent actions (ssm:UpdateInstanceInformation, ssmmessages:*Channel, ec2messages:*, as in "
            "AmazonSSMManagedInstanceCore) support no resource-level permissions (SSM user guide), so they use "
            "Resource *; every action is named, none is a wildcard.",
        )

    @property
    def policy_arn(self) -> str:
        return self.policy.managed_policy_arn

    # --- iam.IPrincipal -----------------------------------------------------------------------------------------

    @property
    def grant_principal(self) -> iam.IPrincipal:
        return self

    @property
    def assume_role_action(self) -> str:
        return "sts:AssumeRole"

    @property
    def principal_account(self) -> Optional[str]:
        return Stack.of(self).account

    @property
    def policy_fragment(self) -> iam.PrincipalPolicyFragment:
        raise TypeError(f"{self.node.path}: a node policy is no principal of a resource policy; grant to it "
                        "through identity policies (iam.Grant.add_to_principal)")

    def add_to_principal_policy(self, statement: iam.PolicyStatement) -> iam.AddToPrincipalPolicyResult:
        self.policy.add_statements(statement)
        return iam.AddToPrincipalPolicyResult(statement_added=True, policy_dependable=self.policy)
