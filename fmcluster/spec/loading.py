"""Reading a spec: YAML (duplicate keys refused) -> the spec model, every failure one line per problem.

The spec model depends on the orchestrator kinds it takes and the store sections under ``storage`` (`StoreSection`:
a store's key and settings model), which the composition root (`fmcluster.registry`) passes to `spec_model`,
`parse_spec` and `load_spec`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Type, Union, cast

from pydantic import BaseModel, Field, ValidationError, create_model
from typing_extensions import Annotated

from fmcluster.spec.base import SpecError, SpecModel, clipped_repr
from fmcluster.spec.checkpoints import checkpoints_model
from fmcluster.spec.cluster import ClusterSpec, OrchestratorTraits
from fmcluster.spec.node_group import MAX_NODE_GROUPS, NODE_GROUPS_WHY
from fmcluster.spec.orchestrator import OrchestratorSettings
from fmcluster.spec.serving import serving_model
from fmcluster.spec.storage import Storage, StoreSettings
from fmcluster.spec.yaml_source import read_yaml

Loc = Tuple[Union[str, int], ...]
# A store's section under ``storage``: its key, its settings model, the section's description.
StoreSection = Tuple[str, Type[StoreSettings], str]
_models: Dict[Tuple[Any, ...], Type[ClusterSpec]] = {}


def _storage_model(sections: Sequence[StoreSection]) -> Type[Storage]:
    """`Storage` with an optional field per store section. The first store's goes before ``data_bucket``, where the
    spec has declared it since the first release, so the keys messages list keep their order."""
    if not sections:
        return Storage
    fields: Dict[str, Any] = {key: (Optional[model], Field(None, description=text)) for key, model, text in sections}
    first = next(iter(fields))
    # a base after Storage: pydantic orders fields from the last base to the first
    leading = create_model("StorageFirstSection", __base__=SpecModel, **{first: fields.pop(first)})
    bases: Any = (Storage, leading)
    storage = cast(Type[Storage], create_model("Storage", __base__=bases, **fields))
    storage.__doc__ = Storage.__doc__
    return storage


def _checkpoints_field(storage: Type[Storage]) -> Tuple[Any, Any]:
    """``checkpoints`` taking the checkpoint tiers of `storage` (its stores' and the others), as ClusterSpec declares it."""
    declared = ClusterSpec.model_fields["checkpoints"]
    return Optional[checkpoints_model(storage)], Field(None, description=declared.description)


def spec_model(kinds: Sequence[OrchestratorTraits], sections: Sequence[StoreSection] = (),
               stores: Sequence[Any] = ()) -> Type[ClusterSpec]:
    """`ClusterSpec` whose ``orchestrator`` takes the settings of `kinds` (the first is the default), told apart by
    ``type``, and whose ``storage`` takes the store `sections`. One model per set of kinds and sections."""
    if not kinds:
        raise ValueError("kinds: a spec needs at least one orchestrator kind")
    # the model holds the kinds and sections, so their ids stay theirs
    key = (tuple(id(k) for k in kinds), tuple(id(m) for _, m, _ in sections), tuple(id(s) for s in stores))
    if key not in _models:
        members = tuple(k.settings for k in kinds)
        union: Any = Annotated[Union[members], Field(discriminator="type")]  # type: ignore[valid-type]
        description = "; ".join(f"{k.name}: {k.summary}" for k in kinds)
        field = Field(default_factory=kinds[0].settings, description=description)
        extra: Dict[str, Any] = {}
        storage = _storage_model(sections)
        if sections:
            extra["storage"] = (storage, Field(default_factory=storage))
            extra["serving"] = _serving_field(storage)
        extra["checkpoints"] = _checkpoints_field(storage)
        model = create_model("ClusterSpec", __base__=ClusterSpec, orchestrator=(union, field), **extra)
        model.__doc__ = ClusterSpec.__doc__
        model.kinds = {k.name: k for k in kinds}
        model.stores = tuple(stores)
        _models[key] = model
    return _models[key]


def _serving_field(storage: Type[Storage]) -> Tuple[Any, Any]:
    """``serving`` whose models' sources take a directory on the shared file system under its section's key."""
    serving = serving_model(storage.file_system_key())
    return Optional[serving], Field(None, description=ClusterSpec.model_fields["serving"].description)


# --- error formatting -------------------------------------------------------------------------


def _union_members(field: Any) -> Optional[Dict[str, Type[BaseModel]]]:
    """For a field holding a union discriminated by `field.discriminator`: tag -> member model."""
    key = getattr(field, "discriminator", None)
    if not isinstance(key, str):
        return None
    members: Dict[str, Type[BaseModel]] = {}
    for member in getattr(field.annotation, "__args__", ()):
        if isinstance(member, type) and issubclass(member, BaseModel) and key in member.model_fields:
            for tag in getattr(member.model_fields[key].annotation, "__args__", ()):
                members[str(tag)] = member
    return members


def _inner_model(annotation: Any) -> Optional[Type[BaseModel]]:
    """The model inside Optional[...], List[...] and the like."""
    for arg in getattr(annotation, "__args__", ()) or (annotation,):
        for inner in getattr(arg, "__args__", ()) or (arg,):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return None


def _walk(root: Type[ClusterSpec], loc: Loc) -> Tuple[str, Optional[Type[BaseModel]]]:
    """The user-facing path of `loc` (pydantic's internal parts and union tags dropped) and the model
    that owns the mapping it ends in (None when unknown)."""
    path = ""
    model: Optional[Type[BaseModel]] = root
    tags: Optional[Dict[str, Type[BaseModel]]] = None
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
            continue
        if tags is not None and part in tags:
            model, tags = tags[part], None
            continue
        if str(part).startswith(("function-", "tagged-union", "literal")):
            continue
        path += ("." if path else "") + str(part)
        field = model.model_fields.get(part) if model is not None else None
        tags = _union_members(field) if field is not None else None
        model = _inner_model(field.annotation) if field is not None and tags is None else None
    return path or "(top level)", model


def _shown(value: Any) -> str:
    """A user's value as YAML spells it (yes, not True), cut short without rendering the rest."""
    if isinstance(value, bool):
        return "true/yes" if value else "false/no"
    return clipped_repr(value, 80)


def _format_one(root: Type[ClusterSpec], e: Dict[str, Any]) -> List[str]:
    loc = tuple(e["loc"])
    path, _ = _walk(root, loc)
    msg, kind = e["msg"], e["type"]
    if kind == "extra_forbidden":
        _, owner = _walk(root, loc[:-1])
        msg = "unknown key" + (f"; allowed keys: {', '.join(owner.model_fields)}" if owner else "")
        if owner is not None and issubclass(owner, OrchestratorSettings):
            # another kind's section: say whose
            owners = [k.name for k in root.kinds.values() if str(loc[-1]) in k.settings.model_fields]
            if owners:
                mine = getattr(owner.model_fields["type"].annotation, "__args__", ("?",))[0]
                msg = f"applies to orchestrator type {' or '.join(owners)}, not {mine}"
    elif kind == "missing":
        msg = "required"
    elif kind == "too_long" and path == "node_groups":
        msg = f"{e.get('ctx', {}).get('actual_length')} groups; at most {MAX_NODE_GROUPS} ({NODE_GROUPS_WHY})"
    elif kind == "int_type":
        msg = f"{_shown(e.get('input'))} is not a whole number; write digits, e.g. 2"
    elif kind in ("less_than_equal", "greater_than_equal", "less_than", "greater_than"):
        msg = f"{_shown(e.get('input'))} is out of range: {msg[len('Input should be '):]}"
    elif kind in ("union_tag_invalid", "union_tag_not_found"):
        key = str(e.get("ctx", {}).get("discriminator", "'type'")).strip("'")
        got = e.get("ctx", {}).get("tag")
        path = f"{path}.{key}"
        allowed = ", ".join(root.kinds)
        msg = f"{got!r} is not allowed; allowed: {allowed}" if got is not None else f"required; allowed: {allowed}"
    elif kind == "string_pattern_mismatch":
        _, owner = _walk(root, loc[:-1]) if loc and isinstance(loc[-1], str) else ("", None)
        info = owner.model_fields[str(loc[-1])].description if owner and str(loc[-1]) in owner.model_fields else None
        msg = f"{_shown(e.get('input'))} is not allowed: {info or 'it must match ' + e['ctx']['pattern']}"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
        if msg.startswith("@"):
            lines = []
            for tagged in msg.split("\n"):
                sub, _, text = tagged[1:].partition("@")
                full = f"{path}.{sub}" if path != "(top level)" else sub
                lines.append(f"{full.replace('.[', '[')}: {text}")
            return lines
    return [f"{path}: {msg}"]


def format_validation_error(err: ValidationError, model: Type[ClusterSpec]) -> List[str]:
    return [line for e in err.errors(include_url=False) for line in _format_one(model, dict(e))]


# --- loading ----------------------------------------------------------------------------------


def _named_kind(data: Dict[str, Any], kinds: Sequence[OrchestratorTraits]) -> Optional[OrchestratorTraits]:
    """The kind `data` is written for: the one its ``orchestrator.type`` names, the first when it names none; None
    when it names no kind of `kinds` or its section is not a mapping."""
    section = data.get("orchestrator", {})
    if not isinstance(section, dict):
        return None
    name = section.get("type", kinds[0].name)
    return next((k for k in kinds if k.name == name), None)


def parse_spec(data: Any, kinds: Sequence[OrchestratorTraits], sections: Sequence[StoreSection] = (),
               stores: Sequence[Any] = ()) -> ClusterSpec:
    """`data` validated by the spec model of `kinds`. A spec written for one kind is validated by the model of that kind
    alone, which accepts exactly what the whole model accepts for it and builds one kind's settings schema, not every
    kind's (a command's start-up: bench/command_startup.py); a spec it refuses is validated again by the whole model,
    whose errors also name the kind that owns a key the spec's kind does not take."""
    if data is None:
        raise SpecError(["(top level): the spec is empty; expected a mapping with name, region, node_groups, ..."])
    if not isinstance(data, dict):
        raise SpecError([f"(top level): expected a mapping of keys, got a {type(data).__name__}"])
    kind = _named_kind(data, kinds)
    if kind is not None and len(kinds) > 1:
        try:
            return spec_model([kind], sections, stores).model_validate(data)
        except ValidationError:
            pass  # the whole model says why, below
    model = spec_model(kinds, sections, stores)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise SpecError(format_validation_error(e, model)) from None


def load_spec(path: Union[str, Path], kinds: Sequence[OrchestratorTraits],
              sections: Sequence[StoreSection] = (), stores: Sequence[Any] = ()) -> ClusterSpec:
    """Read and validate a spec file; every failure is a `SpecError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([f"{p}: no such file"]) from None
    except IsADirectoryError:
        raise SpecError([f"{p}: is a directory, expected a YAML file"]) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError([f"{p}: cannot read ({e})"]) from None
    return parse_spec(read_yaml(text, str(p)), kinds, sections, stores)


def json_schema(model: Type[ClusterSpec]) -> Dict[str, Any]:
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "fmcluster cluster spec"
    return schema
