"""cfn-lint over the committed templates (templates/<example>/*.json), each in its example's region.

`python scripts/cfn_lint_templates.py` prints one line per finding and exits 1 if there is any (make lint runs it);
`--json` prints the findings as a JSON list instead. The test suite lints each example in a test of its own
(tests/test_quality.py), which pytest-xdist spreads over the cores; tests/test_quality.py also holds templates/ equal
to what the examples synthesize, so linting these files is linting the synthesized templates.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's fmcluster, also when run as a script


def examples() -> List[str]:
    return sorted(p.stem for p in (ROOT / "examples").glob("*.yaml"))


@functools.lru_cache(maxsize=1)
def _rules() -> Any:
    """cfn-lint's rule set, built once per process. cfnlint.api.lint builds it again on every call (its isinstance
    check wants a RulesCollection, which the runner's Rules is not), and that was a third of the lint's time; cfn-lint's
    own command line runs one rule set over every template it is given, as this does."""
    from cfnlint.config import ConfigMixIn
    from cfnlint.runner import Runner

    return Runner(ConfigMixIn()).rules


def lint_text(text: str, region: str) -> List[Any]:
    """cfn-lint's matches for one template (JSON or YAML text) in one region, with the default rules."""
    from cfnlint.config import ConfigMixIn
    from cfnlint.decode.decode import decode_str
    from cfnlint.runner import run_template_by_data

    template, errors = decode_str(text)
    if errors:
        return list(errors)
    return list(run_template_by_data(template, ConfigMixIn(regions=[region]), _rules()))


def findings(names: Optional[Sequence[str]] = None) -> List[str]:
    """cfn-lint's findings for the named examples' committed templates (all examples by default)."""
    from fmcluster.registry import load_spec

    lines = []
    for name in names if names is not None else examples():
        example = ROOT / "examples" / f"{name}.yaml"
        region = load_spec(example).region
        for template in sorted((ROOT / "templates" / example.stem).glob("*.template.json")):
            label = f"{example.stem}/{template.name}"
            lines += [f"{label}: {m.rule.id} {m.message[:200]}" for m in lint_text(template.read_text(), region)]
    return lines


def main(argv: List[str]) -> int:
    found = findings()
    print(json.dumps(found) if "--json" in argv else "\n".join(found))
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
