"""Parse nccl-tests output (all_reduce_perf, alltoall_perf, ...) as the binaries print it.

The format is nccl-tests' own (src/common.cu): a header of `#` lines (`# nThread ... minBytes ... maxBytes`, one
`#  Rank  N Group  G Pid P on HOST device D [bus] NAME` line per rank, the two column header lines), one line per
message size with the out-of-place and in-place `time algbw busbw #wrong` columns, then `# Out of bounds values`
and `# Avg bus bandwidth`. Versions before 2.x have no `root` column. Newer versions print
`# Collective test starting: NAME`. A failed run prints `HOST: Test NCCL failure FILE:LINE 'reason'` and
` .. HOST pid N: Test failure FILE:LINE`. Launchers may prefix every line (`[1,0]<stdout>:` from OpenMPI's
--tag-output, `0: ` from srun --label); the prefix is dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

COLLECTIVES = ("all_reduce", "alltoall", "all_gather", "reduce_scatter")
_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:\s)")
_NAME = re.compile(r"\b(" + "|".join(COLLECTIVES) + r")_perf\b")
_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.*)$")
_FAILURE = re.compile(r"Test (?:NCCL |CUDA )?failure\b.*|NCCL failure\b.*")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(\w+)")
_MAX_LINES = 200_000  # a log is read whole; this bounds what one bad file costs


class OutputError(ValueError):
    """The text is not nccl-tests output (bad input)."""


@dataclass
class Row:
    size: int
    count: int
    dtype: str
    redop: str
    out_busbw: float
    in_busbw: float
    wrong: int  # #wrong of both columns summed; 0 when validation was off (N/A)

    @property
    def busbw(self) -> float:
        """The lower of out-of-place and in-place: a degraded link shows in both, so the lower is the fabric's."""
        return min(self.out_busbw, self.in_busbw)


@dataclass
class Run:
    collective: Optional[str]
    ranks: List[Tuple[int, str, str]] = field(default_factory=list)  # (rank, host, device name)
    rows: List[Row] = field(default_factory=list)
    avg_busbw: Optional[float] = None
    out_of_bounds: Optional[int] = None
    failures: List[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.avg_busbw is not None

    @property
    def hosts(self) -> List[str]:
        return sorted({h for _, h, _ in self.ranks})

    @property
    def device(self) -> Optional[str]:
        return self.ranks[0][2].strip() if self.ranks else None


def _number(token: str) -> float:
    return float(token)


def _row(tokens: List[str]) -> Optional[Row]:
    # size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong
    if len(tokens) not in (12, 13) or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    offset = 5 if len(tokens) == 13 else 4
    try:
        out_bus, in_bus = _number(tokens[offset + 2]), _number(tokens[offset + 6])
        wrong = sum(int(t) if t.isdigit() else 0 for t in (tokens[offset + 3], tokens[offset + 7]))
    except ValueError:
        return None
    return Row(int(tokens[0]), int(tokens[1]), tokens[2], tokens[3], out_bus, in_bus, wrong)


def parse(text: str, collective: Optional[str] = None) -> List[Run]:
    """Every run in `text`, in order. A run starts at its `# nThread` line; its collective is the last
    `<name>_perf` named before or in its header (a launcher's command line, our jobs' marker, or nccl-tests'
    own `Collective test starting`), else `collective`."""
    lines = text.splitlines()
    if len(lines) > _MAX_LINES:
        raise OutputError(f"more than {_MAX_LINES} lines: not one nccl-tests log")
    runs: List[Run] = []
    named: Optional[str] = None
    current: Optional[Run] = None
    for raw in lines:
        line = _PREFIX.sub("", raw, count=1).rstrip()
        stripped = line.strip()
        found = _NAME.search(line)
        if found:
            named = found.group(1)
            if current is not None and not current.rows and current.collective in (None, collective):
                current.collective = named  # nccl-tests 2.15+ names itself after the nThread line
        if stripped.startswith("# nThread") or stripped.startswith("nThread"):
            current = Run(collective=named or collective)
            runs.append(current)
            named = None
            continue
        failure = None if stripped.startswith("#") else _FAILURE.search(line)
        if failure:
            if current is None:  # failed before it printed its header
                current = Run(collective=named or collective)
                runs.append(current)
            current.failures.append(stripped)
            continue
        if current is None:
            continue
        rank = _RANK.match(stripped)
        if rank:
            current.ranks.append((int(rank.group(1)), rank.group(2), rank.group(3)))
            continue
        avg = _AVG.match(stripped)
        if avg:
            current.avg_busbw = float(avg.group(1))
            continue
        oob = _OOB.match(stripped)
        if oob:
            current.out_of_bounds = int(oob.group(1))
            continue
        if stripped.startswith("#"):
            continue
        row = _row(stripped.split())
        if row is not None:
            current.rows.append(row)
    if not runs:
        raise OutputError("no nccl-tests run found (no '# nThread ... minBytes ... maxBytes' header line)")
    return runs
