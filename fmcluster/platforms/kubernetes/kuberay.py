"""Ray on a Kubernetes kind: the KubeRay operator (its chart at the pin in versions.CHARTS, on the system nodes) and
the RayJob fmcluster writes for post-training (docs/post-training.md).

The operator's chart carries its CRDs in crds/, which Helm creates (never a client-side apply, whose
last-applied-configuration annotation refuses objects over 256 KiB, as each of KubeRay's CRDs is) and never upgrades:
moving the pin means `kubectl apply --server-side` of the new tag's CRDs first (KubeRay's chart README). Kueue admits
RayJobs and RayClusters through its ray.io integrations (kueue.FRAMEWORKS); with Volcano or KAI the operator hands
Ray's pods to that scheduler (its batchScheduler.name).

A RayJob here runs in SidecarMode: KubeRay puts the submitter beside the head as a container (KubeRay v1.7.0
rayjob_types.go), so Kueue sees two pod sets, the head (with the submitter's default resources added) and the
workers, and admits them whole (kueue v0.19.2 pkg/controller/jobs/rayjob, addSidecarSubmitterToHeadPodSet). Kueue
requires shutdownAfterJobFinishes and no clusterSelector (its rayjob webhook).
https://docs.ray.io/en/latest/cluster/kubernetes/k8s-ecosystem/kueue.html ;
https://kueue.sigs.k8s.io/docs/tasks/run/rayjobs/
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from fmcluster.runtime.observability import RAY_METRICS_PORT

NAMESPACE = "kuberay-system"
RELEASE = "kuberay-operator"
API = "ray.io/v1"
# Ray's ports on the head: GCS, dashboard and job API, the metrics agent (KubeRay injects metrics-export-port 8080
# where rayStartParams has none: ray-operator/controllers/ray/utils/constant.go DefaultMetricsPort).
GCS_PORT, DASHBOARD_PORT, METRICS_PORT = 6379, 8265, RAY_METRICS_PORT
METRICS_PORT_NAME = "metrics"  # the container port KubeRay names for it (utils.MetricsPortName)
NODE_TYPE_LABEL, CLUSTER_LABEL = "ray.io/node-type", "ray.io/cluster"  # on every Ray pod KubeRay creates
# The operator's batchScheduler.name per scheduler of the eks kind (values.yaml: "volcano", "yunikorn",
# "kai-scheduler", "scheduler-plugins"); Kueue is not one: it gates RayJobs by their queue label instead.
BATCH_SCHEDULERS: Dict[str, Optional[str]] = {"kueue": None, "volcano": "volcano", "kai": "kai-scheduler"}
# What KubeRay gives the submitter container it injects beside the head in SidecarMode, and Kueue charges to the head
# pod set (kueue v0.19.2 rayjob_controller.go defaultSubmitterResources).
SIDECAR_SUBMITTER = {"requests": {"cpu": "500m", "memory": "200Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
SIDECAR_SUBMITTER_CPU_CORES = 1  # what the head's Ray container leaves the submitter, in whole cores (its limit)


def chart_values(*, system_selector: Mapping[str, str], scheduler: str = "kueue",
                 tolerations: Sequence[Mapping[str, str]] = ()) -> Dict[str, Any]:
    """The operator on the system nodes; the chart's defaults otherwise (one replica, leader election, its restricted
    securityContext, metrics on 8080)."""
    if scheduler not in BATCH_SCHEDULERS:
        raise ValueError(f"scheduler: {scheduler!r} is not one of {', '.join(BATCH_SCHEDULERS)}")
    values: Dict[str, Any] = {"nodeSelector": dict(system_selector)}
    if tolerations:
        values["tolerations"] = [dict(t) for t in tolerations]
    name = BATCH_SCHEDULERS[scheduler]
    if name:
        values["batchScheduler"] = {"name": name}
    return values


def start_params(gpus: int) -> Dict[str, str]:
    """rayStartParams of a node that takes a whole GPU node: its GPUs, the metrics agent on the port the scrape config
    reads."""
    return {"num-gpus": str(gpus), "metrics-export-port": str(METRICS_PORT)}


def ray_job(*, name: str, namespace: str, labels: Mapping[str, str], entrypoint: str,
            head: Dict[str, Any], workers: Sequence[Tuple[str, int, Dict[str, Any]]], gpus_per_node: int,
            runtime_env_yaml: str = "", backoff_limit: int = 0, active_deadline_seconds: Optional[int] = None,
            ttl_seconds: int = 300) -> Dict[str, Any]:
    """A RayJob whose RayCluster is one head (pod template `head`, a GPU node of its own) and worker groups (name,
    replicas, pod template), suspended until its queue admits it. `backoff_limit`: retries, each on a new RayCluster
    (rayjob_types.go), so a job that resumes from its checkpoints outlives a lost node. `ttl_seconds`: how long the
    finished cluster stays for its logs (HyperPod task governance charges a Ray cluster's quota until it is deleted)."""
    # KubeRay sets the head's dashboard-host to every interface of its pod (common/pod.go), reached by port-forward
    head_params = start_params(gpus_per_node)
    groups: List[Dict[str, Any]] = [
        {"groupName": group, "replicas": count, "minReplicas": count, "maxReplicas": count,
         "rayStartParams": start_params(gpus_per_node), "template": template}
        for group, count, template in workers if count > 0]
    spec: Dict[str, Any] = {
        "suspend": True,  # Kueue starts it (it owns spec.suspend); other schedulers see it unsuspended below
        "entrypoint": entrypoint,
        "submissionMode": "SidecarMode",
        "shutdownAfterJobFinishes": True,
        "ttlSecondsAfterFinished": ttl_seconds,
        "backoffLimit": backoff_limit,
        "rayClusterSpec": {"headGroupSpec": {"rayStartParams": head_params, "template": head},
                           "workerGroupSpecs": groups},
    }
    if runtime_env_yaml:
        spec["runtimeEnvYAML"] = runtime_env_yaml
    if active_deadline_seconds:
        spec["activeDeadlineSeconds"] = active_deadline_seconds
    return {"apiVersion": API, "kind": "RayJob", "metadata": {"name": name, "namespace": namespace,
                                                             "labels": dict(labels)}, "spec": spec}


def dashboard_lines(namespace: str, job: str) -> List[str]:
    """How a person reaches Ray's dashboard and job API of a running RayJob: a port-forward through the Kubernetes
    API (the way in kubectl already uses), to the head service KubeRay names <cluster>-head-svc."""
    return [f"  kubectl -n {namespace} get rayjob {job} -o jsonpath='{{.status.rayClusterName}}'   # the cluster",
            f"  kubectl -n {namespace} port-forward svc/<cluster>-head-svc {DASHBOARD_PORT}:{DASHBOARD_PORT}",
            f"  then http://localhost:{DASHBOARD_PORT} (dashboard) and `ray job list --address "
            f"http://localhost:{DASHBOARD_PORT}` (job API)"]
