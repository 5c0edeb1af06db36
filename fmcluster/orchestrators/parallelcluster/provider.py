"""ParallelCluster's CloudFormation provider: the template AWS publishes per version and region, deployed as a
nested stack. It holds the Lambda function behind `Custom::PclusterCluster` (its ``ServiceToken`` output), the
function's role and a bucket for its events
(https://docs.aws.amazon.com/parallelcluster/latest/ug/cfn-provider-stack.html)."""

from __future__ import annotations

import re
from typing import Optional, Sequence

from aws_cdk import CfnStack, Fn, Token
from constructs import Construct

from fmcluster.orchestrators.parallelcluster.settings import provider_template

VERSION = re.compile(r"^3\.\d+\.\d+$")


class ParallelClusterProvider(Construct):
    """The provider nested stack of one ParallelCluster version.

    :param version: the ParallelCluster version (3.x.y): the template, its Lambda layer and the cluster's
        official AMIs all come from it.
    :param custom_lambda_role_arn: a role for the provider's Lambda instead of the one the template creates.
    :param additional_iam_policy_arns: managed policies added to the template's Lambda role (needed only to let
        it attach node policies whose names do not start with ``parallelcluster``).

    The template declares the ``AWS::Serverless-2016-10-31`` transform, so deploying it needs
    CAPABILITY_AUTO_EXPAND, which ``cdk deploy`` always passes.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        version: str,
        custom_lambda_role_arn: Optional[str] = None,
        additional_iam_policy_arns: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, id)
        if not VERSION.match(version):
            raise ValueError(f"version: {version!r} is not a ParallelCluster 3 version (3.x.y)")
        if custom_lambda_role_arn is not None and additional_iam_policy_arns:
            raise ValueError("additional_iam_policy_arns: ignored by the template when custom_lambda_role_arn is set")
        if custom_lambda_role_arn is not None and not Token.is_unresolved(custom_lambda_role_arn) \
                and ":role/" not in custom_lambda_role_arn:
            raise ValueError(f"custom_lambda_role_arn: {custom_lambda_role_arn!r} is not an IAM role ARN")
        self.version = version
        parameters = {}
        if custom_lambda_role_arn is not None:
            parameters["CustomLambdaRole"] = custom_lambda_role_arn
        if additional_iam_policy_arns:
            parameters["AdditionalIamPolicies"] = Fn.join(",", list(additional_iam_policy_arns))
        bucket, key = provider_template("${AWS::Region}", version)
        self.stack = CfnStack(
            self,
            "Resource",
            template_url=Fn.sub(f"https://{bucket}.s3.${{AWS::Region}}.${{AWS::URLSuffix}}/{key}"),
            parameters=parameters or None,
        )

    @property
    def service_token(self) -> str:
        """The ARN of the provider's Lambda function (the nested stack's ServiceToken output)."""
        return self.stack.get_att("Outputs.ServiceToken").to_string()

    @property
    def log_group_arn(self) -> str:
        return self.stack.get_att("Outputs.LogGroupArn").to_string()
