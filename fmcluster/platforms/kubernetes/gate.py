"""The node gate's Kubernetes objects: a DaemonSet on the spec's node groups that runs node/kube_gate.py
(mounted from a ConfigMap) with the node's boot validation result (hostPath, read only), and a service account that
may read and patch nodes and their status and create events in the default namespace: nothing else. docs/eks.md
("The validation gate") explains why this is race-free and why the kubelet cannot do it itself (NodeRestriction)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Sequence

from fmcluster.platforms.kubernetes import devices, labels
from fmcluster.platforms.kubernetes.versions import GATE_IMAGE

NAMESPACE = "fmcluster-system"
NAME = "fmcluster-node-gate"
SCRIPT = Path(__file__).resolve().parent / "node" / "kube_gate.py"
STATE_DIR = "/var/lib/fmcluster"  # node_bootstrap.sh FMCLUSTER_STATE_DIR
RESULT = "validation.json"
# after the node's creation, how long the gate waits for a result before it treats the node as failed: user data
# and the boot-validation unit (runtime fetch, storage clients, mounts) and the standard level take minutes; the
# validator's own deadline is 60 s
NO_RESULT_TIMEOUT_S = 2700


def objects(*, groups: Sequence[str], policy: str, tolerations: Sequence[Dict[str, str]] = (),
            adopt: bool = False) -> List[Dict[str, Any]]:
    """Namespace, RBAC, ConfigMap and DaemonSet, in the order they must be applied. `tolerations`: taints of the
    orchestrator's own the gate must also run under (HyperPod's deep health checks); `adopt`: also decide for nodes
    that registered without the pending taint (kube_gate.py --adopt)."""
    if policy not in ("taint", "replace", "report"):
        raise ValueError(f"policy: {policy!r} is not taint, replace or report")
    if not groups:
        raise ValueError("groups: the gate needs the node groups it serves")
    meta = {"name": NAME, "namespace": NAMESPACE, "labels": {"app.kubernetes.io/name": NAME}}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": NAME},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
                   {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": NAME},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": NAME, "namespace": "default"},
         "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": NAME, "namespace": "default"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta),
         "data": {"kube_gate.py": SCRIPT.read_text(encoding="utf-8")}},
        daemonset(groups=groups, policy=policy, tolerations=tolerations, adopt=adopt),
    ]


def daemonset(*, groups: Sequence[str], policy: str, tolerations: Sequence[Dict[str, str]] = (),
              adopt: bool = False) -> Dict[str, Any]:
    selector = {"app.kubernetes.io/name": NAME}
    container = {
        "name": "gate",
        "image": GATE_IMAGE,
        "command": ["python3", "/gate/kube_gate.py", "--result", f"/host{STATE_DIR}/{RESULT}", "--policy", policy,
                    "--timeout", str(NO_RESULT_TIMEOUT_S)] + (["--adopt"] if adopt else []),
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "script", "mountPath": "/gate", "readOnly": True},
                         {"name": "state", "mountPath": f"/host{STATE_DIR}", "readOnly": True}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": dict(selector)},
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": dict(selector)},
                "spec": {
                    "serviceAccountName": NAME,
                    "priorityClassName": "system-node-critical",
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": labels.GROUP, "operator": "In", "values": sorted(groups)}]}]}}},
                    # the gate must run on a node its taint keeps everything else off, also once it says failed
                    "tolerations": devices.node_tolerations() + [dict(t) for t in tolerations],
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [
                        {"name": "script", "configMap": {"name": NAME, "defaultMode": 0o444}},
                        {"name": "state", "hostPath": {"path": STATE_DIR, "type": "DirectoryOrCreate"}},
                    ],
                },
            },
        },
    }
