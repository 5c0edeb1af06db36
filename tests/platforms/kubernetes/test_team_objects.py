"""Claims and service accounts created from inside the cluster once their namespace exists (platforms/kubernetes/node/
kube_team_objects.py), and the objects that run it (platforms/kubernetes/team_objects.py). The script is driven
in-process against a fake of the Kubernetes API that answers as the API server does (objects, and Status objects for
404, 409 and a terminating namespace's 403); one test runs the real HTTP transport against a local server."""

from __future__ import annotations

import copy
import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

import pytest
from helpers.storage import fsx_mounts

from fmcluster.platforms.kubernetes import pod_identity, team_objects, volumes
from fmcluster.platforms.kubernetes.node import kube_team_objects

RESEARCH, PRODUCTION = "hyperpod-ns-research", "hyperpod-ns-production"
CHECKPOINTS = "fmcluster-checkpoints"


def wanted(namespace: str, cluster: str = "hpeks-p5") -> Dict[str, Any]:
    """A team's claim of the shared file system, as the hyperpod-eks kind wants it."""
    team = namespace.rsplit("-", 1)[-1]
    (fsx,) = fsx_mounts(file_system_id="fs-0123456789abcdef0", mount_name="abcdefgh", capacity_gib=9600,
                        dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com")
    assert fsx.kubernetes is not None
    _pv, pvc = volumes.static_volume(cluster=f"{cluster}-{team}", namespace=namespace, volume=fsx.kubernetes)
    return pvc


def account(namespace: str) -> Dict[str, Any]:
    """The checkpoint service account, as the hyperpod-eks kind wants it (no labels, no annotations)."""
    return pod_identity.service_account(CHECKPOINTS, namespace)


def status(code: int, reason: str, message: str, kind: str, name: str, causes: Optional[list] = None) -> Dict[str, Any]:
    details: Dict[str, Any] = {"name": name, "kind": kind}
    if causes:
        details["causes"] = causes
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "details": details, "code": code}


def namespace_object(name: str, phase: str = "Active") -> Dict[str, Any]:
    return {"kind": "Namespace", "apiVersion": "v1",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "4242",
                         "creationTimestamp": "2026-12-01T10:00:00Z",
                         "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": phase}}


def served_account(namespace: str, name: str = CHECKPOINTS, **metadata: Any) -> Dict[str, Any]:
    """A ServiceAccount as the API server returns it (Kubernetes 1.24+ creates no token Secret for it)."""
    return {"kind": "ServiceAccount", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}",
                         "resourceVersion": "6161", "creationTimestamp": "2026-12-01T10:06:00Z", **metadata}}


