"""How the first job reaches a cluster reached only through SSM (no scp, no SSH from outside) and how its output comes
back for `fmcluster accept`: through S3 and the shared file system when one of its links to S3 imports from S3 and one
exports to it (`Store.s3_links`), else over the Session Manager session itself. Lines for the job's header
(docs/access.md, "Moving files")."""

from __future__ import annotations

from typing import Any, List, Optional

from fmcluster.cli.shared_storage import file_system


def _first(links: List[Any], events: str) -> Optional[Any]:
    return next((link for link in links if "NEW" in getattr(link, events)), None)


def lines(spec: Any, script: str, output: str, run: str) -> List[str]:
    """Comment lines (without '# ') for a job `script` whose output file is `output`, started on a node by `run` (a
    command with {script} where the script's path goes)."""
    found = file_system(spec)
    bucket = "<data bucket>"
    links = found[0].s3_links(spec, created_bucket=bucket) if found is not None else []
    inbound, outbound = _first(links, "auto_import"), _first(links, "auto_export")
    said = [f"Moving files on a cluster reached only through Session Manager (no scp): {script} and {output} travel"]
    if inbound is not None and outbound is not None:
        s3_in, s3_out = inbound.s3, outbound.s3
        node_in, node_out = inbound.node_path, outbound.node_path
        return said + [
            "through S3 and the shared file system, which every node mounts:",
            f"  1. your machine: aws s3 cp {script} {s3_in}jobs/{script}",
            f"     (automatic import: it appears as {node_in}/jobs/{script} on every node)",
            f"  2. the node of the way in: mkdir -p {node_out}/jobs && cd {node_out}/jobs && "
            f"{run.format(script=f'{node_in}/jobs/{script}')}",
            f"     ({output} is written where the job starts; automatic export copies it to {s3_out}jobs/)",
            f"  3. your machine: aws s3 cp {s3_out}jobs/{output} .",
            *([f"  ({bucket}: the storage stack's DataBucketName output, {spec.name}-storage)"] if bucket in s3_in + s3_out
              else []),
        ]
    return said + [
        "over the session itself (no association here both imports from and exports to S3):",
        f"  1. on the node of the way in, in a directory every node shares: cat > {script}, paste this file, Ctrl-D; "
        f"then {run.format(script=script)}",
        "  2. your machine: aws ssm start-session --target <the node> --document-name AWS-StartInteractiveCommand "
        f"--parameters command=\"cat <that directory>/{output}\" > {output}",
    ]
