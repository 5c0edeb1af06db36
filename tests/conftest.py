"""Shared fixtures. Each example is synthesized once per test session: a CDK app start
costs seconds of jsii/node start-up."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

Templates = Dict[str, Dict[str, Any]]


@pytest.fixture(scope="session")
def synth_example() -> Callable[[str], Templates]:
    """`synth_example("default")` → {stack name: template}, cached for the session."""
    from fmcluster.app import synthesize

    cache: Dict[str, Templates] = {}

    def get(name: str) -> Templates:
        if name not in cache:
            cache[name] = synthesize(EXAMPLES / f"{name}.yaml")
        return cache[name]

    return get


@pytest.fixture(scope="session")
def example_names() -> list:
    return sorted(p.stem for p in EXAMPLES.glob("*.yaml"))



# cfn-lint over every committed template takes most of a minute on one core; when the quality test that needs it is
# collected, it starts in a second process at once and runs beside the other tests.
CFN_LINT_TEST = "test_cfn_lint_reports_nothing"
_cfn_lint: Dict[str, Any] = {}


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: List[pytest.Item]) -> None:
    if any(item.name == CFN_LINT_TEST for item in items) and not _cfn_lint:
        out = tempfile.TemporaryFile(mode="w+")
        _cfn_lint["out"] = out
        _cfn_lint["process"] = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "cfn_lint_templates.py"), "--json"],
            stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)


@pytest.fixture(scope="session")
def cfn_lint_findings() -> Optional[List[str]]:
    """The background cfn-lint's findings (waits for it), or None when it was not started or failed."""
    process = _cfn_lint.get("process")
    if process is None:
        return None
    process.wait(timeout=900)
    out = _cfn_lint["out"]
    out.seek(0)
    text = out.read()
    if process.returncode not in (0, 1):
        pytest.fail(f"cfn-lint did not run: {text[-3000:]}")
    import json

    return list(json.loads(text.strip().splitlines()[-1]))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    process = _cfn_lint.get("process")
    if process is not None and process.poll() is None:
        process.kill()
