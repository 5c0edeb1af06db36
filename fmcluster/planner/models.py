"""What is trained: a model description from a preset, a YAML/JSON file or the size flags.

Parameter counts follow the Llama/Mixtral layout (Hugging Face config.json): per layer,
attention q and o projections h x (heads x head_dim) each, k and v h x (kv_heads x head_dim) each
(head_dim: given, else hidden / heads, else 128),
a SwiGLU MLP of three h x ffn matrices, two RMSNorm vectors; untied input and output
embeddings of vocab x h. For the Llama 3.1 presets this gives the checkpoints' exact count.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from fmcluster.planner.errors import PlanUsageError

DATA = Path(__file__).parent / "data"
HEAD_DIM = 128  # Llama 3.x, Mixtral, most current models; only used when neither heads nor head_dim is given
DEFAULT_SEQ = 4096
INT_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "experts", "active_experts", "expert_ffn",
            "shared_experts", "dense_layers", "head_dim", "qk_head_dim", "v_head_dim", "routed_nodes")
FILE_KEYS = ("name", "params", "active_params", *INT_KEYS, "mlp", "dropout", "sources", "notes")
MLP_KINDS = ("gated", "plain")  # gated: SwiGLU/GeGLU, three h x ffn matrices; plain: GELU/ReLU^2, two


@dataclass(frozen=True)
class Model:
    name: str
    params: float
    active_params: float
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    seq: int
    vocab: int = 0
    ffn: int = 0
    experts: int = 1
    active_experts: int = 1
    expert_ffn: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    expert_params: float = 0.0
    head_dim: int = HEAD_DIM
    qk_head_dim: int = 0  # attention width per head for scores (multi-head latent attention: 192); 0 = head_dim
    v_head_dim: int = 0  # per head for values; 0 = head_dim
    routed_nodes: int = 0  # node-limited routing: a token's experts sit on at most this many nodes (0: no limit)
    mlp: str = "gated"  # gated (SwiGLU: three h x ffn matrices) or plain (GELU, squared ReLU: two)
    dropout: bool = False  # dropout masks kept for backward (1 byte each, Korthikanti et al. Table 2)
    sources: Tuple[str, ...] = ()
    notes: str = ""
    assumptions: Tuple[str, ...] = field(default=())

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def attention_width(self) -> int:
        """heads x (score width + value width) per head: what causal attention multiplies per token and layer."""
        return self.heads * ((self.qk_head_dim or self.head_dim) + (self.v_head_dim or self.head_dim))

    @property
    def embedding_params(self) -> float:
        """Input and output embedding tables (untied)."""
        return 2.0 * self.vocab * self.hidden

    def summary(self) -> Dict[str, Any]:
        out = {k: getattr(self, k) for k in ("name", "params", "active_params", "layers", "hidden", "heads", "kv_heads",
                                              "seq", "vocab", "ffn", "experts", "active_experts", "expert_ffn",
                                              "shared_experts", "dense_layers", "expert_params", "head_dim",
                                              "qk_head_dim", "v_head_dim", "routed_nodes", "mlp", "dropout")}
        out.update(sources=list(self.sources), notes=self.notes, assumptions=list(self.assumptions))
        return out


def architecture_params(layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int,
                        experts: int = 1, expert_ffn: int = 0, shared_experts: int = 0, dense_layers: int = 0,
                        head_dim: int = HEAD_DIM, mlp: str = "gated") -> float:
    """Total parameters of a Llama/Mixtral-style decoder (see the module doc); a plain MLP has two matrices."""
    attn = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    norms = 2 * hidden
    mats = 3 if mlp == "gated" else 2
    if experts > 1:
        moe = (experts + shared_experts) * mats * hidden * expert_ffn + hidden * experts  # experts and the router
        layer_total = dense_layers * (attn + mats * hidden * ffn + norms) + (layers - dense_layers) * (attn + moe + norms)
    else:
        layer_total = layers * (attn + mats * hidden * ffn + norms)
    return float(layer_total + 2 * vocab * hidden + hidden)  # + the final norm


@lru_cache(maxsize=1)
def _data() -> Dict[str, Any]:
    data: Dict[str, Any] = json.loads((DATA / "models.json").read_text(encoding="utf-8"))
    return data


def preset_names() -> List[str]:
    return sorted(_data()["presets"]) + sorted(_data()["aliases"])


def preset(name: str) -> Optional[Model]:
    key = _data()["aliases"].get(name.lower(), name.lower())
    raw = _data()["presets"].get(key)
    return None if raw is None else build(dict(raw, name=key), "--model")


def build(raw: Dict[str, Any], option: str) -> Model:
    """A Model from a mapping (preset, file or flags); `option` names the source in errors."""
    unknown = sorted(set(raw) - set(FILE_KEYS))
    if unknown:
        raise PlanUsageError(f"{option}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(FILE_KEYS)}")
    for key in ("layers", "hidden"):
        if key not in raw:
            raise PlanUsageError(f"{option}: '{key}' is required")
    ints = {}
    for key in INT_KEYS:
        if key in raw:
            ints[key] = _positive_int(raw[key], key, option,
                                      allow_zero=key in ("shared_experts", "dense_layers", "routed_nodes"))
    assumptions: List[str] = []
    hidden, layers = ints["hidden"], ints["layers"]
    if "heads" in ints and "head_dim" not in ints and hidden % ints["heads"]:
        raise PlanUsageError(f"{option}: 'heads' ({ints['heads']}) does not divide 'hidden' ({hidden}); give head_dim "
                             "when the head size is not hidden / heads")
    head_dim = ints.get("head_dim") or (hidden // ints["heads"] if "heads" in ints else HEAD_DIM)
    heads = ints.get("heads") or max(1, hidden // head_dim)
    if "heads" not in ints:
        assumptions.append(f"heads not given: hidden / {head_dim} = {heads}")
    kv_heads = ints.get("kv_heads", heads)
    seq = ints.get("seq", DEFAULT_SEQ)
    if "seq" not in ints:
        assumptions.append(f"seq not given: {DEFAULT_SEQ}")
    experts, k = ints.get("experts", 1), ints.get("active_experts", 1 if "experts" not in ints else 0)
    if experts > 1 and not k:
        raise PlanUsageError(f"{option}: a mixture of experts needs active_experts (experts per token) as well")
    if k > experts:
        raise PlanUsageError(f"{option}: active_experts ({k}) exceeds experts ({experts})")
    dense_layers = ints.get("dense_layers", 0)
    if dense_layers >= layers and experts > 1:
        raise PlanUsageError(f"{option}: dense_layers ({dense_layers}) leaves no MoE layer of {layers}")
    ffn, vocab, expert_ffn = ints.get("ffn", 0), ints.get("vocab", 0), ints.get("expert_ffn", 0)
    shared = ints.get("shared_experts", 0)
    mlp = raw.get("mlp", "gated")
    if mlp not in MLP_KINDS:
        raise PlanUsageError(f"{option}: 'mlp' must be one of {', '.join(MLP_KINDS)}, not {mlp!r}")
    dropout = raw.get("dropout", False)
    if not isinstance(dropout, bool):
        raise PlanUsageError(f"{option}: 'dropout' must be true or false, not {dropout!r}")
    if not vocab:
        assumptions.append("vocab not given: any embedding and output-layer weights inside params are counted as layer "
                           "weights spread over the pipeline stages (not on the first and last stage), the input "
                           "embedding lookup is charged 6 FLOPs per parameter like a matrix multiply, and the fp32 "
                           "logits of the loss (4 s b vocab / t bytes) are left out of activation memory")
    if "params" in raw:
        params = _positive_number(raw["params"], "params", option)
    elif ffn and vocab and (experts == 1 or expert_ffn):
        params = architecture_params(layers, hidden, heads, kv_heads, ffn, vocab, experts, expert_ffn, shared, dense_layers,
                                     max(1, head_dim), mlp)
        assumptions.append("params computed from the architecture (Llama/Mixtral layout)")
    else:
        raise PlanUsageError(f"{option}: give 'params', or 'ffn' and 'vocab' (and 'expert_ffn' for experts) to count them")
    expert_params = 0.0
    if experts > 1:
        moe_layers = layers - dense_layers
        if expert_ffn:
            expert_params = float(moe_layers * experts * (3 if mlp == "gated" else 2) * hidden * expert_ffn)
        else:
            # Without the expert size: all but attention (4h^2 per layer, multi-head) and embeddings is experts.
            expert_params = max(0.0, params - 2.0 * vocab * hidden - layers * 4.0 * hidden * hidden)
            assumptions.append("expert parameters estimated as params - embeddings - 4 x hidden^2 per layer (attention)")
    if "active_params" in raw:
        active = _positive_number(raw["active_params"], "active_params", option)
    else:
        active = params - expert_params * (1 - k / experts) if experts > 1 else params
    if active > params:
        raise PlanUsageError(f"{option}: active_params ({active:g}) exceeds params ({params:g})")
    return Model(
        name=str(raw.get("name", "custom")), params=params, active_params=active, layers=layers, hidden=hidden,
        heads=heads, kv_heads=kv_heads, seq=seq, vocab=vocab, ffn=ffn, experts=experts, active_experts=max(k, 1),
        expert_ffn=expert_ffn, shared_experts=shared, dense_layers=dense_layers if experts > 1 else 0,
        expert_params=expert_params, head_dim=max(1, head_dim), qk_head_dim=ints.get("qk_head_dim", 0),
        v_head_dim=ints.get("v_head_dim", 0), routed_nodes=ints.get("routed_nodes", 0), mlp=mlp, dropout=dropout,
        sources=_sources(raw.get("sources", []), option),
        notes=_text(raw.get("notes", ""), "notes", option),
        assumptions=tuple(assumptions),
    )


def from_file(path: Path) -> Model:
    import yaml

    option = f"--model {path}"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))  # JSON is YAML too
    except (OSError, UnicodeDecodeError) as e:
        raise PlanUsageError(f"{option}: cannot read ({e})") from None
    except yaml.YAMLError as e:
        raise PlanUsageError(f"{option}: not valid YAML or JSON ({str(e).splitlines()[0]})") from None
    if not isinstance(raw, dict):
        raise PlanUsageError(f"{option}: expected a mapping of keys (layers, hidden, params, ...)")
    raw.setdefault("name", path.stem)
    return build(raw, option)


def resolve(value: str) -> Model:
    """`--model VALUE`: a preset name (or alias) first, else a file."""
    found = preset(value)
    if found is not None:
        return found
    path = Path(value)
    if path.is_file():
        return from_file(path)
    raise PlanUsageError(f"--model: {value!r} is neither a preset nor a file; presets: {', '.join(preset_names())}")


def with_seq(model: Model, seq: int) -> Model:
    return dataclasses.replace(model, seq=seq)


SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_count(text: str) -> float:
    """'70e9', '70B', '4M', '1.5T' -> a float; ValueError when it is none of these."""
    t = text.strip().lower()
    scale = SUFFIX.get(t[-1:], 1.0) if t else 1.0
    return float(t[:-1] if scale != 1.0 else t) * scale


def _positive_number(v: Any, key: str, option: str) -> float:
    if isinstance(v, str):  # YAML reads 70e9 (no dot) and 70B as strings
        try:
            v = parse_count(v)
        except ValueError:
            raise PlanUsageError(f"{option}: '{key}' must be a number, not {v!r}") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise PlanUsageError(f"{option}: '{key}' must be a number, not {v!r}")
    if not math.isfinite(v) or v <= 0:
        raise PlanUsageError(f"{option}: '{key}' must be a finite number greater than 0, not {v!r}")
    return float(v)


def _sources(v: Any, option: str) -> Tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise PlanUsageError(f"{option}: 'sources' must be a list of strings (URLs), not {v!r}")
    return tuple(v)


def _text(v: Any, key: str, option: str) -> str:
    if not isinstance(v, str):
        raise PlanUsageError(f"{option}: '{key}' must be a string, not {v!r}")
    return v


def _positive_int(v: Any, key: str, option: str, allow_zero: bool = False) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise PlanUsageError(f"{option}: '{key}' must be a whole number, not {v!r}")
    if v < 0 or (v == 0 and not allow_zero):
        raise PlanUsageError(f"{option}: '{key}' must be {'0 or more' if allow_zero else 'greater than 0'}")
    return v
