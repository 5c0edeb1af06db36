"""Malformed YAML is one line with its position (exit 2), never a traceback; merge keys are supported."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fmcluster.cli import main
from fmcluster.registry import load_spec
from fmcluster.spec import SpecError
from fmcluster.spec.base import clipped_repr
from fmcluster.spec.yaml_aliases import check_aliases
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
                        ("tags:\n  a: 1\n  a: 2\n", "line 10, column 3: duplicate key 'a'"),
                        ("tags: " + laughs(9) + "\n", "too many aliases at line 8, column 212")):
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


def laughs(levels: int, width: int = 9) -> str:
    """A billion-laughs block: level i is a list of `width` aliases of level i - 1 (width ** levels strings in all)."""
    rows = [f"&l0 [{', '.join(['lol'] * width)}]"]
    rows += [f"&l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return "[" + ", ".join(rows) + "]"


@pytest.mark.parametrize("tail", [
    "extra: " + laughs(9) + "\n",  # 9 ** 9 strings behind 550 bytes, as an unknown key
    "checkpoints: " + laughs(12, 6) + "\n",  # 6 ** 12, where a mapping belongs
    "tags: [&m0 {a: 1, b: 2}, " + ", ".join(f"&m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 9)}]}}" for i in range(1, 7))
    + "]\n",  # merge keys: each level merges the one below nine times
])
def test_an_alias_bomb_is_one_line_at_its_position_not_a_walk_of_its_expansion(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], tail: str) -> None:
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + tail)
    assert len(f.read_bytes()) < 1500
    assert main(["validate", str(f)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{f}: too many aliases at line 8, column ")
    assert "past 10,000 nodes" in line


def test_aliases_a_spec_uses_stay_accepted_and_the_bound_counts_what_they_add() -> None:
    node = yaml.compose("a: &a [1, 2, 3]\nb: [*a, *a]\n", Loader=loader_class())  # noqa: S506
    check_aliases(node, limit=8)  # two aliases of a 4-node list add 8 nodes
    with pytest.raises(yaml.YAMLError, match="past 7 nodes"):
        check_aliases(node, limit=7)


def test_a_recursive_alias_is_refused_with_its_position(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "cluster.yaml"
    f.write_text(SPEC + "tags: &t {a: *t}\n")
    assert main(["validate", str(f)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"{f}: recursive alias at line 8, column 7: ")


class _NeverShown:
    def __repr__(self) -> str:
        raise AssertionError("rendered past what the line shows")


def test_a_problem_line_renders_no_more_of_a_value_than_it_shows() -> None:
    huge = ["x"] * 1000 + [_NeverShown()]
    assert clipped_repr(huge, 80).endswith("... (more not shown)")
    assert len(clipped_repr({"k": huge}, 80)) <= 80
    assert clipped_repr({"a": [1, None, "b"]}) == repr({"a": [1, None, "b"]})  # what fits is repr's own text
