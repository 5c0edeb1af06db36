"""Expand Slurm's compressed host lists (``gpu-st-p5-[1-3,7]``, ``ip-10-1-2-[08-10]``, ``a[1-2]-b[1-2]``, lists
joined by commas), as ``scontrol show hostnames`` does, without an RPC to slurmctld per job.

The format: a name holds bracketed ranges of numbers or single numbers separated by commas; a range keeps the width
of its low end when that is zero-padded (Slurm's hostlist syntax, slurm.conf(5), "NodeName"). Standard library only.
"""

from __future__ import annotations

from typing import List

MAX_HOSTS = 100_000  # what one list may expand to: a bound on a garbled or hostile input


class HostlistError(ValueError):
    pass


def _split_top(text: str) -> List[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in {text!r}")
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"unbalanced '[' in {text!r}")
    parts.append(text[start:])
    return [p for p in (p.strip() for p in parts) if p]


def _numbers(spec: str) -> List[str]:
    out: List[str] = []
    for part in spec.split(","):
        low, sep, high = part.strip().partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise HostlistError(f"bad range {part!r}")
        width = len(low) if low.startswith("0") else 0
        lo, hi = int(low), int(high) if sep else int(low)
        if hi < lo or hi - lo >= MAX_HOSTS:
            raise HostlistError(f"bad range {part!r}")
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out


def _expand_one(name: str) -> List[str]:
    open_ = name.find("[")
    if open_ < 0:
        return [name]
    close = name.find("]", open_)
    if close < 0:
        raise HostlistError(f"unbalanced '[' in {name!r}")
    prefix, rest = name[:open_], name[close + 1:]
    tails = _expand_one(rest)
    out = [prefix + n + t for n in _numbers(name[open_ + 1:close]) for t in tails]
    if len(out) > MAX_HOSTS:
        raise HostlistError(f"{name!r} expands to more than {MAX_HOSTS} hosts")
    return out


def expand(hostlist: str) -> List[str]:
    """Every host of a Slurm host list, in order."""
    hosts: List[str] = []
    for item in _split_top(hostlist):
        hosts.extend(_expand_one(item))
        if len(hosts) > MAX_HOSTS:
            raise HostlistError(f"the list expands to more than {MAX_HOSTS} hosts")
    return hosts
