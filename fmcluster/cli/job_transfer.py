"""How the first job reaches a cluster reached only through SSM (no scp, no SSH from outside) and how its output comes
back for `fmcluster accept`: through S3 and the shared file system when an association imports from S3 and one exports
to it, else over the Session Manager session itself. Lines for the job's header (docs/access.md, "Moving files")."""

from __future__ import annotations

from typing import Any, List, Optional

from fmcluster.platforms.storage.fsx_lustre.settings import association_s3_path


def _first(associations: List[Any], events: str) -> Optional[Any]:
    return next((d for d in associations if "NEW" in getattr(d, events)), None)


def lines(spec: Any, script: str, output: str, run: str) -> List[str]:
    """Comment lines (without '# ') for a job `script` whose output file is `output`, started on a node by `run` (a
    command with {script} where the script's path goes)."""
    fsx = spec.storage.fsx
    associations = list(fsx.data_repository_associations) if fsx is not None else []
    bucket = "<data bucket>"
    inbound, outbound = _first(associations, "auto_import"), _first(associations, "auto_export")
    said = [f"Moving files on a cluster reached only through Session Manager (no scp): {script} and {output} travel"]
    if fsx is not None and inbound is not None and outbound is not None:
        s3_in = association_s3_path(spec.storage, inbound, created_bucket=bucket)
        s3_out = association_s3_path(spec.storage, outbound, created_bucket=bucket)
        node_in, node_out = fsx.node_path(inbound.file_system_path), fsx.node_path(outbound.file_system_path)
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
