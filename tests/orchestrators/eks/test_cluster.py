"""`orchestrator: eks`: the control plane, its access and add-ons, and the GPU managed node groups built from the
same EFA launch templates the other kinds use."""

from __future__ import annotations

import base64
import json

import pytest
from helpers import ROOT, boot_pointers, resources_of

from fmcluster.platforms.kubernetes.versions import ADDONS


@pytest.fixture(scope="module")
def p5(synth_example):
    return synth_example("eks-p5")


@pytest.fixture(scope="module")
def b200(synth_example):
    return synth_example("eks-p6-b200-capacity-block")


def one(template, type_):
    (found,) = resources_of(template, type_).values()
    return found["Properties"]


def node_groups(template):
    return {r["Properties"]["NodegroupName"]: r["Properties"] for r in resources_of(template, "AWS::EKS::Nodegroup").values()}


def launch_data(template, group):
    return template["Resources"][group["LaunchTemplate"]["Id"]["Ref"]]["Properties"]["LaunchTemplateData"]


def test_control_plane_is_private_encrypted_logged_in_two_azs(p5):
    cluster = one(p5["eks-p5-cluster"], "AWS::EKS::Cluster")
    assert cluster["Name"] == "eks-p5" and cluster["Version"] == "1.35"
    assert cluster["AccessConfig"] == {"AuthenticationMode": "API", "BootstrapClusterCreatorAdminPermissions": False}
    vpc = cluster["ResourcesVpcConfig"]
    assert vpc["EndpointPrivateAccess"] is True and vpc["EndpointPublicAccess"] is False
    assert "PublicAccessCidrs" not in vpc
    assert len(vpc["SubnetIds"]) == 2 and "Extra" in json.dumps(vpc["SubnetIds"][1])
    assert "EfaSecurityGroup" in json.dumps(vpc["SecurityGroupIds"]), "control plane and nodes share the EFA group"
    assert cluster["EncryptionConfig"][0]["Resources"] == ["secrets"]
    assert {t["Type"] for t in cluster["Logging"]["ClusterLogging"]["EnabledTypes"]} == {
        "api", "audit", "authenticator", "controllerManager", "scheduler"}
    assert cluster["ComputeConfig"] == {"Enabled": False} and cluster["BootstrapSelfManagedAddons"] is False
    (log,) = [g["Properties"] for g in resources_of(p5["eks-p5-cluster"], "AWS::Logs::LogGroup").values()
              if g["Properties"].get("LogGroupName") == "/aws/eks/eks-p5/cluster"]
    assert log["LogGroupName"] == "/aws/eks/eks-p5/cluster" and "KmsKeyId" in log


def test_second_az_subnet_is_in_the_network_stack(p5):
    net = p5["eks-p5-network"]
    subnets = {r["Properties"]["AvailabilityZone"]: r["Properties"] for r in resources_of(net, "AWS::EC2::Subnet").values()}
    assert subnets["us-east-1b"]["CidrBlock"] == "10.4.0.128/27"
    assert subnets["us-east-1a"]["CidrBlock"] != "10.4.0.128/27"
    routes = [r["Properties"] for r in resources_of(net, "AWS::EC2::Route").values()]
    assert sum("NatGatewayId" in r for r in routes) == 2, "the node subnet and the second AZ's both egress via NAT"


def test_public_endpoint_only_from_the_listed_cidrs(b200):
    vpc = one(b200["eks-b200-cluster"], "AWS::EKS::Cluster")["ResourcesVpcConfig"]
    assert vpc["EndpointPublicAccess"] is True and vpc["EndpointPrivateAccess"] is True
    assert vpc["PublicAccessCidrs"] == ["203.0.113.0/24"]


def test_access_entries_for_the_admins_and_the_kubectl_handler_only(b200):
    entries = [r["Properties"] for r in resources_of(b200["eks-b200-cluster"], "AWS::EKS::AccessEntry").values()]
    principals = [e["PrincipalArn"] for e in entries]
    admins = ["arn:aws:iam::123456789012:role/ml-platform-admin", "arn:aws:iam::123456789012:role/ml-research-lead"]
    assert [p for p in principals if isinstance(p, str)] == admins
    others = [p for p in principals if not isinstance(p, str)]
    assert len(others) == 1 and "KubectlProvider" in json.dumps(others), "CloudFormation's kubectl handler applies charts"
    for e in entries:
        (policy,) = e["AccessPolicies"]
        assert json.dumps(policy["PolicyArn"]).endswith(':cluster-access-policy/AmazonEKSClusterAdminPolicy"]]}')
        assert policy["AccessScope"] == {"Type": "cluster"}


