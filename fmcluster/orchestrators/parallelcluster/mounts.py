"""``mounts.sh``: the stores ParallelCluster does not mount itself (a mount without its SharedStorage form, such as
Mountpoint for Amazon S3), mounted by the nodes from their custom action, before fmcluster's script.

ParallelCluster's SharedStorage types are EBS, EFS and Amazon's managed file systems (SharedStorage section of the
cluster configuration reference), so a store without such a form brings its `BootMount`: the client's install for
the cluster's ``Image.Os`` and the mount, each under its own timeouts. A failed mount only says so: on a compute node the
boot validator's required ``storage.mounts`` check, which runs next, judges it by ``validation.policy``; the head
node is never failed (its bootstrap, or an update, would fail with it). The script always exits 0.

It shares the custom action's one window (Slurm's ResumeTimeout, docs/parallelcluster.md "Deadlines"): the whole of it
runs under `BUDGET_S`, and it leaves its start and budget in `STAMP` so that fmcluster's action, which runs next,
counts its own budget from that start instead of from its own.

Pure: the mounts' values may be CDK tokens (the bucket's name), resolved when the node assets deployment writes the
object."""

from __future__ import annotations

from typing import Sequence

from fmcluster.platforms.storage.forms import Mount

BUDGET_S = 600  # every mount of the script together, downloads and installs included: half the action's default
# /run is a tmpfs: a stamp never outlives the boot it was written in. The action reads it (on_node_configured.sh).
STAMP = "/run/fmcluster/action-started"


def mounts_script(mounts: Sequence[Mount], *, os: str) -> str:
    """The script: every mount's boot lines for `os` (ParallelCluster's Image.Os), in the spec's order. A mount
    without a boot form, or whose client names no install for `os`, is refused."""
    lines = [
        "#!/bin/bash",
        "# fmcluster on AWS ParallelCluster: mount the stores ParallelCluster does not mount itself (the first script",
        "# of OnNodeConfigured, and of the head node's OnNodeUpdated). A failed mount is reported here and judged",
        "# by the boot validator (storage.mounts) on compute nodes; this script always exits 0.",
        "set -u",
        f"budget=${{FMCLUSTER_MOUNTS_BUDGET:-{BUDGET_S}}}",
        "# the action's window starts here: fmcluster's script, next in the sequence, counts its budget from this",
        f"stamp=${{FMCLUSTER_ACTION_STAMP:-{STAMP}}}",
        'if [[ "${1:-}" != --bounded ]]; then',
        '  mkdir -p "$(dirname "$stamp")" && printf \'%(%s)T %s\\n\' -1 "$budget" > "$stamp"',
        '  timeout --kill-after=10 "$budget" bash "$0" --bounded '
        '|| echo "fmcluster: the mounts ended unfinished after at most ${budget}s"',
        "  exit 0",
        "fi",
    ]
    for m in mounts:
        if m.boot is None:
            raise ValueError(f"mounts: store {m.store} has neither ParallelCluster's SharedStorage form nor a boot "
                             "form; nothing would mount it on ParallelCluster's nodes")
        lines.append(f"# {m.store}: {m.source} on {m.path} (a client's download URL may hold $(uname -m), one word)")
        lines.append("# shellcheck disable=SC2046")
        lines.append(m.boot.shell(image=os).rstrip("\n"))
    lines.append("exit 0")
    return "\n".join(lines) + "\n"
