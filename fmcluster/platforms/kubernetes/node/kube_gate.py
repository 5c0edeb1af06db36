"""The Kubernetes node gate: opens a node to work once its boot validation passed. Standard library only.

Every node of an fmcluster node group registers with the taint ``fmcluster.io/node-validation=pending:NoSchedule``
(the EKS managed node group sets it at registration, so the node is never schedulable untainted). This script runs
in a DaemonSet pod on each such node, with a service account that may patch nodes, and watches the node's boot
validation result, which ``node_bootstrap.sh`` renames into place when the validator ends (never half written):

- pass: remove the taint; condition ``FmclusterValidated=True``; event ``NodeValidationPassed``.
- fail, policy taint: set the taint's value to ``failed``; condition ``False`` with the failing checks; a Warning event.
- fail, policy report: remove the taint anyway, with the same condition and event (the failure is only reported).
- no result within ``--timeout`` of the node's creation: as a failure (reason ``NoResult``).

Kubelet starts before the validator ends (on the EKS AL2023 AMI the validation runs in a unit ordered after
nodeadm-run.service, which starts kubelet; docs/eks.md, "Boot order on AL2023"); the node is tainted from its
registration until this script has read a result, so nothing without a toleration of the taint is scheduled there
first. The kubelet itself cannot lift its own
taint (the NodeRestriction admission plugin forbids a node to change its taints), hence the separate identity.

With ``--adopt`` the gate also decides for a node that carries no taint of ours and no ``FmclusterValidated``
condition yet: nodes that could not register with the pending taint (SageMaker HyperPod refuses custom taints on
instance groups with deep health checks; HyperPod's own taint keeps them out of work while those checks run). A pass
sets the condition; a failure under policy taint adds the taint with the value ``failed``. Once the condition is set
the node is decided, so a taint an operator removed stays removed.

- fail, policy replace (SageMaker HyperPod): as taint, and when a hardware check failed (actions.HARDWARE_FAULTS) the
  label HyperPod replaces a node for, ``sagemaker.amazonaws.com/node-health-status=UnschedulablePendingReplacement``
  (SageMaker guide, "Manually quarantine, replace, or reboot a node").

    python3 kube_gate.py --node NAME --result /host/var/lib/fmcluster/validation.json [--policy taint|replace|report]
        [--timeout 2700] [--interval 10] [--adopt] [--api URL] [--once]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

TAINT_KEY = "fmcluster.io/node-validation"  # actions.TAINT_KEY (kept literal: this file runs alone in the gate pod)
PENDING, FAILED = "pending", "failed"
CONDITION = "FmclusterValidated"
COMPONENT = "fmcluster-node-gate"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
MESSAGE_MAX = 1000
# actions.HARDWARE_FAULTS and HyperPod's replacement label, kept literal for the same reason as TAINT_KEY
HARDWARE_FAULTS = frozenset({"hw.gpu.pci", "hw.smi.gpus", "hw.xid", "hw.ecc", "hw.pcie_link", "hw.nvlink"})
HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
PENDING_REPLACEMENT = "UnschedulablePendingReplacement"


class Decision:
    """What the gate does with a node: the taint value to keep (None removes it), the node condition, the event."""

    __slots__ = ("taint", "status", "reason", "message", "event_type", "labels")

    def __init__(self, taint: Optional[str], status: str, reason: str, message: str, event_type: str,
                 labels: Optional[Dict[str, str]] = None) -> None:
        self.taint, self.status, self.reason, self.message, self.event_type = taint, status, reason, message, event_type
        self.labels = dict(labels or {})

    def __repr__(self) -> str:
        return f"Decision(taint={self.taint!r}, status={self.status}, reason={self.reason})"


def decide(result: Optional[Dict[str, Any]], policy: str, timed_out: bool = False) -> Optional[Decision]:
    """The decision for a validation result (the report JSON), or None to keep waiting."""
    if result is None:
        if not timed_out:
            return None
        message = ("no boot validation result on the node in time: user data did not finish (see "
                   "/var/log/fmcluster/user-data.log and bootstrap.log on the node)")
        return _failed(policy, "NoResult", message)
    if result.get("verdict") == "pass":
        summary = result.get("summary") or {}
        return Decision(None, "True", "ValidationPassed",
                        f"boot validation passed at level {result.get('level', '?')}: "
                        f"{summary.get('pass', '?')} checks passed", "Normal")
    failing = [str(f) for f in result.get("failing") or []] or ["unknown"]
    details = []
    for c in result.get("checks") or []:
        if c.get("id") in failing:
            details.append(f"{c.get('id')}: {c.get('observed')} (expected {c.get('expected')})")
    message = "boot validation failed: " + ", ".join(failing)
    if result.get("error"):
        message += f" ({result['error']})"
    if details:
        message += "; " + "; ".join(details)
    replace = policy == "replace" and any(f in HARDWARE_FAULTS for f in failing)
    return _failed(policy, "ValidationFailed", message, replace=replace)


def _failed(policy: str, reason: str, message: str, replace: bool = False) -> Decision:
    return Decision(FAILED if policy in ("taint", "replace") else None, "False", reason, message[:MESSAGE_MAX],
                    "Warning", labels={HEALTH_LABEL: PENDING_REPLACEMENT} if replace else None)


def new_taints(current: List[Dict[str, Any]], decision: Decision) -> List[Dict[str, Any]]:
    """The node's taints after the decision: ours removed or set to the decision's value; others untouched."""
    others = [t for t in current if t.get("key") != TAINT_KEY]
    if decision.taint is None:
        return others
    return others + [{"key": TAINT_KEY, "value": decision.taint, "effect": "NoSchedule"}]


def read_result(path: str) -> Optional[Dict[str, Any]]:
    """The validator's report, or None while there is none. A file that is not a JSON object counts as a failure."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        return {"verdict": "fail", "failing": ["result"], "error": f"unreadable result file: {exc}"}
    if not isinstance(data, dict):
        return {"verdict": "fail", "failing": ["result"], "error": "the result file is not a JSON object"}
    return data


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Api:
    """Just enough of the Kubernetes API: in-cluster service-account credentials, or a plain URL (tests)."""

    def __init__(self, base: Optional[str] = None, timeout: float = 15.0) -> None:
        self.timeout = timeout
        self.headers: Dict[str, str] = {}
        self.context: Optional[ssl.SSLContext] = None
        if base:
            if not base.startswith(("http://", "https://")):
                raise ValueError(f"--api {base!r}: not an http(s) URL")
            self.base = base.rstrip("/")
            return
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        self.base = f"https://{host}:{port}"
        self.context = ssl.create_default_context(cafile=os.path.join(SA_DIR, "ca.crt"))

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        headers = dict(self.headers)
        token_file = os.path.join(SA_DIR, "token")
        if self.context is not None and os.path.exists(token_file):
            with open(token_file, encoding="utf-8") as fh:  # projected tokens rotate: read each time
                headers["Authorization"] = "Bearer " + fh.read().strip()
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        # the base is https://KUBERNETES_SERVICE_HOST or an http(s) URL checked above: no file: or custom schemes
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)  # noqa: S310
        with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as resp:  # noqa: S310
            raw = resp.read()
        return json.loads(raw) if raw else None


