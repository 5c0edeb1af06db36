"""Malformed YAML is one line with its position (exit 2), never a traceback; merge keys are supported."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fmcluster.cli import main
from fmcluster.registry import load_spec
from fmcluster.spec import SpecError
from fmcluster.spec.yaml_source import loader_class

SPEC = """name: fm-dev
region: us-east-1
availability_zone: us-east-1a
node_groups:
  - name: gpu
    instance_type: p5.48xlarge
    count: 2
"""


@pytest.mark.parametrize(
    "tail, words",
    [
        ("tags: {built: 2024-02-30}\n", "line 8, column 15: cannot read timestamp"),
        ("tags: {a: !!int abc}\n", "line 8, column 11: cannot read int"),
        ("tags: {a: !!float abc}\n", "line 8, column 11: cannot read float"),
        ("tags: {a: !!bool maybe}\n", "line 8, column 11: cannot read bool"),
        ("tags: !!map [1]\n", "line 8, column 7: expected a mapping node"),
        ("tags:\n  ? [1, 2]\n  : x\n", "found unhashable key"),
        ("tags: {a: " + "9" * 5000 + "}\n", "line 8, column 11: cannot read int"),
        ("tags: " + "[" * 3000 + "]" * 3000 + "\n", "nest"),
        ("tags:\n  a: 1\n  a: 2\n", "line 10, column 3: duplicate key 'a'"),
    ],
)
def test_malformed_yaml_is_one_line_with_its_position(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     tail: str, words: str) -> None:
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + tail)
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = err.splitlines()
    assert line.startswith(f"{f}: not valid YAML at line ") and words in line
    assert len(line) < 400


def test_deep_block_nesting_is_refused_not_a_crash(tmp_path: Path) -> None:
    deep = "".join(f"{'  ' * i}k{i}:\n" for i in range(1500)) + "  " * 1500 + "leaf: 1\n"
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + "tags:\n" + "".join("  " + line + "\n" for line in deep.splitlines()))
    with pytest.raises(SpecError) as e:
        load_spec(f)
    [line] = e.value.problems
    assert "not valid YAML" in line or "tags" in line


def test_merge_keys_are_supported_and_explicit_keys_override() -> None:
    text = SPEC.replace("node_groups:", "defaults: &g {instance_type: p5.48xlarge, count: 2}\nnode_groups:")
    data = yaml.load(text + "  - <<: *g\n    name: cpu\n    count: 3\n", Loader=loader_class())  # noqa: S506
    assert data["node_groups"][1] == {"instance_type": "p5.48xlarge", "count": 3, "name": "cpu"}


def test_duplicate_keys_are_refused_beside_a_merge() -> None:
    with pytest.raises(yaml.YAMLError, match="duplicate key 'x'"):
        yaml.load("b: &b {x: 1}\nc:\n  <<: *b\n  x: 2\n  x: 3\n", Loader=loader_class())  # noqa: S506


def test_the_c_loader_is_used_where_libyaml_is_present() -> None:
    if not yaml.__with_libyaml__:
        pytest.skip("PyYAML built without libyaml")
    assert issubclass(loader_class(), yaml.CSafeLoader)


def test_the_pure_python_loader_gives_the_same_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fmcluster.spec.yaml_source as source

    monkeypatch.setattr(source, "_with_libyaml", lambda: False)
    assert not issubclass(loader_class(), yaml.CSafeLoader)
    for tail, words in (("tags: {a: !!int abc}\n", "line 8, column 11: cannot read int"),
                        ("tags: " + "[" * 3000 + "]" * 3000 + "\n", "nest"),
                        ("tags:\n  a: 1\n  a: 2\n", "line 10, column 3: duplicate key 'a'")):
        f = tmp_path / "cluster.yaml"
        f.write_text(SPEC + tail)
        with pytest.raises(SpecError) as e:
            load_spec(f)
        assert words in e.value.problems[0]


def test_a_key_with_a_newline_stays_one_problem_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "cluster.yaml"
    for tail, start in (('tags: {"team\\nfake: line": x}\n', "tags.team\\nfake: line: the key holds characters"),
                        ('"bad\\nkey": 1\n', "bad\\nkey: unknown key")):
        f.write_text(SPEC + tail)
        assert main(["validate", str(f)]) == 2
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith(start), line


def test_a_huge_value_does_not_become_a_huge_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC.replace("name: fm-dev", "name: " + "x" * 100_000))
    assert main(["validate", str(f)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("name: ") and len(line) <= 400 and "more characters" in line
