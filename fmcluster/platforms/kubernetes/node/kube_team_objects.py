"""Creates objects in namespaces that someone else creates, whenever they appear. Standard library only.

SageMaker HyperPod task governance creates a team's namespace (``hyperpod-ns-<team>``) for the team's compute quota,
at a time AWS does not document; what fmcluster puts in it (the team's claim of the shared file system, the service
account of managed tiered checkpointing) belongs in it. CloudFormation cannot wait for it without a deadline (CDK's
kubectl provider runs in a Lambda function of 15 minutes), so this script runs in a Deployment of fmcluster's own
namespace and does it from inside the cluster, for as long as it takes:

- for each wanted object (a PersistentVolumeClaim or a ServiceAccount, read from ``--objects``, a JSON list):
  namespace missing or terminating: wait; object missing: create it exactly as given; present and matching: done;
  present but different: a conflict, reported and left alone. Matching: every label and annotation the wanted
  object sets has that value, and a claim names the wanted volume (``spec.volumeName``).
- nothing is ever updated or deleted: an object that exists is somebody's, even if this script created it.
- every API call has a timeout and a capped response size; one look at each namespace and at most two calls per
  object a round; errors are reported and retried next round with a growing pause; a line is logged only when an
  object's state changes; ``--ready-file`` exists exactly while every object is in place (the container's readiness
  probe reads it, so ``kubectl get deployment`` shows the state).

    python3 kube_team_objects.py --objects /config/objects.json [--ready-file /run/fmcluster/ready] [--interval 10]
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
RESPONSE_MAX = 1 << 20  # one namespace, claim or service account is a few KB; anything larger is not an answer we can use
MESSAGE_MAX = 400
CALL_TIMEOUT_S = 15.0

# an object's state after a look
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


# the kinds this script creates, by their resource in the core API group (/api/v1), and how a log line names them
RESOURCES = {"PersistentVolumeClaim": "persistentvolumeclaims", "ServiceAccount": "serviceaccounts"}
NOUNS = {"PersistentVolumeClaim": "claim", "ServiceAccount": "service account"}


def namespace_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{urllib.parse.quote(namespace, safe='')}"


def object_path(kind: str, namespace: str, name: str = "") -> str:
    base = f"{namespace_path(namespace)}/{RESOURCES[kind]}"
    return f"{base}/{urllib.parse.quote(name, safe='')}" if name else base


def describe(obj: Dict[str, Any]) -> str:
    """``claim hyperpod-ns-a/datasets``: how log lines name a wanted object."""
    return f"{NOUNS[obj['kind']]} {obj['metadata']['namespace']}/{obj['metadata']['name']}"


def look_at_namespace(api: Any, namespace: str) -> Optional[Tuple[str, str]]:
    """None when `namespace` exists and is not being deleted; else (state, why). One API call."""
    code, ns = api.call("GET", namespace_path(namespace))
    if code == 404:
        return WAITING, f"namespace {namespace} does not exist yet"
    if code != 200:
        return ERROR, f"reading namespace {namespace}: HTTP {code}: {_message(ns)}"
    if (ns.get("status") or {}).get("phase") == "Terminating":
        return WAITING, f"namespace {namespace} is being deleted"
    return None


def reconcile(api: Any, wanted: Dict[str, Any]) -> Tuple[str, str]:
    """One look at one wanted object whose namespace exists: (state, what happened). At most two API calls."""
    kind, namespace, name = wanted["kind"], wanted["metadata"]["namespace"], wanted["metadata"]["name"]
    what = describe(wanted)
    code, existing = api.call("GET", object_path(kind, namespace, name))
    if code == 200:
        return judge(wanted, existing)
    if code != 404:
        return ERROR, f"reading {what}: HTTP {code}: {_message(existing)}"
    code, created = api.call("POST", object_path(kind, namespace), wanted)
    if code in (200, 201):
        volume = (wanted.get("spec") or {}).get("volumeName")
        return CREATED, f"created {what}" + (f" for volume {volume}" if volume else "")
    if code == 409:  # someone else created it meanwhile: judged next round
        return WAITING, f"{what} appeared while creating it"
    if code in (403, 404) and _terminating_or_gone(created):
        return WAITING, f"namespace {namespace} went away while creating the {NOUNS[kind]}: {_message(created)}"
    return ERROR, f"creating {what}: HTTP {code}: {_message(created)}"


def judge(wanted: Dict[str, Any], existing: Dict[str, Any]) -> Tuple[str, str]:
    """An existing object of the wanted namespace and name: PRESENT if it matches, else CONFLICT (left as it is)."""
    what = describe(wanted)
    differences = []
    volume = (wanted.get("spec") or {}).get("volumeName")
    found = (existing.get("spec") or {}).get("volumeName")
    if volume and found and found != volume:
        differences.append(f"exists for volume {found}, not {volume}")
    for field in ("labels", "annotations"):
        want = wanted["metadata"].get(field) or {}
        have = (existing.get("metadata") or {}).get(field) or {}
        differences += [f"{field[:-1]} {key}={have.get(key)!r}, not {value!r}" for key, value in sorted(want.items())
                        if have.get(key) != value]
    if differences:
        return CONFLICT, (f"{what} {'; '.join(differences)}: left as it is (delete it to have it recreated as "
                          f"wanted)")[:MESSAGE_MAX]
    phase = (existing.get("status") or {}).get("phase")
    return PRESENT, f"{what} is in place" + (f" ({phase})" if phase else "")


def _terminating_or_gone(body: Any) -> bool:
    """The API's answer to a create in a namespace being deleted (403, cause NamespaceTerminating) or gone (404)."""
    if not isinstance(body, dict):
        return False
    causes = ((body.get("details") or {}).get("causes")) or []
    if any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes):
        return True
    return body.get("code") == 404 or "being terminated" in str(body.get("message", ""))


