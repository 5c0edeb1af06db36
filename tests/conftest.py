"""Shared fixtures. Each example is synthesized once per test run, shared between pytest-xdist workers: a CDK app
costs seconds of jsii/node start-up and synthesis."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import sys
import tempfile
from datetime import date
from pathlib import Path
from typing import Any, Callable, Dict, Iterable

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def _python3_without_shims() -> None:
    """Node scripts under test call `python3` from PATH, many times per run. Where that name is a version manager's
    shim (pyenv's is a chain of about fifteen bash processes per call), the shim costs more CPU than the scripts.
    Put the interpreter the shim would pick first on PATH: the same python3, without the chain, started with -S (no
    site module: node-side code is standard library only, and a developer interpreter's site-packages and .pth
    files can double each start's CPU). It is the base interpreter behind this virtual environment, so node scripts
    still see no project dependencies."""
    found = shutil.which("python3")
    if not found or "shims" not in Path(found).parts:
        return
    base = Path(os.path.realpath(sys.executable))
    direct = Path(tempfile.mkdtemp(prefix="fmcluster-python3-"))
    wrapper = direct / "python3"
    wrapper.write_text(f'#!/bin/sh\nexec "{base}" -S "$@"\n')
    wrapper.chmod(0o755)
    atexit.register(shutil.rmtree, direct, True)
    os.environ["PATH"] = f"{direct}{os.pathsep}{os.environ.get('PATH', '')}"


_python3_without_shims()


def _moto_default_images_only() -> None:
    """moto gives every region's EC2 backend its ~40 default images plus that region's "latest" and ECS-optimized
    catalogs (thousands of images), rebuilt in each mock and serialized whole by any unfiltered DescribeImages: most
    of the AWS tests' CPU. MOTO_AMIS_PATH (moto's setting, read when moto.ec2 is imported) makes it load one list: its
    own default images, read here from moto's package data. No test here depends on a "latest" catalog image."""
    if "MOTO_AMIS_PATH" in os.environ:
        return
    import gzip
    import importlib.util

    spec = importlib.util.find_spec("moto")
    if spec is None or spec.origin is None:
        return
    defaults = Path(spec.origin).parent / "ec2" / "resources" / "amis.json.gz"
    if not defaults.exists():
        return
    target = Path(tempfile.mkdtemp(prefix="fmcluster-moto-")) / "amis.json"
    target.write_bytes(gzip.decompress(defaults.read_bytes()))
    atexit.register(shutil.rmtree, target.parent, True)
    os.environ["MOTO_AMIS_PATH"] = str(target)


_moto_default_images_only()

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

Templates = Dict[str, Dict[str, Any]]


@pytest.fixture(scope="session")
def synth_example(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Templates]:
    """`synth_example("default")` → {stack name: template}, synthesized once per test run.

    pytest-xdist workers share the result through a file in the run's common temporary directory: the first worker
    to ask synthesizes under a file lock, the others wait for it and read the JSON (a template is plain JSON, so
    nothing is lost on the way)."""
    import fcntl
    import json

    from fmcluster.app import synthesize

    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "synthesized-examples"
    shared.mkdir(exist_ok=True)
    cache: Dict[str, Templates] = {}

    def load(name: str, *, wait: bool) -> bool:
        """The example into `cache`, synthesized here or read from the worker that did; False when another worker
        holds its lock and `wait` is off."""
        target = shared / f"{name}.json"
        with open(shared / f"{name}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                return False
            if target.exists():
                cache[name] = json.loads(target.read_text())
            else:
                cache[name] = synthesize(EXAMPLES / f"{name}.yaml")
                partial = target.with_suffix(".partial")
                partial.write_text(json.dumps(cache[name]))
                partial.rename(target)
        return True

    def get(name: str) -> Templates:
        if name not in cache:
            load(name, wait=True)
        return cache[name]

    def get_all(names: Iterable[str]) -> Dict[str, Templates]:
        """Several examples: those no other worker is synthesizing first, so two workers asking for the same list
        share the work instead of one waiting on each lock the other holds."""
        pending = [n for n in names if n not in cache]
        while pending:
            free = [n for n in pending if load(n, wait=False)]
            if not free:
                load(pending[0], wait=True)
            pending = [n for n in pending if n not in cache]
        return {n: cache[n] for n in names}

    get.all = get_all  # type: ignore[attr-defined]
    return get


# The day every test plans on: a plan prices the EKS control plane by the support its Kubernetes version is in that day
# (standard or extended), so without one day the figures would change as the calendar passes a version's dates.
PLAN_DAY = date(2026, 12, 2)


@pytest.fixture(autouse=True)
def _plans_run_on_one_day(monkeypatch: pytest.MonkeyPatch) -> None:
    from fmcluster.platforms.kubernetes import support

    monkeypatch.setattr(support, "today", lambda: PLAN_DAY)


@pytest.fixture(scope="session")
def example_names() -> list:
    return sorted(p.stem for p in EXAMPLES.glob("*.yaml"))


def pytest_configure(config: pytest.Config) -> None:
    # A worker holds hundreds of thousands of long-lived objects (aws_cdk's modules, botocore's and cfn-lint's schemas):
    # with the default young-generation threshold (700 allocations) the cyclic collector walks them again and again.
    gc.set_threshold(50_000, 10, 10)


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.freeze()  # what collection imported lives for the whole session: later collections skip it


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    """Tests marked ``long`` (the CDK CLI's own synth) go first: pytest-xdist hands out tests in collection order, so a
    long one collected last would run alone at the end while the other cores idle."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
