"""The README's first page, walked as a new user walks it: `fmcluster init` with a few flags, then validate, plan,
synth (with its summary) and the first job, all in a fresh folder, and the first job's preparation run on a stand-in
of the kind's default image (helpers/job_images.py): the job finds or builds its nccl-tests there. Each kind's tests
walk it with their own flags (tests/orchestrators/<kind>/test_first_run.py); the walk synthesizes once per kind."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List

from fmcluster.cli import main
from fmcluster.registry import load_spec
from helpers.job_images import Prepared, prepare


@dataclass
class Walk:
    spec_file: Path
    plan: str
    summary: Dict[str, Any]
    outputs: Dict[str, Any]  # the cluster stack's outputs, by logical id
    job: str
    prepared: Prepared  # the job's preparation on the kind's image: its nccl-tests directory, or how it failed


def walk(folder: Path, capsys: Any, flags: List[str]) -> Walk:
    spec_file = folder / "cluster.yaml"

    def run(*argv: str) -> str:
        code = main(list(argv))
        captured = capsys.readouterr()
        assert code == 0, f"fmcluster {' '.join(argv)}: exit {code}\n{captured.err}"
        return str(captured.out)

    run("init", str(spec_file), *flags)
    run("validate", str(spec_file))
    plan = run("plan", str(spec_file))
    out = folder / "cdk.out"
    summary = json.loads(run("synth", str(spec_file), "--out", str(out), "--json"))
    cluster = next(s for s in summary["stacks"] if s["stack"].endswith("-cluster"))
    outputs = json.loads((out / cluster["template"]).read_text()).get("Outputs", {})
    job_file = folder / "first-job"
    run("job", "nccl", str(spec_file), "--out", str(job_file))
    job = job_file.read_text()
    prepared = prepare(job, load_spec(spec_file).orchestrator.type, folder / "first-job-node")
    assert prepared.rc == 0, f"the first job's preparation: exit {prepared.rc}\n{prepared.stderr}"
    return Walk(spec_file, plan, summary, outputs, job, prepared)


def output(outputs: Dict[str, Any], name: str) -> Dict[str, Any]:
    """The output with construct id `name`: its logical id is `name`, or its path's ids and CDK's 8-digit hash."""
    found = [v for k, v in outputs.items() if re.fullmatch(rf"[A-Za-z0-9]*?{name}([0-9A-F]{{8}})?", k)]
    assert len(found) == 1, f"{name}: {sorted(outputs)}"
    return found[0]


def flattened(value: Any) -> str:
    """An output's value as text, CloudFormation functions reduced to their literal parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(flattened(v) for v in value)
    if isinstance(value, dict):
        (fn, args), = value.items()
        if fn == "Fn::Join":
            return args[0].join(flattened(a) for a in args[1])
        return f"<{fn}>"
    return str(value)
