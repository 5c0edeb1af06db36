"""cfn-lint for tests: the same rule set and entry point as scripts/cfn_lint_templates.py (built once per worker)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def cfn_lint(template: Dict[str, Any], region: str) -> List[str]:
    """One line per cfn-lint finding on `template` in `region`; empty when clean."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    from cfn_lint_templates import lint_text

    return [f"{m.rule.id} {m.message[:200]}" for m in lint_text(json.dumps(template), region)]
