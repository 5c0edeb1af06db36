"""Claims created from inside the cluster once their namespace exists (runtime/kube_claims.py), and the objects that run
it (platforms/kubernetes/claims.py). The script is driven in-process against a fake of the Kubernetes API that answers
as the API server does (objects, and Status objects for 404, 409 and a terminating namespace's 403); one test runs
the real HTTP transport against a local server."""

from __future__ import annotations

import copy
import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

import pytest

from fmcluster.platforms.kubernetes import claims, volumes
from fmcluster.runtime import kube_claims

RESEARCH, PRODUCTION = "hyperpod-ns-research", "hyperpod-ns-production"


def wanted(namespace: str, cluster: str = "hpeks-p5") -> Dict[str, Any]:
    team = namespace.rsplit("-", 1)[-1]
    _pv, pvc = volumes.fsx_volume(cluster=f"{cluster}-{team}", namespace=namespace, file_system_id="fs-0123456789abcdef0",
                                  dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", mount_name="abcdefgh",
                                  capacity_gib=9600)
    return pvc


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


class FakeApi:
    """Namespaces and claims as the API server holds them; every call recorded. `fail` maps (method, path) to a
    queued answer or exception, served once before the normal behaviour."""

    def __init__(self) -> None:
        self.namespaces: Dict[str, Dict[str, Any]] = {}
        self.claims: Dict[Tuple[str, str], Dict[str, Any]] = {}
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
        parts = path.strip("/").split("/")  # api v1 namespaces <ns> [persistentvolumeclaims [<name>]]
        assert parts[:3] == ["api", "v1", "namespaces"], path
        ns = parts[3]
        if len(parts) == 4:
            assert method == "GET"
            if ns not in self.namespaces:
                return 404, status(404, "NotFound", f'namespaces "{ns}" not found', "namespaces", ns)
            return 200, self.namespaces[ns]
        assert parts[4] == "persistentvolumeclaims", path
        if method == "GET":
            name = parts[5]
            if (ns, name) not in self.claims:
                return 404, status(404, "NotFound", f'persistentvolumeclaims "{name}" not found',
                                   "persistentvolumeclaims", name)
            return 200, self.claims[(ns, name)]
        assert method == "POST" and len(parts) == 5, (method, path)
        name = body["metadata"]["name"]
        if ns not in self.namespaces:
            return 404, status(404, "NotFound", f'namespaces "{ns}" not found', "namespaces", ns)
        if self.namespaces[ns]["status"]["phase"] == "Terminating":
            return 403, status(403, "Forbidden", f'persistentvolumeclaims "{name}" is forbidden: unable to create new '
                               f"content in namespace {ns} because it is being terminated", "persistentvolumeclaims",
                               name, causes=[{"reason": "NamespaceTerminating", "message": f"namespace {ns} is being "
                                              "terminated", "field": "metadata.namespace"}])
        if (ns, name) in self.claims:
            return 409, status(409, "AlreadyExists", f'persistentvolumeclaims "{name}" already exists',
                               "persistentvolumeclaims", name)
        created = copy.deepcopy(body)
        created["metadata"].update(uid=f"uid-{ns}-{name}", resourceVersion="5151",
                                   creationTimestamp="2026-12-01T10:05:00Z")
        created["status"] = {"phase": "Pending"}
        self.claims[(ns, name)] = created
        return 201, created

    def writes(self) -> List[Tuple[str, str]]:
        return [c for c in self.calls if c[0] != "GET"]


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


def rounds(api: FakeApi, claims_: List[Dict[str, Any]]):
    log: List[str] = []
    return kube_claims.Reconciler(api, claims_, log.append), log


def test_a_claim_waits_for_its_namespace_and_is_created_once_it_exists(api):
    reconciler, log = rounds(api, [wanted(RESEARCH)])
    assert reconciler.round() is False and (RESEARCH, "fsx") not in api.claims
    assert reconciler.round() is False
    assert log == [f"waiting: namespace {RESEARCH} does not exist yet"], "a state is logged once, not every round"
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