def apply(api: Api, node_name: str, decision: Decision, attempts: int = 5) -> Dict[str, Any]:
    """Set the node's taints (optimistic concurrency: a JSON patch that tests the resourceVersion it was computed
    from), its condition and an event. Returns the node as read before the change."""
    path = f"/api/v1/nodes/{node_name}"
    for attempt in range(attempts):
        node = api.call("GET", path)
        taints = node.get("spec", {}).get("taints") or []
        wanted = new_taints(taints, decision)
        labels = node.get("metadata", {}).get("labels") or {}
        relabel = {k: v for k, v in decision.labels.items() if labels.get(k) != v}
        if wanted == taints and not relabel:
            break
        patch = [{"op": "test", "path": "/metadata/resourceVersion", "value": node["metadata"]["resourceVersion"]},
                 {"op": "add", "path": "/spec/taints", "value": wanted}]
        if relabel:
            patch.append({"op": "add", "path": "/metadata/labels", "value": {**labels, **relabel}})
        try:
            api.call("PATCH", path, patch, "application/json-patch+json")
            break
        except urllib.error.HTTPError as exc:
            if exc.code not in (409, 422) or attempt == attempts - 1:  # 422: the test op failed (node changed)
                raise
            time.sleep(1 + attempt)
    now = _now()
    condition = {"type": CONDITION, "status": decision.status, "reason": decision.reason,
                 "message": decision.message, "lastHeartbeatTime": now, "lastTransitionTime": now}
    api.call("PATCH", f"{path}/status", {"status": {"conditions": [condition]}}, "application/strategic-merge-patch+json")
    event = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{node_name}.fmcluster-validation.", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node_name,
                           "uid": node.get("metadata", {}).get("uid", "")},
        "reason": "NodeValidationPassed" if decision.status == "True" else "NodeValidationFailed",
        "message": decision.message, "type": decision.event_type,
        "source": {"component": COMPONENT, "host": node_name},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }
    api.call("POST", "/api/v1/namespaces/default/events", event)
    return node


