"""Claims for namespaces that another component creates at a time of its own: a Deployment in fmcluster's namespace
runs fmcluster/runtime/kube_claims.py, which waits for each namespace and creates the claim there, so CloudFormation
never waits for the namespace (CDK's kubectl provider could wait at most 15 minutes, its Lambda function's limit).

The service account may only: read the named namespaces, read claims of the wanted names, and create claims. Create
cannot be limited to names or namespaces by RBAC ("You cannot restrict create or deletecollection requests by their
resource name", Kubernetes RBAC documentation), and a Role in a namespace that does not exist yet cannot be created,
so create is granted cluster-wide, and a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in
Kubernetes 1.30) narrows it back: this service account's creates are refused unless they are one of the wanted claims
(namespace, name and volume). docs/hyperpod-eks.md says more. The script never updates or deletes anything."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

from fmcluster.platforms.kubernetes.versions import GATE_IMAGE

NAME = "fmcluster-claims"
SCRIPT = Path(__file__).resolve().parents[2] / "runtime" / "kube_claims.py"
CLAIMS_FILE = "claims.json"
STATUS_DIR = "/run/fmcluster"
READY_FILE = f"{STATUS_DIR}/ready"
# the first pause while a namespace is missing and the longest (also the pause once every claim is in place)
INTERVAL_S, MAX_INTERVAL_S = 10, 300


def objects(*, namespace: str, claims: Sequence[Dict[str, Any]], node_selector: Mapping[str, str],
            tolerations: Sequence[Dict[str, str]] = ()) -> List[Dict[str, Any]]:
    """ServiceAccount, ClusterRole and binding, the admission policy and its binding, ConfigMap (the script and the
    wanted claims) and the Deployment, in the order they must be applied, into `namespace` (which must exist).
    `claims`: PersistentVolumeClaim objects, each bound to its volume (`spec.volumeName`), created as given;
    `node_selector`: where the Deployment's pod runs (a group that exists from the start)."""
    if not claims:
        raise ValueError("claims: the Deployment needs at least one claim to create")
    wanted = [dict(c) for c in claims]
    for c in wanted:
        meta = c.get("metadata") or {}
        if c.get("kind") != "PersistentVolumeClaim" or not meta.get("namespace") or not meta.get("name") \
                or not (c.get("spec") or {}).get("volumeName"):
            raise ValueError(f"claims: {c.get('kind')} {meta.get('name')!r} is not a PersistentVolumeClaim with a "
                             f"namespace, a name and spec.volumeName")
    if len({_key(c) for c in wanted}) != len(wanted):
        raise ValueError("claims: each namespace/name once")
    if not node_selector:
        raise ValueError("node_selector: the Deployment needs the nodes it runs on")
    meta = {"name": NAME, "namespace": namespace, "labels": {"app.kubernetes.io/name": NAME}}
    data = {"kube_claims.py": SCRIPT.read_text(encoding="utf-8"), CLAIMS_FILE: json.dumps(wanted, indent=1)}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": NAME},
         "rules": rules(wanted)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": NAME},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]},
        *admission_policy(namespace=namespace, claims=wanted),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta), "data": data},
        deployment(namespace=namespace, config_digest=_digest(data), node_selector=node_selector,
                   tolerations=tolerations),
    ]


def rules(claims: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Get the claims' namespaces and claims by name; create claims (not limitable by name: see the module)."""
    namespaces = sorted({c["metadata"]["namespace"] for c in claims})
    names = sorted({c["metadata"]["name"] for c in claims})
    return [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"], "resourceNames": namespaces},
            {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get"], "resourceNames": names},
            {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["create"]}]


def admission_policy(*, namespace: str, claims: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The policy and its binding: a claim this service account creates must be one of `claims` (its namespace and
    name, bound to its volume); nobody else's requests are looked at (matchConditions)."""
    user = f"system:serviceaccount:{namespace}:{NAME}"
    allowed = ", ".join(f"{_cel(_key(c))}: {_cel(c['spec'].get('volumeName', ''))}" for c in claims)
    key = 'request.namespace + "/" + object.metadata.name'
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": NAME},
         "spec": {
             "failurePolicy": "Fail",
             "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                     "operations": ["CREATE"],
                                                     "resources": ["persistentvolumeclaims"]}]},
             "matchConditions": [{"name": "created-by-fmcluster-claims",
                                  "expression": f"request.userInfo.username == {_cel(user)}"}],
             "variables": [{"name": "allowed", "expression": f"{{{allowed}}}"}],
             "validations": [{
                 "expression": f"({key}) in variables.allowed && has(object.spec.volumeName) && "
                               f"object.spec.volumeName == variables.allowed[{key}]",
                 "message": f"{NAME} may create only the claims it is configured with"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
         "metadata": {"name": NAME},
         "spec": {"policyName": NAME, "validationActions": ["Deny"]}},
    ]


def _key(claim: Dict[str, Any]) -> str:
    return f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"


def _cel(text: str) -> str:
    """A CEL string literal (JSON's escaping is a subset of CEL's for these names)."""
    return json.dumps(text)


def _digest(data: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def deployment(*, namespace: str, config_digest: str, node_selector: Mapping[str, str],
               tolerations: Sequence[Dict[str, str]] = ()) -> Dict[str, Any]:
    selector = {"app.kubernetes.io/name": NAME}
    container = {
        "name": "claims",
        "image": GATE_IMAGE,
        "command": ["python3", "/claims/kube_claims.py", "--claims", f"/claims/{CLAIMS_FILE}",
                    "--ready-file", READY_FILE, "--interval", str(INTERVAL_S), "--max-interval", str(MAX_INTERVAL_S)],
        "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        # READY once every claim is in place: `kubectl -n <namespace> get deployment fmcluster-claims` shows it
        "readinessProbe": {"exec": {"command": ["cat", READY_FILE]}, "periodSeconds": 30, "timeoutSeconds": 5},
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                            "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "script", "mountPath": "/claims", "readOnly": True},
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
                # a new script or new claims start a new pod, which looks at once
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
