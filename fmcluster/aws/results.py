"""Check results and the mapping of AWS faults to answers (never tracebacks)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

PASS, FAIL, WARN, ERROR, SKIP = "pass", "fail", "warn", "error", "skip"
STATUSES = (PASS, FAIL, WARN, ERROR, SKIP)
CANNOT_CHECK = "cannot check"
NOT_RUN = "not run"
# Exit codes of preflight: nothing failed; a check failed or errored; bad input; nothing failed but some check could
# not run (access denied, cut short), so the run proves nothing about it. docs/preflight.md.
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNCHECKED = 0, 1, 2, 3

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
    ran: bool = True  # False: the check could not look (access denied), whatever its status

    @property
    def checked(self) -> bool:
        return self.ran and not self.observed.startswith(CANNOT_CHECK)


@dataclass
class CheckResult:
    id: str
    title: str
    status: str
    observed: str = ""
    expected: str = ""
    remedy: str = ""
    duration_s: float = 0.0
    ran: bool = True

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class Fault:
    """A classified exception: the outcome to report, and whether later calls are pointless."""

    outcome: Outcome
    fatal: bool = False
    # one service's endpoint only (a region without it, AWS_ENDPOINT_URL_<SERVICE>): ends the run only when nothing
    # else has answered yet
    one_service: bool = False


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


def _from_a_response(exc: BaseException) -> bool:
    """True when the exception rose while botocore parsed an answer (an endpoint that is not AWS, a proxy's error
    page): the endpoint's fault, not fmcluster's."""
    from botocore.parsers import ResponseParserError

    if isinstance(exc, ResponseParserError):
        return True
    if not isinstance(exc, (ValueError, KeyError, IndexError, TypeError)):
        return False
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__", "")
        if name.startswith(("botocore.parsers", "xml.", "json")):
            return True
        tb = tb.tb_next
    return False


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
        ), fatal=True, one_service=True)
    if isinstance(exc, bx.ReadTimeoutError):
        # an endpoint that accepts connections and never answers would hold every later call as long: stop
        return Fault(Outcome(ERROR, f"the {service or 'AWS'} endpoint timed out: {short(str(exc))}",
                             "an answer within the read timeout", "retry; check network, proxy or AWS_ENDPOINT_URL",
                             ran=False), fatal=True)
    if isinstance(exc, bx.ClientError):
        code, msg = error_code(exc), error_message(exc)
        if code in ACCESS_DENIED or code.endswith("AccessDenied") or code.startswith("AccessDenied"):
            action = _iam_action(service, exc)
            return Fault(Outcome(
                WARN, f"{CANNOT_CHECK}: access denied to {action} ({code})", f"permission for {action}",
                f"grant {action} to the caller (read-only), or run preflight with a role that has it",
                ran=False,
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
    if _from_a_response(exc):
        return Fault(Outcome(ERROR, f"unreadable answer from the {service or 'AWS'} endpoint "
                             f"({type(exc).__name__}: {short(str(exc))})", "a well-formed AWS response",
                             "check AWS_ENDPOINT_URL, proxies and emulators between fmcluster and AWS", ran=False))
    from fmcluster.aws.session import AwsSetupError

    if isinstance(exc, AwsSetupError):  # the local setup, not a bug
        return Fault(Outcome(ERROR, f"AWS configuration: {short(str(exc))}", "a usable AWS configuration",
                             "fix the setting named", ran=False), fatal=True)
    if isinstance(exc, bx.BotoCoreError):
        return Fault(Outcome(ERROR, f"{type(exc).__name__}: {short(str(exc))}", "a successful call",
                             "check the AWS configuration"))
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

    not_run: List[str] = field(default_factory=list)  # checks a fatal fault or the deadline left out
    tolerate_unchecked: bool = False

    @property
    def unchecked(self) -> List[str]:
        """Ids of the checks that could not run (access denied, cut short, left out): not passes."""
        return [c.id for c in self.checks if not c.ran] + self.not_run

    @property
    def exit_code(self) -> int:
        """1 when a check failed or errored; 3 when none did but some could not run (unless tolerated); else 0."""
        if any(c.status in (FAIL, ERROR) for c in self.checks):
            return EXIT_FAILED
        return EXIT_UNCHECKED if self.unchecked and not self.tolerate_unchecked else EXIT_OK

    def to_dict(self) -> Dict[str, Any]:
        return {
            "spec": self.spec,
            "region": self.region,
            "account": self.account,
            "ok": self.exit_code == 0,
            "summary": self.counts(),
            "unchecked": self.unchecked,
            "not_run": self.not_run,
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
        unchecked = f", {len(self.unchecked)} could not run" if self.unchecked else ""
        if self.not_run:
            lines.append(f"{NOT_RUN.upper()}: {', '.join(self.not_run)} (an earlier call ended the run)")
        lines.append(
            f"{self.command} {self.spec} ({where}): " + ", ".join(f"{n[s]} {s}" for s in STATUSES) + unchecked
            + f" -> exit {self.exit_code}"
        )
        return "\n".join(lines)