def test_claims_are_independent_and_each_round_makes_at_most_three_calls_per_claim(api):
    api.namespaces[PRODUCTION] = namespace_object(PRODUCTION)
    reconciler, _ = rounds(api, [wanted(RESEARCH), wanted(PRODUCTION)])
    assert reconciler.round() is False
    assert (PRODUCTION, "fsx") in api.claims and (RESEARCH, "fsx") not in api.claims
    assert len(api.calls) <= 6
    assert reconciler.states == {f"{RESEARCH}/fsx": "waiting", f"{PRODUCTION}/fsx": "present"}


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
    assert log == [f"waiting: namespace {RESEARCH} is being deleted"]


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
                 'fmcluster-system:fmcluster-claims" cannot get resource "namespaces"', "namespaces", RESEARCH)),
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


def test_backoff_doubles_while_a_claim_is_missing_and_rests_once_all_are_in_place():
    pauses, previous = [], 0.0
    for _ in range(7):
        previous = kube_claims.next_pause(False, previous, 10, 300)
        pauses.append(previous)
    assert pauses == [10, 20, 40, 80, 160, 300, 300]
    assert kube_claims.next_pause(True, 40, 10, 300) == 300
    assert kube_claims.next_pause(False, 0.0, 10, 300) == 10, "a claim gone missing again is looked after soon"


class Stop(Exception):
    pass


def test_main_marks_ready_only_while_every_claim_is_in_place(tmp_path, monkeypatch):
    fake = FakeApi()
    monkeypatch.setattr(kube_claims, "Api", lambda base=None: fake)
    config = tmp_path / "claims.json"
    config.write_text(json.dumps([wanted(RESEARCH)]))
    ready = tmp_path / "ready"
    slept: List[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        assert ready.exists() == bool(fake.claims)
        if len(slept) == 2:
            fake.namespaces[RESEARCH] = namespace_object(RESEARCH)
        if len(slept) == 4:
            raise Stop

    with pytest.raises(Stop):
        kube_claims.main(["--claims", str(config), "--ready-file", str(ready), "--interval", "10",
                          "--max-interval", "300"], sleep=sleep)
    assert slept == [10, 20, 300, 300]
    assert ready.read_text() == "ready\n"


def test_main_refuses_a_claims_file_that_is_not_claims(tmp_path, capsys):
    config = tmp_path / "claims.json"
    config.write_text(json.dumps([{"kind": "Namespace", "metadata": {"name": RESEARCH}}]))
    assert kube_claims.main(["--claims", str(config), "--api", "http://127.0.0.1:9", "--once"]) == 2
    assert "item 0 is not a PersistentVolumeClaim" in capsys.readouterr().err
    assert kube_claims.main(["--claims", str(tmp_path / "missing.json"), "--api", "http://127.0.0.1:9"]) == 2


def test_the_transport_returns_status_objects_and_caps_the_response(monkeypatch):
    """The real urllib transport: a 404's Status body is returned, not raised; an oversized body is refused."""
    answers = {"/api/v1/namespaces/a": (404, json.dumps(status(404, "NotFound", 'namespaces "a" not found',
                                                                "namespaces", "a")).encode()),
               "/api/v1/namespaces/b": (200, b"{" + b" " * (kube_claims.RESPONSE_MAX + 10) + b"}")}

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
        api = kube_claims.Api(f"http://127.0.0.1:{server.server_address[1]}", timeout=5)
        code, body = api.call("GET", "/api/v1/namespaces/a")
        assert code == 404 and body["reason"] == "NotFound"
        with pytest.raises(ValueError, match="larger than"):
            api.call("GET", "/api/v1/namespaces/b")
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ValueError, match="not an http"):
        kube_claims.Api("file:///etc/passwd")


# --- the objects that run it ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered() -> Dict[str, Dict[str, Any]]:
    objs = claims.objects(namespace="fmcluster-system", claims=[wanted(RESEARCH), wanted(PRODUCTION)],
                          node_selector={"fmcluster.io/node-group": "system"})
    return {o["kind"]: o for o in objs}


