"""CloudFormation custom resource ``Custom::GitHelmChart``: installs a Helm chart that is published only in a Git
repository, fetched at deploy time from the repository's archive at a pinned commit (HyperPod's dependency chart,
aws/sagemaker-hyperpod-cli helm_chart/HyperPodHelmChart). Runs in AWS Lambda (Python standard library and the boto3
the runtime ships) with the kubectl/Helm layer of CDK's kubectl provider (``/opt/helm/helm``), in the cluster's VPC.

Create/Update: download the archive (``ArchiveUrl``), extract the chart directory (``ChartPath``) refusing links and
paths outside it, check its Git tree id against ``TreeId`` (the commit's content, verified file by file), create the
namespaces the chart's values put objects in but no template of the chart creates (``Namespaces``; ``kubectl apply``,
so an existing one is left as it is), run ``helm dependency update`` (its sub-charts come from their own
repositories), then ``helm upgrade --install`` with ``Values`` (JSON) and without --wait: the cluster has no nodes
before the HyperPod cluster exists. Delete: ``helm uninstall`` (a cluster that is gone already counts as done; a
failed uninstall is logged and ignored, so the stack can still be deleted); the namespaces stay (the EKS cluster goes
with the stack). Each kubectl and helm call is retried with doubling delays while its output names a transient
failure (``Unauthorized`` or ``forbidden`` while the installer's fresh access entry propagates, DNS, connection and
registry errors) and the deadline allows. The handler answers CloudFormation itself (the ResponseURL), also when it
fails, and leaves itself a margin before the Lambda timeout.

Properties: ClusterName, ArchiveUrl, ChartPath, TreeId, Release, Namespace, Namespaces (a list of names, optional),
Values (a JSON object as a string).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple

HELM = os.environ.get("FMCLUSTER_HELM", "/opt/helm/helm")
KUBECTL = os.environ.get("FMCLUSTER_KUBECTL", "/opt/kubectl/kubectl")
WORK = os.environ.get("FMCLUSTER_WORK_DIR", "/tmp")  # noqa: S108 - Lambda's only writable directory
MARGIN_S = 30  # answer CloudFormation this long before the Lambda times out
DOWNLOAD_TIMEOUT_S = 120
DOWNLOAD_ATTEMPTS = 4
# kubectl and helm: attempts, the first delay (doubled after each failure) and the least time a retry must still have
TOOL_ATTEMPTS = 4
TOOL_FIRST_DELAY_S = 10.0
TOOL_MIN_RUN_S = 60.0
# Output of a kubectl or helm failure worth another try (lower case): the API server before the installer's access
# entry and its cluster-admin policy have propagated (the entry is created seconds before the first call), DNS and
# connections to the private endpoint or to the sub-charts' repositories (GitHub Pages, quay.io), and server-side
# overload. Anything else (a template error, a conflict) fails at once.
TRANSIENT = (
    "unauthorized", "must be logged in to the server", "provide credentials", "forbidden",
    "no such host", "temporary failure in name resolution", "server misbehaving", "i/o timeout",
    "connection refused", "connection reset", "tls handshake timeout", "context deadline exceeded",
    "client.timeout exceeded", "timeout awaiting response headers", "http2: client connection lost", "unexpected eof",
    '": eof',
    "cannot be reached", "service unavailable", "bad gateway", "gateway timeout", "too many requests",
    "internal error occurred", "etcdserver: request timed out",
)


class InstallError(Exception):
    """A failure with a one-line reason for CloudFormation's event log."""


# --- the chart's source ------------------------------------------------------------------------------------------


def download(url: str, dest: str, attempts: Optional[int] = None) -> None:
    """Fetch `url` to `dest`, retrying with doubling delays (GitHub's archive endpoint redirects to codeload)."""
    attempts = attempts or DOWNLOAD_ATTEMPTS
    delay, last = 2.0, ""
    for attempt in range(1, attempts + 1):
        try:
            with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response, open(dest, "wb") as out:  # noqa: S310
                shutil.copyfileobj(response, out)
            return
        except OSError as exc:
            last = str(exc)
            if attempt < attempts:
                time.sleep(delay)
                delay *= 2
    raise InstallError(f"cannot download {url} after {attempts} attempts: {last}")


