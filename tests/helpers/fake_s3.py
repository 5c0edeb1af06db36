"""A local stand-in for the bucket nodes boot from: `aws s3 cp s3://BUCKET/KEY DEST` copies from a directory, and
`logger` writes to a file, so boot scripts run unchanged against it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

from fmcluster.constructs.runtime_archive import object_key, runtime_archive, sha256_of


def runtime_bucket(tmp_path: Path, bucket_name: str, runtime_files: Dict[str, str]) -> Dict[str, Any]:
    """A bucket directory holding one runtime archive of `runtime_files` (path: text) under its content-addressed
    key, a node root, and a bin directory with the fake `aws` (calls logged to aws.log) and `logger` (journal.log)."""
    bucket = tmp_path / "bucket"
    (bucket / "runtime").mkdir(parents=True)
    (bucket / "boot" / "groups").mkdir(parents=True)
    runtime = tmp_path / "src"
    for name, text in runtime_files.items():
        (runtime / name).parent.mkdir(parents=True, exist_ok=True)
        (runtime / name).write_text(text)
    archive = runtime_archive(runtime)
    digest = sha256_of(archive)
    (bucket / object_key(digest)).write_bytes(archive)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(f"#!/bin/bash\n# aws s3 cp --only-show-errors --region R s3://BUCKET/KEY DEST\n"
                                 f"echo \"$@\" >>{tmp_path}/aws.log\n"
                                 f"src=\"${{6#s3://{bucket_name}/}}\"\ncp \"{bucket}/$src\" \"$7\"\n")
    (bin_dir / "logger").write_text(f"#!/bin/sh\necho \"$@\" >>{tmp_path}/journal.log\n")
    for tool in ("aws", "logger"):
        (bin_dir / tool).chmod(0o755)
    root = tmp_path / "root"
    root.mkdir()
    return {"tmp": tmp_path, "bucket": bucket, "root": root, "digest": digest, "bin": bin_dir}