def has_our_taint(node: Dict[str, Any]) -> Optional[str]:
    for t in node.get("spec", {}).get("taints") or []:
        if t.get("key") == TAINT_KEY:
            return str(t.get("value", ""))
    return None


def node_age(node: Dict[str, Any]) -> float:
    created = node.get("metadata", {}).get("creationTimestamp")
    if not created:
        return 0.0
    then = datetime.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    return (datetime.datetime.now(datetime.timezone.utc) - then).total_seconds()


def decided(node: Dict[str, Any]) -> bool:
    """Whether the gate has set its condition on the node already."""
    return any(c.get("type") == CONDITION for c in node.get("status", {}).get("conditions") or [])


def step(api: Api, node_name: str, result_path: str, policy: str, timeout: float,
         adopt: bool = False) -> Tuple[bool, str]:
    """One look at the node: (done, what happened). Done once the node carries no pending taint of ours (with
    `adopt`: once an untainted node has the gate's condition)."""
    node = api.call("GET", f"/api/v1/nodes/{node_name}")
    ours = has_our_taint(node)
    undecided = adopt and ours is None and not decided(node)
    if ours != PENDING and not undecided:
        return True, f"nothing to do (taint {TAINT_KEY}={ours})" if ours else "nothing to do (no taint)"
    decision = decide(read_result(result_path), policy, timed_out=node_age(node) > timeout)
    if decision is None:
        return False, "waiting for the boot validation result"
    apply(api, node_name, decision)
    return True, f"{decision.reason}: taint {decision.taint or 'removed'}"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="kube_gate.py")
    ap.add_argument("--node", default=os.environ.get("NODE_NAME"), help="this pod's node (downward API)")
    ap.add_argument("--result", required=True, help="the validator's result file, as mounted from the host")
    ap.add_argument("--policy", choices=("taint", "replace", "report"), default="taint")
    ap.add_argument("--timeout", type=float, default=2700.0, help="seconds after the node's creation to give up")
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--adopt", action="store_true",
                    help="also decide for nodes without the pending taint that the gate has not decided yet")
    ap.add_argument("--api", help="API base URL (tests); default: in-cluster")
    ap.add_argument("--once", action="store_true", help="one look, then exit (tests)")
    args = ap.parse_args(argv)
    if not args.node:
        print("kube_gate: --node or NODE_NAME is required", file=sys.stderr)
        return 2
    api = Api(args.api)
    while True:
        try:
            done, what = step(api, args.node, args.result, args.policy, args.timeout, adopt=args.adopt)
            print(f"{_now()} {args.node}: {what}", flush=True)
        except (OSError, ValueError, KeyError) as exc:  # API hiccups: try again next round
            done = False
            print(f"{_now()} {args.node}: error {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        if args.once:
            return 0 if done else 1
        # a DaemonSet pod must keep running: once done, look again rarely (a replaced taint is acted on again)
        time.sleep(args.interval if not done else max(args.interval, 300.0))


if __name__ == "__main__":
    raise SystemExit(main())