class FakeApi:
    """Namespaces, claims and service accounts as the API server holds them; every call recorded. `fail` maps
    (method, path) to a queued answer or exception, served once before the normal behaviour."""

    def __init__(self) -> None:
        self.namespaces: Dict[str, Dict[str, Any]] = {}
        self.stored: Dict[str, Dict[Tuple[str, str], Dict[str, Any]]] = {"persistentvolumeclaims": {},
                                                                         "serviceaccounts": {}}
        self.claims = self.stored["persistentvolumeclaims"]
        self.accounts = self.stored["serviceaccounts"]
        self.calls: List[Tuple[str, str]] = []
        self.fail: Dict[Tuple[str, str], List[Any]] = {}

    def call(self, method: str, path: str, body: Any = None) -> Tuple[int, Any]:
        self.calls.append((method, path))
        queued = self.fail.get((method, path))
        if queued:
            answer = queued.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        parts = path.strip("/").split("/")  # api v1 namespaces <ns> [<resource> [<name>]]
        assert parts[:3] == ["api", "v1", "namespaces"], path
        ns = parts[3]
        if len(parts) == 4:
            assert method == "GET"
            if ns not in self.namespaces:
                return 404, status(404, "NotFound", f'namespaces "{ns}" not found', "namespaces", ns)
            return 200, self.namespaces[ns]
        resource = parts[4]
        store = self.stored[resource]
        if method == "GET":
            name = parts[5]
            if (ns, name) not in store:
                return 404, status(404, "NotFound", f'{resource} "{name}" not found', resource, name)
            return 200, store[(ns, name)]
        assert method == "POST" and len(parts) == 5, (method, path)
        name = body["metadata"]["name"]
        if ns not in self.namespaces:
            return 404, status(404, "NotFound", f'namespaces "{ns}" not found', "namespaces", ns)
        if self.namespaces[ns]["status"]["phase"] == "Terminating":
            return 403, status(403, "Forbidden", f'{resource} "{name}" is forbidden: unable to create new '
                               f"content in namespace {ns} because it is being terminated", resource,
                               name, causes=[{"reason": "NamespaceTerminating", "message": f"namespace {ns} is being "
                                              "terminated", "field": "metadata.namespace"}])
        if (ns, name) in store:
            return 409, status(409, "AlreadyExists", f'{resource} "{name}" already exists', resource, name)
        created = copy.deepcopy(body)
        created["metadata"].update(uid=f"uid-{ns}-{name}", resourceVersion="5151",
                                   creationTimestamp="2026-12-01T10:05:00Z")
        if resource == "persistentvolumeclaims":
            created["status"] = {"phase": "Pending"}
        store[(ns, name)] = created
        return 201, created

    def writes(self) -> List[Tuple[str, str]]:
        return [c for c in self.calls if c[0] != "GET"]


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


def rounds(api: FakeApi, objects: List[Dict[str, Any]]):
    log: List[str] = []
    return kube_team_objects.Reconciler(api, objects, log.append), log


def test_a_claim_waits_for_its_namespace_and_is_created_once_it_exists(api):
    reconciler, log = rounds(api, [wanted(RESEARCH)])
    assert reconciler.round() is False and (RESEARCH, "fsx") not in api.claims
    assert reconciler.round() is False
    assert log == [f"waiting: claim {RESEARCH}/fsx: namespace {RESEARCH} does not exist yet"], \
        "a state is logged once, not every round"
    api.namespaces[RESEARCH] = namespace_object(RESEARCH)  # task governance made it, whenever that was
    assert reconciler.round() is True
    created = api.claims[(RESEARCH, "fsx")]
    expected = wanted(RESEARCH)
    assert {k: created[k] for k in ("apiVersion", "kind", "spec")} == {k: expected[k] for k in ("apiVersion", "kind", "spec")}
    assert created["metadata"]["name"] == "fsx" and created["metadata"]["namespace"] == RESEARCH
    assert api.writes() == [("POST", f"/api/v1/namespaces/{RESEARCH}/persistentvolumeclaims")]
    assert log[-1] == f"created: created claim {RESEARCH}/fsx for volume hpeks-p5-research-fsx"
    assert reconciler.round() is True
    assert len(api.writes()) == 1 and len(log) == 2, "idempotent: an existing claim is left alone, quietly"


def test_objects_are_independent_and_a_round_looks_once_at_each_namespace_and_twice_at_most_per_object(api):
    api.namespaces[PRODUCTION] = namespace_object(PRODUCTION)
    reconciler, _ = rounds(api, [wanted(RESEARCH), account(RESEARCH), wanted(PRODUCTION), account(PRODUCTION)])
    assert reconciler.round() is False
    assert (PRODUCTION, "fsx") in api.claims and (PRODUCTION, CHECKPOINTS) in api.accounts
    assert not api.claims.keys() & {(RESEARCH, "fsx")} and (RESEARCH, CHECKPOINTS) not in api.accounts
    assert api.calls == [
        ("GET", f"/api/v1/namespaces/{RESEARCH}"),
        ("GET", f"/api/v1/namespaces/{PRODUCTION}"),
        ("GET", f"/api/v1/namespaces/{PRODUCTION}/persistentvolumeclaims/fsx"),
        ("POST", f"/api/v1/namespaces/{PRODUCTION}/persistentvolumeclaims"),
        ("GET", f"/api/v1/namespaces/{PRODUCTION}/serviceaccounts/{CHECKPOINTS}"),
        ("POST", f"/api/v1/namespaces/{PRODUCTION}/serviceaccounts"),
    ]
    assert reconciler.states == {f"claim {RESEARCH}/fsx": "waiting", f"service account {RESEARCH}/{CHECKPOINTS}": "waiting",
                                 f"claim {PRODUCTION}/fsx": "present",
                                 f"service account {PRODUCTION}/{CHECKPOINTS}": "present"}


