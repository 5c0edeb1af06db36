"""The pin the first job checks a downloaded NCCL or nccl-tests source against (fmcluster/acceptance/nccl-tests.sbatch,
NCCL_SOURCE_SHA256 / NCCL_TESTS_SOURCE_SHA256), computed from a local clone: the sha256 of the sorted lines
"f <x|-> <sha256 of the file> <path>" (x: executable) and "l <target> <path>" (symbolic links) of every file of the
commit's tree, which is what GitHub's archive of the commit unpacks to, whatever its compression.

    git clone https://github.com/NVIDIA/nccl && python3 scripts/nccl_source_digest.py nccl v2.30.4-1

A repository tool (it runs git), not part of the package."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from typing import List, Tuple


def tree_digest(repo: str, rev: str) -> Tuple[str, str]:
    """(the commit's id, the digest of its tree)."""
    def git(*args: str) -> bytes:
        return subprocess.run(["git", "-C", repo, *args], capture_output=True, check=True, timeout=300).stdout

    commit = git("rev-parse", f"{rev}^{{commit}}").decode().strip()
    entries: List[Tuple[str, str]] = []
    for record in git("ls-tree", "-r", "-z", commit).split(b"\0"):
        if not record:
            continue
        meta, raw_path = record.split(b"\t", 1)
        mode, kind, obj = meta.decode().split()
        path = raw_path.decode()
        if kind != "blob":
            raise SystemExit(f"{path}: a {kind} (submodule) is not in GitHub's archive; this tool does not pin those")
        blob = git("cat-file", "blob", obj)
        line = (f"l {blob.decode()} {path}\n" if mode == "120000" else
                f"f {'x' if mode == '100755' else '-'} {hashlib.sha256(blob).hexdigest()} {path}\n")
        entries.append((path, line))
    return commit, hashlib.sha256("".join(line for _, line in sorted(entries)).encode()).hexdigest()


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print("usage: nccl_source_digest.py CLONE REV", file=sys.stderr)
        return 2
    commit, digest = tree_digest(argv[0], argv[1])
    print(f"commit {commit}\nsha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
