"""What every spec model shares: strict, frozen models and cross-field problems tagged with their path."""

from __future__ import annotations

from typing import List, Tuple

from pydantic import BaseModel, ConfigDict


def _problems(found: List[Tuple[str, str]]) -> None:
    """Raise every cross-field problem at once, each tagged with its path below the model.

    pydantic places a model validator's error at the model itself; the ``@path`` tags
    let `format_validation_error` name the exact field.
    """
    if found:
        raise ValueError("\n".join(f"@{path}@{msg}" for path, msg in found))



class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)