def test_an_existing_claim_for_another_volume_is_a_conflict_and_never_touched(api):
    api.namespaces[RESEARCH] = namespace_object(RESEARCH)
    theirs = wanted(RESEARCH)
    theirs["spec"]["volumeName"] = "someone-elses-volume"
    api.claims[(RESEARCH, "fsx")] = theirs
    reconciler, log = rounds(api, [wanted(RESEARCH)])
    assert reconciler.round() is False
    assert api.writes() == [] and api.claims[(RESEARCH, "fsx")] is theirs
    assert log[0].startswith(f"conflict: claim {RESEARCH}/fsx exists for volume someone-elses-volume")


def test_a_claim_someone_made_for_the_same_volume_counts_as_in_place(api):
    api.namespaces[RESEARCH] = namespace_object(RESEARCH)
    api.claims[(RESEARCH, "fsx")] = {**wanted(RESEARCH), "status": {"phase": "Bound"}}
    reconciler, log = rounds(api, [wanted(RESEARCH)])
    assert reconciler.round() is True and api.writes() == []
    assert log == [f"present: claim {RESEARCH}/fsx is in place (Bound)"]


def test_a_terminating_namespace_is_waited_out_not_written_to(api):
    api.namespaces[RESEARCH] = namespace_object(RESEARCH, phase="Terminating")
    reconciler, log = rounds(api, [wanted(RESEARCH)])
    assert reconciler.round() is False and api.writes() == []
    assert log == [f"waiting: claim {RESEARCH}/fsx: namespace {RESEARCH} is being deleted"]


def test_a_namespace_that_starts_terminating_between_the_look_and_the_create_is_waited_for(api):
    api.namespaces[RESEARCH] = namespace_object(RESEARCH)
    path = f"/api/v1/namespaces/{RESEARCH}/persistentvolumeclaims"
    api.fail[("POST", path)] = [(403, status(403, "Forbidden", "unable to create new content in namespace "
                                             f"{RESEARCH} because it is being terminated", "persistentvolumeclaims",
                                             "fsx", causes=[{"reason": "NamespaceTerminating"}]))]
    reconciler, log = rounds(api, [wanted(RESEARCH)])
    assert reconciler.round() is False and log[0].startswith(f"waiting: namespace {RESEARCH} went away")
    assert reconciler.round() is True, "the next round creates it"


def test_a_claim_created_meanwhile_is_judged_next_round(api):
    api.namespaces[RESEARCH] = namespace_object(RESEARCH)
    path = f"/api/v1/namespaces/{RESEARCH}/persistentvolumeclaims"
    api.fail[("POST", path)] = [(409, status(409, "AlreadyExists", 'persistentvolumeclaims "fsx" already exists',
                                             "persistentvolumeclaims", "fsx"))]
    reconciler, _ = rounds(api, [wanted(RESEARCH)])
    assert reconciler.round() is False
    api.claims[(RESEARCH, "fsx")] = wanted(RESEARCH)
    assert reconciler.round() is True


