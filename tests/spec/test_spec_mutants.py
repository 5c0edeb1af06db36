"""Property: any mutation of any example spec is answered with exit 0 or 2, never a traceback, and a refused spec
writes nothing (synth refuses it before creating --out)."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any, List, Tuple, Union

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fmcluster.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
Path_ = Tuple[Union[str, int], ...]

HOSTILE_VALUES = [
    None, True, False, "yes", 0, -1, 2**31, 10**30, 1e30, float("nan"), "", " ", "\x00", "${AWS::AccountId}",
    "aws:x", "a" * 5000, "2024-02-30", [], {}, [[[]]], {"k": {"k": {"k": None}}}, "p5.48xlarge", "cr-0", "/", "..",
]
TEXT_INSERTS = ["\n", ": ", "- ", "&a ", "*a", "<<: *a\n", "!!int ", "!!map ", "? [1]\n: x\n", "{", "]", "\t",
                "\x00", "%TAG ! tag:x\n", "---\n", "'", '"', "#", "9" * 5000]


def paths(data: Any, prefix: Path_ = ()) -> List[Path_]:
    found: List[Path_] = [prefix] if prefix else []
    if isinstance(data, dict):
        for k, v in data.items():
            found += paths(v, prefix + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            found += paths(v, prefix + (i,))
    return found


def replace(data: Any, path: Path_, value: Any, delete: bool = False) -> Any:
    data = copy.deepcopy(data)
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return data


@st.composite
def mutants(draw: Any) -> str:
    example = draw(st.sampled_from(EXAMPLES))
    text = example.read_text()
    if draw(st.booleans()):  # a change to the text itself: YAML syntax, tags, anchors, control characters
        at = draw(st.integers(0, len(text)))
        return text[:at] + draw(st.sampled_from(TEXT_INSERTS)) + text[at:]
    data = yaml.safe_load(text)
    path = draw(st.sampled_from(paths(data)))
    how = draw(st.sampled_from(["value", "delete", "unknown key"]))
    if how == "delete":
        data = replace(data, path, None, delete=True)
    elif how == "unknown key":
        data = replace(data, path[:-1] + ("colour",), "blue") if isinstance(path[-1], str) else data
    else:
        data = replace(data, path, draw(st.sampled_from(HOSTILE_VALUES)))
    return yaml.safe_dump(data, allow_unicode=True)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(text=mutants())
def test_every_mutant_of_every_example_is_exit_0_or_2_and_a_refusal_writes_nothing(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "cluster.yaml"
        spec.write_text(text, encoding="utf-8")
        out = Path(tmp) / "out"
        with pytest.MonkeyPatch.context() as mp:
            errors: List[str] = []
            mp.setattr("sys.stderr.write", errors.append, raising=False)
            rc = main(["validate", str(spec)])
        assert rc in (0, 2)
        assert not any("Traceback" in e for e in errors)
        if rc == 2:
            assert main(["synth", str(spec), "--out", str(out)]) == 2
            assert not out.exists() and sorted(p.name for p in Path(tmp).iterdir()) == ["cluster.yaml"]
