"""What a change to a served model does while it rolls out: which replicas restart, and whether the pools' serving
capacity drops below their `min` on the way (docs/serving.md, "Changing a deployment").

A model's manifest (a DynamoGraphDeployment on eks, an InferenceEndpointConfig on hyperpod-eks, with the KEDA scalers
that carry each pool's min and max) is compared old against new: a change to a worker's pod (image, model, parallel
sizes, arguments, environment, resources) restarts its replicas; replica counts and scalers restart nothing.

How they roll, as Dynamo documents it ("Rolling Updates", DYNAMO_ROLLING): a worker pool backed by a Kubernetes
Deployment (one node per replica) rolls with every other worker pool of the graph (the operator hashes all worker specs),
new workers in a new Dynamo namespace so old and new never exchange requests, at most 25% of a pool's replicas
unavailable (rounded down) and 25% extra (rounded up); a multinode pool (Grove or LeaderWorkerSet) rolls one replica at
a time without surge, and old and new workers of a disaggregated graph can reach each other. The frontend updates in
place. How the HyperPod Inference Operator rolls its Deployments is not documented: Kubernetes' Deployment defaults
(the same 25%) are assumed (unverified), and so is that Dynamo 1.6.2, the pinned release, rolls as the page (on
Dynamo's main branch) says. The worst case is judged: each pool at its min when the roll starts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from fmcluster.diff.changes import MODIFIED, REPLACED, ResourceChange
from fmcluster.diff.findings import CAPACITY, SAFE, Finding

KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"
DYNAMO_ROLLING = ("https://github.com/ai-dynamo/dynamo/blob/6659a0a2ba391f55da94277ceecebf51b9aff747/docs/pages/"
                  "kubernetes/rolling-update.md")
DEPLOYMENT_ROLLING = "https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#rolling-update-deployment"
WORKER_TYPES = ("worker", "prefill", "decode")
MODEL_FLAGS = ("--model", "--model-path")
PARALLEL_FLAGS = ("--tensor-parallel-size", "--pipeline-parallel-size", "--tp-size", "--pp-size", "--ep-size",
                  "--enable-expert-parallel")


def _text(value: Any) -> str:
    """A manifest's text with CloudFormation references as placeholders (they name AWS resources, not pod specs)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_text(p) for p in parts)
    return "TOKEN"


