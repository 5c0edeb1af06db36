"""Metrics of an EKS cluster for the AMP managed scraper: node_exporter (with the validator's and the EFA
collector's textfiles from the node), dcgm-exporter on GPU nodes, kube-state-metrics, and the scraper's Prometheus
configuration. The series carry the labels fmcluster's rules and dashboards group by (cluster, node, node_group,
instance_type; job node / dcgm), as the host collectors of the other orchestrators write them.

The managed scraper discovers targets with kubernetes_sd_configs only and scrapes at most every 30 s (AMP user guide,
"Using an AWS managed collector"). https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-collector-how-to.html
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from fmcluster.platforms.kubernetes import devices, gate, kuberay, labels
from fmcluster.platforms.kubernetes.versions import DCGM_EXPORTER_IMAGE, KUBE_STATE_METRICS_IMAGE, NODE_EXPORTER_IMAGE
from fmcluster.runtime.observability import (
    DCGM_EXPORTER_PORT,
    NODE_EXPORTER_PORT,
    TEXTFILE_DIR,
    XID_COUNT_WINDOW_MS,
    dcgm_fields,
)

NAMESPACE = gate.NAMESPACE
MIN_SCRAPE_INTERVAL_S = 30
KSM_PORT = 8080
# kube-state-metrics watches only these (least privilege; no secrets or config maps)
KSM_RESOURCES = ("nodes", "pods", "jobs", "daemonsets", "deployments", "namespaces", "persistentvolumeclaims",
                 "persistentvolumes", "resourcequotas")
_API_GROUPS = {"nodes": "", "pods": "", "namespaces": "", "persistentvolumeclaims": "", "persistentvolumes": "",
               "resourcequotas": "", "jobs": "batch", "daemonsets": "apps", "deployments": "apps"}
RESTRICTED = {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534, "allowPrivilegeEscalation": False,
              "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def _meta(name: str) -> Dict[str, Any]:
    return {"name": name, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/name": name}}


def _daemonset(name: str, pod: Dict[str, Any]) -> Dict[str, Any]:
    selector = {"app.kubernetes.io/name": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": _meta(name),
            "spec": {"selector": {"matchLabels": selector},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
                     "template": {"metadata": {"labels": selector}, "spec": pod}}}


def node_exporter() -> Dict[str, Any]:
    """On every node, host network (the scraper reaches node-ip:9100 inside the nodes' security group), reading the
    host's /proc, /sys, / and the textfile directory read-only."""
    mounts = [("proc", "/proc", "/host/proc"), ("sys", "/sys", "/host/sys"), ("root", "/", "/host/root"),
              ("textfile", TEXTFILE_DIR, "/host/textfile")]
    return _daemonset("node-exporter", {
        "hostNetwork": True,
        "hostPID": False,
        "priorityClassName": "system-node-critical",
        "tolerations": devices.node_tolerations(),
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "node-exporter",
            "image": NODE_EXPORTER_IMAGE,
            "args": ["--path.procfs=/host/proc", "--path.sysfs=/host/sys", "--path.rootfs=/host/root",
                     "--collector.textfile.directory=/host/textfile", "--collector.filesystem.mount-timeout=5s",
                     f"--web.listen-address=:{NODE_EXPORTER_PORT}"],
            "ports": [{"name": "metrics", "containerPort": NODE_EXPORTER_PORT, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
            "securityContext": dict(RESTRICTED),
            "volumeMounts": [{"name": n, "mountPath": m, "readOnly": True, **({"mountPropagation": "HostToContainer"}
                                                                               if n == "root" else {})}
                             for n, _, m in mounts],
        }],
        "volumes": [{"name": n, "hostPath": {"path": p, "type": "DirectoryOrCreate" if n == "textfile" else "Directory"}}
                    for n, p, _ in mounts],
    })


def dcgm_exporter(gpu_instance_types: Sequence[str]) -> List[Dict[str, Any]]:
    """On GPU nodes: the field list the rules need and the kubelet's pod-resources socket (GPU metrics labelled with
    the pod using the GPU). The field list is the node's GPU architecture's, as the host collectors write it
    (runtime/observability/dcgm_fields.py: the shared fields, then the architecture's NVLink error counters and
    profiling fields), so one ConfigMap and DaemonSet per architecture, on the nodes of its instance types."""
    by_arch: Dict[str, List[str]] = {}
    texts: Dict[str, str] = {}
    for instance_type in sorted(set(gpu_instance_types)):
        text, arch = dcgm_fields.field_list(instance_type)
        by_arch.setdefault(arch or "shared", []).append(instance_type)
        texts[arch or "shared"] = text
    objects: List[Dict[str, Any]] = []
    for arch, types in sorted(by_arch.items()):
        objects += _dcgm_exporter_for(f"dcgm-exporter-{arch}", texts[arch], types)
    return objects


def _dcgm_exporter_for(name: str, fields: str, instance_types: Sequence[str]) -> List[Dict[str, Any]]:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name), "data": {"counters.csv": fields}}
    ds = _daemonset(name, {
        "hostNetwork": True,
        "priorityClassName": "system-node-critical",
        "nodeSelector": {labels.GPU_PRESENT: "true"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": labels.INSTANCE_TYPE, "operator": "In",
                                   "values": list(instance_types)}]}]}}},
        "tolerations": devices.node_tolerations(),
        "containers": [{
            "name": "dcgm-exporter",
            "image": DCGM_EXPORTER_IMAGE,
            # the Xid window the rules are written for, as install.sh runs the host exporter
            "args": ["-f", "/etc/dcgm-exporter/fmcluster/counters.csv", "-a", f":{DCGM_EXPORTER_PORT}",
                     "--xid-count-window-size", str(XID_COUNT_WINDOW_MS)],
            # every GPU of the node, through the NVIDIA container runtime, without claiming any
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                    {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
                    {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
            "ports": [{"name": "metrics", "containerPort": DCGM_EXPORTER_PORT, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
            # DCGM reads GPU counters through the driver's admin interfaces (as install.sh runs it)
            "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}, "allowPrivilegeEscalation": False},
            "volumeMounts": [{"name": "counters", "mountPath": "/etc/dcgm-exporter/fmcluster", "readOnly": True},
                             {"name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources",
                              "readOnly": True}],
        }],
        "volumes": [{"name": "counters", "configMap": {"name": name}},
                    {"name": "pod-resources", "hostPath": {"path": "/var/lib/kubelet/pod-resources"}}],
    })
    return [config, ds]


def kube_state_metrics(*, system_selector: Dict[str, str], node_labels: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """`node_labels`: node labels kube-state-metrics may export in kube_node_labels (it exports none by default)."""
    name = "kube-state-metrics"
    args = [f"--resources={','.join(KSM_RESOURCES)}", f"--port={KSM_PORT}"]
    if node_labels:
        args.append(f"--metric-labels-allowlist=nodes=[{','.join(node_labels)}]")
    rules: Dict[str, List[str]] = {}
    for r in KSM_RESOURCES:
        rules.setdefault(_API_GROUPS[r], []).append(r)
    selector = {"app.kubernetes.io/name": name}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"fmcluster-{name}"},
         "rules": [{"apiGroups": [g], "resources": sorted(rs), "verbs": ["list", "watch"]}
                   for g, rs in sorted(rules.items())]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"fmcluster-{name}"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"fmcluster-{name}"},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name),
         "spec": {"replicas": 1, "selector": {"matchLabels": selector},
                  "template": {"metadata": {"labels": selector}, "spec": {
                      "serviceAccountName": name,
                      "nodeSelector": dict(system_selector),
                      "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                      "containers": [{
                          "name": name, "image": KUBE_STATE_METRICS_IMAGE,
                          "args": args,
                          "ports": [{"name": "http-metrics", "containerPort": KSM_PORT}],
                          "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
                          "securityContext": dict(RESTRICTED),
                      }]}}}},
    ]


