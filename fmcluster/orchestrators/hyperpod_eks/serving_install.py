"""What the hyperpod-eks kind installs for a `serving` section, as AWS documents the HyperPod Inference Operator's
EKS add-on (docs/serving.md, "hyperpod-eks"): the cluster's OIDC provider and the roles AWS's migration script creates
(the operator's execution role with its managed policy and the TLS bucket, KEDA's role, which here may only query the
AMP workspace; the Mountpoint for S3 driver's role where a model streams from S3), the dependency add-ons (cert-manager,
metrics-server, the Mountpoint for S3 CSI driver), the inference add-on itself, and per deployment its
InferenceEndpointConfig in the serving namespace."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from fmcluster.constructs.bucket_deployment import (
    explicit_bucket_policy,
    nag_resource,
    secure_bucket,
    server_access_log_bucket,
)
from fmcluster.constructs.store_permissions import grant_permissions
from fmcluster.nag import acknowledge
from fmcluster.orchestrators.hyperpod_eks import serving
from fmcluster.orchestrators.hyperpod_eks.irsa import install_addon, irsa_role
from fmcluster.orchestrators.hyperpod_eks.versions import S3_CSI
from fmcluster.platforms.kubernetes import pod_identity, volumes
from fmcluster.platforms.kubernetes import serving as common
from fmcluster.platforms.kubernetes.charts import ClusterObjects
from fmcluster.platforms.kubernetes.cluster import EksControlPlane
from fmcluster.platforms.kubernetes.serving_access import add_model_reads, amp_query_statement, workspace_url
from fmcluster.platforms.storage import Mounts
from fmcluster.platforms.storage.forms import Permission

S3_CSI_SERVICE_ACCOUNT = "s3-csi-driver-sa"  # the driver's node service account (Mountpoint for S3 CSI driver v1)


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("-"))


class ServingInstall(Construct):
    """The operator's add-on and roles; `objects`: each deployment's manifest. `driver_permissions`: what the stores'
    volumes on the Mountpoint for S3 driver need, on the same driver's role."""

    def __init__(self, scope: Construct, id: str, *, spec: Any, control_plane: EksControlPlane,
                 objects: ClusterObjects, hyperpod_cluster_arn: str, workspace_arn: Optional[str],
                 mounts: Mounts, oidc: iam.OidcProviderNative, issuer: str,
                 after: Sequence[IConstruct], driver_permissions: Sequence[Permission] = ()) -> None:
        super().__init__(scope, id)
        section = spec.serving
        stack = Stack.of(self)
        cluster = control_plane.cluster
        version = spec.orchestrator.eks.kubernetes_version
        self.oidc = oidc
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
        if uris or driver_permissions:
            # one driver, one role: the models' reads and what the stores' volumes on it need
            s3_role = self._irsa_role("S3CsiRole", issuer, "kube-system", S3_CSI_SERVICE_ACCOUNT,
                                      "the Mountpoint for S3 CSI driver")
            if uris:
                add_model_reads(s3_role, stack, uris)
            grant_permissions(s3_role, driver_permissions, stack=stack)
            deps.append(install_addon(control_plane, S3_CSI, s3_role, kubernetes_version=version))
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
        file_system = serving.file_system_source(mounts)
        url = workspace_url(stack, workspace_arn) if workspace_arn else None
        self.models: Dict[str, IConstruct] = {}
        for d in section.models:
            self.models[d.name] = objects.manifest(
                f"Model{_camel(d.name)}", [serving.endpoint_config(spec, d, ns, workspace_url=url, file_system=file_system)],
                after=[self.addon, namespace])

    def _irsa_role(self, id: str, issuer: str, namespace: str, service_account: str, purpose: str,
                   sagemaker: bool = False) -> iam.Role:
        """A role for one service account through the cluster's OIDC provider (IRSA), as the add-on takes its
        roles; also assumable by SageMaker where AWS's script trusts it."""
        return irsa_role(self, id, provider=self.oidc, issuer=issuer, namespace=namespace,
                         service_account=service_account, purpose=purpose, sagemaker=sagemaker)