def read_objects(path: str) -> List[Dict[str, Any]]:
    """The wanted objects: a JSON list of v1 PersistentVolumeClaims (with a spec) and ServiceAccounts, each with a
    namespace and a name, each namespace/kind/name once."""
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, list):
        raise ValueError(f"{path}: not a JSON list of objects")
    seen = set()
    for i, o in enumerate(data):
        meta = o.get("metadata") if isinstance(o, dict) else None
        if not (isinstance(o, dict) and o.get("apiVersion") == "v1" and o.get("kind") in RESOURCES
                and isinstance(meta, dict) and meta.get("namespace") and meta.get("name")
                and (o["kind"] != "PersistentVolumeClaim" or isinstance(o.get("spec"), dict))):
            raise ValueError(f"{path}: item {i} is not a v1 {' or '.join(RESOURCES)} with metadata.namespace and "
                             f".name (and a claim's spec)")
        key = (o["kind"], meta["namespace"], meta["name"])
        if key in seen:
            raise ValueError(f"{path}: item {i} repeats {o['kind']} {meta['namespace']}/{meta['name']}")
        seen.add(key)
    return data


# no usable answer (a dropped connection, a cut or malformed body): retried next round
UNUSABLE = (OSError, http.client.HTTPException, ValueError, KeyError, AttributeError, TypeError)


def _failure(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:MESSAGE_MAX]}"


class Reconciler:
    """Rounds over every wanted object; remembers each object's last state so only changes are logged."""

    def __init__(self, api: Any, objects: List[Dict[str, Any]], log: Callable[[str], None]) -> None:
        self.api, self.objects, self.log = api, objects, log
        self.states: Dict[str, str] = {}

    def round(self) -> bool:
        """One look at each namespace and at every object; True when every one is in place."""
        done = True
        namespaces: Dict[str, Optional[Tuple[str, str]]] = {}
        for obj in self.objects:
            key, namespace = describe(obj), obj["metadata"]["namespace"]
            if namespace not in namespaces:
                try:
                    namespaces[namespace] = look_at_namespace(self.api, namespace)
                except UNUSABLE as exc:
                    namespaces[namespace] = ERROR, f"reading namespace {namespace}: {_failure(exc)}"
            blocked = namespaces[namespace]
            if blocked is not None:  # logged per object: each object's state is its own
                state, what = blocked[0], f"{key}: {blocked[1]}"
            else:
                try:
                    state, what = reconcile(self.api, obj)
                except UNUSABLE as exc:
                    state, what = ERROR, f"{key}: {_failure(exc)}"
            seen = PRESENT if state == CREATED else state  # a created object is in place: logged once
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
    """The pause after a round. Once every object is in place, `max_interval` (a namespace deleted and made again by
    task governance gets its objects again); while one is missing, `interval` at first (also right after a round that
    found everything in place), doubling up to `max_interval`."""
    if done:
        return max_interval
    if previous <= 0:
        return interval
    return min(max_interval, previous * 2)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def main(argv: Optional[List[str]] = None, sleep: Callable[[float], None] = time.sleep) -> int:
    ap = argparse.ArgumentParser(prog="kube_team_objects.py")
    ap.add_argument("--objects", required=True, help="JSON list of the PersistentVolumeClaims and ServiceAccounts "
                    "to create")
    ap.add_argument("--ready-file", help="present while every object is in place (readiness probe)")
    ap.add_argument("--interval", type=float, default=10.0, help="first pause while an object is missing (s)")
    ap.add_argument("--max-interval", type=float, default=300.0, help="longest pause between rounds (s)")
    ap.add_argument("--api", help="API base URL (tests); default: in-cluster")
    ap.add_argument("--once", action="store_true", help="one round, then exit 0 if every object is in place")
    args = ap.parse_args(argv)
    if not 0 < args.interval <= args.max_interval:
        print("kube_team_objects: need 0 < --interval <= --max-interval", file=sys.stderr)
        return 2
    try:
        wanted = read_objects(args.objects)
        api = Api(args.api)
    except (OSError, ValueError, KeyError) as exc:
        print(f"kube_team_objects: {_failure(exc)}", file=sys.stderr)
        return 2

    def log(line: str) -> None:
        print(f"{_now()} {line[:MESSAGE_MAX * 2]}", flush=True)

    reconciler = Reconciler(api, wanted, log)
    pause, was_done = 0.0, False
    while True:
        done = reconciler.round()
        try:
            set_ready(args.ready_file, done)
        except OSError as exc:  # the probe then says not ready; the objects are what matters
            log(f"error: ready file {args.ready_file}: {exc}")
        if args.once:
            return 0 if done else 1
        pause = next_pause(done, 0.0 if was_done else pause, args.interval, args.max_interval)
        was_done = done
        sleep(pause)


if __name__ == "__main__":
    raise SystemExit(main())
