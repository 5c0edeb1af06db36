"""Check results and the mapping of AWS faults to answers (never tracebacks)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

PASS, FAIL, WARN, ERROR, SKIP = "pass", "fail", "warn", "error", "skip"
STATUSES = (PASS, FAIL, WARN, ERROR, SKIP)
CANNOT_CHECK = "cannot check"

# Service name (boto3) -> IAM action prefix, for "grant X" remedies.
IAM_PREFIX = {"service-quotas": "servicequotas", "cloudformation": "cloudformation"}

ACCESS_DENIED = {
    "AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess",
    "NotAuthorized", "AuthorizationError", "Forbidden", "403",
}
CREDENTIALS_REJECTED = {
    "ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException",
    "SignatureDoesNotMatch", "AuthFailure", "InvalidSignatureException", "InvalidAccessKeyId", "RequestExpired",
}
THROTTLED = {
    "Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded", "TooManyRequestsException",
    "RequestThrottled", "RequestThrottledException", "SlowDown", "ProvisionedThroughputExceededException",
    "LimitExceededException", "PriorRequestNotComplete", "BandwidthLimitExceeded", "EC2ThrottledException",
}


@dataclass
class Outcome:
    """What a check found: status plus what was observed, what was expected and how to fix it."""

    status: str
    observed: str = ""
    expected: str = ""
    remedy: str = ""


@dataclass
class CheckResult:
    id: str
    title: str
    status: str
    observed: str = ""
    expected: str = ""
    remedy: str = ""
    duration_s: float = 0.0

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class Fault:
    """A classified exception: the outcome to report, and whether later calls are pointless."""

    outcome: Outcome
    fatal: bool = False


def error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def short(text: str, limit: int = 200) -> str:
    """One line of a (possibly HTML) error body."""
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_message(exc: BaseException) -> str:
    response = getattr(exc, "response", None) or {}
    return short(str(response.get("Error", {}).get("Message", "")) or str(exc))


def _iam_action(service: str, exc: BaseException) -> str:
    op = getattr(exc, "operation_name", "") or "the call"
    return f"{IAM_PREFIX.get(service, service)}:{op}"


def classify(exc: BaseException, service: str = "", attempts: Optional[int] = None) -> Fault:
    """Turn any exception from a check into an answer a person can act on."""
    import botocore.exceptions as bx

    credential_errors: tuple = (
        bx.NoCredentialsError, bx.PartialCredentialsError, bx.CredentialRetrievalError,
        bx.NoAuthTokenError, bx.TokenRetrievalError, bx.SSOError,
    )
    if isinstance(exc, credential_errors):
        return Fault(Outcome(
            ERROR, f"no usable AWS credentials ({type(exc).__name__}: {exc})", "credentials for the spec's account",
            "configure credentials: `aws configure`, `aws sso login --profile P` then --profile P, "
            "or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN",
        ), fatal=True)
    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ConnectionClosedError)):
        where = getattr(exc, "kwargs", {}).get("endpoint_url", "") or str(exc)
        return Fault(Outcome(
            ERROR, f"cannot reach the {service or 'AWS'} endpoint {where}".strip(), "a reachable endpoint",
            "check network/proxy settings and the region; AWS_ENDPOINT_URL overrides the endpoint",
        ), fatal=True)
    if isinstance(exc, bx.ReadTimeoutError):
        return Fault(Outcome(ERROR, f"{service} endpoint timed out: {exc}", "an answer within 30 s",
                             "retry; check network or proxy"))
    if isinstance(exc, bx.ClientError):
        code, msg = error_code(exc), error_message(exc)
        if code in ACCESS_DENIED or code.endswith("AccessDenied") or code.startswith("AccessDenied"):
            action = _iam_action(service, exc)
            return Fault(Outcome(
                WARN, f"{CANNOT_CHECK}: access denied to {action} ({code})", f"permission for {action}",
                f"grant {action} to the caller (read-only), or run preflight with a role that has it",
            ))
        if code in CREDENTIALS_REJECTED:
            return Fault(Outcome(
                ERROR, f"AWS rejected the credentials ({code}: {msg})", "valid, unexpired credentials",
                "refresh them (`aws sso login`, new session token) or pick another --profile",
            ), fatal=True)
        if code in THROTTLED:
            tries = f" after {attempts} attempts" if attempts else ""
            return Fault(Outcome(
                ERROR, f"throttled by AWS{tries} ({code}: {msg})", "an answer",
                "retry later, or raise FMCLUSTER_AWS_MAX_ATTEMPTS; other tools may be using the same API quota",
            ))
        if code == "OptInRequired":
            return Fault(Outcome(ERROR, f"the account is not opted in ({msg})", "an enabled region/service",
                                 "enable the region or service for the account"))
        return Fault(Outcome(ERROR, f"{_iam_action(service, exc)} failed: {code}: {msg}", "a successful call",
                             "see the error; rerun with the same credentials to reproduce"))
    if isinstance(exc, NotImplementedError):
        return Fault(Outcome(ERROR, f"the endpoint does not implement this call ({exc})", "a successful call",
                             "run against AWS (emulators such as moto lack this API)"))
    if isinstance(exc, bx.BotoCoreError):
        return Fault(Outcome(ERROR, f"{type(exc).__name__}: {exc}", "a successful call", "check the AWS configuration"))
    return Fault(Outcome(ERROR, f"internal error: {type(exc).__name__}: {exc}", "a completed check",
                         "report this as an fmcluster bug with the --json output"))


@dataclass
class Report:
    command: str
    spec: str
    region: str
    account: Optional[str]
    checks: List[CheckResult]

    def counts(self) -> Dict[str, int]:
        return {s: sum(1 for c in self.checks if c.status == s) for s in STATUSES}

    @property
    def exit_code(self) -> int:
        """0 when nothing failed or errored (warnings and skips are fine), else 1."""
        return 1 if any(c.status in (FAIL, ERROR) for c in self.checks) else 0

    def to_dict(self) -> Dict[str, Any]:
        return {
            "spec": self.spec,
            "region": self.region,
            "account": self.account,
            "ok": self.exit_code == 0,
            "summary": self.counts(),
            "checks": [c.to_dict() for c in self.checks],
        }

    def render_text(self) -> str:
        width = max([len(c.id) for c in self.checks] + [10])
        lines = []
        for c in self.checks:
            line = f"{c.status.upper():<5} {c.id:<{width}}  {c.observed}"
            if c.expected and c.status != PASS:
                line += f"  [expected: {c.expected}]"
            lines.append(line)
            if c.remedy and c.status in (FAIL, WARN, ERROR):
                lines.append(f"{'':<5} {'':<{width}}  fix: {c.remedy}")
        n = self.counts()
        where = f"{self.region}, account {self.account or '?'}"
        lines.append(
            f"{self.command} {self.spec} ({where}): " + ", ".join(f"{n[s]} {s}" for s in STATUSES)
            + f" -> exit {self.exit_code}"
        )
        return "\n".join(lines)
