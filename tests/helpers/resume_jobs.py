"""The resume-from-checkpoint example jobs under examples/jobs/ as the kinds' tests check them: the checkpoint settings
their scripts default to, and runs of the shell scripts against stand-ins for srun, scontrol and torchrun."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from fmcluster.registry import parse_spec
from fmcluster.spec import SpecError
from fmcluster.spec.checkpoints import paths

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "examples" / "jobs"
RESUME = JOBS / "resume"

# Stand-ins: each records its arguments, one call a line, in $CALLS; scontrol prints the node list one per line.
RECORDER = '#!/bin/bash\necho "$(basename "$0") $*" >> "$CALLS"\nexit "${STUB_RC:-0}"\n'
SCONTROL = '#!/bin/bash\necho "scontrol $*" >> "$CALLS"\nprintf "%s\\n" $STUB_NODES\n'


def shell_defaults(script: Path) -> Dict[str, str]:
    """NAME -> default of every ``NAME="${NAME:-default}"`` line of a shell script."""
    pattern = re.compile(r'^([A-Z_]+)="\$\{\1:-([^}]*)\}"$', re.M)
    return dict(pattern.findall(script.read_text()))


def expected_settings(spec: Any) -> Dict[str, str]:
    """What a job's checkpoint defaults must be for `spec`: its tier, directories, interval and retention."""
    where = paths(spec)
    assert where is not None, "the example spec has a checkpoints section"
    ck = spec.checkpoints
    out = {"TIER": ck.tier, "DURABLE_ROOT": where.durable, "INTERVAL_MINUTES": str(ck.interval_minutes),
           "KEEP": str(ck.keep)}
    if where.local is not None:
        out["LOCAL_ROOT"] = where.local
    return out


def example_data(name: str) -> Dict[str, Any]:
    return yaml.safe_load((ROOT / "examples" / f"{name}.yaml").read_text())


def problems_with_checkpoints(example: str, **section: Any) -> List[str]:
    """The spec problems of `example` with its checkpoints section replaced by `section`."""
    data = example_data(example)
    data["checkpoints"] = section
    try:
        parse_spec(data)
    except SpecError as e:
        return e.problems
    return []


def stubs(tmp_path: Path, *names: str) -> Path:
    """A bin directory of recording stand-ins for `names` (scontrol prints $STUB_NODES)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in names:
        path = bin_dir / name
        path.write_text(SCONTROL if name == "scontrol" else RECORDER)
        path.chmod(0o755)
    return bin_dir


def run(script: Path, tmp_path: Path, stub_names: Tuple[str, ...], env: Optional[Dict[str, str]] = None,
        args: Tuple[str, ...] = ()) -> Tuple[subprocess.CompletedProcess, List[str]]:
    """Run `script` with bash, the stand-ins first on PATH; returns the result and the recorded calls."""
    bin_dir = stubs(tmp_path, *stub_names)
    calls = tmp_path / "calls"
    calls.touch()
    base = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls), "STUB_NODES": "node-a node-b"}
    result = subprocess.run(["bash", str(script), *args], env={**base, **(env or {})}, capture_output=True, text=True,
                            timeout=60)
    return result, calls.read_text().splitlines()


def checkpoint(root: Path, step: int, complete: bool = True) -> Path:
    """A checkpoint of `step` under `root` as train.py leaves it: committed (marker, renamed) or still partial."""
    name = f"step-{step:08d}"
    path = root / (name if complete else f".partial-{name}")
    path.mkdir(parents=True)
    (path / "__0_0.distcp").write_bytes(b"shard")
    if complete:
        (path / "COMPLETE").write_text(f'{{"step": {step}}}')
    return path
