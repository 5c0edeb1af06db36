"""Parse nccl-tests output (all_reduce_perf, alltoall_perf, ...) as the binaries print it, in every form they print.

The format is nccl-tests' own (src/common.cu and src/util.cu): a header of `#` lines (`# nThread ... minBytes ...
maxBytes`, one `#  Rank  N Group  G Pid P on HOST device D [bus] NAME` line per rank, the two column header lines),
one line per message size, then `# Out of bounds values` and `# Avg bus bandwidth`. Newer versions print
`# Collective test starting: NAME` first and `# Collective test concluded: NAME` last. A size line is
`size count type redop root`, then for out-of-place and for in-place `time algbw busbw #wrong`, where:

- `root` is missing before nccl-tests 2.x, whose fourth column was the largest error (`error`), not a count;
- `#wrong` is `N/A` when results are not checked (`-c 0`), and printed with `%g` (1e+06 for a million);
- `-C 1` reports CPU time (`cputime`) in place of GPU time: the same columns;
- `-a` chooses how ranks' times are combined (average, min, max): the same columns;
- `-I 1` adds `i_min i_max i_p99 i_cv%` after each `#wrong` (per-iteration timing);
- `-S 1` appends the time of day, `YYYY-MM-DD HH:MM:SS`, to each line (two more words);
- `-T N` stops a collective that takes longer than N seconds and prints `HOST: Test timeout (Ns) FILE:LINE`.

The column header line says which columns there are; a log without it (a launcher that dropped `#` lines) is read
by its column count. A failed run prints `HOST: Test NCCL failure FILE:LINE 'reason'` (or `Test CUDA failure`) and
` .. HOST pid N: Test failure FILE:LINE`. Launchers may prefix every line (`[1,0]<stdout>:` from Open MPI's
--tag-output, `0: ` from srun --label); the prefix is dropped. A line that looks like a size line but cannot be
read is kept, with why, in the run's `unread`: dropping it silently would hide what the run measured.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

COLLECTIVES = ("all_reduce", "alltoall", "all_gather", "reduce_scatter")
_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:\s)")
_NAME = re.compile(r"\b(" + "|".join(COLLECTIVES) + r")_perf\b")
_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.*)$")
_FAILURE = re.compile(r"Test (?:NCCL |CUDA )?failure\b.*|NCCL failure\b.*|Test timeout \(\d+s\).*")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(\w+)")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}$|^\d{2}:\d{2}:\d{2}$")
_MAX_LINES = 200_000  # a log is read whole; this bounds what one bad file costs
_MAX_UNREAD = 20  # kept per run, with their reasons


class OutputError(ValueError):
    """The text is not nccl-tests output (bad input)."""


@dataclass(frozen=True)
class Layout:
    """Where a size line's values are: the word index of each placement's busbw and #wrong (or error), and whether
    the wrong column counts wrong elements (`#wrong`) or is an error magnitude (`error`, before 2.x)."""

    words: int  # without a timestamp
    busbw: Tuple[int, int]
    wrong: Tuple[int, int]
    counts_wrong: bool = True


def _layout(root: bool, per_iteration: bool, counts_wrong: bool = True) -> Layout:
    start = 5 if root else 4
    placement = 8 if per_iteration else 4  # time algbw busbw #wrong [i_min i_max i_p99 i_cv%]
    return Layout(start + 2 * placement, (start + 2, start + placement + 2), (start + 3, start + placement + 3),
                  counts_wrong)


# every layout nccl-tests prints, by its word count without a timestamp
_BY_WORDS = {lay.words: lay for lay in (_layout(True, False), _layout(False, False, counts_wrong=False),
                                        _layout(True, True), _layout(False, True))}


def header_layout(words: List[str]) -> Optional[Layout]:
    """The layout a column header line (`# size count type redop root time algbw busbw #wrong ...`) announces."""
    if words[:3] != ["size", "count", "type"] or "busbw" not in words:
        return None
    wrong = "#wrong" if "#wrong" in words else "error"
    return _layout("root" in words, "i_min" in words, counts_wrong=wrong == "#wrong")


@dataclass
class Row:
    size: int
    count: int
    dtype: str
    redop: str
    out_busbw: float
    in_busbw: float
    wrong: int  # wrong elements of both placements summed; 0 when results were not checked (N/A) or before 2.x

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
    unread: List[str] = field(default_factory=list)  # size lines that could not be read, each with why
    layout: Optional[Layout] = None

    @property
    def complete(self) -> bool:
        return self.avg_busbw is not None

    @property
    def hosts(self) -> List[str]:
        return sorted({h for _, h, _ in self.ranks})

    @property
    def ranks_per_host(self) -> int:
        """The fewest ranks any host of the run ran (0 without rank lines)."""
        counts = Counter(h for _, h, _ in self.ranks)
        return min(counts.values()) if counts else 0

    @property
    def device(self) -> Optional[str]:
        return self.ranks[0][2].strip() if self.ranks else None


def _number(token: str) -> float:
    return float(token)


def _wrong(word: str, counts: bool) -> int:
    if not counts or word == "N/A":
        return 0
    return int(float(word))  # %g: 3, or 1e+06


def _row(words: List[str], layout: Optional[Layout]) -> Tuple[Optional[Row], Optional[str]]:
    """(row, None), or (None, why) for a size line that cannot be read, or (None, None) for a line that is none."""
    if len(words) < 2 or not words[0].isdigit() or not words[1].isdigit():
        return None, None
    if len(words) >= 2 and all(_TIMESTAMP.match(w) for w in words[-2:]):
        words = words[:-2]  # -S 1: the time of day
    lay = layout if layout is not None and layout.words == len(words) else _BY_WORDS.get(len(words))
    if lay is None:
        expected = f"{layout.words} per the column header" if layout else f"one of {sorted(_BY_WORDS)}"
        return None, f"{len(words)} columns, expected {expected}"
    try:
        out_bus, in_bus = _number(words[lay.busbw[0]]), _number(words[lay.busbw[1]])
        wrong = sum(_wrong(words[i], lay.counts_wrong) for i in lay.wrong)
    except ValueError as e:
        return None, f"not a number ({e})"
    return Row(int(words[0]), int(words[1]), words[2], words[3], out_bus, in_bus, wrong), None


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
            announced = header_layout(stripped.lstrip("#").split())
            if announced is not None:
                current.layout = announced
            continue
        row, why = _row(stripped.split(), current.layout)
        if row is not None:
            current.rows.append(row)
        elif why is not None and len(current.unread) < _MAX_UNREAD:
            current.unread.append(f"{stripped[:120]!r}: {why}")
    if not runs:
        raise OutputError("no nccl-tests run found (no '# nThread ... minBytes ... maxBytes' header line)")
    return runs
