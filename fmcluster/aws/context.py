"""What every check receives, and the runner that turns checks into results."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence

from fmcluster.aws.results import ERROR, SKIP, CheckResult, Outcome, classify, error_code
from fmcluster.aws.session import AwsClients, max_attempts

if TYPE_CHECKING:
    from fmcluster.spec import ClusterSpec

Progress = Callable[[str], None]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class Context:
    spec: ClusterSpec
    aws: AwsClients
    account: Optional[str] = None
    now: Callable[[], datetime] = _utcnow
    cache: Dict[str, Any] = field(default_factory=dict)

    @property
    def region(self) -> str:
        return self.aws.region

    def client(self, service: str) -> Any:
        return self.aws.client(service)


@dataclass
class PreflightCheck:
    """One check to run: a stable id (``--skip`` matches it by prefix), a title, the service it calls
    (for fault messages) and the callable."""

    id: str
    title: str
    service: str
    run: Callable[[Context], Outcome]


def has_code(exc: BaseException, *codes: str) -> bool:
    return error_code(exc) in codes


def skipped(checks: Sequence[PreflightCheck], skip: Iterable[str]) -> List[str]:
    prefixes = [s for s in skip if s]
    return [p.id for p in checks if any(p.id == s or p.id.startswith(s.rstrip(":") + ":") for s in prefixes)]


def run_checks(
    ctx: Context,
    checks: Sequence[PreflightCheck],
    *,
    skip: Iterable[str] = (),
    progress: Optional[Progress] = None,
    command: str = "preflight",
) -> List[CheckResult]:
    """Run each check; any exception becomes that check's answer. A fatal fault in the first
    check (no credentials, unreachable endpoint) ends the run with that single result."""
    skip_ids = set(skipped(checks, skip))
    out: List[CheckResult] = []
    for i, p in enumerate(checks, 1):
        if p.id in skip_ids:
            out.append(CheckResult(p.id, p.title, SKIP, "skipped by --skip"))
            continue
        if progress:
            progress(f"{command}: [{i}/{len(checks)}] {p.title}")
        t0 = time.monotonic()
        fatal = False
        try:
            outcome = p.run(ctx)
        except Exception as e:  # noqa: BLE001 - every fault is an answer, never a traceback
            fault = classify(e, p.service, attempts=max_attempts())
            outcome, fatal = fault.outcome, fault.fatal
        out.append(CheckResult(p.id, p.title, outcome.status, outcome.observed, outcome.expected, outcome.remedy,
                               round(time.monotonic() - t0, 3)))
        if fatal and i == 1:
            break
    return out


def error_result(check_id: str, title: str, exc: BaseException, service: str) -> CheckResult:
    f = classify(exc, service, attempts=max_attempts())
    return CheckResult(check_id, title, f.outcome.status or ERROR, f.outcome.observed, f.outcome.expected,
                       f.outcome.remedy)


def paginate(client: Any, op: str, key: str, **kwargs: Any) -> List[Dict[str, Any]]:
    items: List[Dict[str, Any]] = []
    for page in client.get_paginator(op).paginate(**kwargs):
        items.extend(page.get(key, []))
    return items


def fmt_time(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return str(value)


def as_utc(value: Any) -> Optional[datetime]:
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
