"""The node gate: a node leaves the pending taint only on a passing boot validation result; a failure leaves a
`failed` taint, a False condition and a Warning event (what `kubectl describe node` shows). Driven end to end against
a small fake of the Kubernetes API (the calls kube_gate.py makes: GET and JSON-patch a node, strategic-merge its
status, POST an event), with its resourceVersion check."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List

import pytest

from fmcluster.platforms.kubernetes import gate, labels
from fmcluster.platforms.kubernetes.node import kube_gate
from fmcluster.runtime import actions

NODE = "ip-10-4-1-23.ec2.internal"
GPU = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
PENDING = {"key": kube_gate.TAINT_KEY, "value": "pending", "effect": "NoSchedule"}


class FakeApi:
    """One node; records every write. `race` bumps the resourceVersion once under the gate's feet."""

    def __init__(self, taints: List[Dict[str, Any]], created: str = "2026-11-30T10:00:00Z") -> None:
        self.node: Dict[str, Any] = {"metadata": {"name": NODE, "uid": "u-1", "resourceVersion": "7",
                                                  "creationTimestamp": created},
                                     "spec": {"taints": list(taints)}, "status": {"conditions": []}}
        self.events: List[Dict[str, Any]] = []
        self.patches: List[Any] = []
        self.race = False
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: Any) -> None:
                raw = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _body(self) -> Any:
                return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

            def do_GET(self) -> None:  # noqa: N802
                assert self.path == f"/api/v1/nodes/{NODE}"
                self._send(200, api.node)

            def do_PATCH(self) -> None:  # noqa: N802
                body = self._body()
                if self.path == f"/api/v1/nodes/{NODE}":
                    assert self.headers["Content-Type"] == "application/json-patch+json"
                    api.patches.append(body)
                    if api.race:  # someone else changed the node since the gate read it
                        api.race = False
                        api.node["metadata"]["resourceVersion"] = "8"
                    test, *ops = body
                    if test["value"] != api.node["metadata"]["resourceVersion"]:
                        return self._send(422, {"reason": "Invalid"})
                    for op in ops:
                        assert op["op"] == "add" and op["path"] in ("/spec/taints", "/metadata/labels"), op
                        where, key = op["path"].split("/")[1:]
                        api.node[where][key] = op["value"]
                    api.node["metadata"]["resourceVersion"] = str(int(api.node["metadata"]["resourceVersion"]) + 1)
                    return self._send(200, api.node)
                assert self.path == f"/api/v1/nodes/{NODE}/status"
                assert self.headers["Content-Type"] == "application/strategic-merge-patch+json"
                api.node["status"]["conditions"] = body["status"]["conditions"]
                self._send(200, api.node)

            def do_POST(self) -> None:  # noqa: N802
                assert self.path == "/api/v1/namespaces/default/events"
                api.events.append(self._body())
                self._send(201, {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def gate(self, result: Path, policy: str = "taint", timeout: float = 2700.0, adopt: bool = False) -> int:
        return kube_gate.main(["--node", NODE, "--result", str(result), "--policy", policy, "--api", self.url,
                               "--timeout", str(timeout), "--once"] + (["--adopt"] if adopt else []))

    @property
    def condition(self) -> Dict[str, Any]:
        (c,) = self.node["status"]["conditions"]
        return c


@pytest.fixture
def api():
    fake = FakeApi([GPU, PENDING], created=kube_gate._now())
    yield fake
    fake.server.shutdown()


def write_result(tmp_path: Path, verdict: str, failing: List[str] = ()) -> Path:
    path = tmp_path / "validation.json"
    checks = [{"id": f, "observed": "driver not loaded", "expected": "loaded"} for f in failing]
    path.write_text(json.dumps({"verdict": verdict, "failing": list(failing), "level": "standard", "checks": checks,
                                "summary": {"pass": 40}}))
    return path


def test_the_gate_uses_the_runtime_taint_key():
    assert kube_gate.TAINT_KEY == actions.TAINT_KEY == labels.VALIDATION_TAINT_KEY


def test_a_passing_node_is_opened(api, tmp_path):
    assert api.gate(write_result(tmp_path, "pass")) == 0
    assert api.node["spec"]["taints"] == [GPU], "only our taint goes; the GPU taint stays"
    assert api.condition["type"] == "FmclusterValidated" and api.condition["status"] == "True"
    (event,) = api.events
    assert event["reason"] == "NodeValidationPassed" and event["type"] == "Normal"
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": "u-1"}


def test_a_failing_node_stays_tainted_with_the_reason(api, tmp_path):
    assert api.gate(write_result(tmp_path, "fail", ["hw.gpu.driver"])) == 0
    assert api.node["spec"]["taints"] == [GPU, {**PENDING, "value": "failed"}]
    assert api.condition["status"] == "False" and api.condition["reason"] == "ValidationFailed"
    assert "hw.gpu.driver: driver not loaded (expected loaded)" in api.condition["message"]
    (event,) = api.events
    assert event["type"] == "Warning" and event["reason"] == "NodeValidationFailed"


def test_report_policy_opens_a_failing_node_but_says_so(api, tmp_path):
    assert api.gate(write_result(tmp_path, "fail", ["efa.ports"]), policy="report") == 0
    assert api.node["spec"]["taints"] == [GPU]
    assert api.condition["status"] == "False" and api.events[0]["type"] == "Warning"


def test_before_the_validator_ends_nothing_changes(api, tmp_path):
    """Kubelet may start first: without a result the node keeps its pending taint and the gate keeps looking."""
    assert api.gate(tmp_path / "validation.json") == 1
    assert api.node["spec"]["taints"] == [GPU, PENDING] and not api.patches and not api.events


def test_no_result_in_time_is_a_failure(tmp_path):
    fake = FakeApi([GPU, PENDING], created="2026-01-01T00:00:00Z")
    try:
        assert fake.gate(tmp_path / "validation.json", timeout=60) == 0
        assert fake.node["spec"]["taints"][-1]["value"] == "failed"
        assert fake.condition["reason"] == "NoResult"
    finally:
        fake.server.shutdown()


def test_a_garbled_result_is_a_failure(api, tmp_path):
    (tmp_path / "validation.json").write_text("{not json")
    assert api.gate(tmp_path / "validation.json") == 0
    assert api.node["spec"]["taints"][-1]["value"] == "failed" and "unreadable" in api.condition["message"]


def test_a_concurrent_node_change_is_retried_not_overwritten(api, tmp_path):
    api.race = True
    assert api.gate(write_result(tmp_path, "pass")) == 0
    assert len(api.patches) == 2, "the first patch's resourceVersion test failed; the gate re-read and retried"
    assert api.node["spec"]["taints"] == [GPU]


def test_a_node_already_decided_is_left_alone(tmp_path):
    fake = FakeApi([GPU, {**PENDING, "value": "failed"}])
    try:
        assert fake.gate(write_result(tmp_path, "pass")) == 0
        assert not fake.patches and not fake.events, "an operator resets the taint to pending to re-gate a node"
    finally:
        fake.server.shutdown()


def test_adopt_decides_for_a_node_that_registered_without_the_pending_taint(tmp_path):
    """HyperPod refuses custom taints on instance groups with deep health checks: such nodes register untainted."""
    fake = FakeApi([], created=kube_gate._now())
    try:
        assert fake.gate(write_result(tmp_path, "fail", ["storage.mounts"])) == 0
        assert not fake.patches, "without --adopt an untainted node is left alone"
        assert fake.gate(tmp_path / "missing.json", adopt=True) == 1, "no result yet: keep looking"
        assert fake.gate(write_result(tmp_path, "fail", ["storage.mounts"]), adopt=True) == 0
        assert fake.node["spec"]["taints"] == [{**PENDING, "value": "failed"}]
        assert fake.condition["status"] == "False"
        fake.node["spec"]["taints"] = []  # an operator lifts it: the node is decided, the gate leaves it alone
        patches = len(fake.patches)
        assert fake.gate(write_result(tmp_path, "fail", ["storage.mounts"]), adopt=True) == 0
        assert len(fake.patches) == patches and fake.node["spec"]["taints"] == []
    finally:
        fake.server.shutdown()


def test_adopt_opens_nothing_on_a_pass_but_records_it(tmp_path):
    fake = FakeApi([], created=kube_gate._now())
    try:
        assert fake.gate(write_result(tmp_path, "pass"), adopt=True) == 0
        assert fake.node["spec"]["taints"] == [] and fake.condition["status"] == "True"
    finally:
        fake.server.shutdown()


def test_decide_waits_then_decides():
    assert kube_gate.decide(None, "taint") is None
    assert kube_gate.decide(None, "taint", timed_out=True).taint == "failed"
    assert kube_gate.decide({"verdict": "pass"}, "taint").taint is None
    long = kube_gate.decide({"verdict": "fail", "failing": ["x"] * 500}, "taint")
    assert len(long.message) <= kube_gate.MESSAGE_MAX


# ---- the objects that run it ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gate_objects():
    return {o["kind"]: o for o in gate.objects(groups=["h100", "prep"], policy="taint")}


def test_the_gate_runs_on_every_spec_node_group_despite_the_taints(gate_objects):
    pod = gate_objects["DaemonSet"]["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": labels.GROUP, "operator": "In", "values": ["h100", "prep"]}]}]
    tolerated = {(t.get("key"), t.get("effect")) for t in pod["tolerations"] if t["operator"] == "Exists"}
    assert {(labels.VALIDATION_TAINT_KEY, "NoSchedule"), ("nvidia.com/gpu", "NoSchedule")} <= tolerated


