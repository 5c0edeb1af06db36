"""What every check receives, and the runner that turns checks into results."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from fmcluster.aws.results import ERROR, SKIP, CheckResult, Fault, Outcome, classify, error_code
from fmcluster.aws.session import AwsClients, max_attempts
from fmcluster.spec.base import one_line

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
    deadline: Optional[float] = None  # time.monotonic() by which the whole run ends
    stopped: Optional[str] = None  # why later calls are pointless (an endpoint that never answers, no credentials)
    last_call: Optional[Tuple[str, str]] = None  # (IAM prefix, operation) of the latest AWS call
    _watched: Set[int] = field(default_factory=set)

    @property
    def region(self) -> str:
        return self.aws.region

    def client(self, service: str) -> Any:
        c = self.aws.client(service)
        if id(c) not in self._watched:
            self._watched.add(id(c))
            events = getattr(getattr(c, "meta", None), "events", None)
            if events is not None:
                events.register_first("before-call.*.*", self._note_call)  # before stubs answer
        return c

    def _note_call(self, model: Any = None, **_: Any) -> None:
        if model is not None:
            self.last_call = (model.service_model.signing_name, model.name)

    def service_of(self, exc: BaseException, default: str) -> str:
        """The service whose call raised `exc` (a check may call several), for naming its IAM action."""
        op = getattr(exc, "operation_name", None)
        if op and self.last_call and self.last_call[1] == op:
            return self.last_call[0]
        return default

    def remaining(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()


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


def bounded(fn: Callable[[], Any], seconds: float) -> Tuple[bool, Any, Optional[BaseException]]:
    """Run `fn` for at most `seconds`: (finished, its value, what it raised). A call still blocked in a socket when
    the time is up is left to its daemon thread; nothing waits for it."""
    box: Dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the caller
            box["error"] = e

    worker = threading.Thread(target=target, name="fmcluster-aws-call", daemon=True)
    worker.start()
    worker.join(None if seconds == float("inf") else max(0.0, seconds))
    if worker.is_alive():
        return False, None, None
    return True, box.get("value"), box.get("error")


def past_deadline(command: str, seconds: Optional[float]) -> Fault:
    limit = f" of {seconds:g} s" if seconds is not None else ""
    return Fault(Outcome(ERROR, f"did not finish within the {command} deadline{limit}", "an answer in time",
                         "retry, or give more time with --deadline; check network, proxy or AWS_ENDPOINT_URL",
                         ran=False), fatal=True)


def run_checks(
    ctx: Context,
    checks: Sequence[PreflightCheck],
    *,
    skip: Iterable[str] = (),
    progress: Optional[Progress] = None,
    command: str = "preflight",
    deadline_s: Optional[float] = None,
) -> List[CheckResult]:
    """Run each check; any exception becomes that check's answer, each result is reported as it finishes. A fatal
    fault (no credentials, an endpoint unreachable or not answering, the deadline passed) ends the run: the checks
    after it get no result."""
    skip_ids = set(skipped(checks, skip))
    out: List[CheckResult] = []
    for i, p in enumerate(checks, 1):
        if p.id in skip_ids:
            out.append(CheckResult(p.id, p.title, SKIP, "skipped by --skip"))
            continue
        if ctx.stopped:
            break  # the caller lists what did not run (Report.not_run)
        t0 = time.monotonic()
        finished, outcome, exc = bounded(lambda p=p: p.run(ctx), ctx.remaining())  # type: ignore[misc]
        fault: Optional[Fault] = None
        if not finished:
            fault = past_deadline(command, deadline_s)
        elif exc is not None:  # every fault is an answer, never a traceback
            fault = classify(exc, ctx.service_of(exc, p.service), attempts=max_attempts())
        elif not isinstance(outcome, Outcome):
            fault = Fault(Outcome(ERROR, f"internal error: the check returned {type(outcome).__name__}"))
        if fault is not None:
            outcome = fault.outcome
            if fault.fatal and not (fault.one_service and any(r.ran and r.status != SKIP for r in out)):
                ctx.stopped = f"an earlier call ended the run ({p.id}: {one_line(outcome.observed, 120)})"
        result = CheckResult(p.id, p.title, outcome.status, outcome.observed, outcome.expected, outcome.remedy,
                             round(time.monotonic() - t0, 3), ran=outcome.checked)
        out.append(result)
        if progress:
            progress(f"{command}: [{i}/{len(checks)}] {result.status.upper()} {p.id}: {one_line(result.observed, 160)}")
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
