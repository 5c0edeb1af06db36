"""Report renderings: text (a line per check with its remedy), JSON, Prometheus textfile (written atomically)."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import tempfile
from typing import Any, Dict, List, Optional

REPORT_SCHEMA = 1


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return str(v)


def to_text(report: Dict[str, Any]) -> str:
    lines: List[str] = [
        f"fmcluster node validation: {report['instance_type']} level={report['level']} host={report['hostname']}"
    ]
    for c in report["checks"]:
        req = "" if c["required"] else " (advisory)"
        line = f"{c['status'].upper():5} {c['id']:<24} [{c['layer']}] {_fmt(c['observed'])}"
        if c["status"] not in ("pass", "skip"):
            line += f" (expected {_fmt(c['expected'])})"
        line += f" {c['duration_s']:.2f}s{req}"
        if c.get("detail") and c["status"] in ("fail", "warn", "error"):
            line += f" - {c['detail']}"
        if c.get("remedy") and c["status"] in ("fail", "warn", "error"):
            line += f"\n      remedy: {c['remedy']}"
        lines.append(line)
    s = report["summary"]
    counts = ", ".join(f"{k} {s[k]}" for k in ("pass", "fail", "warn", "error", "skip"))
    lines.append(f"RESULT {report['verdict'].upper()}: {counts}; {report['duration_s']:.1f}s"
                 + (f"; failing: {', '.join(report['failing'])}" if report["failing"] else ""))
    if report.get("action"):
        lines.append(f"ACTION {report['action']['policy']}: {report['action']['result']}")
    return "\n".join(lines) + "\n"


def to_json(report: Dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False, default=str) + "\n"


def _label(v: Any) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def to_prom(report: Dict[str, Any]) -> str:
    base = f'instance_type="{_label(report["instance_type"])}",level="{_label(report["level"])}"'
    out: List[str] = [
        "# HELP fmcluster_node_check_status 1 for the status the check ended in (pass, fail, warn, skip, error).",
        "# TYPE fmcluster_node_check_status gauge",
    ]
    for c in report["checks"]:
        lab = f'check="{_label(c["id"])}",layer="{_label(c["layer"])}"'
        for st in ("pass", "fail", "warn", "skip", "error"):
            out.append(f'fmcluster_node_check_status{{{lab},status="{st}"}} {1 if c["status"] == st else 0}')
    out += ["# HELP fmcluster_node_check_duration_seconds How long the check took.",
            "# TYPE fmcluster_node_check_duration_seconds gauge"]
    for c in report["checks"]:
        lab = f'check="{_label(c["id"])}",layer="{_label(c["layer"])}"'
        out.append(f"fmcluster_node_check_duration_seconds{{{lab}}} {c['duration_s']:.3f}")
    out += [
        "# HELP fmcluster_node_validation_healthy 1 when every required check passed.",
        "# TYPE fmcluster_node_validation_healthy gauge",
        f"fmcluster_node_validation_healthy{{{base}}} {1 if report['verdict'] == 'pass' else 0}",
        "# HELP fmcluster_node_validation_failed_checks Required checks that did not pass.",
        "# TYPE fmcluster_node_validation_failed_checks gauge",
        f"fmcluster_node_validation_failed_checks{{{base}}} {len(report['failing'])}",
        "# HELP fmcluster_node_validation_duration_seconds Wall time of the last validation.",
        "# TYPE fmcluster_node_validation_duration_seconds gauge",
        f"fmcluster_node_validation_duration_seconds{{{base}}} {report['duration_s']:.3f}",
        "# HELP fmcluster_node_validation_last_run_timestamp_seconds When the last validation finished (unix time).",
        "# TYPE fmcluster_node_validation_last_run_timestamp_seconds gauge",
        f"fmcluster_node_validation_last_run_timestamp_seconds{{{base}}} {report['finished_unix']:.0f}",
    ]
    return "\n".join(out) + "\n"


def replaceable(path: str) -> Optional[str]:
    """Why `path` cannot take a file `write_atomic` writes (None when it can): its directory is missing, or something
    other than a regular file is there (a device such as /dev/full, a directory, a link, a pipe), which a rename over
    it would destroy."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        directory = os.path.dirname(os.path.abspath(path))
        return None if os.path.isdir(directory) else f"{directory} is not a directory"
    except OSError as exc:
        return f"cannot read it ({exc.strerror or exc})"
    if not stat.S_ISREG(mode):
        return "exists and is not a regular file (a device, directory, link, pipe or socket); give a file's path"
    return None


def write_atomic(path: str, text: str, regular_only: bool = False) -> None:
    """Write text to path via a temporary file in the same directory, synced, and a rename (node_exporter textfile
    rule); with `regular_only`, only where nothing or a regular file is (else OSError)."""
    if regular_only:
        problem = replaceable(path)
        if problem:
            raise OSError(errno.EEXIST, problem)
    directory = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix=".fmcluster-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _sync_directory(directory)


def _sync_directory(directory: str) -> None:
    """Make the rename durable (best effort: not every file system syncs a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# A failure summary goes into places with small limits (a bootstrap error message, a journal line): each line is cut.
MAX_SUMMARY_LINE = 300


def failing_checks(report: Dict[str, Any]) -> List[str]:
    """One line per check that failed or errored, required ones first: id, what was observed and expected, why."""
    bad = [c for c in report.get("checks") or [] if isinstance(c, dict) and c.get("status") in ("fail", "error")]
    bad.sort(key=lambda c: not c.get("required", True))
    lines = []
    for c in bad:
        line = f"{c.get('id', '?')} {c.get('status')}: {_fmt(c.get('observed'))} (expected {_fmt(c.get('expected'))})"
        if c.get("detail"):
            line += f" - {c['detail']}"
        lines.append(line if len(line) <= MAX_SUMMARY_LINE else line[:MAX_SUMMARY_LINE - 3] + "...")
    if not lines and report.get("verdict") != "pass":
        lines.append(f"verdict {report.get('verdict', 'unknown')}; failing: {', '.join(report.get('failing') or []) or '?'}")
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m fmcluster.runtime.report --failing REPORT.json``: the failing checks of a JSON report, a line each
    (for a node script's stderr and journal). Exit 0 with a line saying so when the report cannot be read."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] != "--failing":
        print("usage: python -m fmcluster.runtime.report --failing REPORT.json", file=sys.stderr)
        return 2
    try:
        with open(args[1], encoding="utf-8") as fh:
            report = json.load(fh)
        if not isinstance(report, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        print(f"no readable validation report at {args[1]}: {exc}")
        return 0
    print("\n".join(failing_checks(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
