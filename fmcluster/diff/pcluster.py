"""ParallelCluster's own verdict on a change of its cluster configuration.

ParallelCluster's CloudFormation provider runs its update checker (``ConfigPatch``) on every update of
``Custom::PclusterCluster``; a change its update policies refuse while the compute fleet runs fails the custom
resource, and with it the stack update. `fmcluster diff` asks the same checker before the deploy: the two
configurations, CloudFormation references replaced by ids of the right shape, go to ``scripts/pcluster_update_check.py``
in the interpreter that holds ParallelCluster (``make setup`` builds ``.venv-pcluster``; ``FMCLUSTER_PCLUSTER_PYTHON``
names another). Its answer is for a running compute fleet, the case a reviewer needs. When it cannot run, the report
says so and the change is not called safe.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from fmcluster.diff.findings import CONTROL_PLANE, NODES, Finding
from fmcluster.diff.groups import NodeUnit

CHECKER_TIMEOUT_S = 120
CHECKER_MAX_BYTES = 4 << 20
ROOT = Path(__file__).resolve().parents[2]  # the checkout fmcluster runs from (scripts/ and .venv-pcluster/ are there)
CHECKER = ROOT / "scripts" / "pcluster_update_check.py"
PYTHON_ENV = "FMCLUSTER_PCLUSTER_PYTHON"

# Ids of the right shape for what each key holds (ParallelCluster's id patterns: 8 or 17 lower-case characters,
# file system ids exactly 17); its checker cannot read CloudFormation intrinsics, CloudFormation resolves them first.
PLACEHOLDERS: Dict[str, str] = {
    "SubnetId": "subnet-0123456789abcdef0",
    "SubnetIds": "subnet-0123456789abcdef0",
    "SecurityGroups": "sg-0123456789abcdef0",
    "FileSystemId": "fs-0123456789abcdef0",
    "Policy": "arn:aws:iam::123456789012:policy/parallelcluster-placeholder",
    "Script": "s3://cdk-assets-123456789012-us-east-1/on_node_configured.sh",
    "Args": "placeholder-argument",
    "Name": "fmcluster-placement-group",
}
# Keys whose placeholder carries a digest of the reference it replaces, so that two configurations whose references
# differ (an asset's content hash) still differ for the checker.
DISTINCT = {"Script": "s3://placeholder-{digest}/script.sh", "Args": "placeholder-{digest}"}
_INTRINSICS = ("Ref", "Fn::GetAtt", "Fn::ImportValue", "Fn::Join", "Fn::Sub", "Fn::Select")


class PlaceholderError(KeyError):
    """A reference under a key that has no placeholder: the checker would see nothing there."""


def is_intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in _INTRINSICS


def with_placeholders(config: Any, key: str = "", distinct: bool = False) -> Any:
    """The configuration with every CloudFormation reference replaced by an id of the shape its key takes.
    `distinct`: script URLs and arguments get a placeholder derived from the reference itself."""
    if is_intrinsic(config):
        if key not in PLACEHOLDERS:
            raise PlaceholderError(f"no placeholder for a reference under {key!r}: {config}")
        if distinct and key in DISTINCT:
            digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
            return DISTINCT[key].format(digest=digest)
        return PLACEHOLDERS[key]
    if isinstance(config, dict):
        return {k: with_placeholders(v, k, distinct) for k, v in config.items()}
    if isinstance(config, list):
        return [with_placeholders(v, key, distinct) for v in config]
    return config


@dataclass
class Row:
    """One changed setting as the checker reports it."""

    path: List[str]  # e.g. ["Scheduling", "SlurmQueues[h100]", "ComputeResources[p5-48xlarge]"]
    parameter: str
    old: Any
    new: Any
    policy: str
    refused: bool
    reason: str = ""
    action: str = ""

    @property
    def queue(self) -> Optional[str]:
        return _named(self.path, "SlurmQueues", 1)

    @property
    def resource(self) -> Optional[str]:
        return _named(self.path, "ComputeResources", 2)


def _named(path: List[str], section: str, at: int) -> Optional[str]:
    """The name in ``Section[name]`` at position `at` of a checker path."""
    if len(path) > at and path[at].startswith(f"{section}[") and path[at].endswith("]"):
        return path[at][len(section) + 1:-1]
    return None


@dataclass
class Verdict:
    allowed: Optional[bool]  # None: the checker could not run
    rows: List[Row] = field(default_factory=list)
    unavailable: str = ""  # why the checker could not run


Runner = Callable[[Dict[str, Any], Dict[str, Any], str], Tuple[int, Dict[str, Any]]]


def checker_python() -> Optional[Path]:
    named = os.environ.get(PYTHON_ENV)
    if named:
        return Path(named)
    local = ROOT / ".venv-pcluster" / "bin" / "python"
    return local if local.exists() else None


def run_checker(base: Dict[str, Any], target: Dict[str, Any], cluster_name: str) -> Tuple[int, Dict[str, Any]]:
    """scripts/pcluster_update_check.py in ParallelCluster's interpreter, bounded in time and output."""
    import subprocess
    import tempfile

    python = checker_python()
    if python is None or not python.exists() or not CHECKER.is_file():
        raise CheckerUnavailable(f"ParallelCluster is not installed here (run `make setup`, or set {PYTHON_ENV} to a "
                                 "Python that has aws-parallelcluster)")
    with tempfile.TemporaryDirectory(prefix="fmcluster-pcluster-") as tmp:
        paths = [Path(tmp) / "base.json", Path(tmp) / "target.json"]
        for path, config in zip(paths, (base, target)):
            path.write_text(json.dumps(config))
        try:
            done = subprocess.run([str(python), str(CHECKER), *map(str, paths), "--cluster-name", cluster_name],
                                  capture_output=True, timeout=CHECKER_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CheckerUnavailable(f"ParallelCluster's update checker did not answer ({type(e).__name__})") from None
    if len(done.stdout) > CHECKER_MAX_BYTES:
        raise CheckerUnavailable("ParallelCluster's update checker printed more than expected")
    try:
        return done.returncode, json.loads(done.stdout.decode(errors="replace"))
    except ValueError:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise CheckerUnavailable(f"ParallelCluster's update checker failed: {tail[0][:200]}") from None


class CheckerUnavailable(Exception):
    pass


# Tests replace this with a long-lived checker (one ParallelCluster import per test worker).
RUNNER: List[Runner] = [run_checker]


def configuration(resource: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    config = ((resource or {}).get("Properties") or {}).get("ClusterConfiguration")
    return config if isinstance(config, dict) else None


def verdict(old: Dict[str, Any], new: Dict[str, Any]) -> Verdict:
    """What ParallelCluster's checker says of updating the cluster resource `old` to `new` while its fleet runs."""
    try:
        base = with_placeholders(configuration(old), distinct=True)
        target = with_placeholders(configuration(new), distinct=True)
    except PlaceholderError as e:
        return Verdict(None, unavailable=f"the configuration holds a reference fmcluster cannot stand in for ({e})")
    name = str((new.get("Properties") or {}).get("ClusterName") or "fmcluster-cluster")
    try:
        rc, answer = RUNNER[0](base, target, name)
    except CheckerUnavailable as e:
        return Verdict(None, unavailable=str(e))
    if rc not in (0, 1) or not isinstance(answer.get("changes"), list):
        errors = "; ".join(map(str, answer.get("errors", [])))[:300] or f"exit {rc}"
        return Verdict(None, unavailable=f"ParallelCluster's update checker could not read the configuration: {errors}")
    rows = []
    for c in answer["changes"]:
        check = str(c.get("check") or "")
        rows.append(Row([str(p) for p in c.get("path") or []], str(c.get("parameter")), c.get("old"), c.get("new"),
                        str(c.get("policy")), check in ("ACTION NEEDED", "FAILED"), str(c.get("reason") or ""),
                        str(c.get("action_needed") or "")))
    return Verdict(bool(answer.get("allowed")), rows)


PCLUSTER_UPDATE = "https://docs.aws.amazon.com/parallelcluster/latest/ug/using-pcluster-update-cluster-v3.html"
PCLUSTER_CFN = "https://docs.aws.amazon.com/parallelcluster/latest/ug/cfn-cluster-ops.html"
REFUSED_JOBS = ("untouched: the update is refused and rolled back; the way through stops the compute fleet (every "
                "running job) or, under QueueUpdateStrategy TERMINATE, kills the jobs on the nodes it removes")


def _refusal(row: Row) -> str:
    return (f"ParallelCluster refuses this update while the compute fleet runs: {row.parameter} {row.old} -> "
            f"{row.new} (update policy {row.policy}: {row.reason or 'refused'}); the custom resource fails and the "
            f"stack update rolls back. Way through: {row.action or 'stop the compute fleet first'}")


def apply(changes: Iterable[Any], units: Dict[str, NodeUnit], found: List[Finding]) -> None:
    """ParallelCluster's verdict on each changed cluster resource, over the findings its node groups already have:
    a refused change fails the deploy (on the groups it names, or on the cluster); a checker that cannot run leaves
    the change unverified, never safe."""
    for c in changes:
        if c.type != "Custom::PclusterCluster" or c.action != "modified":
            continue
        judged = verdict(c.old or {}, c.new or {})
        if judged.allowed is None:
            found.append(Finding(CONTROL_PLANE, c.where, "ParallelCluster's own update checker could not run, so "
                                 f"whether ParallelCluster accepts this update is unknown: {judged.unavailable}. Run "
                                 "`pcluster update-cluster --dryrun true` against the cluster before deploying",
                                 sources=[PCLUSTER_UPDATE]))
            continue
        for row in judged.rows:
            if not row.refused:
                continue
            mine = [u for u in units.values() if f"{u.stack}/{u.logical_id}" == c.where
                    and (row.queue is None or u.key.split("/")[2] == row.queue)
                    and (row.resource is None or u.key.split("/")[3] == row.resource)]
            if row.queue is None or not mine:
                found.append(Finding(CONTROL_PLANE, c.where, _refusal(row), sources=[PCLUSTER_UPDATE, PCLUSTER_CFN],
                                     fails=True))
                continue
            for u in mine:
                hits = [f for f in found if f.where == u.key and f.cls == NODES]
                for f in hits:
                    f.fails, f.jobs = True, REFUSED_JOBS
                    f.text += f". {_refusal(row)}"
                    f.sources = sorted(set(f.sources) | {PCLUSTER_UPDATE, PCLUSTER_CFN})
                if not hits:
                    found[:] = [f for f in found if f.where != u.key]  # "launched" was never going to happen
                    found.append(Finding(NODES, u.key, f"{u.describe()}: {_refusal(row)}", u.gpus, REFUSED_JOBS,
                                         [PCLUSTER_UPDATE, PCLUSTER_CFN], fails=True))