@pytest.mark.parametrize("failure", [
    (403, status(403, "Forbidden", 'namespaces "hyperpod-ns-research" is forbidden: User "system:serviceaccount:'
                 'fmcluster-system:fmcluster-team-objects" cannot get resource "namespaces"', "namespaces", RESEARCH)),
    TimeoutError("timed out"),
    ValueError("response larger than 1048576 bytes"),
    http.client.IncompleteRead(b"{\"kind\":"),
], ids=["refused", "timeout", "oversized", "cut-short"])
def test_api_errors_are_reported_and_retried_never_fatal(api, failure):
    api.namespaces[RESEARCH] = namespace_object(RESEARCH)
    api.fail[("GET", f"/api/v1/namespaces/{RESEARCH}")] = [failure]
    reconciler, log = rounds(api, [wanted(RESEARCH)])
    assert reconciler.round() is False and log[0].startswith("error: ")
    assert reconciler.round() is True and log[-1].startswith("created: ")


def test_a_service_account_waits_for_its_namespace_and_is_created_exactly_as_given(api):
    reconciler, log = rounds(api, [account(RESEARCH)])
    assert reconciler.round() is False and api.writes() == []
    api.namespaces[RESEARCH] = namespace_object(RESEARCH)
    assert reconciler.round() is True
    created = api.accounts[(RESEARCH, CHECKPOINTS)]
    assert {k: v for k, v in created["metadata"].items() if k in ("name", "namespace", "labels", "annotations")} == \
        {"name": CHECKPOINTS, "namespace": RESEARCH}
    assert api.writes() == [("POST", f"/api/v1/namespaces/{RESEARCH}/serviceaccounts")]
    assert log == [f"waiting: service account {RESEARCH}/{CHECKPOINTS}: namespace {RESEARCH} does not exist yet",
                   f"created: created service account {RESEARCH}/{CHECKPOINTS}"]
    assert reconciler.round() is True and len(api.writes()) == 1 and len(log) == 2, "idempotent and quiet"


def test_a_service_account_someone_made_counts_as_in_place_when_it_sets_nothing_fmcluster_wants_otherwise(api):
    """fmcluster's wanted service account sets no labels or annotations: any ServiceAccount of that name serves the
    Pod Identity association (which names only the namespace and the service account)."""
    api.namespaces[RESEARCH] = namespace_object(RESEARCH)
    api.accounts[(RESEARCH, CHECKPOINTS)] = served_account(RESEARCH, labels={"team": "research"})
    reconciler, log = rounds(api, [account(RESEARCH)])
    assert reconciler.round() is True and api.writes() == []
    assert log == [f"present: service account {RESEARCH}/{CHECKPOINTS} is in place"]