def extract_chart(archive: str, chart_path: str, dest: str) -> str:
    """Extract ``<top>/<chart_path>/**`` of a GitHub archive into `dest`; the chart directory. Links, absolute paths
    and ``..`` are refused (the archive is data from the network)."""
    prefix_parts = [p for p in chart_path.strip("/").split("/") if p]
    chart_dir = os.path.join(dest, "chart")
    os.makedirs(chart_dir, exist_ok=True)
    found = 0
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if member.name.startswith("/") or ".." in parts:
                raise InstallError(f"archive member {member.name!r} escapes the archive")
            inside = parts[1:1 + len(prefix_parts)] == prefix_parts and len(parts) > 1 + len(prefix_parts)
            if not inside:
                continue
            rel = parts[1 + len(prefix_parts):]
            if not (member.isfile() or member.isdir()):
                raise InstallError(f"archive member {member.name!r} is a link or device; the chart holds none")
            target = os.path.join(chart_dir, *rel)
            if member.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            source = tar.extractfile(member)
            if source is None:
                raise InstallError(f"cannot read {member.name!r} from the archive")
            with source, open(target, "wb") as out:
                shutil.copyfileobj(source, out)
            os.chmod(target, 0o755 if member.mode & 0o100 else 0o644)
            found += 1
    if not found or not os.path.isfile(os.path.join(chart_dir, "Chart.yaml")):
        raise InstallError(f"no chart (Chart.yaml) under {chart_path} in the archive")
    return chart_dir


def git_tree_id(path: str) -> str:
    """The Git tree id of a directory as Git computes it (``git write-tree`` of its files): sha1 of ``tree <size>\\0``
    and, per entry sorted by name (a directory sorts as ``name/``), ``<mode> <name>\\0`` and the entry's 20-byte id.
    Files are blobs (``blob <size>\\0<content>``), mode 100755 when executable, else 100644."""
    entries: List[Tuple[str, bytes]] = []
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if os.path.islink(full):
            raise InstallError(f"{full} is a link")
        if os.path.isdir(full):
            if not os.listdir(full):
                continue  # Git records no empty directories
            entries.append((name + "/", b"40000 " + name.encode() + b"\0" + bytes.fromhex(git_tree_id(full))))
        else:
            with open(full, "rb") as fh:
                content = fh.read()
            blob = hashlib.sha1(b"blob %d\0" % len(content) + content).digest()  # noqa: S324 - Git's object ids
            mode = b"100755" if os.stat(full).st_mode & 0o100 else b"100644"
            entries.append((name, mode + b" " + name.encode() + b"\0" + blob))
    body = b"".join(entry for _, entry in sorted(entries, key=lambda e: e[0].encode()))
    return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()  # noqa: S324 - Git's object ids


# --- the cluster -------------------------------------------------------------------------------------------------