def _objects(resource: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    manifest = ((resource or {}).get("Properties") or {}).get("Manifest")
    if manifest is None:
        return []
    try:
        docs = json.loads(_text(manifest))
    except ValueError:
        return []
    return [d for d in docs if isinstance(d, dict)]


@dataclass
class Pool:
    name: str  # the component (eks) or role (hyperpod-eks)
    pod: Dict[str, Any]  # what restarts it when it changes
    min: int
    multinode: bool
    gpus: int  # per pod


def _arg(args: List[str], flag: str) -> Optional[str]:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def _what(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    """The reviewer's words for a pod change: model, image, parallelism, or the rest."""
    def flat(pod: Dict[str, Any]) -> Tuple[str, List[str], str]:
        text = json.dumps(pod, sort_keys=True)
        images = sorted({v for k, v in _walk(pod) if k == "image"})
        args = [a for k, v in _walk(pod) if k == "args" for a in v]
        return text, args, ",".join(images)

    (t0, a0, i0), (t1, a1, i1) = flat(old), flat(new)
    out = []
    # the engine's model argument (eks), or the operator's model source (hyperpod-eks mounts it at a fixed path)
    if [_arg(a0, f) for f in MODEL_FLAGS] != [_arg(a1, f) for f in MODEL_FLAGS] or old.get("model") != new.get("model"):
        out.append("model")
    if i0 != i1:
        out.append(f"image ({i0} -> {i1})")
    if ([(f, _arg(a0, f)) for f in PARALLEL_FLAGS if f in a0] != [(f, _arg(a1, f)) for f in PARALLEL_FLAGS if f in a1]
            or _gpus(old) != _gpus(new) or old.get("multinode") != new.get("multinode")):
        out.append("parallelism")
    if not out and t0 != t1:
        out.append("pod settings")
    return out


def _walk(value: Any):
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("image", "args") and not isinstance(v, dict):
                yield k, v
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def _gpus(pod: Dict[str, Any]) -> int:
    found = [int(v) for k, v in _resource_items(pod) if k == "nvidia.com/gpu"]
    return max(found, default=0)


def _resource_items(value: Any):
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "limits" and isinstance(v, dict):
                yield from v.items()
            else:
                yield from _resource_items(v)
    elif isinstance(value, list):
        for v in value:
            yield from _resource_items(v)


def _mins(objects: List[Dict[str, Any]]) -> Dict[str, int]:
    """Each KEDA-scaled target's minReplicaCount, by target name."""
    return {o["spec"]["scaleTargetRef"]["name"]: int(o["spec"].get("minReplicaCount", 1)) for o in objects
            if o.get("kind") == "ScaledObject"}


def dynamo_pools(graph: Dict[str, Any], objects: List[Dict[str, Any]]) -> Dict[str, Pool]:
    mins = _mins(objects)
    name = graph["metadata"]["name"]
    out = {}
    for c in graph["spec"].get("components", []):
        if c.get("type") not in WORKER_TYPES:
            continue
        pod = {"podTemplate": c.get("podTemplate"), "multinode": c.get("multinode")}
        out[c["name"]] = Pool(c["name"], pod, mins.get(f"{name}-{c['name']}", int(c.get("replicas", 1))),
                              bool(c.get("multinode")), _gpus(pod))
    return out


def endpoint_pools(config: Dict[str, Any]) -> Dict[str, Pool]:
    spec = config["spec"]
    worker = {k: v for k, v in spec.get("worker", {}).items()}
    pd = spec.get("pdSpec")
    if not pd:
        scaling = spec.get("autoScalingSpec") or {}
        return {"worker": Pool("worker", {"worker": worker, "model": spec.get("modelSourceConfig")},
                               int(scaling.get("minReplicaCount", spec.get("replicas", 1))), False, _gpus(worker))}
    scaling = pd.get("autoScalingSpec") or {}
    out = {}
    for key, role, scale in (("prefillSpec", "prefill", "prefillAutoScaling"),
                             ("decodingSpec", "decode", "decodingAutoScaling")):
        part = pd.get(key) or {}
        pod = {"worker": worker, "role": {k: v for k, v in part.items() if k != "replicas"},
               "model": spec.get("modelSourceConfig")}
        out[role] = Pool(role, pod, int((scaling.get(scale) or {}).get("minReplicaCount", part.get("replicas", 1))),
                         False, _gpus(part))
    return out


def _roll(pool: Pool, what: List[str], where: str, model: str, isolated: bool, documented: bool) -> Finding:
    sources = [DYNAMO_ROLLING] if documented else [DEPLOYMENT_ROLLING]
    if pool.multinode:
        unavailable, surge = 1, 0
    else:
        unavailable, surge = pool.min * 25 // 100, -(-pool.min * 25 // 100)
    left = pool.min - unavailable
    head = f"{model}: pool {pool.name} ({pool.min} replica(s) at its min) restarts: {', '.join(what)} changed"
    if not isolated:
        head += ("; during the roll old and new workers can exchange requests (Dynamo: a multinode pool, under Grove "
                 "or LeaderWorkerSet; HyperPod: undocumented for prefill and decode), which fails if they are "
                 "incompatible (a model change): a new deployment name, then removing the old one, avoids it")
    unverified = "" if documented else " (the operator's roll strategy is undocumented: Kubernetes' default assumed)"
    if left < pool.min:
        return Finding(CAPACITY, where, f"{head}. Capacity drops below min during the roll: {left} of {pool.min} "
                       f"replicas serve while {unavailable} restart(s){unverified}. Way through: raise the pool's "
                       "replicas.min by that much for the roll, or roll at low load", sources=sources)
    room = f"{surge} extra pod(s) of {pool.gpus} GPU(s)" if surge else "no extra pod"
    return Finding(SAFE, where, f"{head}. Capacity stays at min: new replicas start before old ones stop, which needs "
                   f"{room} free in the node group (Cluster Autoscaler or HyperPod adds a node within max_count; "
                   f"without one the roll waits){unverified}", sources=sources)


def findings(c: ResourceChange) -> List[Finding]:
    """The roll of each served model whose manifest changed; [] for any other in-cluster change."""
    if c.type != KUBERNETES_RESOURCE or c.action not in (MODIFIED, REPLACED):
        return []
    old, new = _objects(c.old), _objects(c.new)
    out: List[Finding] = []
    for kind in ("DynamoGraphDeployment", "InferenceEndpointConfig"):
        before = {o["metadata"]["name"]: o for o in old if o.get("kind") == kind}
        for after in (o for o in new if o.get("kind") == kind):
            name = after["metadata"]["name"]
            if name not in before:
                continue
            dynamo = kind == "DynamoGraphDeployment"
            pools_old = dynamo_pools(before[name], old) if dynamo else endpoint_pools(before[name])
            pools_new = dynamo_pools(after, new) if dynamo else endpoint_pools(after)
            changed = {p: _what(pools_old[p].pod, pools_new[p].pod) for p in pools_new
                       if p in pools_old and pools_old[p].pod != pools_new[p].pod}
            if not changed and before[name] != after:
                out.append(Finding(SAFE, c.where, f"{name}: replicas, scalers or the frontend change; no worker "
                                                  "restarts (Dynamo updates a frontend in place)"))
                continue
            if dynamo and changed:
                # the operator hashes every worker spec: all worker pools roll together
                what = sorted({w for ws in changed.values() for w in ws})
                changed = {p: what for p in pools_new}
            for p, what in sorted(changed.items()):
                pool = pools_new[p]
                isolated = not pool.multinode if dynamo else len(pools_new) == 1
                out.append(_roll(pool, what, c.where, name, isolated=isolated, documented=dynamo))
    return out
