"""What to do with an unhealthy node, by policy: fail (exit code only), drain (Slurm), taint (Kubernetes), report."""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional

from .node import run_command

TAINT_KEY = "fmcluster.io/node-validation"


def drain_argv(node: str, reason: str) -> List[str]:
    return ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"]


def taint_argv(node: str, kubeconfig: Optional[str] = None) -> List[str]:
    argv = ["kubectl"]
    if kubeconfig:
        argv += ["--kubeconfig", kubeconfig]
    return argv + ["taint", "nodes", node, f"{TAINT_KEY}=failed:NoSchedule", "--overwrite"]


def reason_for(failing: List[str]) -> str:
    text = "fmcluster validate: " + ",".join(failing)
    text = re.sub(r"[^\w.,:= -]", "_", text)
    return text[:200]


def act(policy: str, healthy: bool, failing: List[str], node_name: str, timeout: float = 30.0,
        env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Perform the policy's action; never raises. Returns {"policy", "result", "argv"?}."""
    if healthy:
        return {"policy": policy, "result": "none (healthy)"}
    if policy in ("report", "fail"):
        return {"policy": policy, "result": "none" if policy == "report" else "exit code 1"}
    if policy == "drain":
        argv = drain_argv(node_name, reason_for(failing))
    elif policy == "taint":
        kubeconfig = (env or os.environ).get("KUBECONFIG") or next(
            (p for p in ("/var/lib/kubelet/kubeconfig", "/etc/kubernetes/kubelet.conf") if os.path.exists(p)), None)
        argv = taint_argv(node_name, kubeconfig)
    else:
        return {"policy": policy, "result": f"unknown policy {policy!r}"}
    res = run_command(argv, timeout, env)
    outcome = "done" if res.ok else f"FAILED ({res.why()})"
    return {"policy": policy, "result": outcome, "argv": argv}
