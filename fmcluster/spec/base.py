"""What every spec model shares: strict, frozen models and cross-field problems tagged with their path."""

from __future__ import annotations

import re
from typing import Any, Iterator, List, Sequence, Set, Tuple

from pydantic import BaseModel, ConfigDict, model_validator

# A problem found by a cross-field rule: (field path below the model, what is wrong and what is allowed).
Problem = Tuple[str, str]

# A problem line quotes the user's input: it stays one line whatever that input holds. Values are quoted short where
# they are embedded (loading._shown); this bounds the whole line, our longest explanations included.
PROBLEM_LINE_LIMIT = 2000
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(text: str, limit: int = PROBLEM_LINE_LIMIT) -> str:
    """`text` with control characters escaped (a newline cannot start a second line) and cut to `limit`."""
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 40]}... ({len(text) - limit + 40} more characters)"


def _pieces(value: Any, open_: Set[int]) -> Iterator[str]:
    """repr(value) piece by piece, lists and dicts lazily (repr's own marks for a value inside itself)."""
    kind = type(value)
    if kind is not list and kind is not dict:
        yield repr(value)
        return
    if id(value) in open_:
        yield "[...]" if kind is list else "{...}"
        return
    open_.add(id(value))
    yield "[" if kind is list else "{"
    for i, item in enumerate(value.items() if kind is dict else value):
        if i:
            yield ", "
        if kind is dict:
            yield from _pieces(item[0], open_)
            yield ": "
            item = item[1]
        yield from _pieces(item, open_)
    yield "]" if kind is list else "}"
    open_.discard(id(value))


def clipped_repr(value: Any, limit: int = 80) -> str:
    """`one_line(repr(value), limit)`, rendering no more of a list or dict than the line shows: what YAML aliases
    make can be far larger than its file (spec/yaml_aliases.py)."""
    text, shown = "", 0
    for piece in _pieces(value, set()):
        text += piece
        shown += len(piece)
        if shown > limit:
            if type(value) in (list, dict):
                return one_line(text[:limit - 20], limit) + "... (more not shown)"
            break
    return one_line(text, limit)


class SpecError(Exception):
    """Invalid spec input: `problems` holds one `path: message` line each."""

    def __init__(self, problems: Sequence[str]):
        self.problems = [one_line(p) for p in problems]
        super().__init__("\n".join(self.problems))


def raise_problems(found: List[Problem]) -> None:
    """Raise every cross-field problem at once, each tagged with its path below the model.

    pydantic places a model validator's error at the model itself; the ``@path`` tags
    let `format_validation_error` name the exact field.
    """
    if found:
        raise ValueError("\n".join(f"@{one_line(path)}@{one_line(msg)}" for path, msg in found))


# AWS API integers are 32-bit (the Smithy `Integer` shape the SDKs and CloudFormation resource schemas use); a larger
# number in a field without a tighter bound is a mistake that would only surface at deploy.
INT32_MAX = 2**31 - 1


class SpecModel(BaseModel):
    """Unknown keys are errors (a typo never passes silently); numbers are whole where a field takes an integer
    (strict: `count: yes` or `count: 2.5` is refused, not read as 1 or 2); a validated spec is immutable."""

    # defer_build: a model's validator is built when first used, so a command builds the models of the spec it reads
    # (its own kind's settings, `fmcluster.spec.loading.parse_spec`) and not every kind's.
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, strict=True, defer_build=True)

    @model_validator(mode="after")
    def _integers_fit_aws(self) -> SpecModel:
        found: List[Problem] = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            items = value.items() if isinstance(value, dict) else [(None, value)]
            for key, v in items:
                if isinstance(v, int) and not isinstance(v, bool) and abs(v) > INT32_MAX:
                    found.append((name if key is None else f"{name}.{key}",
                                  f"{v} is out of range; at most {INT32_MAX} (AWS takes 32-bit integers)"))
        raise_problems(found)
        return self