def test_addons_pinned_with_pod_identity(p5):
    addons = {r["Properties"]["AddonName"]: r["Properties"]
              for r in resources_of(p5["eks-p5-cluster"], "AWS::EKS::Addon").values()}
    # the platform's add-ons and the CSI drivers of the stores the cluster installs (their own pins)
    from fmcluster.platforms.kubernetes.preflight import installed_addons
    from fmcluster.registry import load_spec

    pins = installed_addons(load_spec(ROOT / "examples" / "eks-p5.yaml"))
    assert set(addons) == set(pins) and set(ADDONS) < set(pins)
    for name, props in addons.items():
        assert props.get("AddonVersion") == pins[name].version_for("1.35")
    cni = addons["vpc-cni"]
    assert json.loads(cni["ConfigurationValues"])["env"] == {"WARM_IP_TARGET": "4", "MINIMUM_IP_TARGET": "16"}
    assert cni["PodIdentityAssociations"][0]["ServiceAccount"] == "aws-node"
    assert addons["aws-fsx-csi-driver"]["PodIdentityAssociations"][0]["ServiceAccount"] == "fsx-csi-controller-sa"
    roles = resources_of(p5["eks-p5-cluster"], "AWS::IAM::Role")
    fsx_role = next(r for k, r in roles.items() if k.startswith("EksControlPlaneAwsFsxCsiDriverRole"))
    trust = fsx_role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    assert "ManagedPolicyArns" not in fsx_role["Properties"]
    policy = next(r for k, r in resources_of(p5["eks-p5-cluster"], "AWS::IAM::Policy").items()
                  if k.startswith("EksControlPlaneAwsFsxCsiDriverRole"))
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "fsx:DescribeFileSystems" and "file-system/" in json.dumps(statement["Resource"])


