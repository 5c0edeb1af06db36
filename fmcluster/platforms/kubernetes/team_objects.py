"""Objects for namespaces that another component creates at a time of its own: a Deployment in fmcluster's namespace
runs node/kube_team_objects.py, which waits for each namespace and creates the objects there, so
CloudFormation never waits for the namespace (CDK's kubectl provider could wait at most 15 minutes, its Lambda
function's limit). The objects are PersistentVolumeClaims (bound to their volume) and ServiceAccounts.

The service account may only: read the named namespaces, read objects of the wanted kinds and names, and create
objects of the wanted kinds. Create cannot be limited to names or namespaces by RBAC ("You cannot restrict create or
deletecollection requests by their resource name", Kubernetes RBAC documentation), and a Role in a namespace that
does not exist yet cannot be created, so create is granted cluster-wide, and one ValidatingAdmissionPolicy per kind
(admissionregistration.k8s.io/v1, GA in Kubernetes 1.30) narrows it back: this service account's creates are refused
unless they are one of the wanted objects (namespace and name, and a claim's volume). docs/hyperpod-eks.md says more.
The script never updates or deletes anything."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

from fmcluster.platforms.kubernetes.versions import GATE_IMAGE

NAME = "fmcluster-team-objects"
SCRIPT = Path(__file__).resolve().parent / "node" / "kube_team_objects.py"
OBJECTS_FILE = "objects.json"
STATUS_DIR = "/run/fmcluster"
READY_FILE = f"{STATUS_DIR}/ready"
MOUNT = "/team-objects"
# the first pause while a namespace is missing and the longest (also the pause once every object is in place)
INTERVAL_S, MAX_INTERVAL_S = 10, 300
# what the script creates: kind -> resource (core API group, v1), in the order the rules and policies list them
RESOURCES = {"PersistentVolumeClaim": "persistentvolumeclaims", "ServiceAccount": "serviceaccounts"}


def objects(*, namespace: str, wanted: Sequence[Dict[str, Any]], node_selector: Mapping[str, str],
            tolerations: Sequence[Dict[str, str]] = ()) -> List[Dict[str, Any]]:
    """ServiceAccount, ClusterRole and binding, the admission policies and their bindings, ConfigMap (the script and
    the wanted objects) and the Deployment, in the order they must be applied, into `namespace` (which must exist).
    `wanted`: v1 PersistentVolumeClaims, each bound to its volume (`spec.volumeName`), and ServiceAccounts, created
    as given; `node_selector`: where the Deployment's pod runs (a group that exists from the start)."""
    if not wanted:
        raise ValueError("wanted: the Deployment needs at least one object to create")
    items = [dict(o) for o in wanted]
    for o in items:
        meta = o.get("metadata") or {}
        if o.get("apiVersion") != "v1" or o.get("kind") not in RESOURCES or not meta.get("namespace") \
                or not meta.get("name"):
            raise ValueError(f"wanted: {o.get('kind')} {meta.get('name')!r} is not a v1 "
                             f"{' or '.join(RESOURCES)} with a namespace and a name")
        if o["kind"] == "PersistentVolumeClaim" and not (o.get("spec") or {}).get("volumeName"):
            raise ValueError(f"wanted: claim {meta['name']!r} names no volume (spec.volumeName)")
    if len({(o["kind"], _key(o)) for o in items}) != len(items):
        raise ValueError("wanted: each kind and namespace/name once")
    if not node_selector:
        raise ValueError("node_selector: the Deployment needs the nodes it runs on")
    meta = {"name": NAME, "namespace": namespace, "labels": {"app.kubernetes.io/name": NAME}}
    data = {"kube_team_objects.py": SCRIPT.read_text(encoding="utf-8"), OBJECTS_FILE: json.dumps(items, indent=1)}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": NAME},
         "rules": rules(items)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": NAME},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]},
        *admission_policies(namespace=namespace, wanted=items),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta), "data": data},
        deployment(namespace=namespace, config_digest=_digest(data), node_selector=node_selector,
                   tolerations=tolerations),
    ]


