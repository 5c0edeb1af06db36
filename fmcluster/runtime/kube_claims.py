"""Creates PersistentVolumeClaims in namespaces that someone else creates, whenever they appear. Standard library only.

SageMaker HyperPod task governance creates a team's namespace (``hyperpod-ns-<team>``) for the team's compute quota,
at a time AWS does not document; the team's claim of the shared file system belongs in it. CloudFormation cannot wait
for it without a deadline (CDK's kubectl provider runs in a Lambda function of 15 minutes), so this script runs in a
Deployment of fmcluster's own namespace and does it from inside the cluster, for as long as it takes:

- for each wanted claim (a PersistentVolumeClaim object, read from ``--claims``, a JSON list):
  namespace missing or terminating: wait; claim missing: create it exactly as given; claim present and bound for the
  wanted volume (``spec.volumeName``): done; present for another volume: a conflict, reported and left alone.
- nothing is ever updated or deleted: a claim that exists is somebody's, even if this script created it.
- every API call has a timeout and a capped response size; errors are reported and retried next round with a growing
  pause; a line is logged only when a claim's state changes; ``--ready-file`` exists exactly while every claim is in
  place (the container's readiness probe reads it, so ``kubectl get deployment`` shows the state).

    python3 kube_claims.py --claims /config/claims.json [--ready-file /run/fmcluster/ready] [--interval 10]
        [--max-interval 300] [--api URL] [--once]
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
RESPONSE_MAX = 1 << 20  # one namespace or claim is a few KB; anything larger is not an answer we can use
MESSAGE_MAX = 400
CALL_TIMEOUT_S = 15.0

# a claim's state after a look
WAITING, CREATED, PRESENT, CONFLICT, ERROR = "waiting", "created", "present", "conflict", "error"
DONE = frozenset({CREATED, PRESENT})


class Api:
    """Just enough of the Kubernetes API: in-cluster service-account credentials, or a plain URL (tests).
    `call` returns (HTTP status, JSON body or None) and raises (OSError, http.client.HTTPException, ValueError) only
    when no usable answer came back."""

    def __init__(self, base: Optional[str] = None, timeout: float = CALL_TIMEOUT_S) -> None:
        self.timeout = timeout
        self.context: Optional[ssl.SSLContext] = None
        if base:
            if not base.startswith(("http://", "https://")):
                raise ValueError(f"--api {base!r}: not an http(s) URL")
            self.base = base.rstrip("/")
            return
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        self.base = f"https://{host}:{port}"
        self.context = ssl.create_default_context(cafile=os.path.join(SA_DIR, "ca.crt"))

    def call(self, method: str, path: str, body: Any = None) -> Tuple[int, Any]:
        headers = {"Accept": "application/json"}
        token_file = os.path.join(SA_DIR, "token")
        if self.context is not None and os.path.exists(token_file):
            with open(token_file, encoding="utf-8") as fh:  # projected tokens rotate: read each time
                headers["Authorization"] = "Bearer " + fh.read().strip()
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        # the base is https://KUBERNETES_SERVICE_HOST or an http(s) URL checked above: no file: or custom schemes
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as resp:  # noqa: S310
                return resp.status, _json(resp.read(RESPONSE_MAX + 1))
        except urllib.error.HTTPError as exc:  # an answer: the API's Status object
            try:
                raw = exc.read(RESPONSE_MAX + 1)
            finally:
                exc.close()
            try:
                return exc.code, _json(raw)
            except ValueError:
                return exc.code, None


def _json(raw: bytes) -> Any:
    if len(raw) > RESPONSE_MAX:
        raise ValueError(f"response larger than {RESPONSE_MAX} bytes")
    return json.loads(raw) if raw else None


def _message(body: Any) -> str:
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])[:MESSAGE_MAX]
    return "no message"


def claim_path(namespace: str, name: str = "") -> str:
    base = f"/api/v1/namespaces/{urllib.parse.quote(namespace, safe='')}/persistentvolumeclaims"
    return f"{base}/{urllib.parse.quote(name, safe='')}" if name else base


def reconcile(api: Any, claim: Dict[str, Any]) -> Tuple[str, str]:
    """One look at one wanted claim: (state, what happened). At most three API calls."""
    namespace, name = claim["metadata"]["namespace"], claim["metadata"]["name"]
    volume = claim["spec"].get("volumeName")
    code, ns = api.call("GET", f"/api/v1/namespaces/{urllib.parse.quote(namespace, safe='')}")
    if code == 404:
        return WAITING, f"namespace {namespace} does not exist yet"
    if code != 200:
        return ERROR, f"reading namespace {namespace}: HTTP {code}: {_message(ns)}"
    if (ns.get("status") or {}).get("phase") == "Terminating":
        return WAITING, f"namespace {namespace} is being deleted"
    code, existing = api.call("GET", claim_path(namespace, name))
    if code == 200:
        return _judge(existing, volume, namespace, name)
    if code != 404:
        return ERROR, f"reading claim {namespace}/{name}: HTTP {code}: {_message(existing)}"
    code, created = api.call("POST", claim_path(namespace), claim)
    if code in (200, 201):
        return CREATED, f"created claim {namespace}/{name} for volume {volume}"
    if code == 409:  # someone else created it meanwhile: judged next round
        return WAITING, f"claim {namespace}/{name} appeared while creating it"
    if code in (403, 404) and _terminating_or_gone(created):
        return WAITING, f"namespace {namespace} went away while creating the claim: {_message(created)}"
    return ERROR, f"creating claim {namespace}/{name}: HTTP {code}: {_message(created)}"


def _judge(existing: Dict[str, Any], volume: Optional[str], namespace: str, name: str) -> Tuple[str, str]:
    found = (existing.get("spec") or {}).get("volumeName")
    phase = (existing.get("status") or {}).get("phase", "unknown")
    if volume and found and found != volume:
        return CONFLICT, (f"claim {namespace}/{name} exists for volume {found}, not {volume}: left as it is (delete it "
                          f"to have it recreated for {volume})")
    return PRESENT, f"claim {namespace}/{name} is in place ({phase})"


def _terminating_or_gone(body: Any) -> bool:
    """The API's answer to a create in a namespace being deleted (403, cause NamespaceTerminating) or gone (404)."""
    if not isinstance(body, dict):
        return False
    causes = ((body.get("details") or {}).get("causes")) or []
    if any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes):
        return True
    return body.get("code") == 404 or "being terminated" in str(body.get("message", ""))