def exporter_objects(*, system_selector: Dict[str, str], gpu_instance_types: Sequence[str],
                     node_labels: Sequence[str] = (), tolerations: Sequence[Dict[str, str]] = ()) -> List[Dict[str, Any]]:
    """Everything the scraper collects from, in the gate's namespace (applied after it). `gpu_instance_types`: the GPU
    groups' instance types (dcgm-exporter runs on their nodes); `node_labels`: node labels kube-state-metrics exports;
    `tolerations`: the orchestrator's own taints the per-node exporters also run under."""
    objects = [node_exporter()]
    if gpu_instance_types:
        objects += dcgm_exporter(gpu_instance_types)
    for obj in objects:
        if obj["kind"] == "DaemonSet" and tolerations:
            obj["spec"]["template"]["spec"]["tolerations"] += [dict(t) for t in tolerations]
    return objects + kube_state_metrics(system_selector=system_selector, node_labels=node_labels)


def ray_job(cluster: str) -> Dict[str, Any]:
    """Ray's metrics agents: every pod KubeRay runs (head and workers, its ray.io/node-type label) on the port it names
    metrics, labelled with the node, the pod and the Ray cluster. Pods, not a Service: the head is behind two Services
    and a ServiceMonitor would count it twice (Ray docs, "Using Prometheus and Grafana", KubeRay)."""
    def pod_label(name: str) -> str:
        return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() or c == "_" else "_" for c in name)

    return {
        "job_name": "ray",
        "kubernetes_sd_configs": [{"role": "pod"}],
        "relabel_configs": [
            {"source_labels": [pod_label(kuberay.NODE_TYPE_LABEL), "__meta_kubernetes_pod_container_port_name"],
             "regex": f".+;{kuberay.METRICS_PORT_NAME}", "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_node_name"], "regex": "([^.]+).*", "replacement": "$1",
             "target_label": "node"},
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"source_labels": [pod_label(kuberay.CLUSTER_LABEL)], "target_label": "ray_io_cluster"},
            {"source_labels": [pod_label(kuberay.NODE_TYPE_LABEL)], "target_label": "ray_node_type"},
            {"target_label": "cluster", "replacement": cluster},
        ],
    }


