"""`fmcluster synth --out DIR` replaces only an earlier synth's output and never a user's files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, List

import pytest

from fmcluster.cli import main

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "examples" / "default.yaml"


class FakeApp:
    """Writes what a CDK cloud assembly holds (manifest.json, cdk.out, tree.json, a template, an asset folder)."""

    def __init__(self, outdir: str, fail_with_report: bool = False) -> None:
        self.outdir = Path(outdir)
        self.fail_with_report = fail_with_report

    def synth(self) -> None:
        (self.outdir / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": {}}))
        (self.outdir / "cdk.out").write_text(json.dumps({"version": "48.0.0"}))
        (self.outdir / "tree.json").write_text("{}")
        (self.outdir / "fm-dev-network.template.json").write_text("{}")
        (self.outdir / "fm-dev-network.assets.json").write_text("{}")
        (self.outdir / "asset.0123abcd").mkdir()
        if self.fail_with_report:
            (self.outdir / "validation-report.json").write_text(json.dumps({"pluginReports": [{
                "pluginName": "AwsSolutions", "violations": [{"ruleName": "AwsSolutions-S1", "description": "logs",
                                                              "violatingConstructs": [{"constructPath": "a/b"}]}]}]}))
            raise RuntimeError("Validation failed")


@pytest.fixture
def synths(monkeypatch: pytest.MonkeyPatch) -> List[str]:
    import fmcluster.app

    calls: List[str] = []

    def build_app(spec: Any, outdir: str, **_: Any) -> FakeApp:
        calls.append(outdir)
        return FakeApp(outdir, fail_with_report=os.environ.get("FAKE_NAG") == "1")

    monkeypatch.setattr(fmcluster.app, "build_app", build_app)
    return calls


def test_an_earlier_synth_is_replaced(tmp_path: Path, synths: List[str]) -> None:
    out = tmp_path / "cdk.out"
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 0
    (out / "asset.stale").mkdir()  # from an older synth: CDK output, replaced with the rest
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["manifest.json", "cdk.out", "tree.json", "fm-dev-network.template.json", "fm-dev-network.assets.json",
         "asset.0123abcd"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fmcluster")], "no staging left behind"


def test_a_folder_of_user_files_is_refused_untouched(tmp_path: Path, synths: List[str], capsys: Any) -> None:
    out = tmp_path / "existing"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "notes.txt" in err and "not the output of an earlier synth" in err
    assert (out / "notes.txt").read_text() == "mine" and synths == []


def test_an_earlier_synth_with_a_user_file_added_is_refused(tmp_path: Path, synths: List[str], capsys: Any) -> None:
    out = tmp_path / "cdk.out"
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 0
    (out / "my-notes.md").write_text("mine")
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 2
    assert "my-notes.md" in capsys.readouterr().err
    assert (out / "my-notes.md").read_text() == "mine"


def test_the_working_directory_is_never_replaced(tmp_path: Path, synths: List[str], capsys: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    spec = project / "cluster.yaml"
    shutil.copy(DEFAULT, spec)
    monkeypatch.chdir(project)
    for out in (".", str(project), str(tmp_path)):
        assert main(["synth", "cluster.yaml", "--out", out]) == 2
        assert "working directory" in capsys.readouterr().err
    assert spec.exists() and synths == []


def test_a_folder_holding_the_spec_is_never_replaced(tmp_path: Path, synths: List[str], capsys: Any) -> None:
    out = tmp_path / "cdk.out"
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 0
    spec = out / "cluster.yaml"  # a spec kept inside an earlier synth's folder
    shutil.copy(DEFAULT, spec)
    assert main(["synth", str(spec), "--out", str(out)]) == 2
    assert "holds the spec" in capsys.readouterr().err
    assert spec.exists()


def test_a_symlinked_out_replaces_its_target_and_stays_a_link(tmp_path: Path, synths: List[str]) -> None:
    real = tmp_path / "real-out"
    link = tmp_path / "cdk.out"
    link.symlink_to(real, target_is_directory=True)
    assert main(["synth", str(DEFAULT), "--out", str(link)]) == 0
    assert link.is_symlink() and (real / "manifest.json").is_file()
    assert main(["synth", str(DEFAULT), "--out", str(link)]) == 0
    assert link.is_symlink() and (real / "manifest.json").is_file()


def test_a_symlink_to_a_user_folder_is_refused_before_synthesizing(tmp_path: Path, synths: List[str]) -> None:
    real = tmp_path / "mine"
    real.mkdir()
    (real / "data.bin").write_text("x")
    link = tmp_path / "cdk.out"
    link.symlink_to(real, target_is_directory=True)
    assert main(["synth", str(DEFAULT), "--out", str(link)]) == 2
    assert synths == [] and (real / "data.bin").exists()


def test_a_cdk_nag_failure_names_a_report_that_exists(tmp_path: Path, synths: List[str], capsys: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NAG", "1")
    out = tmp_path / "cdk.out"
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "AwsSolutions-S1" in err
    named = [word.strip("()") for word in err.split() if word.strip("()").endswith("validation-report.json")]
    assert named and all(Path(n).is_file() for n in named)
    assert not out.exists(), "nothing half-written"