def test_a_service_account_with_other_values_for_wanted_labels_is_a_conflict_and_never_touched(api):
    api.namespaces[RESEARCH] = namespace_object(RESEARCH)
    theirs = served_account(RESEARCH, labels={"app.kubernetes.io/managed-by": "helm"})
    api.accounts[(RESEARCH, CHECKPOINTS)] = theirs
    ours = account(RESEARCH)
    ours["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "fmcluster"}
    ours["metadata"]["annotations"] = {"fmcluster.io/purpose": "checkpoints"}
    reconciler, log = rounds(api, [ours])
    assert reconciler.round() is False and reconciler.round() is False
    assert api.writes() == [] and api.accounts[(RESEARCH, CHECKPOINTS)] is theirs
    (line,) = log
    assert line.startswith(f"conflict: service account {RESEARCH}/{CHECKPOINTS} label "
                           "app.kubernetes.io/managed-by='helm', not 'fmcluster'; annotation fmcluster.io/purpose=None")
    assert "left as it is" in line


def test_a_service_account_in_a_namespace_that_starts_terminating_is_waited_for(api):
    api.namespaces[RESEARCH] = namespace_object(RESEARCH)
    path = f"/api/v1/namespaces/{RESEARCH}/serviceaccounts"
    api.fail[("POST", path)] = [(403, status(403, "Forbidden", f'serviceaccounts "{CHECKPOINTS}" is forbidden: unable '
                                             f"to create new content in namespace {RESEARCH} because it is being "
                                             "terminated", "serviceaccounts", CHECKPOINTS,
                                             causes=[{"reason": "NamespaceTerminating"}]))]
    reconciler, log = rounds(api, [account(RESEARCH)])
    assert reconciler.round() is False
    assert log == [f"waiting: namespace {RESEARCH} went away while creating the service account: serviceaccounts "
                   f'"{CHECKPOINTS}" is forbidden: unable to create new content in namespace {RESEARCH} because it is '
                   "being terminated"]
    assert reconciler.round() is True


def test_a_refused_service_account_is_an_error_and_holds_readiness_while_the_claim_is_done(api):
    """What the admission policy's denial looks like to the script (HTTP 422, reason Invalid): reported, retried."""
    api.namespaces[RESEARCH] = namespace_object(RESEARCH)
    path = f"/api/v1/namespaces/{RESEARCH}/serviceaccounts"
    message = (f'serviceaccounts "{CHECKPOINTS}" is forbidden: ValidatingAdmissionPolicy '
               f"'fmcluster-team-objects-service-accounts' with binding 'fmcluster-team-objects-service-accounts' "
               "denied request: fmcluster-team-objects may create only the service accounts it is configured with")
    api.fail[("POST", path)] = [(422, status(422, "Invalid", message, "serviceaccounts", CHECKPOINTS))]
    reconciler, log = rounds(api, [wanted(RESEARCH), account(RESEARCH)])
    assert reconciler.round() is False
    assert (RESEARCH, "fsx") in api.claims
    assert log[-1] == f"error: creating service account {RESEARCH}/{CHECKPOINTS}: HTTP 422: {message}"
    assert reconciler.round() is True


def test_backoff_doubles_while_an_object_is_missing_and_rests_once_all_are_in_place():
    pauses, previous = [], 0.0
    for _ in range(7):
        previous = kube_team_objects.next_pause(False, previous, 10, 300)
        pauses.append(previous)
    assert pauses == [10, 20, 40, 80, 160, 300, 300]
    assert kube_team_objects.next_pause(True, 40, 10, 300) == 300
    assert kube_team_objects.next_pause(False, 0.0, 10, 300) == 10, "an object gone missing again is looked after soon"


class Stop(Exception):
    pass


def test_main_marks_ready_only_while_every_object_is_in_place(tmp_path, monkeypatch):
    fake = FakeApi()
    monkeypatch.setattr(kube_team_objects, "Api", lambda base=None: fake)
    config = tmp_path / team_objects.OBJECTS_FILE
    config.write_text(json.dumps([wanted(RESEARCH), account(RESEARCH)]))
    ready = tmp_path / "ready"
    refused = (422, status(422, "Invalid", "denied request", "serviceaccounts", CHECKPOINTS))
    slept: List[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        assert ready.exists() == bool(fake.claims and fake.accounts)
        if len(slept) == 2:
            fake.namespaces[RESEARCH] = namespace_object(RESEARCH)
            fake.fail[("POST", f"/api/v1/namespaces/{RESEARCH}/serviceaccounts")] = [refused]
        if len(slept) == 5:
            raise Stop

    with pytest.raises(Stop):
        kube_team_objects.main(["--objects", str(config), "--ready-file", str(ready), "--interval", "10",
                                "--max-interval", "300"], sleep=sleep)
    # waiting, waiting, claim created but the account refused, both in place, still in place
    assert slept == [10, 20, 40, 300, 300]
    assert ready.read_text() == "ready\n"


@pytest.mark.parametrize("content, error", [
    ([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RESEARCH}}], "item 0 is not a v1"),
    ([{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": CHECKPOINTS}}], "item 0 is not a v1"),
    ([{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "fsx", "namespace": RESEARCH}}],
     "item 0 is not a v1"),
    ([account(RESEARCH), account(RESEARCH)], f"item 1 repeats ServiceAccount {RESEARCH}/{CHECKPOINTS}"),
    ({"items": []}, "not a JSON list"),
], ids=["other-kind", "no-namespace", "claim-without-spec", "twice", "not-a-list"])
def test_main_refuses_an_objects_file_it_cannot_act_on(tmp_path, capsys, content, error):
    config = tmp_path / team_objects.OBJECTS_FILE
    config.write_text(json.dumps(content))
    assert kube_team_objects.main(["--objects", str(config), "--api", "http://127.0.0.1:9", "--once"]) == 2
    assert error in capsys.readouterr().err


def test_main_refuses_a_missing_objects_file(tmp_path, capsys):
    assert kube_team_objects.main(["--objects", str(tmp_path / "missing.json"), "--api", "http://127.0.0.1:9"]) == 2
    assert "FileNotFoundError" in capsys.readouterr().err


def test_the_transport_returns_status_objects_and_caps_the_response(monkeypatch):
    """The real urllib transport: a 404's Status body is returned, not raised; an oversized body is refused."""
    answers = {"/api/v1/namespaces/a": (404, json.dumps(status(404, "NotFound", 'namespaces "a" not found',
                                                                "namespaces", "a")).encode()),
               "/api/v1/namespaces/b": (200, b"{" + b" " * (kube_team_objects.RESPONSE_MAX + 10) + b"}")}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            code, raw = answers[self.path]
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        api = kube_team_objects.Api(f"http://127.0.0.1:{server.server_address[1]}", timeout=5)
        code, body = api.call("GET", "/api/v1/namespaces/a")
        assert code == 404 and body["reason"] == "NotFound"
        with pytest.raises(ValueError, match="larger than"):
            api.call("GET", "/api/v1/namespaces/b")
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ValueError, match="not an http"):
        kube_team_objects.Api("file:///etc/passwd")


# --- the objects that run it ------------------------------------------------------------------------------------


SYSTEM = {"fmcluster.io/node-group": "system"}
WANTED = [wanted(RESEARCH), wanted(PRODUCTION), account(RESEARCH), account(PRODUCTION)]


def by_kind(objects: List[Dict[str, Any]]) -> Dict[str, List[Dict[str, Any]]]:
    out: Dict[str, List[Dict[str, Any]]] = {}
    for o in objects:
        out.setdefault(o["kind"], []).append(o)
    return out


@pytest.fixture(scope="module")
def rendered() -> Dict[str, List[Dict[str, Any]]]:
    return by_kind(team_objects.objects(namespace="fmcluster-system", wanted=WANTED, node_selector=SYSTEM))


def test_the_service_account_may_read_the_named_namespaces_and_objects_and_create_the_wanted_kinds_nothing_else(
        rendered):
    (role,) = rendered["ClusterRole"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"], "resourceNames": [PRODUCTION, RESEARCH]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get"], "resourceNames": ["fsx"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get"], "resourceNames": [CHECKPOINTS]},
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["create"]},
    ]
    (binding,) = rendered["ClusterRoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": team_objects.NAME,
                                    "namespace": "fmcluster-system"}]


