"""The CLI answers bad input with exit 2 and one line per problem — never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fmcluster.cli import main

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = str(ROOT / "examples" / "default.yaml")


@pytest.mark.parametrize("command", ["validate", "plan", "synth"])
@pytest.mark.parametrize(
    "content, words",
    [
        (None, "no such file"),
        ("", "empty"),
        ("::: not yaml :::\n  - [", "not valid YAML"),
        ("- 1\n- 2\n", "expected a mapping"),
        ("name: x1\nregion: us-east-1\navailability_zone: us-east-1a\nnode_groups: 3\n", "node_groups: "),
        ("name: x1\nregion: us-east-1\navailability_zone: us-east-1a\nnode_groups: []\ntypo: 1\n", "typo: unknown key"),
        ("name: x1\nregion: us-east-1\navailability_zone: us-east-1a\n"
         "node_groups: [{name: g, instance_type: p5.48xlarge, count: -1}]\n", "node_groups[0]"),
        ("name: x1\nregion: us-east-1\navailability_zone: us-east-1a\n"
         "node_groups: [{name: g, instance_type: p5.48xlarge, count: 2}]\n"
         "storage: {fsx: {data_repository_associations: [{file_system_path: /fsx/datasets, "
         "data_bucket_prefix: datasets/}]}}\n",
         "storage.fsx.data_repository_associations[0].file_system_path: /fsx/datasets is a path inside the file "
         "system, which nodes mount at /fsx: they would see it at /fsx/fsx/datasets; write /datasets"),
    ],
)
def test_bad_spec_exits_2_with_field_lines(tmp_path, capsys, command, content, words):
    f = tmp_path / "spec.yaml"
    if content is not None:
        f.write_text(content)
    out = tmp_path / "out"
    argv = [command, str(f)] + (["--out", str(out)] if command == "synth" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert not out.exists(), "nothing is written for a bad spec"


def test_usage_errors_exit_2(capsys):
    assert main(["nonsense"]) == 2
    assert main(["plan", DEFAULT, "--gradient-gb", "-1"]) == 2
    assert "--gradient-gb" in capsys.readouterr().err


def test_validate_ok(capsys):
    assert main(["validate", DEFAULT]) == 0
    assert "valid" in capsys.readouterr().out


def test_schema_is_json_schema_and_committed_copy_is_current(capsys):
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    schema = json.loads(printed)
    assert schema["additionalProperties"] is False and "node_groups" in schema["required"]
    committed = (ROOT / "schema" / "cluster.schema.json").read_text()
    assert json.loads(committed) == schema, "schema/cluster.schema.json is stale: run make templates"


def test_examples_point_editors_at_the_schema():
    for example in (ROOT / "examples").glob("*.yaml"):
        assert example.read_text().startswith("# yaml-language-server: $schema=../schema/cluster.schema.json"), example


def test_module_entry_point_never_prints_a_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    r = subprocess.run([sys.executable, "-m", "fmcluster", "validate", str(bad)], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "not valid YAML" in r.stderr and "Traceback" not in r.stderr


def test_plan_json(capsys):
    assert main(["plan", DEFAULT, "--json", "--gradient-gb", "10"]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["cluster"]["total"]["gpus"] == 16 and p["cluster"]["gradient_gb"] == 10


def test_synth_into_a_file_is_a_usage_error_not_a_traceback(tmp_path, capsys):
    target = tmp_path / "not-a-dir"
    target.write_text("keep me")
    assert main(["synth", "examples/default.yaml", "--out", str(target)]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert target.read_text() == "keep me"
