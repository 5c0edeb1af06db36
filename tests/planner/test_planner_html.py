"""`plan --html`: one self-contained page, rendered in a real headless Chromium."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from fmcluster.planner.cli import main

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def write_page(tmp_path: Path, *argv: str) -> Path:
    out = tmp_path / "plan.html"
    assert main(["plan", *argv, "--html", str(out)]) == 0
    return out


def test_page_is_self_contained_with_tables_diagram_and_chart(tmp_path, capsys):
    html = write_page(tmp_path, str(ROOT / "examples" / "default.yaml"), "--model", "llama3-8b").read_text()
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", html) and "@import" not in html and "url(" not in html
    for part in ("Memory fit per GPU", "Where one step's time goes", "Checkpoints:", "Data path", "Cost per hour",
                 'class="chart"', "Assumptions", "Efficiency model: the estimate beside the bound", "tokens per step",
                 "framework megatron: Megatron-LM / NeMo", "6 + 12/d bytes per parameter", "step estimate"):
        assert part in html, part
    if shutil.which("dot"):
        assert "EFA fabric" in html  # the inline diagram
    assert html.count("<table") >= 5


def test_page_without_a_model_has_cluster_and_cost(tmp_path, capsys):
    html = write_page(tmp_path, str(ROOT / "examples" / "hyperpod-slurm-p5.yaml")).read_text()
    assert "Cost per hour" in html and "SageMaker HyperPod with Slurm: controller" in html and "Training job" not in html


def png_size(data: bytes) -> tuple:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def png_distinct_bytes(data: bytes) -> int:
    """Distinct byte values in the decompressed image data: a blank page has a handful."""
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(idat)))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make setup installs Debian's chromium)")
def test_page_renders_in_headless_chromium(tmp_path, capsys):
    page = write_page(tmp_path, str(ROOT / "examples" / "pcs-p5.yaml"), "--model", "mixtral-8x7b")
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    shot = tmp_path / "plan.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1400,2000", page.as_uri()], capture_output=True,
                   timeout=120, check=True)
    data = shot.read_bytes()
    assert png_size(data) == (1400, 2000)
    assert len(data) > 50_000 and png_distinct_bytes(data) > 64
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert dom.count("<table") >= 5 and "Memory fit per GPU" in dom and "Expert all-to-all" in dom
    assert "Where one step" in dom and "<svg" in dom


def test_page_without_graphviz_says_why_and_still_has_the_tables(tmp_path, capsys, monkeypatch):
    from fmcluster.planner import diagram

    def missing(*_a, **_k):
        raise diagram.DiagramUnavailable("Graphviz's dot is not installed")

    monkeypatch.setattr(diagram, "render", missing)
    html = write_page(tmp_path, str(ROOT / "examples" / "default.yaml"), "--model", "llama3-8b").read_text()
    assert "No diagram: Graphviz&#x27;s dot is not installed" in html and "Memory fit per GPU" in html


def test_page_carries_the_orchestrators_notes(tmp_path, capsys):
    """What the text report says about the orchestrator (HyperPod on EKS: nodes without a controller, what
    CloudFormation cannot build) is on the page too."""
    from fmcluster.registry import load_spec

    spec = load_spec(ROOT / "examples" / "hyperpod-eks-p5.yaml")
    notes = spec.orchestrator_kind.plan_notes(spec)
    assert notes
    html = write_page(tmp_path, str(ROOT / "examples" / "hyperpod-eks-p5.yaml")).read_text()
    from html import escape

    for line in notes:
        assert f"<li>{escape(line)}</li>" in html
