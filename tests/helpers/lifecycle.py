"""HyperPod inputs for the lifecycle tests: a resource_config.json in the shape HyperPod writes to
/opt/ml/config/resource_config.json (controller, login and two worker groups) and our provisioning
parameters. The ClusterConfig block, InstanceType, AgentIpAddress and InstanceId fields are as recalled from
HyperPod nodes and unverified; the lifecycle code only relies on InstanceGroups[].Name,
.Instances[].CustomerIpAddress and .InstanceName, which AWS's public base-config scripts read."""

from __future__ import annotations

import copy
from typing import Any, Dict


def _instance(name: str, ip: str, n: int) -> Dict[str, str]:
    return {"AgentIpAddress": f"172.16.{n}.{n + 10}", "CustomerIpAddress": ip,
            "InstanceId": f"i-0{n:015x}", "InstanceName": name}


RESOURCE_CONFIG: Dict[str, Any] = {
    "ClusterConfig": {"ClusterArn": "arn:aws:sagemaker:us-east-1:111122223333:cluster/abc123def456", "ClusterName": "demo"},
    "InstanceGroups": [
        {"Name": "controller", "InstanceType": "ml.m5.2xlarge", "Instances": [_instance("controller-1", "10.1.0.10", 1)]},
        {"Name": "login", "InstanceType": "ml.m5.xlarge", "Instances": [_instance("login-1", "10.1.0.20", 2)]},
        {"Name": "gpu-a", "InstanceType": "ml.p5.48xlarge",
         "Instances": [_instance("gpu-a-1", "10.1.1.11", 3), _instance("gpu-a-2", "10.1.1.12", 4)]},
        {"Name": "cpu-b", "InstanceType": "ml.c5.18xlarge", "Instances": [_instance("cpu-b-1", "10.1.2.21", 5)]},
    ],
}

PARAMS: Dict[str, Any] = {
    "version": 1, "workload_manager": "slurm", "cluster_name": "demo", "region": "us-east-1",
    "controller_group": "controller", "login_group": "login",
    "worker_groups": [
        {"instance_group_name": "gpu-a", "partition_name": "gpu-a", "instance_type": "ml.p5.48xlarge", "gpu": True,
         "efa": True},
        {"instance_group_name": "cpu-b", "partition_name": "cpu-b", "instance_type": "ml.c5.18xlarge", "gpu": False},
    ],
    "fsx": {"dns_name": "fs-0abc.fsx.us-east-1.amazonaws.com", "mount_name": "abcdefgh", "mount_point": "/fsx", "efa": False},
    "validation": {"level": "standard", "policy": "drain"},
    "observability": {"remote_write_url": "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1234/api/v1/remote_write",
                      "scrape_interval_seconds": 30},
    "users": [{"name": "alice", "uid": 2001, "groups": ["docker"],
               "ssh_public_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly alice@example"]}],
}

CONTROLLER_IP, LOGIN_IP, GPU_IP, CPU_IP = "10.1.0.10", "10.1.0.20", "10.1.1.12", "10.1.2.21"


def params(**changes: Any) -> Dict[str, Any]:
    out = copy.deepcopy(PARAMS)
    out.update(changes)
    return out


def resource_config() -> Dict[str, Any]:
    return copy.deepcopy(RESOURCE_CONFIG)


# HyperPod on EKS (on_create_eks.sh): parameters as fmcluster renders them (workload_manager eks); a node knows its
# group from the entry stub HyperPod runs for it, so there is no resource_config.json to read.
EKS_PARAMS: Dict[str, Any] = {
    "version": 1, "workload_manager": "eks", "cluster_name": "demo", "region": "us-east-1", "system_group": "system",
    "worker_groups": [
        {"instance_group_name": "h100", "instance_type": "ml.p5.48xlarge", "gpu": True, "efa": True,
         "instance_store": True},
        {"instance_group_name": "prep", "instance_type": "ml.c5.18xlarge", "gpu": False, "efa": False,
         "instance_store": False},
    ],
    "fsx": {"dns_name": "fs-0abc.fsx.us-east-1.amazonaws.com", "mount_name": "abcdefgh", "mount_point": "/fsx",
            "efa": True},
    "validation": {"level": "standard", "policy": "taint"},
    "observability": {"efa_textfile": True},
}


def eks_params(**changes: Any) -> Dict[str, Any]:
    out = copy.deepcopy(EKS_PARAMS)
    out.update(changes)
    return out
