"""What the hyperpod-eks kind installs for a `serving` section, as AWS documents the HyperPod Inference Operator's
EKS add-on (docs/serving.md, "hyperpod-eks"): the cluster's OIDC provider and the roles AWS's migration script creates
(the operator's execution role with its managed policy and the TLS bucket, KEDA's role, which here may only query the
AMP workspace; the Mountpoint for S3 driver's role where a model streams from S3), the dependency add-ons (cert-manager,
metrics-server, the Mountpoint for S3 CSI driver), the inference add-on itself, and per deployment its
InferenceEndpointConfig in the serving namespace."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from aws_cdk import CfnJson, Fn, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from fmcluster.constructs.bucket_deployment import (
    explicit_bucket_policy,
    nag_resource,
    secure_bucket,
    server_access_log_bucket,
)
from fmcluster.nag import acknowledge
from fmcluster.orchestrators.hyperpod_eks import serving
from fmcluster.platforms.kubernetes import pod_identity, volumes
from fmcluster.platforms.kubernetes import serving as common
from fmcluster.platforms.kubernetes.charts import ClusterObjects
from fmcluster.platforms.kubernetes.cluster import EksControlPlane
from fmcluster.platforms.kubernetes.serving_access import add_model_reads, amp_query_statement, workspace_url
from fmcluster.platforms.storage import Mounts

S3_CSI = "aws-mountpoint-s3-csi-driver"
S3_CSI_SERVICE_ACCOUNT = "s3-csi-driver-sa"  # the driver's node service account (Mountpoint for S3 CSI driver v1)


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("-"))


class ServingInstall(Construct):
    """The operator's add-on and roles; `objects`: each deployment's manifest."""

    def __init__(self, scope: Construct, id: str, *, spec: Any, control_plane: EksControlPlane,
                 objects: ClusterObjects, hyperpod_cluster_arn: str, workspace_arn: Optional[str],
                 mounts: Mounts,
                 after: Sequence[IConstruct]) -> None:
        super().__init__(scope, id)
        section = spec.serving
        stack = Stack.of(self)
        cluster = control_plane.cluster
        version = spec.orchestrator.eks.kubernetes_version
        self.oidc = iam.OidcProviderNative(self, "Oidc", url=cluster.cluster_open_id_connect_issuer_url,
                                           client_ids=["sts.amazonaws.com"])
        issuer = Fn.select(1, Fn.split("https://", cluster.cluster_open_id_connect_issuer_url))
        # the operator's TLS certificates get a bucket of their own: its role writes and deletes there only (AWS's
        # script points it at a bucket of the user's; the data bucket's objects stay out of its reach)
        access_logs = server_access_log_bucket(self, "TlsAccessLogs", logged="inference operator's TLS bucket")
        self.tls_bucket = secure_bucket(self, "TlsCertificates", server_access_logs_bucket=access_logs,
                                        removal_policy=RemovalPolicy.DESTROY, auto_delete_objects=True)
        explicit_bucket_policy(self.tls_bucket)
        self.execution_role = self._irsa_role(
            "OperatorExecutionRole", issuer, serving.OPERATOR_NAMESPACE, serving.CONTROLLER_SERVICE_ACCOUNT,
            "the HyperPod inference operator", sagemaker=True)
        self.execution_role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(serving.EXECUTION_POLICY))
        acknowledge(self.execution_role, f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                    f"{serving.EXECUTION_POLICY}]", "AWS's inference operator add-on documents this managed policy "
                    "for its execution role (migration/helm_to_addon.sh in aws/sagemaker-hyperpod-cli).")
        self.execution_role.add_to_policy(iam.PolicyStatement(
            sid="TlsCertificates", actions=["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject"],
            resources=[self.tls_bucket.arn_for_objects("*")]))
        acknowledge(self.execution_role, f"AwsSolutions-IAM5[Resource::{nag_resource(stack, self.tls_bucket.bucket_arn)}/*]",
                    "The operator names its TLS certificate objects itself, in a bucket of their own.")
        tls_bucket = self.tls_bucket.bucket_name
        keda_statements = [amp_query_statement(workspace_arn)] if workspace_arn else []
        self.keda_role = self._irsa_role("KedaRole", issuer, serving.OPERATOR_NAMESPACE, serving.KEDA_SERVICE_ACCOUNT,
                                         "the inference operator's KEDA", sagemaker=True)
        for statement in keda_statements:
            self.keda_role.add_to_policy(statement)
        deps: List[IConstruct] = []
        # cert-manager: HyperPod's dependency chart runs it where the training operator is on; else its add-on
        wanted = ["metrics-server"] + ([] if spec.orchestrator.hyperpod.training_operator else ["cert-manager"])
        for name in wanted:
            deps.append(control_plane.add_addon(name, kubernetes_version=version, after=["eks-pod-identity-agent"]))
        uris = [d.source.s3 for d in section.models if d.source.s3]
        if uris:
            s3_role = self._irsa_role("S3CsiRole", issuer, "kube-system", S3_CSI_SERVICE_ACCOUNT,
                                      "the Mountpoint for S3 CSI driver")
            add_model_reads(s3_role, stack, uris)
            addon = control_plane.add_addon(S3_CSI, kubernetes_version=version)
            addon.node.default_child.add_property_override(  # type: ignore[union-attr]
                "ServiceAccountRoleArn", s3_role.role_arn)
            deps.append(addon)
        configuration = serving.addon_configuration(
            execution_role_arn=self.execution_role.role_arn, tls_bucket=tls_bucket, cluster_arn=hyperpod_cluster_arn,
            keda_role_arn=self.keda_role.role_arn)
        self.addon = control_plane.add_addon(serving.ADDON, kubernetes_version=version, configuration=configuration)
        for d in (*deps, *after):
            self.addon.node.add_dependency(d)
        # the serving namespace and its pods' account, then each model
        ns = section.namespace
        role = control_plane.pod_identity_role(
            "ModelServerRole", f"model servers ({ns}/{common.SERVICE_ACCOUNT}) of {spec.name}")
        add_model_reads(role, stack, uris)
        identity = pod_identity.associate(self, "ModelServerPodIdentity", cluster_name=cluster.cluster_name,
                                          namespace=ns, service_account=common.SERVICE_ACCOUNT, role=role)
        namespace = objects.manifest("ServingNamespace", [volumes.namespace(ns),
                                                          pod_identity.service_account(common.SERVICE_ACCOUNT, ns)],
                                     after=[identity, self.addon])
        fsx = _fsx(mounts)
        url = workspace_url(stack, workspace_arn) if workspace_arn else None
        self.models: Dict[str, IConstruct] = {}
        for d in section.models:
            self.models[d.name] = objects.manifest(
                f"Model{_camel(d.name)}", [serving.endpoint_config(spec, d, ns, workspace_url=url, fsx=fsx)],
                after=[self.addon, namespace])

    def _irsa_role(self, id: str, issuer: str, namespace: str, service_account: str, purpose: str,
                   sagemaker: bool = False) -> iam.Role:
        """A role for one service account through the cluster's OIDC provider (IRSA), as the add-on takes its
        roles; also assumable by SageMaker where AWS's script trusts it."""
        conditions = CfnJson(self, f"{id}Trust", value={f"{issuer}:sub": f"system:serviceaccount:{namespace}:"
                                                                          f"{service_account}",
                                                         f"{issuer}:aud": "sts.amazonaws.com"})
        principal: iam.IPrincipal = iam.WebIdentityPrincipal(self.oidc.oidc_provider_arn,
                                                             {"StringEquals": conditions})
        if sagemaker:
            principal = iam.CompositePrincipal(principal, iam.ServicePrincipal("sagemaker.amazonaws.com"))
        return iam.Role(self, id, assumed_by=principal, description=f"IRSA: {purpose} ({namespace}/{service_account})")


def _fsx(mounts: Mounts) -> Optional[Dict[str, str]]:
    """The shared file system as the operator's fsxStorage takes it (id, DNS name, mount name), or None."""
    for _, volume in mounts.volumes():
        attrs = dict(volume.attributes)
        return {"id": volume.handle, "dns": attrs.get("dnsname", ""), "mount": attrs.get("mountname", "")}
    return None

