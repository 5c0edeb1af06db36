"""Which of a node group's nodes a log tested, and which host its failures point at (`fmcluster accept --spec`).

A run on 2 of 16 nodes says nothing of the other 14: `accept` says how many were tested and how to test the rest
(`fmcluster job nccl --cover pairs`), and with `--strict` an incomplete coverage fails. When the log holds several
runs on different hosts (pairs), a host whose every run failed while other runs passed is the likely culprit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Sequence

FAIL = "fail"


@dataclass(frozen=True)
class Coverage:
    group: str
    group_nodes: int
    tested: List[str]  # hosts named in the log's rank lines
    suspects: List[str]  # hosts whose every run failed while another run passed

    @property
    def complete(self) -> bool:
        return len(self.tested) >= self.group_nodes

    def to_json(self) -> Dict[str, Any]:
        return {"group": self.group, "group_nodes": self.group_nodes, "tested": len(self.tested),
                "hosts": self.tested, "complete": self.complete, "suspect_hosts": self.suspects}

    def describe(self, spec_file: str) -> List[str]:
        lines = [f"coverage: {len(self.tested)} of {self.group_nodes} node(s) of group {self.group} tested"]
        if not self.tested:
            lines[0] = f"coverage: unknown, the log names no hosts (group {self.group} has {self.group_nodes} node(s))"
        if not self.complete:
            lines.append(f"  {self.group_nodes - len(self.tested)} node(s) not tested: `fmcluster job nccl {spec_file} "
                         f"--group {self.group} --cover pairs` tests every node (its header says how long)")
        if self.suspects:
            lines.append(f"  suspect host(s): {', '.join(self.suspects)} (every run on it failed, runs elsewhere passed)")
        return lines


def of(runs: Sequence[Any], group: str, group_nodes: int) -> Coverage:
    """`runs`: RunVerdicts (hosts, verdict)."""
    tested = sorted({h for r in runs for h in r.hosts})
    passed_somewhere = any(r.verdict != FAIL for r in runs)
    suspects = [h for h in tested if passed_somewhere and
                all(r.verdict == FAIL for r in runs if h in r.hosts)] if len(runs) > 1 else []
    return Coverage(group, group_nodes, tested, suspects)
