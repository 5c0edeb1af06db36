"""For the ParallelCluster tests: spec builders, the rendered configuration of a synthesized template,
placeholder ids for its CloudFormation references, and ParallelCluster's own schema gate."""

from __future__ import annotations

import atexit
import copy
import json
import select
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

from fmcluster.diff.pcluster import DISTINCT, PLACEHOLDERS, is_intrinsic, with_placeholders  # noqa: F401 (one home)
from fmcluster.registry import parse_spec
from fmcluster.spec import ClusterSpec

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = ROOT / "scripts" / "pcluster_validate.py"
UPDATE_CHECK = ROOT / "scripts" / "pcluster_update_check.py"
SERVE = ROOT / "scripts" / "pcluster_serve.py"

BASE: Dict[str, Any] = {
    "name": "pc-test",
    "region": "us-east-1",
    "availability_zone": "us-east-1a",
    "network": {"new_vpc": {"cidr": "10.0.0.0/16"}},
    "orchestrator": {"type": "parallelcluster"},
    "node_groups": [{"name": "gpu", "instance_type": "p5.48xlarge", "count": 2}],
}

def spec_data(**changes: Any) -> Dict[str, Any]:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return data


def make_spec(settings: Any = None, **changes: Any) -> ClusterSpec:
    """The base spec with top-level keys replaced; `settings` becomes orchestrator.parallelcluster."""
    data = spec_data(**changes)
    if settings is not None:
        data["orchestrator"] = {"type": "parallelcluster", "parallelcluster": settings}
    return parse_spec(data)


def cluster_resource(template: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    (found,) = [(k, v) for k, v in template["Resources"].items() if v["Type"] == "Custom::PclusterCluster"]
    return found


def configuration(template: Dict[str, Any]) -> Dict[str, Any]:
    return cluster_resource(template)[1]["Properties"]["ClusterConfiguration"]


def references(config: Any, path: str = "") -> List[Tuple[str, Any]]:
    """(path, intrinsic) for every CloudFormation reference in the configuration."""
    found: List[Tuple[str, Any]] = []
    if is_intrinsic(config):
        return [(path, config)]
    if isinstance(config, dict):
        for k, v in config.items():
            found += references(v, f"{path}.{k}" if path else k)
    elif isinstance(config, list):
        for i, v in enumerate(config):
            found += references(v, f"{path}[{i}]")
    return found


class _Gate:
    """One scripts/pcluster_serve.py per interpreter and test worker: ParallelCluster's import (about a second and a
    half) is paid once, not once per configuration. Answers are what the two scripts print and exit with
    (tests/orchestrators/parallelcluster/test_pc_schema_gate.py compares the two on the same configurations)."""

    _running: Dict[str, _Gate] = {}

    def __init__(self, python: Path) -> None:
        self.process = subprocess.Popen([str(python), str(SERVE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env={"PATH": "/usr/bin:/bin"})
        atexit.register(self.close)

    @classmethod
    def of(cls, python: Path) -> _Gate:
        gate = cls._running.get(str(python))
        if gate is None or gate.process.poll() is not None:
            gate = cls._running[str(python)] = cls(python)
        return gate

    def ask(self, request: Dict[str, Any], timeout: float = 120) -> Tuple[int, Dict[str, Any]]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.process.kill()
            raise AssertionError(f"pcluster_serve.py gave no answer within {timeout} s (exit {self.process.poll()})")
        reply = json.loads(line)
        return reply["rc"], reply["result"]

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def pcluster_validate(python: Path, config: Dict[str, Any], cluster_name: str, tmp_path: Path) -> Tuple[int, Dict[str, Any]]:
    """ParallelCluster's schema and offline validators on `config`: (exit code, JSON report)."""
    return _Gate.of(python).ask({"op": "validate", "config": config, "cluster_name": cluster_name})


def pcluster_update_check(python: Path, base: Dict[str, Any], target: Dict[str, Any], cluster_name: str,
                          tmp_path: Path) -> Tuple[int, Dict[str, Any]]:
    """ParallelCluster's own update checker (ConfigPatch) from `base` to `target`: (exit code, JSON report)."""
    return _Gate.of(python).ask({"op": "update", "base": base, "target": target, "cluster_name": cluster_name})


def pcluster_validate_script(python: Path, config: Dict[str, Any], cluster_name: str,
                             tmp_path: Path) -> Tuple[int, Dict[str, Any]]:
    """The same through scripts/pcluster_validate.py in a process of its own, as `make lint` and users run it."""
    path = tmp_path / f"{cluster_name}.json"
    path.write_text(json.dumps(config))
    r = subprocess.run([str(python), str(VALIDATOR), str(path), "--cluster-name", cluster_name],
                       capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    try:
        report = json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"pcluster_validate.py printed no JSON (exit {r.returncode}): {r.stderr[-2000:]}") from None
    return r.returncode, report


def pcluster_update_check_script(python: Path, base: Dict[str, Any], target: Dict[str, Any], cluster_name: str,
                                 tmp_path: Path) -> Tuple[int, Dict[str, Any]]:
    """The same through scripts/pcluster_update_check.py in a process of its own."""
    paths = []
    for name, config in (("base", base), ("target", target)):
        path = tmp_path / f"{cluster_name}-{name}.json"
        path.write_text(json.dumps(config))
        paths.append(str(path))
    r = subprocess.run([str(python), str(UPDATE_CHECK), *paths, "--cluster-name", cluster_name],
                       capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    try:
        report = json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"pcluster_update_check.py printed no JSON (exit {r.returncode}): {r.stderr[-2000:]}") from None
    return r.returncode, report
