"""NodeValidationFailed reads the validator's textfile, which keeps saying 0 until the validator
runs again. The alert's runbook re-runs it with --prom before the node is resumed; this runs that very command on a
fixture node, failed then fixed, and reads the textfile the alert would see."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from typing import List

from fmcluster import observability as obs
from fmcluster.runtime.observability import VALIDATOR_PROM_FILE

from .conftest import REPO, SYSTEM_PATH, FixtureNode


def runbook_command() -> List[str]:
    [rule] = [r for _, r in obs.iter_rules() if r.get("alert") == "NodeValidationFailed"]
    runbook = " ".join(rule["annotations"]["runbook"].split())
    found = re.search(r"sudo PYTHONPATH=\S+ (python3 -m fmcluster\.runtime\.validate .*?--policy report)", runbook)
    assert found, f"the runbook gives no validator re-run: {runbook}"
    assert "scontrol update nodename=NODE state=resume" in runbook[found.end():], "resume after the re-run"
    return shlex.split(found.group(1))


def healthy_value(prom: str) -> str:
    [line] = [ln for ln in prom.splitlines() if ln.startswith("fmcluster_node_validation_healthy")]
    return line.split()[-1]


def run(node: FixtureNode, argv: List[str]) -> subprocess.CompletedProcess:
    env = {"PATH": f"{node.bin}:{SYSTEM_PATH}", "PYTHONPATH": str(REPO), "HOME": str(node.base)}
    cmd = [sys.executable, *argv[1:], "--root", str(node.root)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=str(node.base))


def test_the_runbook_rerun_rewrites_the_textfile_the_alert_reads(p5, tmp_path):
    argv = runbook_command()
    assert argv[argv.index("--prom") + 1] == VALIDATOR_PROM_FILE  # the file node_exporter serves
    prom = tmp_path / "fmcluster_node_validation.prom"
    argv[argv.index("--prom") + 1] = str(prom)
    argv[argv.index("--profile") + 1] = str(p5.profile())

    healthy_tool = (p5.bin / "nvidia-smi").read_text()
    p5.tool("nvidia-smi", "echo 'NVIDIA-SMI has failed' >&2; exit 9\n")  # the boot run finds a broken GPU stack
    assert run(p5, argv).returncode != 0
    assert healthy_value(prom.read_text()) == "0"  # NodeValidationFailed fires

    (p5.bin / "nvidia-smi").write_text(healthy_tool)  # the operator fixes the node and re-runs the validator
    out = run(p5, argv)
    assert out.returncode == 0, out.stdout + out.stderr
    assert healthy_value(prom.read_text()) == "1"  # the alert clears on the next scrape
