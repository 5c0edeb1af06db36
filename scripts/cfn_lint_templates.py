"""cfn-lint over the committed templates (templates/<example>/*.json), each in its example's region.

`python scripts/cfn_lint_templates.py` prints one line per finding and exits 1 if there is any (make lint runs it);
`--json` prints the findings as a JSON list instead. The test suite lints each example in a test of its own
(tests/test_quality.py), which pytest-xdist spreads over the cores; tests/test_quality.py also holds templates/ equal
to what the examples synthesize, so linting these files is linting the synthesized templates.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's fmcluster, also when run as a script


def examples() -> List[str]:
    return sorted(p.stem for p in (ROOT / "examples").glob("*.yaml"))


def findings(names: Optional[Sequence[str]] = None) -> List[str]:
    """cfn-lint's findings for the named examples' committed templates (all examples by default)."""
    from cfnlint.api import ManualArgs, lint

    from fmcluster.registry import load_spec

    lines = []
    for name in names if names is not None else examples():
        example = ROOT / "examples" / f"{name}.yaml"
        region = load_spec(example).region
        for template in sorted((ROOT / "templates" / example.stem).glob("*.template.json")):
            label = f"{example.stem}/{template.name}"
            lines += [f"{label}: {m.rule.id} {m.message[:200]}"
                      for m in lint(template.read_text(), config=ManualArgs(regions=[region]))]
    return lines


def main(argv: List[str]) -> int:
    found = findings()
    print(json.dumps(found) if "--json" in argv else "\n".join(found))
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
