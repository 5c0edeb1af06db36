"""The spec's `serving` section: models served on the cluster's GPU node groups with vLLM or SGLang, aggregated or
with disaggregated prefill and decode pools, sized from the spec (docs/serving.md).

Each deployment names its model's architecture (what the weights and the KV cache weigh: fmcluster/spec/
serving_models.py), where its weights are read from (a directory on the shared file system, an S3 prefix, or a public
model id at a pinned revision, staged once), the engine, the mode, the parallel sizes (or ``plan``: the smallest that
fits and meets the SLOs, fmcluster/spec/serving_sizing.py), the replicas' range, the node group, the request mix it is
sized for and its SLOs. The rules here are those a deploy or the engine would refuse later, or that make the SLOs
impossible: each names its field, and `validate` exits 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, List, Literal, Optional, Tuple, Type, Union, cast

from pydantic import AfterValidator, Field, create_model, field_validator, model_validator
from typing_extensions import Annotated

from fmcluster.spec import serving_models
from fmcluster.spec.base import Problem, SpecModel, raise_problems

if TYPE_CHECKING:
    from fmcluster.spec import serving_sizing

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$"  # a Kubernetes object name part and a Prometheus label value
HUB_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$"
REVISION_PATTERN = r"^[0-9a-f]{40}$"
S3_PREFIX_PATTERN = r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/([^\s]*/)?$"
# Each deployment is a handful of Kubernetes objects in the cluster stack's template (the engine's resource, its
# scaler, its volume claim): a bound that keeps the template's growth small (docs/serving.md, "Template size").
MAX_DEPLOYMENTS = 16
TP_SIZES = (1, 2, 4, 8)
KUBERNETES = "kubernetes"
MODELS = "/models"  # where a hub model is staged on the shared file system


def _directory(v: Optional[str]) -> Optional[str]:
    if v is not None and (not re.fullmatch(r"(/[A-Za-z0-9._-]+)+", v) or "/." in v):
        raise ValueError(f"{v!r} is not an absolute directory of letters, digits, '.', '_' and '-' such as "
                         "/models/llama-3.1-70b")
    return v


class ModelSource(SpecModel):
    """Where the weights are read from: exactly one of s3 and hub, or a directory on the shared file system under
    its store's key (`source_model`)."""

    # the shared file system's key (`Storage.file_system_key`), the source's first field: set by `source_model`
    file_system_key: ClassVar[Optional[str]] = None
    s3: Optional[str] = Field(None, description="s3://bucket/prefix/ holding the safetensors; streamed by the engine "
                                                "(Run:ai Model Streamer) or mounted (Mountpoint for Amazon S3).")
    hub: Optional[str] = Field(None, description="A public model id (org/name) on the Hugging Face Hub, staged once to "
                                                 "the shared file system's /models/<name> by the staging job "
                                                 "`fmcluster job serve` writes (needs the shared file system).")
    revision: Optional[str] = Field(None, description="hub only (required): the commit to stage, 40 hex digits.")

    @field_validator("s3")
    @classmethod
    def _s3(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not re.fullmatch(S3_PREFIX_PATTERN, v if v.endswith("/") else v + "/"):
            raise ValueError(f"{v!r} is not s3://bucket/prefix/")
        return None if v is None else (v if v.endswith("/") else v + "/")

    @classmethod
    def keys(cls) -> List[str]:
        return [k for k in (cls.file_system_key, "s3", "hub") if k is not None]

    @model_validator(mode="after")
    def _one(self) -> ModelSource:
        keys = self.keys()
        given = [k for k in keys if getattr(self, k) is not None]
        found: List[Problem] = []
        if len(given) != 1:
            found.append((keys[0] if not given else given[1], f"give exactly one of {', '.join(keys[:-1])} and "
                                                              f"{keys[-1]}"))
        if self.hub is not None:
            if not re.fullmatch(HUB_PATTERN, self.hub):
                found.append(("hub", f"{self.hub!r} is not a model id such as meta-llama/Llama-3.1-8B-Instruct"))
            if self.revision is None or not re.fullmatch(REVISION_PATTERN, self.revision):
                found.append(("revision", "required with hub: the commit to stage (40 hex digits), so every replica "
                                          "serves the same weights"))
        elif self.revision is not None:
            found.append(("revision", "applies to hub only"))
        raise_problems(found)
        return self

    @property
    def on_file_system(self) -> Optional[str]:
        """The directory from the shared file system's root the source names, or None."""
        key = self.file_system_key
        return getattr(self, key) if key is not None else None

    @property
    def kind(self) -> str:
        """The key the source gives."""
        return next(k for k in self.keys() if getattr(self, k) is not None)


class Parallelism(SpecModel):
    """Parallel sizes of one replica: tensor within a node (NVLink), pipeline across nodes, expert inside the
    tensor-parallel group (a mixture of experts only)."""

    tensor: int = Field(ge=1, le=8, description=f"GPUs a layer is split over, within one node: {TP_SIZES}.")
    pipeline: int = Field(1, ge=1, le=8, description="Stages, one per node (each stage tensor GPUs).")
    expert: int = Field(1, ge=1, le=64, description="1, or the tensor size: experts spread over the tensor-parallel "
                                                    "GPUs instead of each expert split over them (MoE only).")


Plan = Literal["plan"]


class Replicas(SpecModel):
    min: int = Field(ge=0, le=256, description="Replicas always running (0: scaled to zero when idle).")
    max: int = Field(ge=1, le=256, description="Replicas the autoscaler may run; their GPUs come from the node "
                                               "group's range (max_count).")

    @model_validator(mode="after")
    def _range(self) -> Replicas:
        if self.min > self.max:
            raise_problems([("min", f"{self.min} exceeds max {self.max}")])
        return self


class Pool(SpecModel):
    """Disaggregated serving's prefill or decode workers."""

    parallelism: Union[Plan, Parallelism] = Field("plan", description="`plan` or {tensor, pipeline, expert}.")
    replicas: Replicas


class Slo(SpecModel):
    ttft_ms: int = Field(ge=1, le=600000, description="Time to first token the replicas are sized for (ms).")
    tpot_ms: int = Field(ge=1, le=10000, description="Time per output token after the first (ms).")


class Workload(SpecModel):
    """The request mix the deployment is sized for (`plan --serve`, `job serve`'s load test)."""

    prompt_tokens: int = Field(ge=1, le=1048576, description="Mean prompt length (tokens).")
    output_tokens: int = Field(ge=1, le=262144, description="Mean output length (tokens).")
    requests_per_second: float = Field(gt=0, le=100000, description="The rate to serve within the SLOs.")
    context: Optional[int] = Field(None, ge=2, le=1048576, description="The engine's max model length (tokens); "
                                                                      "default prompt + output.")

    @property
    def max_context(self) -> int:
        return self.context or self.prompt_tokens + self.output_tokens


class Deployment(SpecModel):
    """One model served by one engine on one node group."""

    name: str = Field(pattern=NAME_PATTERN, description="DNS-safe, unique: names its objects and its metrics' "
                                                        "model_name label.")
    architecture: str = Field(description="The model's architecture for sizing: one of "
                                          f"{', '.join(serving_models.names())}.")
    source: ModelSource
    precision: Literal["bf16", "fp8"] = Field("bf16", description="The checkpoint's weights (fp8: an FP8 checkpoint).")
    kv_cache: Literal["auto", "fp8"] = Field("auto", description="auto: the engine's default (16-bit); fp8 halves "
                                                                 "it.")
    engine: Literal["vllm", "sglang"]
    mode: Literal["aggregated", "disaggregated"] = "aggregated"
    node_group: str = Field(description="The GPU node group its pods run on.")
    parallelism: Union[Plan, Parallelism, None] = Field(
        None, description="aggregated: `plan` (default) or {tensor, pipeline, expert}.")
    replicas: Optional[Replicas] = Field(None, description="aggregated (required): the replicas' range.")
    prefill: Optional[Pool] = Field(None, description="disaggregated (required): the prefill workers.")
    decode: Optional[Pool] = Field(None, description="disaggregated (required): the decode workers.")
    slo: Slo
    workload: Workload

    @field_validator("architecture")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in serving_models.names():
            raise ValueError(f"{v!r} is not a known architecture: {', '.join(serving_models.names())}")
        return v

    @model_validator(mode="after")
    def _mode(self) -> Deployment:
        found: List[Problem] = []
        if self.mode == "aggregated":
            found += [(k, "applies to mode disaggregated; use parallelism and replicas")
                      for k in ("prefill", "decode") if getattr(self, k) is not None]
            if self.replicas is None:
                found.append(("replicas", "required: {min, max}"))
        else:
            found += [(k, "applies to mode aggregated; give prefill and decode {parallelism, replicas}")
                      for k in ("parallelism", "replicas") if getattr(self, k) is not None]
            found += [(k, "required with mode disaggregated: {parallelism, replicas}")
                      for k in ("prefill", "decode") if getattr(self, k) is None]
        raise_problems(found)
        return self

    @property
    def model(self) -> serving_models.Architecture:
        return serving_models.get(self.architecture)

    @property
    def kv(self) -> str:
        return "fp8" if self.kv_cache == "fp8" else "bf16"

    def file_system_path(self) -> Optional[str]:
        """Where the weights are on the shared file system, from its root: the source's directory, or where a hub
        model is staged; None for weights read from S3."""
        if self.source.s3 is not None:
            return None
        return self.source.on_file_system or f"{MODELS}/{self.name}"

    def pools(self) -> List[Tuple[str, Union[str, Parallelism], Replicas]]:
        """(path below the deployment, parallelism, replicas) of each pool: one for aggregated, prefill and decode."""
        if self.mode == "aggregated":
            assert self.replicas is not None
            return [("parallelism", self.parallelism or "plan", self.replicas)]
        assert self.prefill is not None and self.decode is not None
        return [("prefill.parallelism", self.prefill.parallelism, self.prefill.replicas),
                ("decode.parallelism", self.decode.parallelism, self.decode.replicas)]


def _models_field() -> Any:
    return Field(min_length=1, max_length=MAX_DEPLOYMENTS, description=f"1 to {MAX_DEPLOYMENTS} deployments.")


class Serving(SpecModel):
    """Models served on the cluster (Kubernetes kinds: eks, hyperpod-eks); docs/serving.md."""

    namespace: str = Field("serving", pattern=r"^[a-z][a-z0-9-]{0,61}[a-z0-9]$",
                           description="The Kubernetes namespace the models run in.")
    models: List[Deployment] = _models_field()


@cache
def serving_model(file_system_key: Optional[str]) -> Type[Serving]:
    """`Serving` whose models' source takes a directory on the shared file system under `file_system_key` (the key of
    the store section that is it, `Storage.file_system_key`): composed by the composition root with the storage's
    sections, so the spec keeps the key users write without naming the store. None: sources on S3 and the hub only."""
    key = file_system_key
    if key is None:
        return Serving
    directory: Any = (Annotated[Optional[str], AfterValidator(_directory)],
                 Field(None, description="Directory from the shared file system's root (as file_system_path), e.g. "
                                         f"/models/llama-3.1-70b; pods see it below storage.{key}.mount_point."))
    # a base after ModelSource: pydantic orders fields from the last base to the first, so the key comes first
    leading: Any = create_model("ModelSourceFileSystem", __base__=SpecModel, **{key: directory})
    hub = Field(None, description="A public model id (org/name) on the Hugging Face Hub, staged once to the shared "
                                  "file system's /models/<name> by the staging job `fmcluster job serve` writes "
                                  f"(needs storage.{key}).")
    source: Any = create_model("ModelSource", __base__=(ModelSource, leading), hub=(Optional[str], hub),
                               __doc__=f"Where the weights are read from: exactly one of {key}, s3 and hub. Replicas "
                               "never download from the internet at start: a hub model is staged once onto the shared "
                               "file system (`fmcluster job serve` writes the staging job).")
    cast(Any, source).file_system_key = key
    deployment: Any = create_model("Deployment", __base__=Deployment, __doc__=Deployment.__doc__,
                                   source=(source, ...))
    return create_model("Serving", __base__=Serving, __doc__=Serving.__doc__,
                        models=(List[deployment], _models_field()))


@dataclass(frozen=True)
class Layout:
    """A pool's resolved parallel sizes and what one replica of it holds."""

    tensor: int
    pipeline: int
    expert: int
    replica: serving_sizing.Replica
    planned: bool  # chosen by `plan`, not written in the spec


def layout(d: Deployment, parallelism: Union[str, Parallelism], instance_type: str, role: str = "") -> Optional[Layout]:
    """The pool's parallel sizes: as written, or (``plan``) the pick of `fmcluster plan --serve` for the deployment's
    request mix and SLOs (fewest GPUs for its rate; aggregated, or the prefill/decode pair for a disaggregated pool),
    else the smallest one-node tensor size that fits its context; None when nothing fits a node."""
    from fmcluster.spec import serving_sizing  # the sizing model, loaded only for a spec that serves

    hw = serving_sizing.gpu(instance_type)
    if isinstance(parallelism, Parallelism):
        r = serving_sizing.Replica(d.model, hw, parallelism.tensor, parallelism.pipeline, d.precision, d.kv)
        return Layout(parallelism.tensor, parallelism.pipeline, parallelism.expert, r, False)
    layouts = serving_sizing.layouts(d.model, hw, d.precision, d.kv)
    fitting = [r for r in layouts if r.fits(d.workload.max_context)]
    if not fitting:
        return None
    w, ttft, tpot = d.workload, d.slo.ttft_ms / 1e3, d.slo.tpot_ms / 1e3
    pick = fitting[0]
    if role:
        pairs = serving_sizing.disaggregated(layouts, layouts, w.prompt_tokens, w.output_tokens,
                                             w.requests_per_second, ttft, tpot)
        if pairs:
            pick = pairs[0].prefill if role == "prefill" else pairs[0].decode
    else:
        sized = serving_sizing.aggregated(layouts, w.prompt_tokens, w.output_tokens, w.requests_per_second, ttft, tpot)
        if sized:
            pick = sized[0].replica
    return Layout(pick.tp, 1, pick.tp if d.model.is_moe and pick.tp > 1 else 1, pick, True)



def pool_layouts(d: Deployment, instance_type: str) -> List[Tuple[str, str, Replicas, Layout]]:
    """(path, role, replicas, resolved layout) of each of the deployment's pools; role is "prefill" or "decode" when
    disaggregated, "" otherwise. A pool that fits no node is a ValueError naming it (the spec's rules refuse it)."""
    out = []
    for path, parallelism, replicas in d.pools():
        role = path.split(".")[0] if d.mode == "disaggregated" else ""
        found = layout(d, parallelism, instance_type, role)
        if found is None:
            raise ValueError(f"serving model {d.name}: {path}: no layout fits one {instance_type}")
        out.append((path, role, replicas, found))
    return out

def problems(spec: Any) -> List[Problem]:
    """What the section needs of the rest of the spec (field paths from the top)."""
    serving: Optional[Serving] = spec.serving
    if serving is None:
        return []
    kind = spec.orchestrator_kind
    if kind.nodes.agent != KUBERNETES:
        return [("serving", f"orchestrator {kind.name} runs no Kubernetes: serving deploys engines, scalers and "
                            "load balancing as Kubernetes objects, so it needs orchestrator eks or hyperpod-eks "
                            "(docs/serving.md)")]
    found: List[Problem] = []
    groups = {g.name: g for g in spec.node_groups}
    seen = set()
    gpus_taken = {name: 0 for name in groups}
    for i, d in enumerate(serving.models):
        at = f"serving.models[{i}]"
        if d.name in seen:
            found.append((f"{at}.name", f"{d.name!r} names another deployment; names are unique"))
        seen.add(d.name)
        group = groups.get(d.node_group)
        if group is None or group.role != "gpu":
            gpu_groups = [g.name for g in spec.node_groups if g.role == "gpu"]
            found.append((f"{at}.node_group", f"{d.node_group!r} is not a GPU node group of this spec "
                                              f"({', '.join(gpu_groups) or 'none'})"))
            continue
        found += _source_problems(spec, d, at)
        if d.workload.max_context < d.workload.prompt_tokens + d.workload.output_tokens:
            found.append((f"{at}.workload.context", f"{d.workload.context} is below prompt_tokens + output_tokens "
                                                    f"({d.workload.prompt_tokens + d.workload.output_tokens})"))
        if d.workload.max_context > d.model.context:
            found.append((f"{at}.workload.context", f"{d.workload.max_context} exceeds {d.architecture}'s "
                                                    f"{d.model.context}-token context"))
        if d.mode == "disaggregated" and not group.efa_enabled:
            why = "has no EFA" if not group.instance.efa_supported else "has EFA turned off (efa: false)"
            found.append((f"{at}.mode", f"disaggregated serving moves the KV cache from prefill to decode workers "
                                        f"over EFA (NIXL's LIBFABRIC backend); node group {group.name} "
                                        f"({group.instance_type}) {why}: use mode aggregated or an EFA group"))
        for path, parallelism, replicas in d.pools():
            role = path.split(".")[0] if d.mode == "disaggregated" else ""
            found += _pool_problems(d, f"{at}.{path}", parallelism, group)
            lay = layout(d, parallelism, group.instance_type, role)
            if lay is not None:
                gpus_taken[group.name] += replicas.max * lay.replica.gpus
    for name, gpus in gpus_taken.items():
        g = groups[name]
        have = g.max_size * g.instance.gpus
        if gpus > have:
            i = next(i for i, d in enumerate(serving.models) if d.node_group == name)
            found.append((f"serving.models[{i}].node_group", f"the deployments on {name} take up to {gpus} GPUs at "
                          f"their replicas' max, the group's range holds {have} ({g.max_size} x {g.instance_type}): "
                          "lower replicas.max or raise the group's max_count"))
    return found


def _source_problems(spec: Any, d: Deployment, at: str) -> List[Problem]:
    if d.file_system_path() is None or spec.storage.file_system() is not None:
        return []
    key = type(spec.storage).file_system_key()
    needs = f"needs storage.{key}" if key is not None else "needs a shared file system (no store offers one)"
    if d.source.hub is not None:
        return [(f"{at}.source.hub", f"{needs}: a hub model is staged once to the shared file system "
                                     f"({MODELS}/{d.name}), so no replica downloads it at start")]
    return [(f"{at}.source.{d.source.kind}", f"{needs}: the weights are read from the shared file system")]


def _pool_problems(d: Deployment, at: str, parallelism: Union[str, Parallelism], group: Any) -> List[Problem]:
    from fmcluster.spec import serving_sizing  # the sizing model, loaded only for a spec that serves

    t = group.instance
    hw = serving_sizing.gpu(group.instance_type)
    m = d.model
    if isinstance(parallelism, Parallelism):
        p = parallelism
        found: List[Problem] = []
        if p.tensor not in TP_SIZES or p.tensor > t.gpus:
            found.append((f"{at}.tensor", f"{p.tensor}: tensor parallelism stays within one node's NVLink; "
                                          f"{group.instance_type} has {t.gpus} GPUs ({', '.join(map(str, TP_SIZES))})"))
        elif m.heads % p.tensor:
            found.append((f"{at}.tensor", f"{p.tensor} does not divide {d.architecture}'s {m.heads} attention heads"))
        if p.pipeline > 1 and p.tensor != t.gpus:
            found.append((f"{at}.pipeline", f"a pipeline stage is one whole node: tensor must be {t.gpus} with "
                                            "pipeline > 1"))
        if p.pipeline > group.max_size:
            found.append((f"{at}.pipeline", f"{p.pipeline} stages need {p.pipeline} nodes; {group.name} has at most "
                                            f"{group.max_size}"))
        if p.expert > 1 and not m.is_moe:
            found.append((f"{at}.expert", f"{d.architecture} has no experts: expert parallelism is 1"))
        elif p.expert not in (1, p.tensor * p.pipeline):
            found.append((f"{at}.expert", f"{p.expert}: expert parallelism spans the replica's GPUs (1 or "
                                          f"{p.tensor * p.pipeline})"))
        if found:
            return found
        r = serving_sizing.Replica(m, hw, p.tensor, p.pipeline, d.precision, d.kv)
        if not r.fits(d.workload.max_context):
            return [(f"{at}.tensor", _does_not_fit(d, r))]
        return []
    lay = layout(d, parallelism, group.instance_type)
    if lay is None:
        r = serving_sizing.Replica(m, hw, min(t.gpus, 8), 1, d.precision, d.kv)
        return [(at, f"plan: {_does_not_fit(d, r)}; give {{tensor: {t.gpus}, pipeline: N}} to span nodes")]
    return []


def _does_not_fit(d: Deployment, r: serving_sizing.Replica) -> str:
    from fmcluster.spec import serving_sizing  # the sizing model, loaded only for a spec that serves

    gib = 2**30
    need = r.weight_bytes_per_gpu + d.workload.max_context * r.kv_bytes_per_token_per_gpu + serving_sizing.RESERVE_BYTES
    have = r.utilization * r.hw.hbm_bytes
    hint = " or fp8 weights" if d.precision == "bf16" else ""
    return (f"{d.architecture} in {d.precision} does not fit {r.tp * r.pp} x {r.hw.name}: {r.weight_bytes_per_gpu / gib:.1f} "
            f"GiB of weights and {d.workload.max_context * r.kv_bytes_per_token_per_gpu / gib:.1f} GiB of KV cache for "
            f"one {d.workload.max_context}-token sequence per GPU, with the engine's reserve {need / gib:.1f} GiB, "
            f"against {have / gib:.1f} GiB usable ({serving_sizing.UTILIZATION:.0%} of HBM): use more GPUs{hint}")
