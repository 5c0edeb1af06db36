"""`fmcluster synth --out DIR` replaces only an earlier synth's output and never a user's files."""

from __future__ import annotations

import json
import os
import shutil
import sys
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
        if os.environ.get("FAKE_FAILURE"):
            raise RuntimeError(os.environ["FAKE_FAILURE"].replace("OUTDIR", str(self.outdir)))
        (self.outdir / "manifest.json").write_text(json.dumps({"version": "48.0.0", "artifacts": {
            "fm-dev-network.assets": {"type": "cdk:asset-manifest", "properties": {"file": "fm-dev-network.assets.json"}},
            "fm-dev-network": {"type": "aws:cloudformation:stack", "additionalMetadataFile": "fm-dev-network.metadata.json",
                               "properties": {"templateFile": "fm-dev-network.template.json"}},
            "Tree": {"type": "cdk:tree", "properties": {"file": "tree.json"}}}}))
        (self.outdir / "cdk.out").write_text(json.dumps({"version": "48.0.0"}))
        (self.outdir / "tree.json").write_text("{}")
        (self.outdir / "fm-dev-network.template.json").write_text("{}")
        (self.outdir / "fm-dev-network.metadata.json").write_text("{}")
        (self.outdir / "fm-dev-network.assets.json").write_text(json.dumps({"version": "48.0.0", "files": {
            "0123abcd": {"source": {"path": "asset.0123abcd", "packaging": "zip"}}}}))
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


OUTPUT = ["manifest.json", "cdk.out", "tree.json", "fm-dev-network.template.json", "fm-dev-network.metadata.json",
          "fm-dev-network.assets.json", "asset.0123abcd"]


def test_an_earlier_synth_is_replaced(tmp_path: Path, synths: List[str]) -> None:
    out = tmp_path / "cdk.out"
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 0
    (out / "synth.lock").write_text("")  # the CDK CLI's own, while it reads the folder
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fmcluster")], "no staging left behind"


@pytest.mark.parametrize("name", ["asset.stale", "notes.template.json", "x-NagReport.csv"])
def test_an_entry_named_like_synth_output_that_its_manifest_does_not_name_is_refused(
        tmp_path: Path, synths: List[str], capsys: Any, name: str) -> None:
    out = tmp_path / "cdk.out"
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 0
    (out / name).write_text("mine")
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"it holds {name}, which no synth manifest there names" in err
    assert (out / name).read_text() == "mine" and len(synths) == 1


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


def test_a_refused_out_is_refused_before_the_cdk_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: Any) -> None:
    import fmcluster

    monkeypatch.delattr(fmcluster, "app", raising=False)
    monkeypatch.setitem(sys.modules, "fmcluster.app", None)  # importing it now fails
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 2
    assert "not the output of an earlier synth" in capsys.readouterr().err


def test_a_failure_without_a_report_names_no_staging_folder(tmp_path: Path, synths: List[str], capsys: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FAILURE", "cannot write OUTDIR/asset.1/x")
    assert main(["synth", str(DEFAULT), "--out", str(tmp_path / "cdk.out")]) == 1
    err = capsys.readouterr().err
    assert ".fmcluster-synth-" not in err and "cannot write <synth staging folder, removed>/asset.1/x" in err


def test_the_kept_report_replaces_its_own_earlier_copy_but_not_a_users_file_without_force(
        tmp_path: Path, synths: List[str], capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NAG", "1")
    out = tmp_path / "cdk.out"
    kept = tmp_path / "cdk.out.validation-report.json"
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 1
    assert json.loads(kept.read_text())["pluginReports"][0]["pluginName"] == "AwsSolutions"
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 1  # its own copy: replaced
    assert f"full report: {kept}" in capsys.readouterr().err
    kept.write_text("my notes")
    assert main(["synth", str(DEFAULT), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "full report not kept" in err and "--force replaces it" in err and "AwsSolutions-S1" in err
    assert kept.read_text() == "my notes"
    assert main(["synth", str(DEFAULT), "--out", str(out), "--force"]) == 1
    assert "pluginReports" in kept.read_text()
