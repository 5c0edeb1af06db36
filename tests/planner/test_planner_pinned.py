"""--layout and --recompute: the layout a team already runs, with its memory, its step time and where it loses to the
tie group's pick; bad input is one line and exit 2."""

from __future__ import annotations

import json

import pytest

from fmcluster.planner.cli import main

BIG = "name: big\nregion: us-east-1\navailability_zone: us-east-1a\nnode_groups:\n" \
      "  - {name: gpu, instance_type: p5.48xlarge, count: 1024}\n"
SMALL = "name: small\nregion: us-east-1\navailability_zone: us-east-1a\nnode_groups:\n" \
        "  - {name: gpu, instance_type: p5.48xlarge, count: 8}\n"


@pytest.fixture
def big(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text(BIG)
    return str(f)


@pytest.fixture
def small(tmp_path):
    f = tmp_path / "small.yaml"
    f.write_text(SMALL)
    return str(f)


def test_metas_405b_layout_pinned_is_evaluated_against_the_pick(big, capsys, tmp_path):
    """Llama 3 Table 4's 8,192-GPU layout (TP 8, PP 16, interleaved), 16M-token steps."""
    argv = ["plan", big, "--model", "llama3-405b", "--global-batch-tokens", "16777216", "--layout",
            "tp=8,pp=16,vp=8,cp=1,dp=64", "--recompute", "selective"]
    assert main([*argv, "--json"]) == 0
    pinned = json.loads(capsys.readouterr().out)["jobs"][0]["pinned"]
    assert pinned["given"] == {"tp": 8, "pp": 16, "vp": 8, "cp": 1, "dp": 64}
    lay = pinned["layout"]
    assert (lay["tp"], lay["pp"], lay["vp"], lay["cp"], lay["dp"]) == (8, 16, 8, 1, 64)
    assert lay["recompute"] == "selective" and pinned["memory"]["fits"]
    assert pinned["estimate"]["seconds"]["value"] > 0 and "vs_pick" in pinned
    vs = pinned["vs_pick"]
    assert vs["in_tie_group"] and isinstance(vs["slower"], float)
    assert all({"term", "seconds_per_token", "share_of_pick"} <= set(r) for r in vs["losses"])
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "  pinned layout (--layout tp=8,pp=16,vp=8,cp=1,dp=64): tp=8, pp=16, vp=8 (interleaved), dp=64" in text
    assert "per token against the pick" in text
    out = tmp_path / "p.html"
    assert main([*argv, "--html", str(out)]) == 0
    assert "Pinned layout (--layout)" in out.read_text()


def test_a_pinned_layout_that_does_not_fit_says_by_how_much(small, capsys):
    assert main(["plan", small, "--model", "llama3-70b", "--layout", "tp=1,pp=1", "--recompute", "none"]) == 0
    text = capsys.readouterr().out
    assert "pinned layout (--layout tp=1,pp=1): tp=1, pp=1, dp=64" in text and "DOES NOT FIT" in text and "GiB over" in text


@pytest.mark.parametrize("extra, message", [
    (["--layout", "tp=3,pp=1"], "--layout: tp=3 does not divide 64 attention heads"),
    (["--layout", "tp=8,pp=3"], "--layout: tp x cp x pp x dp = "),
    (["--layout", "tp=8,pp=2,dp=2"], "--layout: tp x cp x pp x dp = 32, the group gpu has 64 GPUs"),
    (["--layout", "tp=16,pp=1"], "--layout: tp=16 spans more than one 8-GPU NVLink domain"),
    (["--layout", "tp=8,pp=1,vp=2"], "--layout: vp=2 needs pipeline parallelism"),
    (["--layout", "tp=8,zp=2"], "--layout: 'zp=2': give KEY=N pairs"),
    (["--layout", "tp=8,pp=x"], "--layout: pp='x' must be a whole number"),
    (["--layout", "pp=2"], "--layout: give at least tp and pp"),
    (["--layout", "tp=8,pp=1,ep=2"], "--layout: ep=2 needs a mixture of experts"),
    (["--layout", "tp=8,pp=2", "--recompute", "most"], "--recompute: 'most' is not one of none, selective, full"),
    (["--recompute", "full"], "--recompute: applies to a pinned layout; give --layout too"),
    (["--layout", "tp=8,pp=2,vp=2", "--framework", "deepspeed"], "--layout: vp=2: deepspeed runs plain 1F1B only"),
])
def test_bad_pins_are_one_line_and_exit_2(small, capsys, extra, message):
    assert main(["plan", small, "--model", "llama3-70b", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fmcluster: {message}") and len(err.strip().splitlines()) == 1 and "usage:" not in err