def test_the_service_account_may_read_the_named_namespaces_and_claims_and_create_claims_nothing_else(rendered):
    assert rendered["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"], "resourceNames": [PRODUCTION, RESEARCH]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get"], "resourceNames": ["fsx"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["create"]},
    ]
    binding = rendered["ClusterRoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": claims.NAME, "namespace": "fmcluster-system"}]


def test_an_admission_policy_confines_the_cluster_wide_create_to_the_wanted_claims(rendered):
    """RBAC cannot limit create by name or to namespaces that do not exist yet; the policy (CEL) can: it looks only at
    this service account's requests and allows exactly the wanted namespace/name, bound to its volume."""
    policy, binding = rendered["ValidatingAdmissionPolicy"], rendered["ValidatingAdmissionPolicyBinding"]
    spec = policy["spec"]
    assert spec["matchConstraints"]["resourceRules"] == [{"apiGroups": [""], "apiVersions": ["v1"],
                                                          "operations": ["CREATE"], "resources": ["persistentvolumeclaims"]}]
    assert spec["matchConditions"][0]["expression"] == \
        'request.userInfo.username == "system:serviceaccount:fmcluster-system:fmcluster-claims"'
    assert json.loads(spec["variables"][0]["expression"]) == {  # a CEL map literal that is also JSON
        f"{RESEARCH}/fsx": "hpeks-p5-research-fsx", f"{PRODUCTION}/fsx": "hpeks-p5-production-fsx"}
    assert spec["failurePolicy"] == "Fail" and binding["spec"] == {"policyName": claims.NAME,
                                                                   "validationActions": ["Deny"]}
    (validation,) = spec["validations"]
    assert "variables.allowed" in validation["expression"] and "object.spec.volumeName" in validation["expression"]


def test_the_deployment_runs_the_script_with_the_wanted_claims_as_given(rendered):
    config = rendered["ConfigMap"]["data"]
    assert json.loads(config[claims.CLAIMS_FILE]) == [wanted(RESEARCH), wanted(PRODUCTION)]
    assert config["kube_claims.py"] == claims.SCRIPT.read_text()
    pod = rendered["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == claims.GATE_IMAGE and container["command"][:2] == ["python3", "/claims/kube_claims.py"]
    assert container["readinessProbe"]["exec"]["command"] == ["cat", claims.READY_FILE]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["nodeSelector"] == {"fmcluster.io/node-group": "system"} and pod["serviceAccountName"] == claims.NAME
    assert rendered["Deployment"]["spec"]["strategy"] == {"type": "Recreate"}


def test_new_claims_roll_the_pod_so_it_looks_at_once(rendered):
    other = claims.objects(namespace="fmcluster-system", claims=[wanted(RESEARCH)],
                           node_selector={"fmcluster.io/node-group": "system"})
    digest = "fmcluster.io/config-digest"
    before = rendered["Deployment"]["spec"]["template"]["metadata"]["annotations"][digest]
    assert other[-1]["spec"]["template"]["metadata"]["annotations"][digest] != before


def test_the_objects_refuse_what_they_cannot_create():
    with pytest.raises(ValueError, match="claims"):
        claims.objects(namespace="n", claims=[], node_selector={"a": "b"})
    with pytest.raises(ValueError, match="not a PersistentVolumeClaim"):
        claims.objects(namespace="n", claims=[{"kind": "Namespace", "metadata": {"name": "x"}}], node_selector={"a": "b"})
    with pytest.raises(ValueError, match="each namespace/name once"):
        claims.objects(namespace="n", claims=[wanted(RESEARCH), wanted(RESEARCH)], node_selector={"a": "b"})
    unbound = wanted(RESEARCH)
    del unbound["spec"]["volumeName"]
    with pytest.raises(ValueError, match="volumeName"):
        claims.objects(namespace="n", claims=[unbound], node_selector={"a": "b"})
    with pytest.raises(ValueError, match="node_selector"):
        claims.objects(namespace="n", claims=[wanted(RESEARCH)], node_selector={})
