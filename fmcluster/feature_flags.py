"""CDK feature flags, decided once for every fmcluster app: `cdk synth` (app.py) and `fmcluster synth` pass the same
context, so they write the same templates and the CLI reports no unconfigured flag.

`FLAGS` sets every flag aws-cdk-lib recommends for new projects (its ``recommended-feature-flags.json``), at
the recommended value unless `DEVIATIONS` says why not. Upgrading aws-cdk-lib can add flags; a test then fails
until each new one is decided here (tests/test_feature_flags.py). A flag flipped here is reviewed like any other
template change: the diff under templates/ shows what it does to a deployed cluster.
"""

from __future__ import annotations

from typing import Any, Dict

# Recommended values as of aws-cdk-lib 2.275.0.
FLAGS: Dict[str, Any] = {
    "@aws-cdk/aws-signer:signingProfileNamePassedToCfn": True,
    "@aws-cdk/aws-ecs-patterns:secGroupsDisablesImplicitOpenListener": True,
    "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
    "@aws-cdk/core:checkSecretUsage": True,
    "@aws-cdk/core:target-partitions": ["aws", "aws-cn"],
    "@aws-cdk-containers/ecs-service-extensions:enableDefaultLogDriver": True,
    "@aws-cdk/aws-ec2:uniqueImdsv2TemplateName": True,
    "@aws-cdk/aws-ecs:arnFormatIncludesClusterName": True,
    "@aws-cdk/aws-iam:minimizePolicies": True,
    "@aws-cdk/core:validateSnapshotRemovalPolicy": True,
    "@aws-cdk/aws-codepipeline:crossAccountKeyAliasStackSafeResourceName": True,
    "@aws-cdk/aws-s3:createDefaultLoggingPolicy": True,
    "@aws-cdk/aws-sns-subscriptions:restrictSqsDescryption": True,
    "@aws-cdk/aws-apigateway:disableCloudWatchRole": True,
    "@aws-cdk/core:enablePartitionLiterals": True,
    "@aws-cdk/aws-events:eventsTargetQueueSameAccount": True,
    "@aws-cdk/aws-ecs:disableExplicitDeploymentControllerForCircuitBreaker": True,
    "@aws-cdk/aws-iam:importedRoleStackSafeDefaultPolicyName": True,
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
    "@aws-cdk/aws-route53-patters:useCertificate": True,
    "@aws-cdk/customresources:installLatestAwsSdkDefault": False,
    "@aws-cdk/aws-rds:databaseProxyUniqueResourceName": True,
    "@aws-cdk/aws-codedeploy:removeAlarmsFromDeploymentGroup": True,
    "@aws-cdk/aws-apigateway:authorizerChangeDeploymentLogicalId": True,
    "@aws-cdk/aws-ec2:launchTemplateDefaultUserData": True,
    "@aws-cdk/aws-secretsmanager:useAttachedSecretResourcePolicyForSecretTargetAttachments": True,
    "@aws-cdk/aws-redshift:columnId": True,
    "@aws-cdk/aws-stepfunctions-tasks:enableEmrServicePolicyV2": True,
    "@aws-cdk/aws-ec2:restrictDefaultSecurityGroup": True,
    "@aws-cdk/aws-apigateway:requestValidatorUniqueId": True,
    "@aws-cdk/aws-kms:aliasNameRef": True,
    "@aws-cdk/aws-kms:applyImportedAliasPermissionsToPrincipal": True,
    "@aws-cdk/aws-autoscaling:generateLaunchTemplateInsteadOfLaunchConfig": True,
    "@aws-cdk/core:includePrefixInUniqueNameGeneration": True,
    "@aws-cdk/aws-efs:denyAnonymousAccess": True,
    "@aws-cdk/aws-opensearchservice:enableOpensearchMultiAzWithStandby": True,
    "@aws-cdk/aws-lambda-nodejs:useLatestRuntimeVersion": True,
    "@aws-cdk/aws-efs:mountTargetOrderInsensitiveLogicalId": True,
    "@aws-cdk/aws-rds:auroraClusterChangeScopeOfInstanceParameterGroupWithEachParameters": True,
    "@aws-cdk/aws-appsync:useArnForSourceApiAssociationIdentifier": True,
    "@aws-cdk/aws-rds:preventRenderingDeprecatedCredentials": True,
    "@aws-cdk/aws-codepipeline-actions:useNewDefaultBranchForCodeCommitSource": True,
    "@aws-cdk/aws-cloudwatch-actions:changeLambdaPermissionLogicalIdForLambdaAction": True,
    "@aws-cdk/aws-codepipeline:crossAccountKeysDefaultValueToFalse": True,
    "@aws-cdk/aws-codepipeline:defaultPipelineTypeToV2": True,
    "@aws-cdk/aws-kms:reduceCrossAccountRegionPolicyScope": True,
    "@aws-cdk/aws-eks:nodegroupNameAttribute": True,
    "@aws-cdk/aws-eks:useNativeOidcProvider": True,
    "@aws-cdk/aws-ec2:ebsDefaultGp3Volume": True,
    "@aws-cdk/aws-ecs:removeDefaultDeploymentAlarm": True,
    "@aws-cdk/custom-resources:logApiResponseDataPropertyTrueDefault": False,
    "@aws-cdk/aws-s3:keepNotificationInImportedBucket": False,
    "@aws-cdk/core:explicitStackTags": True,
    "@aws-cdk/aws-ecs:reduceEc2FargateCloudWatchPermissions": True,
    "@aws-cdk/aws-dynamodb:resourcePolicyPerReplica": True,
    "@aws-cdk/aws-ec2:ec2SumTImeoutEnabled": True,
    "@aws-cdk/aws-appsync:appSyncGraphQLAPIScopeLambdaPermission": True,
    "@aws-cdk/aws-rds:setCorrectValueForDatabaseInstanceReadReplicaInstanceResourceId": True,
    "@aws-cdk/core:cfnIncludeRejectComplexResourceUpdateCreatePolicyIntrinsics": True,
    "@aws-cdk/aws-lambda-nodejs:sdkV3ExcludeSmithyPackages": True,
    "@aws-cdk/aws-stepfunctions-tasks:fixRunEcsTaskPolicy": True,
    "@aws-cdk/aws-ec2:bastionHostUseAmazonLinux2023ByDefault": True,
    "@aws-cdk/aws-route53-targets:userPoolDomainNameMethodWithoutCustomResource": True,
    "@aws-cdk/aws-elasticloadbalancingV2:albDualstackWithoutPublicIpv4SecurityGroupRulesDefault": True,
    "@aws-cdk/aws-iam:oidcRejectUnauthorizedConnections": True,
    "@aws-cdk/core:enableAdditionalMetadataCollection": True,
    "@aws-cdk/aws-lambda:createNewPoliciesWithAddToRolePolicy": False,
    "@aws-cdk/aws-s3:setUniqueReplicationRoleName": True,
    "@aws-cdk/aws-events:requireEventBusPolicySid": True,
    "@aws-cdk/core:aspectPrioritiesMutating": True,
    "@aws-cdk/aws-dynamodb:retainTableReplica": True,
    "@aws-cdk/aws-stepfunctions:useDistributedMapResultWriterV2": True,
    "@aws-cdk/s3-notifications:addS3TrustKeyPolicyForSnsSubscriptions": True,
    "@aws-cdk/aws-ec2:requirePrivateSubnetsForEgressOnlyInternetGateway": True,
    "@aws-cdk/aws-s3:publicAccessBlockedByDefault": True,
    "@aws-cdk/aws-lambda:useCdkManagedLogGroup": False,
    "@aws-cdk/aws-elasticloadbalancingv2:networkLoadBalancerWithSecurityGroupByDefault": True,
    "@aws-cdk/aws-ecs-patterns:uniqueTargetGroupId": True,
    "@aws-cdk/aws-route53-patterns:useDistribution": True,
    "@aws-cdk/aws-cloudfront:defaultFunctionRuntimeV2_0": True,
    "@aws-cdk/aws-elasticloadbalancingv2:usePostQuantumTlsPolicy": True,
    "@aws-cdk/aws-batch:defaultToAL2023": True,
    "@aws-cdk/aws-eks:defaultToAL2023": True,
    "@aws-cdk/core:annotationsInValidationReport": True,
    "@aws-cdk/core:defaultCrossStackReferences": "strong",
    "@aws-cdk/core:validateAgainstDefaultRules": True,
    "@aws-cdk/aws-ecs:removeEmptyLoadBalancers": True,
    "@aws-cdk/aws-cloudfront:defaultViewerProtocolPolicyRedirectToHttps": True,
    "@aws-cdk/aws-apigateway:logGroupDestinationArnWithoutWildcard": True,
}

DEVIATIONS: Dict[str, str] = {
    "@aws-cdk/core:defaultCrossStackReferences": (
        "strong (Fn::ImportValue): CloudFormation refuses to delete or change an export a stack imports, so the "
        "storage stack (the shared stores, the data bucket) cannot be torn away from a cluster that mounts it; weak "
        "references (Fn::GetStackOutput) would let it go silently. The cluster stack is the one meant to be replaced."
    ),
    "@aws-cdk/aws-lambda:useCdkManagedLogGroup": (
        "false: it adds a log group per CDK-provided Lambda (EKS's kubectl provider) without a KMS key, and every log "
        "group fmcluster creates is encrypted with a customer managed key (tests/test_quality.py)."
    ),
}