def test_gpu_node_group_from_the_efa_launch_template(p5):
    template = p5["eks-p5-cluster"]
    h100 = node_groups(template)["h100"]
    assert h100["AmiType"] == "AL2023_x86_64_NVIDIA" and h100["CapacityType"] == "ON_DEMAND"
    assert h100["ScalingConfig"] == {"DesiredSize": 4, "MaxSize": 8, "MinSize": 0}, "elastic: count 4 within 0..8"
    assert "InstanceTypes" not in h100, "the instance type is in the launch template"
    assert h100["NodeRepairConfig"] == {"Enabled": True}
    assert h100["Labels"] == {"fmcluster.io/node-group": "h100", "fmcluster.io/instance-type": "p5.48xlarge",
                              "fmcluster.io/efa-interfaces": "32", "fmcluster.io/efa-device": "plugin",
                              "nvidia.com/gpu.present": "true"}
    assert h100["Taints"] == [{"Effect": "NO_SCHEDULE", "Key": "nvidia.com/gpu", "Value": "true"},
                              {"Effect": "NO_SCHEDULE", "Key": "fmcluster.io/node-validation", "Value": "pending"}]
    data = launch_data(template, h100)
    assert data["InstanceType"] == "p5.48xlarge"
    assert "ImageId" not in data and "IamInstanceProfile" not in data, "EKS picks the AMI and the instance profile"
    assert not resources_of(template, "AWS::IAM::InstanceProfile"), "a managed node group makes its own from the role"
    # one hop: pods outside the host network cannot reach IMDS (so not the node role's credentials)
    assert data["MetadataOptions"]["HttpTokens"] == "required" and data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    (root,) = data["BlockDeviceMappings"]
    assert root["DeviceName"] == "/dev/xvda" and root["Ebs"]["Encrypted"] is True
    interfaces = data["NetworkInterfaces"]
    assert len(interfaces) == 33 and all("SubnetId" not in i for i in interfaces)
    assert [(i["NetworkCardIndex"], i["DeviceIndex"], i["InterfaceType"]) for i in interfaces[:3]] == [
        (0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only")]
    assert all(len(i["Groups"]) == 1 for i in interfaces) and interfaces[0]["AssociatePublicIpAddress"] is False
    assert data["Placement"]["GroupName"]["Ref"] in template["Resources"]


def test_user_data_is_mime_with_a_node_config_and_the_validator(p5):
    data = launch_data(p5["eks-p5-cluster"], node_groups(p5["eks-p5-cluster"])["h100"])
    text = "".join(p if isinstance(p, str) else "<token>" for p in data["UserData"]["Fn::Base64"]["Fn::Join"][1])
    assert text.startswith('Content-Type: multipart/mixed; boundary="==FMCLUSTER=="')
    assert "Content-Type: application/node.eks.aws" in text and '"strategy": "RAID0"' in text
    assert text.index("application/node.eks.aws") < text.index("text/x-shellscript")
    assert "fm_pointer=boot/groups/h100.json" in text, "the profile, level and policy come from the group's pointer"
    pointer = boot_pointers(p5["eks-p5-cluster"])["boot/groups/h100.json"]
    profile = pointer["profile"]
    assert profile["orchestrator"] == "kubernetes" and profile["policy"] == pointer["policy"] == "report"
    assert profile["instance_store"] == "/opt/dlami/nvme" and profile["min_versions"]["driver"].startswith("580.")
    assert "dnf install -y -q lustre-client" in text and "--efa" not in text
    assert "observability/install.sh" not in text


def test_capacity_block_group_one_subnet_no_placement(b200):
    template = b200["eks-b200-cluster"]
    group = node_groups(template)["b200"]
    assert group["CapacityType"] == "CAPACITY_BLOCK" and len(group["Subnets"]) == 1
    # the block's whole count from creation: before the block is active its Auto Scaling group reports launch errors,
    # then launches the nodes (EKS user guide, "capacity-blocks-mng"); no step by hand
    assert group["ScalingConfig"] == {"MinSize": 0, "DesiredSize": 2, "MaxSize": 2}
    assert group["AmiType"] == "AL2023_x86_64_NVIDIA"
    data = launch_data(template, group)
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"] == \
        "cr-0b1c2d3e4f5a60718"
    assert "Placement" not in data and not resources_of(template, "AWS::EC2::PlacementGroup")
    assert len(data["NetworkInterfaces"]) == 9 and group["Labels"]["fmcluster.io/efa-device"] == "dra"
    text = "".join(p for p in data["UserData"]["Fn::Base64"]["Fn::Join"][1] if isinstance(p, str))
    assert "--efa" in text, "an EFA-enabled file system is mounted with LNet over EFA"


def test_system_node_group_is_untainted_cpu(p5):
    system = node_groups(p5["eks-p5-cluster"])["system"]
    assert system["AmiType"] == "AL2023_x86_64_STANDARD" and "Taints" not in system
    data = launch_data(p5["eks-p5-cluster"], system)
    assert data["InstanceType"] == "m6i.2xlarge" and len(data["NetworkInterfaces"]) == 1
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1 and data["BlockDeviceMappings"][0]["Ebs"]["Encrypted"]
    assert base64.b64encode(b"x")  # user data is still MIME for EKS to merge into
    assert "multipart/mixed" in json.dumps(data["UserData"])


def test_node_role_has_the_documented_eks_policies_only(p5):
    roles = resources_of(p5["eks-p5-cluster"], "AWS::IAM::Role")
    node = next(r["Properties"] for k, r in roles.items() if k.startswith("EksNodesNodeRole"))
    managed = json.dumps(node["ManagedPolicyArns"])
    assert "AmazonEKSWorkerNodePolicy" in managed and "AmazonEC2ContainerRegistryPullOnly" in managed
    assert "AmazonEKS_CNI_Policy" not in managed, "the CNI's policy is on the vpc-cni add-on's Pod Identity role"
    assert len(node["ManagedPolicyArns"]) == 2


def _statements(template, role_prefix):
    roles = {k for k in resources_of(template, "AWS::IAM::Role") if k.startswith(role_prefix)}
    found = []
    for policy in resources_of(template, "AWS::IAM::Policy").values():
        if any(r.get("Ref") in roles for r in policy["Properties"]["Roles"]):
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def test_the_node_role_cannot_touch_the_data_bucket_or_write_metrics(p5):
    """With IMDS at one hop a pod cannot read the node role's credentials anyway; the role holds neither. Its one
    write is the node's own report (runtime/node_report.py) under its group's prefix of the runtime bucket."""
    statements = _statements(p5["eks-p5-cluster"], "EksNodesNodeRole")
    actions = json.dumps([st["Action"] for st in statements])
    assert "aps:RemoteWrite" not in actions and "kms:" not in actions
    (put,) = [st for st in statements if "s3:PutObject" in json.dumps(st["Action"])]
    assert put["Action"] == "s3:PutObject" and "/node-reports/h100/*" in json.dumps(put["Resource"])
    assert "NodeRuntimeBucket" in json.dumps(put["Resource"])


def test_training_pods_get_the_data_bucket_through_pod_identity(p5):
    template = p5["eks-p5-cluster"]
    (association,) = [a["Properties"] for a in resources_of(template, "AWS::EKS::PodIdentityAssociation").values()
                      if a["Properties"]["Namespace"] == "training"]
    assert association["Namespace"] == "training" and association["ServiceAccount"] == "fmcluster-training"
    role_id = association["RoleArn"]["Fn::GetAtt"][0]
    trust = template["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust[0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(trust[0]["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    statements = _statements(template, role_id)
    s3 = [st for st in statements if any(str(a).startswith("s3:") for a in (
        st["Action"] if isinstance(st["Action"], list) else [st["Action"]]))]
    assert s3, "the workload role reads and writes the data bucket"
    for st in s3:
        resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        assert all("DataBucketArn" in json.dumps(r) for r in resources), st
    assert all("*" not in (a if isinstance(a, str) else "") for st in statements
               for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]]))
    # the service account exists in the training namespace
    manifests = json.dumps([m["Properties"] for m in resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").values()])
    assert "ServiceAccount" in manifests and "fmcluster-training" in manifests


def test_the_node_subnet_must_hold_the_pod_addresses(p5):
    from fmcluster.registry import load_spec

    spec = load_spec("examples/eks-p5.yaml")
    assert spec.node_ip_addresses == 8 * (1 + 24), "room for the elastic group's max_count"
    assert 2 ** (32 - (spec.node_subnet_prefix or 0)) - 5 >= spec.required_ips


def test_existing_vpc_uses_its_extra_subnets_and_every_node_subnet():
    """An existing VPC names the second AZ's subnet(s); on-demand groups spread over every node subnet."""
    import copy
    from pathlib import Path

    import yaml

    from fmcluster.app import synthesize
    from fmcluster.registry import parse_spec

    data = yaml.safe_load((Path(__file__).resolve().parents[3] / "examples" / "eks-p5.yaml").read_text())
    data = copy.deepcopy(data)
    data["network"] = {"existing_vpc": {
        "vpc_id": "vpc-0123456789abcdef0", "subnet_ids": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
        "extra_subnet_ids": ["subnet-0123456789abcdef2"]}}
    data.pop("storage")
    data.pop("checkpoints")  # its tier lives on the FSx this variant drops
    data["observability"] = {"enabled": False}
    template = synthesize(parse_spec(data))["eks-p5-cluster"]
    vpc = one(template, "AWS::EKS::Cluster")["ResourcesVpcConfig"]
    assert vpc["SubnetIds"] == ["subnet-0123456789abcdef0", "subnet-0123456789abcdef2"]
    assert node_groups(template)["h100"]["Subnets"] == ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
    assert not resources_of(template, "AWS::APS::Scraper"), "no scraper without observability"


def test_constructs_refuse_one_az_naming_the_prop():
    import aws_cdk as cdk
    from aws_cdk import aws_ec2 as ec2

    from fmcluster.app import new_app
    from fmcluster.platforms.kubernetes.cluster import EksControlPlane
    from fmcluster.platforms.kubernetes.scraper import ManagedScraper

    stack = cdk.Stack(new_app(nag=False), "S", env=cdk.Environment(account="123456789012", region="us-east-1"))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=["us-east-1a"], nat_gateways=0)
    one_az = vpc.isolated_subnets[:1] + vpc.isolated_subnets[:1]
    group = ec2.SecurityGroup(stack, "Sg", vpc=vpc)
    with pytest.raises(ValueError, match="^subnets: EKS needs"):
        EksControlPlane(stack, "Cp", cluster_name="c", kubernetes_version="1.35", vpc=vpc, subnets=one_az,
                        security_group=group, admins=["arn:aws:iam::123456789012:role/a"])
    with pytest.raises(ValueError, match="^subnets: a managed scraper"):
        ManagedScraper(stack, "Sc", alias="a", cluster_arn="arn", subnets=one_az, security_groups=[group],
                       workspace_arn="arn", config={"scrape_configs": []})


@pytest.mark.parametrize("system_type, ami", [("m7g.2xlarge", "AL2023_ARM_64_STANDARD"),
                                              ("m7i.2xlarge", "AL2023_x86_64_STANDARD")])
def test_the_system_node_groups_ami_type_follows_its_architecture(system_type, ami):
    """EKS refuses an instance type whose architecture is not the AMI type's: an arm64 system type (m7g) needs the
    ARM AMI type."""
    from pathlib import Path

    import yaml

    from fmcluster import catalog
    from fmcluster.app import synthesize
    from fmcluster.orchestrators.eks.node_groups import ami_type
    from fmcluster.registry import parse_spec

    data = yaml.safe_load((Path(__file__).resolve().parents[3] / "examples" / "eks-p5.yaml").read_text())
    data["orchestrator"]["eks"]["system_nodes"] = {"instance_type": system_type}
    data.pop("storage")
    data.pop("checkpoints")  # its tier lives on the FSx this variant drops
    data["observability"] = {"enabled": False}
    template = synthesize(parse_spec(data))["eks-p5-cluster"]
    system = node_groups(template)["system"]
    assert system["AmiType"] == ami
    assert launch_data(template, system)["InstanceType"] == system_type
    assert node_groups(template)["h100"]["AmiType"] == "AL2023_x86_64_NVIDIA"
    assert ami_type(catalog.get("p6e-gb200.36xlarge")).value == "AL2023_ARM_64_NVIDIA"