def test_the_gate_reads_the_result_read_only_and_runs_unprivileged(gate_objects):
    pod = gate_objects["DaemonSet"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert {"name": "state", "mountPath": "/host/var/lib/fmcluster", "readOnly": True} in container["volumeMounts"]
    assert "/host/var/lib/fmcluster/validation.json" in container["command"]
    ctx = container["securityContext"]
    assert ctx["runAsNonRoot"] and ctx["readOnlyRootFilesystem"] and ctx["capabilities"] == {"drop": ["ALL"]}
    assert not ctx["allowPrivilegeEscalation"] and "hostNetwork" not in pod


def test_the_gate_may_patch_nodes_and_post_events_only(gate_objects):
    assert gate_objects["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}]
    role = gate_objects["Role"]
    assert role["metadata"]["namespace"] == "default"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]


def test_the_script_shipped_is_the_runtime_gate(gate_objects):
    script = gate_objects["ConfigMap"]["data"]["kube_gate.py"]
    assert script == (Path(kube_gate.__file__)).read_text()
    compile(script, "kube_gate.py", "exec")


def test_gate_policy_must_be_one_the_gate_knows():
    with pytest.raises(ValueError, match="policy"):
        gate.objects(groups=["a"], policy="drain")


def test_replace_labels_a_node_with_a_hardware_fault_for_hyperpods_replacement(api, tmp_path):
    api.node["metadata"]["labels"] = {"fmcluster.io/node-group": "h100"}
    assert api.gate(write_result(tmp_path, "fail", ["hw.ecc", "versions.nccl"]), policy="replace") == 0
    assert api.node["spec"]["taints"] == [GPU, {**PENDING, "value": "failed"}]
    assert api.node["metadata"]["labels"] == {"fmcluster.io/node-group": "h100",
                                              "sagemaker.amazonaws.com/node-health-status":
                                                  "UnschedulablePendingReplacement"}


def test_replace_keeps_a_node_with_a_software_fault_tainted_only(api, tmp_path):
    assert api.gate(write_result(tmp_path, "fail", ["versions.nccl"]), policy="replace") == 0
    assert api.node["spec"]["taints"] == [GPU, {**PENDING, "value": "failed"}]
    assert "labels" not in api.node["metadata"], "a new instance would fail the same way: no replacement asked"


def test_the_gate_and_the_validator_agree_on_what_a_hardware_fault_is():
    assert kube_gate.HARDWARE_FAULTS == actions.HARDWARE_FAULTS
