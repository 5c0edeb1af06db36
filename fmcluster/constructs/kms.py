"""A customer managed KMS key whose policy names every action (no ``kms:*``)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

# What the account (through IAM) may do with the key: manage it and use it. Listed
# explicitly because the CDK default grants the account root ``kms:*``.
KEY_ADMIN_ACTIONS = (
    "kms:CancelKeyDeletion",
    "kms:CreateAlias",
    "kms:CreateGrant",
    "kms:DeleteAlias",
    "kms:DescribeKey",
    "kms:DisableKey",
    "kms:DisableKeyRotation",
    "kms:EnableKey",
    "kms:EnableKeyRotation",
    "kms:GetKeyPolicy",
    "kms:GetKeyRotationStatus",
    "kms:ListAliases",
    "kms:ListGrants",
    "kms:ListKeyPolicies",
    "kms:ListResourceTags",
    "kms:PutKeyPolicy",
    "kms:RetireGrant",
    "kms:RevokeGrant",
    "kms:ScheduleKeyDeletion",
    "kms:TagResource",
    "kms:UntagResource",
    "kms:UpdateAlias",
    "kms:UpdateKeyDescription",
)
KEY_USE_ACTIONS = (
    "kms:Decrypt",
    "kms:DescribeKey",
    "kms:Encrypt",
    "kms:GenerateDataKey",
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:ReEncryptFrom",
    "kms:ReEncryptTo",
)


class ClusterKey(Construct):
    """Customer managed key, rotation on, retained on delete.

    :param description: shown in the KMS console.
    :param service_principals: AWS service principal → the condition that limits its use of the
        key to this account's resources (each service documents its own condition key).
    :param statements: further key policy statements (e.g. for a service-linked role).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        description: str,
        service_principals: Mapping[str, Dict[str, Any]] = {},  # noqa: B006 - read only
        removal_policy: Optional[RemovalPolicy] = RemovalPolicy.RETAIN,
        statements: Sequence[iam.PolicyStatement] = (),
    ) -> None:
        super().__init__(scope, id)
        policy = iam.PolicyDocument(
            statements=[
                iam.PolicyStatement(
                    sid="AccountAdministersAndUsesKeyThroughIam",
                    principals=[iam.AccountRootPrincipal()],
                    actions=sorted(set(KEY_ADMIN_ACTIONS + KEY_USE_ACTIONS)),
                    resources=["*"],  # in a key policy "*" means this key
                )
            ]
        )
        for service, conditions in service_principals.items():
            policy.add_statements(
                iam.PolicyStatement(
                    sid=f"{service.split('.')[0].capitalize()}ServiceUsesKey",
                    principals=[iam.ServicePrincipal(service)],
                    actions=list(KEY_USE_ACTIONS),
                    resources=["*"],
                    conditions=conditions,
                )
            )
        policy.add_statements(*statements)
        self.key = kms.Key(
            self,
            "Key",
            description=description,
            enable_key_rotation=True,
            policy=policy,
            removal_policy=removal_policy,
        )

    @property
    def key_arn(self) -> str:
        return self.key.key_arn


def logs_key_conditions(region: str, account: str) -> Dict[str, Any]:
    """CloudWatch Logs may use the key only for this account's log groups (Logs user guide)."""
    return {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:{region}:{account}:log-group:*"}}
