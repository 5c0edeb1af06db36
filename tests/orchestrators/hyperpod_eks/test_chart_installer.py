"""The custom resource that installs HyperPod's dependency chart (chart_installer/index.py), run as Lambda would run
it, offline: the archive is a local tarball shaped as GitHub serves one (file:// URL), helm is a fake that records its
arguments, EKS is a botocore Stubber, and CloudFormation's answer is captured. The Git tree id the handler computes is
the one git itself computes."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any, Dict, List

import boto3
import pytest
from botocore.stub import Stubber

from fmcluster.orchestrators.hyperpod_eks.chart_installer import index
from fmcluster.orchestrators.hyperpod_eks.versions import HYPERPOD_CHART

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOP = f"sagemaker-hyperpod-cli-{COMMIT}"
CHART_FILES = {
    "Chart.yaml": "apiVersion: v2\nname: hyperpod-helm-chart\nversion: 0.1.0\n",
    "values.yaml": "namespace:\n  name: aws-hyperpod\n",
    "charts/health-monitoring-agent/Chart.yaml": "apiVersion: v2\nname: health-monitoring-agent\nversion: 0.1.0\n",
    "charts/health-monitoring-agent/templates/agent.yaml": "kind: DaemonSet\n",
}


class Context:
    def __init__(self, remaining_ms: int = 900_000) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def archive(tmp: Path, files: Dict[str, str], extra: Any = None) -> Path:
    """A .tar.gz as GitHub's archive endpoint serves one: everything under <repo>-<commit>/."""
    path = tmp / "source.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for rel, text in {"README.md": "other files\n", **{f"helm_chart/HyperPodHelmChart/{k}": v
                                                           for k, v in files.items()}}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{TOP}/{rel}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        if extra is not None:
            extra(tar)
    return path


