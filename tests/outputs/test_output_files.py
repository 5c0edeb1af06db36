"""Every command that writes a file the user names replaces only a file it wrote itself and nobody changed since,
unless --force; never the spec, even with --force; never anything but a regular file; and judges the path before it
does the work."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, List

import pytest

from fmcluster.cli import main

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "pcs-p5.yaml"

# command, the output option, the file name: one per command that writes a file
COMMANDS = [
    (["job", "nccl", "{spec}"], "--out", "nccl-tests.sbatch"),
    (["plan", "{spec}"], "--html", "plan.html"),
    (["diagram", "{spec}"], "--out", "cluster.dot"),
    (["diagram", "{spec}"], "--out", "cluster.png"),
    (["plan-rules", "{spec}", "--model", "llama3-70b"], "--out", "plan-rules.yaml"),
]
IDS = [f"{c[0]} {c[1]} {c[2]}" for c in COMMANDS]


def run(command: List[str], option: str, out: Path, spec: Path, *extra: str) -> int:
    return main([part.format(spec=spec) for part in command] + [option, str(out), *extra])


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    copy = tmp_path / "cluster.yaml"
    shutil.copy(SPEC, copy)
    return copy


@pytest.mark.parametrize("command, option, name", COMMANDS, ids=IDS)
def test_an_output_replaces_its_own_file_and_refuses_an_edited_or_foreign_one_without_force(
        tmp_path: Path, spec: Path, capsys: Any, command: List[str], option: str, name: str) -> None:
    if name.endswith(".png") and not shutil.which("dot"):
        pytest.skip("Graphviz's dot is not installed")
    out = tmp_path / name
    assert run(command, option, out, spec) == 0
    written = out.read_bytes()
    assert run(command, option, out, spec) == 0 and out.read_bytes() == written  # its own, unchanged: replaced
    out.write_bytes(written + b"\n")  # edited: the user's now
    capsys.readouterr()
    assert run(command, option, out, spec) == 2
    assert f"{option} {out}: exists and fmcluster did not write it, or it changed since; --force replaces it" \
        in capsys.readouterr().err
    assert out.read_bytes() == written + b"\n"
    assert run(command, option, out, spec, "--force") == 0 and out.read_bytes() == written
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["cluster.yaml", name]), "no temporary file left"


@pytest.mark.parametrize("command, option, name", COMMANDS[:1] + COMMANDS[2:3] + COMMANDS[4:], ids=IDS[:1] + IDS[2:3] + IDS[4:])
def test_the_spec_is_never_an_output_even_with_force(tmp_path: Path, spec: Path, capsys: Any,
                                                     command: List[str], option: str, name: str) -> None:
    before = spec.read_bytes()
    link = tmp_path / name
    link.symlink_to(spec)  # also through a link
    for target in (link,) if command[0] == "diagram" else (spec, link):  # diagram wants its own suffix
        assert run(command, option, target, spec, "--force") == 2
        assert "--force never replaces the spec" in capsys.readouterr().err
    assert spec.read_bytes() == before


def test_a_file_the_user_had_there_is_refused_before_any_work(tmp_path: Path, spec: Path, capsys: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import fmcluster.planner.report as report

    monkeypatch.setattr(report, "build", lambda *a, **k: pytest.fail("planned before judging --html"))
    page = tmp_path / "plan.html"
    page.write_text("<p>my notes</p>")
    assert main(["plan", str(spec), "--html", str(page)]) == 2
    assert "--force replaces it" in capsys.readouterr().err and page.read_text() == "<p>my notes</p>"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_anything_but_a_regular_file_is_refused_even_with_force(tmp_path: Path, spec: Path, capsys: Any) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["job", "nccl", str(spec), "--out", str(fifo), "--force"]) == 2
    assert "is not a regular file" in capsys.readouterr().err
    assert main(["job", "nccl", str(spec), "--out", str(tmp_path), "--force"]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_a_symlinked_output_writes_its_target_and_stays_a_link(tmp_path: Path, spec: Path) -> None:
    real = tmp_path / "real.sbatch"
    link = tmp_path / "nccl.sbatch"
    link.symlink_to(real)
    assert main(["job", "nccl", str(spec), "--out", str(link)]) == 0
    assert main(["job", "nccl", str(spec), "--out", str(link)]) == 0
    assert link.is_symlink() and real.read_text().startswith("#!/bin/bash\n# fmcluster-output sha256=")
