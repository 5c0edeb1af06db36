"""Shared fixtures. Each example is synthesized once per test session (once per pytest-xdist worker): a CDK app
start costs seconds of jsii/node start-up."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict

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


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    """Tests marked ``long`` (the CDK CLI's own synth) go first: pytest-xdist hands out tests in collection order, so a
    long one collected last would run alone at the end while the other cores idle."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
