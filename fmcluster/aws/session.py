"""boto3 clients for preflight and status: one session, retries with backoff, short timeouts.

Credentials, profiles and endpoints resolve the standard way (environment, shared config,
SSO, instance roles; ``AWS_ENDPOINT_URL`` and ``AWS_ENDPOINT_URL_<SERVICE>``), so the same
code runs against AWS and against a moto server.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Dict, Optional

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
        return self._session

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(service, region_name=self.region, config=self.config)
        return self._clients[service]

    def set(self, service: str, client: Any) -> None:
        self._clients[service] = client