def read_claims(path: str) -> List[Dict[str, Any]]:
    """The wanted claims: a JSON list of PersistentVolumeClaim objects, each with a namespace and a name."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, list):
        raise ValueError(f"{path}: not a JSON list of PersistentVolumeClaims")
    for i, c in enumerate(data):
        meta = c.get("metadata") if isinstance(c, dict) else None
        if not (isinstance(c, dict) and c.get("kind") == "PersistentVolumeClaim" and isinstance(meta, dict)
                and meta.get("namespace") and meta.get("name") and isinstance(c.get("spec"), dict)):
            raise ValueError(f"{path}: item {i} is not a PersistentVolumeClaim with metadata.namespace and .name")
    return data


class Reconciler:
    """Rounds over every wanted claim; remembers each claim's last state so only changes are logged."""

    def __init__(self, api: Any, claims: List[Dict[str, Any]], log: Callable[[str], None]) -> None:
        self.api, self.claims, self.log = api, claims, log
        self.states: Dict[str, str] = {}

    def round(self) -> bool:
        """One look at every claim; True when every one is in place."""
        done = True
        for claim in self.claims:
            key = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
            try:
                state, what = reconcile(self.api, claim)
            except (OSError, http.client.HTTPException, ValueError, KeyError, AttributeError, TypeError) as exc:
                # no usable answer (a dropped connection, a cut or malformed body): next round
                state, what = ERROR, f"{key}: {type(exc).__name__}: {str(exc)[:MESSAGE_MAX]}"
            seen = PRESENT if state == CREATED else state  # a created claim is in place: logged once
            if self.states.get(key) != seen or state == CREATED:
                self.log(f"{state}: {what}")
            self.states[key] = seen
            done = done and state in DONE
        return done


def set_ready(path: Optional[str], ready: bool) -> None:
    if not path:
        return
    if ready:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("ready\n")
    elif os.path.exists(path):
        os.remove(path)


def next_pause(done: bool, previous: float, interval: float, max_interval: float) -> float:
    """The pause after a round. Once every claim is in place, `max_interval` (a namespace deleted and made again by
    task governance gets its claim again); while one is missing, `interval` at first (also right after a round that
    found everything in place), doubling up to `max_interval`."""
    if done:
        return max_interval
    if previous <= 0:
        return interval
    return min(max_interval, previous * 2)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def main(argv: Optional[List[str]] = None, sleep: Callable[[float], None] = time.sleep) -> int:
    ap = argparse.ArgumentParser(prog="kube_claims.py")
    ap.add_argument("--claims", required=True, help="JSON list of the PersistentVolumeClaims to create")
    ap.add_argument("--ready-file", help="present while every claim is in place (readiness probe)")
    ap.add_argument("--interval", type=float, default=10.0, help="first pause while a claim is missing (s)")
    ap.add_argument("--max-interval", type=float, default=300.0, help="longest pause between rounds (s)")
    ap.add_argument("--api", help="API base URL (tests); default: in-cluster")
    ap.add_argument("--once", action="store_true", help="one round, then exit 0 if every claim is in place")
    args = ap.parse_args(argv)
    if not 0 < args.interval <= args.max_interval:
        print("kube_claims: need 0 < --interval <= --max-interval", file=sys.stderr)
        return 2
    try:
        claims = read_claims(args.claims)
        api = Api(args.api)
    except (OSError, ValueError, KeyError) as exc:
        print(f"kube_claims: {type(exc).__name__}: {str(exc)[:MESSAGE_MAX]}", file=sys.stderr)
        return 2

    def log(line: str) -> None:
        print(f"{_now()} {line[:MESSAGE_MAX * 2]}", flush=True)

    reconciler = Reconciler(api, claims, log)
    pause, was_done = 0.0, False
    while True:
        done = reconciler.round()
        try:
            set_ready(args.ready_file, done)
        except OSError as exc:  # the probe then says not ready; the claims are what matters
            log(f"error: ready file {args.ready_file}: {exc}")
        if args.once:
            return 0 if done else 1
        pause = next_pause(done, 0.0 if was_done else pause, args.interval, args.max_interval)
        was_done = done
        sleep(pause)


if __name__ == "__main__":
    raise SystemExit(main())