def test_only_the_kinds_wanted_are_granted():
    claims_only = by_kind(team_objects.objects(namespace="fmcluster-system", wanted=[wanted(RESEARCH)],
                                               node_selector=SYSTEM))
    accounts_only = by_kind(team_objects.objects(namespace="fmcluster-system", wanted=[account(RESEARCH)],
                                                 node_selector=SYSTEM))
    assert {r["resources"][0] for r in claims_only["ClusterRole"][0]["rules"]} == {"namespaces", "persistentvolumeclaims"}
    assert {r["resources"][0] for r in accounts_only["ClusterRole"][0]["rules"]} == {"namespaces", "serviceaccounts"}
    assert [p["metadata"]["name"] for p in claims_only["ValidatingAdmissionPolicy"]] == [f"{team_objects.NAME}-claims"]
    assert [p["metadata"]["name"] for p in accounts_only["ValidatingAdmissionPolicy"]] == \
        [f"{team_objects.NAME}-service-accounts"]


def policy(rendered: Dict[str, List[Dict[str, Any]]], resource: str) -> Dict[str, Any]:
    (found,) = [p for p in rendered["ValidatingAdmissionPolicy"]
                if p["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == [resource]]
    return found


def test_admission_policies_confine_the_cluster_wide_creates_to_the_wanted_objects(rendered):
    """RBAC cannot limit create by name or to namespaces that do not exist yet; the policies (CEL) can: they look only
    at this service account's requests and allow exactly the wanted namespace/name (a claim bound to its volume)."""
    claims, accounts = policy(rendered, "persistentvolumeclaims"), policy(rendered, "serviceaccounts")
    for p in (claims, accounts):
        spec = p["spec"]
        assert spec["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]
        assert spec["matchConditions"][0]["expression"] == \
            'request.userInfo.username == "system:serviceaccount:fmcluster-system:fmcluster-team-objects"'
        assert spec["failurePolicy"] == "Fail"
    assert json.loads(claims["spec"]["variables"][0]["expression"]) == {  # a CEL map literal that is also JSON
        f"{RESEARCH}/fsx": "hpeks-p5-research-fsx", f"{PRODUCTION}/fsx": "hpeks-p5-production-fsx"}
    (validation,) = claims["spec"]["validations"]
    assert "variables.allowed" in validation["expression"] and "object.spec.volumeName" in validation["expression"]
    assert json.loads(accounts["spec"]["variables"][0]["expression"]) == [  # a CEL list literal that is also JSON
        f"{RESEARCH}/{CHECKPOINTS}", f"{PRODUCTION}/{CHECKPOINTS}"]
    (validation,) = accounts["spec"]["validations"]
    assert validation["expression"] == '(request.namespace + "/" + object.metadata.name) in variables.allowed'
    assert sorted((b["spec"]["policyName"], b["spec"]["validationActions"][0]) for b in
                  rendered["ValidatingAdmissionPolicyBinding"]) == [
        (f"{team_objects.NAME}-claims", "Deny"), (f"{team_objects.NAME}-service-accounts", "Deny")]


def test_the_platforms_kinds_are_the_scripts():
    assert team_objects.RESOURCES == kube_team_objects.RESOURCES


def test_the_deployment_runs_the_script_with_the_wanted_objects_as_given(rendered):
    (config,) = rendered["ConfigMap"]
    assert json.loads(config["data"][team_objects.OBJECTS_FILE]) == WANTED
    assert config["data"]["kube_team_objects.py"] == team_objects.SCRIPT.read_text()
    (deployment,) = rendered["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == team_objects.GATE_IMAGE
    assert container["command"][:4] == ["python3", "/team-objects/kube_team_objects.py", "--objects",
                                        f"/team-objects/{team_objects.OBJECTS_FILE}"]
    assert container["readinessProbe"]["exec"]["command"] == ["cat", team_objects.READY_FILE]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["nodeSelector"] == SYSTEM and pod["serviceAccountName"] == team_objects.NAME
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_new_wanted_objects_roll_the_pod_so_it_looks_at_once(rendered):
    other = team_objects.objects(namespace="fmcluster-system", wanted=WANTED[:2], node_selector=SYSTEM)
    digest = "fmcluster.io/config-digest"
    before = rendered["Deployment"][0]["spec"]["template"]["metadata"]["annotations"][digest]
    assert other[-1]["spec"]["template"]["metadata"]["annotations"][digest] != before


def test_the_objects_refuse_what_they_cannot_create():
    def render(items: List[Dict[str, Any]], node_selector: Dict[str, str] = SYSTEM) -> None:
        team_objects.objects(namespace="n", wanted=items, node_selector=node_selector)

    with pytest.raises(ValueError, match="at least one"):
        render([])
    with pytest.raises(ValueError, match="not a v1"):
        render([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}])
    with pytest.raises(ValueError, match="not a v1"):
        render([{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": CHECKPOINTS}}])
    with pytest.raises(ValueError, match="each kind and namespace/name once"):
        render([account(RESEARCH), account(RESEARCH)])
    unbound = wanted(RESEARCH)
    del unbound["spec"]["volumeName"]
    with pytest.raises(ValueError, match="volumeName"):
        render([unbound])
    with pytest.raises(ValueError, match="node_selector"):
        render([wanted(RESEARCH)], node_selector={})