def git_tree(files: Dict[str, str], tmp: Path) -> str:
    """What git says the directory's tree id is."""
    repo = tmp / "git"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    env = dict(os.environ, GIT_DIR=str(repo / ".git"), GIT_WORK_TREE=str(repo))
    subprocess.run(["git", "init", "-q", str(repo)], check=True, capture_output=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    return subprocess.run(["git", "write-tree"], cwd=repo, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def sleeps(monkeypatch) -> List[float]:
    """The installer's delays between tries, recorded instead of slept."""
    delays: List[float] = []
    monkeypatch.setattr(index, "pause", delays.append)
    return delays


@pytest.fixture
def fake_helm(tmp_path, monkeypatch, sleeps):
    """A fake helm and a fake kubectl, both logging to helm.log (kubectl's lines start with KUBECTL). FAKE_HELM_RC and
    FAKE_HELM_OUTPUT: every helm call's exit status and output; FAKE_HELM_FAIL_ONCE=<subcommand>:<message> and
    FAKE_KUBECTL_FAIL_ONCE=<message>: the first such call fails with the message."""
    log = tmp_path / "helm.log"
    helm = tmp_path / "helm"
    helm.write_text("#!/bin/bash\n"
                    f'echo "$* HOME=$HOME" >> {log}\n'
                    'if [ -n "$FAKE_HELM_FAIL_ONCE" ] && [ "$1" = "${FAKE_HELM_FAIL_ONCE%%:*}" ] && '
                    f'[ ! -e {tmp_path}/helm-failed ]; then touch {tmp_path}/helm-failed; '
                    'echo "${FAKE_HELM_FAIL_ONCE#*:}" >&2; exit 1; fi\n'
                    'if [ "$1" = upgrade ]; then cp "$(echo "$@" | sed -n "s/.*--values \\([^ ]*\\).*/\\1/p")" '
                    f"{tmp_path}/values-seen.json; fi\n"
                    '[ -n "$FAKE_HELM_OUTPUT" ] && echo "$FAKE_HELM_OUTPUT" >&2\n'
                    'exit "${FAKE_HELM_RC:-0}"\n')
    helm.chmod(0o755)
    kubectl = tmp_path / "kubectl"
    kubectl.write_text("#!/bin/bash\n"
                       f'echo "KUBECTL $*" >> {log}\n'
                       'if [ -n "$FAKE_KUBECTL_FAIL_ONCE" ] && '
                       f'[ ! -e {tmp_path}/kubectl-failed ]; then touch {tmp_path}/kubectl-failed; '
                       'echo "$FAKE_KUBECTL_FAIL_ONCE" >&2; exit 1; fi\n'
                       f'cp "$3" {tmp_path}/kubectl-applied.json\n')
    kubectl.chmod(0o755)
    monkeypatch.setattr(index, "HELM", str(helm))
    monkeypatch.setattr(index, "KUBECTL", str(kubectl))
    monkeypatch.setattr(index, "WORK", str(tmp_path))
    monkeypatch.setattr(index, "DOWNLOAD_ATTEMPTS", 1)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    return log


def session_with_cluster(found: bool = True) -> Any:
    session = boto3.session.Session(region_name="us-east-1")
    eks = session.client("eks", region_name="us-east-1")
    stub = Stubber(eks)
    if found:
        stub.add_response("describe_cluster", {"cluster": {
            "name": "hpeks-p5", "endpoint": "https://ABC.gr7.us-east-1.eks.amazonaws.com",
            "certificateAuthority": {"data": "Q0EK"}}}, {"name": "hpeks-p5"})
    else:
        stub.add_client_error("describe_cluster", "ResourceNotFoundException", http_status_code=404)
    stub.activate()
    real = session.client

    class Session:
        def client(self, service: str, **kw: Any) -> Any:
            return eks if service == "eks" else real(service, **kw)

        def get_credentials(self) -> Any:
            return session.get_credentials()

        @property
        def events(self) -> Any:
            return session.events

    return Session()


def event(tmp_path: Path, request: str, url: str, tree: str, **props: Any) -> Dict[str, Any]:
    return {"RequestType": request, "ResponseURL": "https://cloudformation-custom-resource-response",
            "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/hpeks-p5-cluster/1", "RequestId": "r-1",
            "LogicalResourceId": "HyperPodEksDependencies", "ResourceType": "Custom::GitHelmChart",
            "ResourceProperties": {"ServiceToken": "arn", "ClusterName": "hpeks-p5", "ArchiveUrl": url,
                                   "ChartPath": "helm_chart/HyperPodHelmChart", "TreeId": tree,
                                   "Release": "hyperpod-dependencies", "Namespace": "kube-system",
                                   "Values": json.dumps({"global": {"region": "us-east-1"}}), **props}}


def run(ev: Dict[str, Any], session: Any) -> List[tuple]:
    answers: List[tuple] = []
    index.handler(ev, Context(), session_factory=lambda: session, answer=lambda *a: answers.append(a))
    return answers


def test_the_tree_id_is_gits(tmp_path):
    files = {**CHART_FILES, "charts/x/run.sh": "#!/bin/sh\n"}
    chart = tmp_path / "chart"
    for rel, text in files.items():
        (chart / rel).parent.mkdir(parents=True, exist_ok=True)
        (chart / rel).write_text(text)
    (chart / "empty-dir").mkdir()
    assert index.git_tree_id(str(chart)) == git_tree(files, tmp_path)
    (chart / "charts/x/run.sh").chmod(0o755)
    assert index.git_tree_id(str(chart)) != git_tree(files, tmp_path), "the executable bit is part of the tree"


def test_create_downloads_checks_the_tree_updates_dependencies_and_installs(tmp_path, fake_helm):
    url = archive(tmp_path, CHART_FILES).as_uri()
    answers = run(event(tmp_path, "Create", url, git_tree(CHART_FILES, tmp_path)), session_with_cluster())
    (ev, status, reason, physical), = answers
    assert status == "SUCCESS", reason
    assert physical == "hpeks-p5/kube-system/hyperpod-dependencies"
    calls = fake_helm.read_text().splitlines()
    assert calls[0].startswith("dependency update ") and calls[0].split()[2].endswith("/chart")
    assert calls[1].startswith("upgrade --install hyperpod-dependencies ")
    assert "--namespace kube-system" in calls[1] and "--kubeconfig" in calls[1] and "--wait" not in calls[1]
    assert json.loads((tmp_path / "values-seen.json").read_text()) == {"global": {"region": "us-east-1"}}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("chart-")], "the work directory is cleaned up"


def test_create_makes_the_namespaces_the_chart_needs_before_helm_installs(tmp_path, fake_helm):
    """cert-manager's sub-chart puts its objects in the cert-manager namespace and nothing in the chart creates it: the
    installer applies it (idempotent: an existing namespace is left as it is) before helm upgrade --install."""
    url = archive(tmp_path, CHART_FILES).as_uri()
    ev = event(tmp_path, "Create", url, git_tree(CHART_FILES, tmp_path), Namespaces=["cert-manager"])
    (_, status, reason, _), = run(ev, session_with_cluster())
    assert status == "SUCCESS", reason
    calls = fake_helm.read_text().splitlines()
    assert calls[0].startswith("KUBECTL apply -f ") and "--kubeconfig" in calls[0], calls
    assert [c.split()[0] for c in calls[1:]] == ["dependency", "upgrade"]
    applied = json.loads((tmp_path / "kubectl-applied.json").read_text())
    assert [(o["kind"], o["metadata"]["name"]) for o in applied["items"]] == [("Namespace", "cert-manager")]
    assert applied["items"][0]["metadata"]["labels"] == {"fmcluster.io/created-for": "hyperpod-dependencies"}


def test_helm_is_retried_after_a_transient_failure(tmp_path, fake_helm, sleeps, monkeypatch):
    """Seconds after its access entry exists the installer's first calls may be refused (Unauthorized); a registry or
    DNS error is as passing. The failed call is made again after a delay and the resource succeeds."""
    monkeypatch.setenv("FAKE_HELM_FAIL_ONCE", "upgrade:Error: Kubernetes cluster unreachable: the server has asked "
                                              "for the client to provide credentials (Unauthorized)")
    url = archive(tmp_path, CHART_FILES).as_uri()
    (_, status, reason, _), = run(event(tmp_path, "Create", url, git_tree(CHART_FILES, tmp_path)),
                                  session_with_cluster())
    assert status == "SUCCESS", reason
    assert [c.split()[0] for c in fake_helm.read_text().splitlines()] == ["dependency", "upgrade", "upgrade"]
    assert sleeps == [index.TOOL_FIRST_DELAY_S]


def test_kubectl_is_retried_after_a_transient_failure(tmp_path, fake_helm, monkeypatch):
    monkeypatch.setenv("FAKE_KUBECTL_FAIL_ONCE", 'error: Get "https://ABC.gr7.us-east-1.eks.amazonaws.com/api": dial '
                                                 "tcp: lookup ABC.gr7.us-east-1.eks.amazonaws.com: no such host")
    url = archive(tmp_path, CHART_FILES).as_uri()
    ev = event(tmp_path, "Create", url, git_tree(CHART_FILES, tmp_path), Namespaces=["cert-manager"])
    (_, status, reason, _), = run(ev, session_with_cluster())
    assert status == "SUCCESS", reason
    assert [c.split()[0] for c in fake_helm.read_text().splitlines()] == ["KUBECTL", "KUBECTL", "dependency", "upgrade"]


def test_a_lasting_failure_is_not_retried_and_a_transient_one_only_within_the_deadline(tmp_path, fake_helm, sleeps,
                                                                                        monkeypatch):
    url = archive(tmp_path, CHART_FILES).as_uri()
    tree = git_tree(CHART_FILES, tmp_path)
    monkeypatch.setenv("FAKE_HELM_RC", "1")
    monkeypatch.setenv("FAKE_HELM_OUTPUT", "Error: template: hyperpod-helm-chart/templates/x.yaml:3: bad character")
    (_, status, reason, _), = run(event(tmp_path, "Create", url, tree), session_with_cluster())
    assert status == "FAILED" and "bad character" in reason and "attempts" not in reason
    assert len(fake_helm.read_text().splitlines()) == 1 and sleeps == []
    # transient, every time: retried TOOL_ATTEMPTS times, then the resource fails with the output
    fake_helm.unlink()
    monkeypatch.setenv("FAKE_HELM_OUTPUT", "Error: looks like \"https://nvidia.github.io/k8s-device-plugin\" is not a "
                                           "valid chart repository or cannot be reached: 503 Service Unavailable")
    (_, status, reason, _), = run(event(tmp_path, "Create", url, tree), session_with_cluster())
    assert status == "FAILED" and f"after {index.TOOL_ATTEMPTS} attempts" in reason and "cannot be reached" in reason
    assert len(fake_helm.read_text().splitlines()) == index.TOOL_ATTEMPTS and sleeps == [10.0, 20.0, 40.0]
    # transient, but the Lambda's deadline leaves no room for another try: no retry
    fake_helm.unlink()
    sleeps.clear()
    answers: List[tuple] = []
    index.handler(event(tmp_path, "Create", url, tree), Context(remaining_ms=(index.MARGIN_S + 60) * 1000),
                  session_factory=session_with_cluster, answer=lambda *a: answers.append(a))
    (_, status, reason, _), = answers
    assert status == "FAILED" and "cannot be reached" in reason and sleeps == []


def test_content_other_than_the_pinned_trees_is_refused(tmp_path, fake_helm):
    url = archive(tmp_path, {**CHART_FILES, "values.yaml": "namespace:\n  name: evil\n"}).as_uri()
    (_, status, reason, _), = run(event(tmp_path, "Create", url, git_tree(CHART_FILES, tmp_path)),
                                  session_with_cluster())
    assert status == "FAILED" and "refusing to install content other than the pinned commit's" in reason
    assert not fake_helm.exists(), "helm never ran"


def test_links_in_the_chart_are_refused(tmp_path, fake_helm):
    def link(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(f"{TOP}/helm_chart/HyperPodHelmChart/templates/passwd")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)

    url = archive(tmp_path, CHART_FILES, extra=link).as_uri()
    (_, status, reason, _), = run(event(tmp_path, "Create", url, "0" * 40), session_with_cluster())
    assert status == "FAILED" and "is a link or device" in reason


def test_a_failing_helm_fails_the_resource_with_its_output(tmp_path, fake_helm, monkeypatch):
    monkeypatch.setenv("FAKE_HELM_RC", "1")
    url = archive(tmp_path, CHART_FILES).as_uri()
    (_, status, reason, _), = run(event(tmp_path, "Create", url, git_tree(CHART_FILES, tmp_path)),
                                  session_with_cluster())
    assert status == "FAILED" and reason.startswith("helm dependency failed (exit 1)")


def test_an_unreachable_archive_fails_the_resource(tmp_path, fake_helm):
    (_, status, reason, _), = run(event(tmp_path, "Create", (tmp_path / "missing.tar.gz").as_uri(), "0" * 40),
                                  session_with_cluster())
    assert status == "FAILED" and reason.startswith("cannot download")


def test_delete_uninstalls_and_tolerates_a_cluster_that_is_gone(tmp_path, fake_helm):
    ev = event(tmp_path, "Delete", "unused", "0" * 40)
    ev["PhysicalResourceId"] = "hpeks-p5/kube-system/hyperpod-dependencies"
    (_, status, _, physical), = run(ev, session_with_cluster())
    assert status == "SUCCESS" and physical == ev["PhysicalResourceId"]
    assert fake_helm.read_text().startswith("uninstall hyperpod-dependencies --namespace kube-system --kubeconfig ")
    assert "--ignore-not-found" in fake_helm.read_text()
    fake_helm.unlink()
    (_, status, _, _), = run(ev, session_with_cluster(found=False))
    assert status == "SUCCESS" and not fake_helm.exists()


def test_a_failed_uninstall_never_blocks_the_stacks_deletion(tmp_path, fake_helm, monkeypatch):
    monkeypatch.setenv("FAKE_HELM_RC", "1")
    (_, status, reason, _), = run(event(tmp_path, "Delete", "unused", "0" * 40), session_with_cluster())
    assert status == "SUCCESS" and reason.startswith("uninstall failed, ignored")


def test_the_eks_token_is_a_presigned_get_caller_identity_naming_the_cluster(monkeypatch):
    import base64
    from urllib.parse import parse_qs, urlparse

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_STS_REGIONAL_ENDPOINTS", "regional")
    token = index.eks_token(boto3.session.Session(region_name="us-east-1"), "hpeks-p5", "us-east-1")
    assert token.startswith("k8s-aws-v1.") and "=" not in token
    raw = token[len("k8s-aws-v1."):]
    url = urlparse(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode())
    query = parse_qs(url.query)
    assert url.netloc == "sts.us-east-1.amazonaws.com" and query["Action"] == ["GetCallerIdentity"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0] and query["X-Amz-Expires"] == ["60"]


def test_the_pin_is_a_full_commit_and_tree():
    assert len(HYPERPOD_CHART.commit) == 40 and len(HYPERPOD_CHART.tree) == 40
    assert HYPERPOD_CHART.archive_url.endswith(f"/archive/{HYPERPOD_CHART.commit}.tar.gz")
    assert shutil.which("git"), "the tree-id test needs git"
