"""What to do with an unhealthy node, by policy: fail (exit code only), drain (Slurm), taint (Kubernetes), replace
(SageMaker HyperPod: a new instance for a hardware fault, drain otherwise), report."""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional

from .node import run_command

TAINT_KEY = "fmcluster.io/node-validation"
# Checks whose failure means the instance itself is faulty (a GPU off the bus or unseen, Xid errors, uncorrectable ECC
# or row remapping, a degraded PCIe or NVLink link): a new instance fixes them. Every other failure (a version, a
# setting, a mount) would fail the same way on a replacement, so `replace` keeps such a node drained instead.
HARDWARE_FAULTS = frozenset({"hw.gpu.pci", "hw.smi.gpus", "hw.xid", "hw.ecc", "hw.pcie_link",
                             "hw.nvlink"})
# The Slurm reason SageMaker HyperPod replaces a node for, with state fail ("Replace a node using Slurm",
# https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-resiliency-slurm-replace-faulty-instance.html).
HYPERPOD_REPLACE_REASON = "Action:Replace"


def drain_argv(node: str, reason: str) -> List[str]:
    return ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"]


def replace_argv(node: str) -> List[str]:
    return ["scontrol", "update", f"nodename={node}", "state=fail", f"reason={HYPERPOD_REPLACE_REASON}"]


def resume_argv(node: str) -> List[str]:
    return ["scontrol", "update", f"nodename={node}", "state=resume"]


def hardware_fault(failing: List[str]) -> bool:
    """Whether a new instance would fix the failure (a failing check is one of HARDWARE_FAULTS)."""
    return any(f in HARDWARE_FAULTS for f in failing)


def taint_argv(node: str, kubeconfig: Optional[str] = None) -> List[str]:
    argv = ["kubectl"]
    if kubeconfig:
        argv += ["--kubeconfig", kubeconfig]
    return argv + ["taint", "nodes", node, f"{TAINT_KEY}=failed:NoSchedule", "--overwrite"]


VALIDATE_PREFIX = "fmcluster validate: "


def reason_for(failing: List[str], prefix: str = VALIDATE_PREFIX) -> str:
    text = prefix + ",".join(failing)
    text = re.sub(r"[^\w.,:= -]", "_", text)
    return text[:200]


def act(policy: str, healthy: bool, failing: List[str], node_name: str, timeout: float = 30.0,
        env: Optional[Dict[str, str]] = None, reason: Optional[str] = None) -> Dict[str, Any]:
    """Perform the policy's action; never raises. Returns {"policy", "result", "argv"?}. `reason`: the drain's
    (default: reason_for(failing))."""
    if healthy:
        return {"policy": policy, "result": "none (healthy)"}
    if policy in ("report", "fail"):
        return {"policy": policy, "result": "none" if policy == "report" else "exit code 1"}
    if policy == "replace" and hardware_fault(failing):
        argv = replace_argv(node_name)
    elif policy in ("drain", "replace"):
        argv = drain_argv(node_name, reason or reason_for(failing))
    elif policy == "taint":
        kubeconfig = (env or os.environ).get("KUBECONFIG") or next(
            (p for p in ("/var/lib/kubelet/kubeconfig", "/etc/kubernetes/kubelet.conf") if os.path.exists(p)), None)
        argv = taint_argv(node_name, kubeconfig)
    else:
        return {"policy": policy, "result": f"unknown policy {policy!r}"}
    res = run_command(argv, timeout, env)
    outcome = "done" if res.ok else f"FAILED ({res.why()})"
    return {"policy": policy, "result": outcome, "argv": argv}
