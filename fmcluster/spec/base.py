"""What every spec model shares: strict, frozen models and cross-field problems tagged with their path."""

from __future__ import annotations

from typing import List, Sequence, Tuple

from pydantic import BaseModel, ConfigDict

# A problem found by a cross-field rule: (field path below the model, what is wrong and what is allowed).
Problem = Tuple[str, str]


class SpecError(Exception):
    """Invalid spec input: `problems` holds one `path: message` line each."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def raise_problems(found: List[Problem]) -> None:
    """Raise every cross-field problem at once, each tagged with its path below the model.

    pydantic places a model validator's error at the model itself; the ``@path`` tags
    let `format_validation_error` name the exact field.
    """
    if found:
        raise ValueError("\n".join(f"@{path}@{msg}" for path, msg in found))


class SpecModel(BaseModel):
    """Unknown keys are errors (a typo never passes silently); a validated spec is immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)