def _label(node_label: str) -> str:
    """How Prometheus names a node label in service discovery (every character not [a-zA-Z0-9_] becomes _)."""
    return "__meta_kubernetes_node_label_" + "".join(c if c.isalnum() or c == "_" else "_" for c in node_label)


def _node_job(job: str, port: int, cluster: str, keep: str, instance_type_regex: str = "(.*)") -> Dict[str, Any]:
    return {
        "job_name": job,
        "honor_labels": True,  # the validator's textfile carries instance_type itself
        "kubernetes_sd_configs": [{"role": "node"}],
        "relabel_configs": [
            {"source_labels": [_label(keep)], "regex": ".+", "action": "keep"},
            {"source_labels": ["__meta_kubernetes_node_address_InternalIP"], "regex": "(.+)",
             "replacement": f"$1:{port}", "target_label": "__address__"},
            # node: the short host name, as the host collectors of the other orchestrators label it
            {"source_labels": ["__meta_kubernetes_node_name"], "regex": "([^.]+).*", "replacement": "$1",
             "target_label": "node"},
            {"source_labels": [_label(labels.GROUP)], "target_label": "node_group"},
            {"source_labels": [_label("node.kubernetes.io/instance-type")], "target_label": "instance_type",
             **({"regex": instance_type_regex} if instance_type_regex != "(.*)" else {})},
            {"target_label": "cluster", "replacement": cluster},
        ],
    }


# SageMaker HyperPod names instance types with an ml. prefix in node.kubernetes.io/instance-type; the series carry the
# EC2 name, as every other kind's (runtime/contract.py ec2_type).
ML_PREFIXED = r"(?:ml\.)?(.*)"


# A serving pod names the port its metrics are on (fmcluster/orchestrators/eks/serving.py); pods fmcluster does not
# template (the HyperPod Inference Operator's) are scraped on the engines' HTTP port, where vLLM and SGLang serve /metrics.
METRICS_PORT_LABEL = "fmcluster.io/metrics-port"
ENGINE_PORT = 8000


def _pod_label(pod_label: str) -> str:
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() or c == "_" else "_" for c in pod_label)


def _serving_jobs(cluster: str, namespace: str) -> List[Dict[str, Any]]:
    """The serving namespace's engines and frontends: their own metric names and model_name label, with the cluster,
    the pod and (eks) the worker pool the KEDA scalers select on."""
    common = [
        {"source_labels": ["__meta_kubernetes_pod_phase"], "regex": "Running", "action": "keep"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": [_pod_label("fmcluster.io/pool")], "regex": "(.+)", "target_label": "pool"},
        {"target_label": "cluster", "replacement": cluster},
    ]
    discovery = [{"role": "pod", "namespaces": {"names": [namespace]}}]
    labelled = _pod_label(METRICS_PORT_LABEL)
    return [
        {"job_name": "serving", "kubernetes_sd_configs": discovery, "relabel_configs": [
            {"source_labels": [labelled], "regex": ".+", "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_ip", labelled], "separator": ":", "regex": "(.+)",
             "target_label": "__address__"},
            *common]},
        {"job_name": "serving-engines", "kubernetes_sd_configs": discovery, "relabel_configs": [
            {"source_labels": [labelled], "regex": ".+", "action": "drop"},
            {"source_labels": ["__meta_kubernetes_pod_container_port_number"], "regex": str(ENGINE_PORT),
             "action": "keep"},
            *common]},
    ]


def scrape_config(*, cluster: str, interval_s: int, strip_ml_prefix: bool = False,
                  serving_namespace: Optional[str] = None) -> Dict[str, Any]:
    """The managed scraper's Prometheus configuration (`strip_ml_prefix`: SageMaker HyperPod nodes;
    `serving_namespace`: where a serving section's models run)."""
    interval = f"{max(MIN_SCRAPE_INTERVAL_S, interval_s)}s"
    types = ML_PREFIXED if strip_ml_prefix else "(.*)"
    config: Dict[str, Any] = {
        "global": {"scrape_interval": interval, "scrape_timeout": "20s"},
        "scrape_configs": [
            _node_job("node", NODE_EXPORTER_PORT, cluster, labels.GROUP, types),
            _node_job("dcgm", DCGM_EXPORTER_PORT, cluster, labels.GPU_PRESENT, types),
            ray_job(cluster),
            {
                "job_name": "kube-state-metrics",
                "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [NAMESPACE]}}],
                "relabel_configs": [
                    {"source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name",
                                       "__meta_kubernetes_pod_container_port_name"],
                     "regex": "kube-state-metrics;http-metrics", "action": "keep"},
                    {"target_label": "cluster", "replacement": cluster},
                ],
            },
        ],
    }
    if serving_namespace is not None:
        config["scrape_configs"] += _serving_jobs(cluster, serving_namespace)
    return config
