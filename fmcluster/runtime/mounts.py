"""The node's mount table, parsed once for every node-side reader (the validator's probes, the stores' mount helpers,
the HyperPod lifecycle): /proc/mounts as the kernel writes it (proc(5): fields separated by spaces, and a space, tab,
newline or backslash inside a field written as the octal escapes \\040, \\011, \\012, \\134), and /etc/fstab, which
fstab(5) lays out and escapes the same way. Standard library only."""

from __future__ import annotations

import re
from typing import List, NamedTuple, Sequence

_OCTAL = re.compile(r"\\([0-7]{3})")


class Mount(NamedTuple):
    source: str
    mount_point: str
    fstype: str
    options: str


def unescape(field: str) -> str:
    """A /proc/mounts field as the path it names (every octal escape decoded)."""
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse(text: str) -> List[Mount]:
    """The mounts in /proc/mounts order (later entries are mounted over earlier ones); malformed lines are skipped."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            found.append(Mount(unescape(fields[0]), unescape(fields[1]), fields[2],
                               fields[3] if len(fields) > 3 else ""))
    return found


def fstab_lines_on(lines: Sequence[str], mount_point: str) -> List[int]:
    """The indexes of the /etc/fstab lines that mount something on `mount_point` (comments and lines too short to
    name a mount point skipped)."""
    found = []
    for i, line in enumerate(lines):
        fields = line.split()
        if not line.lstrip().startswith("#") and len(fields) >= 2 and unescape(fields[1]) == mount_point:
            found.append(i)
    return found
