"""What every node-setup module shares: its one error, and reading and writing files the way a node must.

Stdlib only (runs with the node's python3, 3.9+)."""

from __future__ import annotations

import json
import os
from typing import Any, Dict


class SetupError(Exception):
    """A problem with the inputs or this node: one line, shown as the step's failure reason."""


def load_json(path: str, what: str) -> Dict[str, Any]:
    """The JSON object at `path`; `what` names it in the error."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise SetupError(f"{what} not found at {path}") from None
    except (OSError, ValueError) as exc:
        raise SetupError(f"{what} at {path} is not readable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SetupError(f"{what} at {path} is not a JSON object")
    return data


def clean(value: Any, field: str) -> str:
    """A string that can travel as one shell argument and one line."""
    if not isinstance(value, str) or not value:
        raise SetupError(f"{field} must be a non-empty string, got {value!r}")
    if any(c in value for c in "\t\n\r\0"):
        raise SetupError(f"{field} contains a tab, newline or NUL")
    return value


def write_file(path: str, text: str) -> None:
    """Write `text` to `path` by rename, so a reader (systemd, docker, mount) never sees half a file."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.fmcluster.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
