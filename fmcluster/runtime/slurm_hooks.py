"""Programs fmcluster gives Slurm on a node (the job map's Prolog/Epilog, the health check), written whole, and the
shims a directory every node reads (ParallelCluster's shared /opt/slurm) holds for them."""

from __future__ import annotations

import os
import shlex
import tempfile


def shim_script(what: str, program: str) -> str:
    """A script that runs the node's own `program` when it has one and does nothing otherwise (`what` names it)."""
    program = shlex.quote(program)
    return f"""#!/bin/sh
# fmcluster: this node's Slurm {what} when it has one ({program}); nothing to do otherwise.
[ -x {program} ] && exec {program}
exit 0
"""


def write_executable(path: str, text: str) -> None:
    """`text` as an executable at `path`, renamed into place: slurmd never runs half a script."""
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".fmcluster-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o755)  # noqa: S103  slurmd (root) executes it; nothing secret in it
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