def rules(wanted: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Get the wanted objects' namespaces, and per wanted kind: get by the wanted names, create (not limitable by name:
    see the module)."""
    namespaces = sorted({o["metadata"]["namespace"] for o in wanted})
    out: List[Dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"], "resourceNames": namespaces}]
    for kind, resource in RESOURCES.items():
        names = sorted({o["metadata"]["name"] for o in wanted if o["kind"] == kind})
        if names:
            out += [{"apiGroups": [""], "resources": [resource], "verbs": ["get"], "resourceNames": names},
                    {"apiGroups": [""], "resources": [resource], "verbs": ["create"]}]
    return out


def admission_policies(*, namespace: str, wanted: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per wanted kind, a policy and its binding: an object of that kind this service account creates must be one of
    `wanted` (its namespace and name; a claim also bound to its volume); nobody else's requests are looked at
    (matchConditions). One policy per kind, so each expression is type-checked against the one kind it reads."""
    claims = [o for o in wanted if o["kind"] == "PersistentVolumeClaim"]
    accounts = [o for o in wanted if o["kind"] == "ServiceAccount"]
    key = 'request.namespace + "/" + object.metadata.name'
    out: List[Dict[str, Any]] = []
    if claims:
        allowed = ", ".join(f"{_cel(_key(c))}: {_cel(c['spec']['volumeName'])}" for c in claims)
        out += _policy(f"{NAME}-claims", namespace=namespace, resource="persistentvolumeclaims",
                       allowed=f"{{{allowed}}}",
                       expression=f"({key}) in variables.allowed && has(object.spec.volumeName) && "
                                  f"object.spec.volumeName == variables.allowed[{key}]",
                       message=f"{NAME} may create only the claims it is configured with")
    if accounts:
        allowed = ", ".join(_cel(_key(a)) for a in accounts)
        out += _policy(f"{NAME}-service-accounts", namespace=namespace, resource="serviceaccounts",
                       allowed=f"[{allowed}]", expression=f"({key}) in variables.allowed",
                       message=f"{NAME} may create only the service accounts it is configured with")
    return out


def _policy(name: str, *, namespace: str, resource: str, allowed: str, expression: str,
            message: str) -> List[Dict[str, Any]]:
    user = f"system:serviceaccount:{namespace}:{NAME}"
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": name},
         "spec": {
             "failurePolicy": "Fail",
             "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                     "operations": ["CREATE"], "resources": [resource]}]},
             "matchConditions": [{"name": f"created-by-{NAME}",
                                  "expression": f"request.userInfo.username == {_cel(user)}"}],
             "variables": [{"name": "allowed", "expression": allowed}],
             "validations": [{"expression": expression, "message": message}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": name},
         "spec": {"policyName": name, "validationActions": ["Deny"]}},
    ]


def _key(obj: Dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def _cel(text: str) -> str:
    """A CEL string literal (JSON's escaping is a subset of CEL's for these names)."""
    return json.dumps(text)


def _digest(data: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def deployment(*, namespace: str, config_digest: str, node_selector: Mapping[str, str],
               tolerations: Sequence[Dict[str, str]] = ()) -> Dict[str, Any]:
    selector = {"app.kubernetes.io/name": NAME}
    container = {
        "name": "team-objects",
        "image": GATE_IMAGE,
        "command": ["python3", f"{MOUNT}/kube_team_objects.py", "--objects", f"{MOUNT}/{OBJECTS_FILE}",
                    "--ready-file", READY_FILE, "--interval", str(INTERVAL_S), "--max-interval", str(MAX_INTERVAL_S)],
        "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        # READY once every object is in place: `kubectl -n <namespace> get deployment fmcluster-team-objects` shows it
        "readinessProbe": {"exec": {"command": ["cat", READY_FILE]}, "periodSeconds": 30, "timeoutSeconds": 5},
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "script", "mountPath": MOUNT, "readOnly": True},
                         {"name": "status", "mountPath": STATUS_DIR}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(selector)},
        "spec": {
            "replicas": 1,
            # one writer at a time (creates are idempotent anyway: a second create gets AlreadyExists)
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(selector)},
            "template": {
                # a new script or new wanted objects start a new pod, which looks at once
                "metadata": {"labels": dict(selector), "annotations": {"fmcluster.io/config-digest": config_digest}},
                "spec": {
                    "serviceAccountName": NAME,
                    "nodeSelector": dict(node_selector),
                    **({"tolerations": [dict(t) for t in tolerations]} if tolerations else {}),
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [
                        {"name": "script", "configMap": {"name": NAME, "defaultMode": 0o444}},
                        {"name": "status", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
                    ],
                },
            },
        },
    }
