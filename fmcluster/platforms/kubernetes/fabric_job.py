"""The fabric acceptance job on a Kubernetes kind: an MPIJob (Kubeflow MPI operator, v2beta1) whose launcher runs the
packaged nccl-tests script over one worker pod per node of a GPU group, each pod taking every GPU and EFA interface
of its node. The kinds say where it goes (namespace, queue labels) and which nodes it may use; this module writes
the rest from the spec, so the job needs no hand edits (examples/jobs/nccl-tests-*.yaml are its written-out form).
"""

from __future__ import annotations

from importlib import resources
from typing import Any, Dict, List, Mapping, Optional

import yaml

from fmcluster.platforms.kubernetes import allocatable, devices, labels
from fmcluster.platforms.kubernetes.job_image import NCCL_TESTS_DIR, NCCL_TESTS_IMAGE
from fmcluster.spec.node_group import NodeGroup

__all__ = ["NCCL_TESTS_DIR", "NCCL_TESTS_IMAGE", "manifests", "script", "worker_resources"]
SCRIPT = "nccl-tests.sbatch"
JOB_NAME = "nccl-tests"
# the launcher only runs mpirun
LAUNCHER_RESOURCES = {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"memory": "2Gi"}}
# What AWS's EFA job manifests ask of each worker besides GPUs and EFA interfaces: 5120Mi of 2 MiB hugepages, from the
# 5128 pages instances with the EFA driver installed pre-allocate (EKS user guide, "Run machine learning training on
# Amazon EKS with Elastic Fabric Adapter", its NCCL MPIJob; allocatable.EFA_HUGEPAGES_2MI). libfabric's EFA provider
# puts its buffers on hugepages when it can map them (fi_efa(7), FI_EFA_USE_HUGE_PAGE); the request makes the pod's
# hugetlb allowance match.
WORKER_HUGEPAGES_2MI = "5120Mi"


def script() -> str:
    return resources.files("fmcluster.acceptance").joinpath(SCRIPT).read_text(encoding="utf-8")


def worker_resources(group: NodeGroup, *, threads_per_core: int, efa_claim: bool,
                     hugepages: bool = False, daemonset_millicores: Optional[int] = None) -> Dict[str, Any]:
    """Every GPU and EFA interface of the node (without the EFA request a pod gets no EFA device and NCCL falls back
    to TCP), the node's CPU less what the DaemonSets keep, a quarter of its memory and, with `hugepages`, the hugepages
    AWS's EFA jobs request."""
    t = group.instance
    memory = f"{t.memory_mib // 1024 // 4}Gi"
    requests: Dict[str, Any] = {labels.GPU_RESOURCE: t.gpus}
    limits: Dict[str, Any] = {labels.GPU_RESOURCE: t.gpus}
    if not efa_claim:
        requests[labels.EFA_RESOURCE] = limits[labels.EFA_RESOURCE] = t.efa_interfaces
    requests["cpu"] = str(allocatable.whole_node_cpu_request(
        t, threads_per_core, allocatable.DAEMONSET_CPU_MILLICORES if daemonset_millicores is None else daemonset_millicores))
    requests["memory"] = limits["memory"] = memory
    if hugepages and group.efa_enabled:  # hugepages must be requested and limited alike (Kubernetes, "Manage HugePages")
        requests[allocatable.HUGEPAGES_2MI] = limits[allocatable.HUGEPAGES_2MI] = WORKER_HUGEPAGES_2MI
    out: Dict[str, Any] = {"requests": requests, "limits": limits}
    if efa_claim:
        out["claims"] = [{"name": "efa"}]
    return out


def manifests(group: NodeGroup, *, namespace: str, job_labels: Mapping[str, str], header: List[str],
              image: Optional[str] = None, threads_per_core: int = 2, efa_claim: bool = False,
              worker_annotations: Optional[Mapping[str, str]] = None,
              node_selector: Optional[Mapping[str, str]] = None, workers: Optional[int] = None,
              launcher_placement: Optional[Mapping[str, Any]] = None, hugepages: bool = False,
              daemonset_millicores: Optional[int] = None) -> str:
    """The ConfigMap holding the script and the MPIJob, as one multi-document YAML file led by `header` comments;
    one worker per node of the group unless `workers` says fewer. `launcher_placement`: the launcher pod's
    nodeSelector and tolerations, where the kind has nodes for it (else it goes where its queue puts it).
    `daemonset_millicores`: the CPU the DaemonSets on a worker's node request, where the kind has the sum from their
    sources (else allocatable's allowance)."""
    t = group.instance
    image = image or NCCL_TESTS_IMAGE
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": JOB_NAME, "namespace": namespace},
                  "data": {"nccl-tests.sh": script()}}
    launcher = {"name": "launcher", "image": image, "command": ["/bin/bash", "/scripts/nccl-tests.sh"],
                "env": [{"name": "HOSTFILE", "value": "/etc/mpi/hostfile"},  # the MPI operator writes it
                        {"name": "NCCL_TESTS_DIR", "value": NCCL_TESTS_DIR},
                        {"name": "GPUS_PER_NODE", "value": str(t.gpus)},
                        {"name": "MPI_EXTRA_ARGS", "value": "--allow-run-as-root"}],
                "resources": LAUNCHER_RESOURCES, "volumeMounts": [{"name": "scripts", "mountPath": "/scripts"}]}
    worker = {"name": "worker", "image": image, "command": ["/usr/sbin/sshd", "-De"],  # mpirun reaches it over SSH
              "resources": worker_resources(group, threads_per_core=threads_per_core, efa_claim=efa_claim,
                                            hugepages=hugepages, daemonset_millicores=daemonset_millicores),
              "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}]}  # noqa: S108 - NCCL's shared memory, in RAM
    worker_pod: Dict[str, Any] = {"containers": [worker],
                                  "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}]}
    if node_selector:
        worker_pod["nodeSelector"] = dict(node_selector)
    if efa_claim:
        worker_pod["resourceClaims"] = [{"name": "efa",
                                         "resourceClaimTemplateName": devices.efa_claim_template_name(group)}]
    launcher_pod: Dict[str, Any] = {"containers": [launcher], **dict(launcher_placement or {}),
                                    "volumes": [{"name": "scripts", "configMap": {"name": JOB_NAME}}]}
    worker_template: Dict[str, Any] = {"spec": worker_pod}
    if worker_annotations:
        worker_template = {"metadata": {"annotations": dict(worker_annotations)}, **worker_template}
    job = {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"name": JOB_NAME, "namespace": namespace, "labels": dict(job_labels)},
        "spec": {
            "slotsPerWorker": t.gpus,
            # suspended: the queue starts it when the launcher and every worker can be admitted at once
            "runPolicy": {"suspend": True, "backoffLimit": 0, "cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": {"spec": launcher_pod}},
                "Worker": {"replicas": workers or group.count, "restartPolicy": "Never", "template": worker_template},
            },
        },
    }
    body = yaml.dump_all([config_map, job], Dumper=_Dumper, sort_keys=False, width=120)
    return "".join(f"# {line}\n" if line else "#\n" for line in header) + body


class _Dumper(yaml.SafeDumper):
    pass


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # the script as a literal block, readable and diffable against nccl-tests.sbatch
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _text)