def eks_token(session: Any, cluster_name: str, region: str) -> str:
    """A Kubernetes bearer token for EKS: a presigned STS GetCallerIdentity URL naming the cluster in the signed
    ``x-k8s-aws-id`` header, base64url without padding after ``k8s-aws-v1.`` (as aws-iam-authenticator and ``aws eks
    get-token`` make it)."""
    from botocore.signers import RequestSigner

    sts = session.client("sts", region_name=region)
    signer = RequestSigner(sts.meta.service_model.service_id, region, "sts", "v4", session.get_credentials(),
                           session.events)
    url = signer.generate_presigned_url(
        {"method": "GET", "url": f"{sts.meta.endpoint_url}/?Action=GetCallerIdentity&Version=2011-06-15", "body": {},
         "headers": {"x-k8s-aws-id": cluster_name}, "context": {}},
        region_name=region, expires_in=60, operation_name="")
    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def write_kubeconfig(session: Any, cluster_name: str, region: str, path: str) -> Optional[str]:
    """A kubeconfig for `cluster_name` at `path`; None when the cluster does not exist (any more)."""
    eks = session.client("eks", region_name=region)
    try:
        cluster = eks.describe_cluster(name=cluster_name)["cluster"]
    except eks.exceptions.ResourceNotFoundException:
        return None
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": cluster_name,
        "clusters": [{"name": cluster_name, "cluster": {
            "server": cluster["endpoint"], "certificate-authority-data": cluster["certificateAuthority"]["data"]}}],
        "users": [{"name": "installer", "user": {"token": eks_token(session, cluster_name, region)}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": "installer"}}],
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(config, fh)  # JSON is YAML
    return path


def pause(seconds: float) -> None:
    """The wait between two tries of a kubectl or helm call."""
    time.sleep(seconds)


def transient(output: str) -> bool:
    """Whether a failed kubectl or helm call's output names a failure that another try may not meet."""
    text = output.lower()
    return any(marker in text for marker in TRANSIENT)


def run_tool(tool: str, args: List[str], *, env: Dict[str, str], deadline: float) -> str:
    """Run `tool` (kubectl or helm) with `args`; retry a transient failure with doubling delays while at least
    TOOL_MIN_RUN_S would be left after the delay; raise InstallError with the output when it fails for good or runs
    past the deadline."""
    name = os.path.basename(tool)
    what = f"{name} {' '.join(args[:2])}"
    delay = TOOL_FIRST_DELAY_S
    for attempt in range(1, TOOL_ATTEMPTS + 1):
        timeout = deadline - time.monotonic()
        if timeout < 5:
            raise InstallError(f"no time left for {what}")
        try:
            done = subprocess.run([tool, *args], env=env, capture_output=True, text=True, timeout=timeout)  # noqa: S603
        except subprocess.TimeoutExpired:
            raise InstallError(f"{what} did not finish in {timeout:.0f}s") from None
        output = (done.stdout + done.stderr).strip()
        print(f"{name} {' '.join(args)} (attempt {attempt})\n{output}", flush=True)
        if done.returncode == 0:
            return output
        failure = f"{name} {args[0]} failed (exit {done.returncode})"
        left = deadline - time.monotonic() - delay
        if attempt < TOOL_ATTEMPTS and transient(output) and left >= TOOL_MIN_RUN_S:
            print(f"{failure}: transient, retrying in {delay:.0f}s", flush=True)
            pause(delay)
            delay *= 2
            continue
        tries = f" after {attempt} attempts" if attempt > 1 else ""
        raise InstallError(f"{failure}{tries}: {output[-700:]}")
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def helm(args: List[str], *, home: str, deadline: float) -> str:
    """Run helm with its state under `home` (retrying transient failures, `run_tool`)."""
    env = dict(os.environ, HOME=home, HELM_CACHE_HOME=f"{home}/cache", HELM_CONFIG_HOME=f"{home}/config",
               HELM_DATA_HOME=f"{home}/data")
    return run_tool(HELM, args, env=env, deadline=deadline)


def ensure_namespaces(names: List[str], *, kubeconfig: str, work: str, release: str, deadline: float) -> None:
    """Create the namespaces `names` unless they exist (``kubectl apply`` of Namespace objects: idempotent, and an
    existing namespace keeps its labels and contents). Labelled with the release they were made for."""
    if not names:
        return
    manifest = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": name, "labels": {"fmcluster.io/created-for": release}}} for name in names]}
    path = os.path.join(work, "namespaces.json")
    with open(path, "w") as fh:
        json.dump(manifest, fh)
    run_tool(KUBECTL, ["apply", "-f", path, "--kubeconfig", kubeconfig], env=dict(os.environ, HOME=work),
             deadline=deadline)


# --- the custom resource -----------------------------------------------------------------------------------------


def install(props: Dict[str, Any], *, session: Any, region: str, deadline: float) -> None:
    work = tempfile.mkdtemp(prefix="chart-", dir=WORK)
    try:
        archive = os.path.join(work, "source.tar.gz")
        download(props["ArchiveUrl"], archive)
        chart = extract_chart(archive, props["ChartPath"], work)
        tree = git_tree_id(chart)
        if tree != props["TreeId"]:
            raise InstallError(f"{props['ChartPath']} at {props['ArchiveUrl']} has Git tree {tree}, the pin says "
                               f"{props['TreeId']}: refusing to install content other than the pinned commit's")
        kubeconfig = write_kubeconfig(session, props["ClusterName"], region, os.path.join(work, "kubeconfig"))
        if kubeconfig is None:
            raise InstallError(f"EKS cluster {props['ClusterName']} not found")
        ensure_namespaces(list(props.get("Namespaces") or []), kubeconfig=kubeconfig, work=work,
                          release=props["Release"], deadline=deadline)
        home = os.path.join(work, "helm")
        helm(["dependency", "update", chart], home=home, deadline=deadline)
        values = os.path.join(work, "values.json")
        with open(values, "w") as fh:
            fh.write(props.get("Values") or "{}")
        helm(["upgrade", "--install", props["Release"], chart, "--namespace", props["Namespace"], "--values", values,
              "--kubeconfig", kubeconfig, "--timeout", "10m"], home=home, deadline=deadline)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def uninstall(props: Dict[str, Any], *, session: Any, region: str, deadline: float) -> None:
    work = tempfile.mkdtemp(prefix="chart-", dir=WORK)
    try:
        kubeconfig = write_kubeconfig(session, props["ClusterName"], region, os.path.join(work, "kubeconfig"))
        if kubeconfig is None:
            print(f"EKS cluster {props['ClusterName']} is gone: nothing to uninstall", flush=True)
            return
        helm(["uninstall", props["Release"], "--namespace", props["Namespace"], "--kubeconfig", kubeconfig,
              "--ignore-not-found", "--timeout", "10m"], home=os.path.join(work, "helm"), deadline=deadline)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def respond(event: Dict[str, Any], status: str, reason: str, physical_id: str) -> None:
    body = json.dumps({
        "Status": status, "Reason": reason[:1000] or status, "PhysicalResourceId": physical_id,
        "StackId": event["StackId"], "RequestId": event["RequestId"], "LogicalResourceId": event["LogicalResourceId"],
        "Data": {},
    }).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",  # noqa: S310 - CloudFormation's URL
                                     headers={"content-type": "", "content-length": str(len(body))})
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        print(f"answered CloudFormation {status}: HTTP {response.status}", flush=True)


def _session() -> Any:
    import boto3

    return boto3.session.Session()


def handler(event: Dict[str, Any], context: Any, *, session_factory: Callable[[], Any] = _session,
            answer: Callable[[Dict[str, Any], str, str, str], None] = respond) -> None:
    print(json.dumps({k: v for k, v in event.items() if k != "ResponseURL"}), flush=True)
    props = event.get("ResourceProperties", {})
    physical_id = event.get("PhysicalResourceId") or \
        f"{props.get('ClusterName', '?')}/{props.get('Namespace', '?')}/{props.get('Release', '?')}"
    deadline = time.monotonic() + context.get_remaining_time_in_millis() / 1000 - MARGIN_S
    region = os.environ.get("AWS_REGION", "")
    status, reason = "SUCCESS", ""
    try:
        if event["RequestType"] in ("Create", "Update"):
            install(props, session=session_factory(), region=region, deadline=deadline)
        elif event["RequestType"] == "Delete":
            uninstall(props, session=session_factory(), region=region, deadline=deadline)
        else:
            raise InstallError(f"unknown request type {event['RequestType']!r}")
    except Exception as exc:  # noqa: BLE001 - CloudFormation must hear of every failure, or it waits an hour
        reason = str(exc) if isinstance(exc, InstallError) else f"{type(exc).__name__}: {exc}"
        # a failed uninstall must not keep the stack from being deleted (the EKS cluster goes with it)
        status = "SUCCESS" if event.get("RequestType") == "Delete" else "FAILED"
        if status == "SUCCESS":
            reason = f"uninstall failed, ignored: {reason}"
    print(f"{event.get('RequestType')} {physical_id}: {status} {reason}", flush=True)
    answer(event, status, reason, physical_id)
