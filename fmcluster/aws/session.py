"""boto3 clients for preflight and status: one session, retries with backoff, short timeouts.

Credentials, profiles and endpoints resolve the standard way (environment, shared config,
SSO, instance roles; ``AWS_ENDPOINT_URL`` and ``AWS_ENDPOINT_URL_<SERVICE>``), so the same
code runs against AWS and against a moto server.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Dict, Mapping, Optional
from urllib.parse import urlsplit

import boto3
from botocore.config import Config

# Adaptive retries back off exponentially on throttling and on transient network errors and
# rate-limit the client after throttling. ``FMCLUSTER_AWS_MAX_ATTEMPTS`` overrides the count of
# attempts per call, the first included (botocore's ``total_max_attempts``).
DEFAULT_MAX_ATTEMPTS = 6
MAX_ATTEMPTS_ENV = "FMCLUSTER_AWS_MAX_ATTEMPTS"


class AwsSetupError(Exception):
    """The local AWS setup is unusable before any call (unknown profile, bad config)."""


def max_attempts() -> int:
    raw = os.environ.get(MAX_ATTEMPTS_ENV, "")
    try:
        return max(1, int(raw)) if raw else DEFAULT_MAX_ATTEMPTS
    except ValueError:
        return DEFAULT_MAX_ATTEMPTS


CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 5.0, 30.0


def client_config(attempts: Optional[int] = None, deadline_s: Optional[float] = None) -> Config:
    """Retries and timeouts; under a short deadline each attempt waits a fraction of it, so a timeout surfaces (and
    ends the run) before the deadline does."""
    attempts = attempts or max_attempts()
    read, connect = READ_TIMEOUT_S, CONNECT_TIMEOUT_S
    if deadline_s is not None:
        read = max(0.5, min(read, deadline_s / (attempts + 1)))
        connect = max(0.5, min(connect, read))
    return Config(
        retries={"mode": "adaptive", "total_max_attempts": attempts},  # incl. the first
        connect_timeout=connect,
        read_timeout=read,
        user_agent_extra="fmcluster",
    )


@functools.lru_cache(maxsize=1)
def _service_models() -> Any:
    """One botocore data loader per process. It only reads the service models and endpoint data shipped with
    botocore, so every session can share it; each new session would otherwise parse them again (about 0.4 s of CPU
    for the seven clients a preflight makes)."""
    from botocore.loaders import create_loader

    return create_loader()


def _url_problem(url: str) -> Optional[str]:
    """Why botocore cannot use `url` as an endpoint (None when it can)."""
    from botocore.utils import is_valid_endpoint_url, is_valid_ipv6_endpoint_url

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number in range
        valid = is_valid_endpoint_url(url) or is_valid_ipv6_endpoint_url(url)
    except ValueError as e:
        return f"not a URL ({e})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "give http:// or https:// and a host, e.g. http://localhost:5000"
    return None if valid else "not a host name or address botocore takes"


def endpoint_problem(environ: Mapping[str, str], config: Mapping[str, Any]) -> Optional[str]:
    """The first endpoint URL set in the environment (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>) or the profile
    (endpoint_url) that botocore cannot use, and why; user input, so refused before any call."""
    if environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return None
    found = [(name, environ[name]) for name in sorted(environ)
             if name == "AWS_ENDPOINT_URL" or name.startswith("AWS_ENDPOINT_URL_")]
    if isinstance(config.get("endpoint_url"), str):
        found.append(("endpoint_url in the AWS config", config["endpoint_url"]))
    for name, url in found:
        why = _url_problem(url) if url else None
        if why:
            return f"{name}={url[:200]!r}: {why}"
    return None


def new_session(profile: Optional[str], region: str) -> boto3.Session:
    import botocore.session

    core = botocore.session.Session()
    core.register_component("data_loader", _service_models())
    session = boto3.Session(botocore_session=core, profile_name=profile, region_name=region)
    core.get_scoped_config()  # an unknown profile raises ProfileNotFound here, as boto3.Session(profile_name=) does
    return session


class AwsClients:
    """Lazily created, cached boto3 clients for one region (and optional profile).

    Tests hand in prepared clients (moto-backed or wrapped in a botocore Stubber) with `set`.
    """

    def __init__(self, region: str, profile: Optional[str] = None, session: Optional[boto3.Session] = None,
                 deadline_s: Optional[float] = None):
        self.region = region
        self.profile = profile
        self._session = session
        self._clients: Dict[str, Any] = {}
        self.config = client_config(deadline_s=deadline_s)

    @property
    def session(self) -> boto3.Session:
        if self._session is None:
            import botocore.exceptions

            try:
                self._session = new_session(self.profile, self.region)
            except botocore.exceptions.ProfileNotFound:
                raise AwsSetupError(f"--profile: no AWS profile named {self.profile!r} in the shared config") from None
            except botocore.exceptions.BotoCoreError as e:
                raise AwsSetupError(f"AWS configuration: {e}") from None
            problem = endpoint_problem(os.environ, self._session._session.get_scoped_config())
            if problem:
                self._session = None
                raise AwsSetupError(problem)
        return self._session

    def client(self, service: str) -> Any:
        if service not in self._clients:
            try:
                self._clients[service] = self.session.client(service, region_name=self.region, config=self.config)
            except ValueError as e:  # botocore's word for an endpoint it cannot use (a service's own, say)
                raise AwsSetupError(f"the {service} endpoint: {e}; check AWS_ENDPOINT_URL, "
                                    f"AWS_ENDPOINT_URL_{service.upper()} and endpoint_url in the AWS config") from None
        return self._clients[service]

    def set(self, service: str, client: Any) -> None:
        self._clients[service] = client
