"""templates/: normalized templates of every example, committed so a pull request shows
the infrastructure diff; also writes schema/cluster.schema.json. A repository tool, not part of
the package: `python scripts/templates.py write|check` (make templates)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Dict

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's fmcluster, also when run as a script
EXAMPLES = ROOT / "examples"
TEMPLATES = ROOT / "templates"


def normalize(template: Dict[str, object]) -> str:
    """Sorted keys, stable indentation, newline at the end."""
    return json.dumps(template, indent=1, sort_keys=True) + "\n"


def synth_templates(example: Path) -> Dict[str, Dict[str, object]]:
    """Stack name → template for one example spec."""
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from fmcluster.app import synthesize

    return synthesize(example)


def expected_files(examples: Dict[str, Dict[str, Dict[str, object]]]) -> Dict[str, str]:
    """Relative path under templates/ → normalized text."""
    return {
        f"{example}/{stack}.template.json": normalize(t)
        for example, stacks in examples.items()
        for stack, t in stacks.items()
    }


def all_examples() -> Dict[str, Dict[str, Dict[str, object]]]:
    return {p.stem: synth_templates(p) for p in sorted(EXAMPLES.glob("*.yaml"))}


def stale(expected: Dict[str, str]) -> list:
    """Paths under templates/ that differ from `expected`, are missing or are extra."""
    actual = {str(p.relative_to(TEMPLATES)): p.read_text() for p in TEMPLATES.rglob("*.template.json")}
    return sorted(k for k in set(actual) | set(expected) if actual.get(k) != expected.get(k))


def write(expected: Dict[str, str]) -> None:
    for p in TEMPLATES.rglob("*.template.json"):
        if str(p.relative_to(TEMPLATES)) not in expected:
            p.unlink()
    for rel, text in expected.items():
        path = TEMPLATES / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for d in sorted(TEMPLATES.iterdir()):
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()


def write_schema() -> None:
    """schema/cluster.schema.json: what editors validate specs against."""
    from fmcluster.registry import json_schema

    (ROOT / "schema").mkdir(exist_ok=True)
    (ROOT / "schema" / "cluster.schema.json").write_text(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")


def main(argv: list) -> int:
    mode = argv[0] if argv else "check"
    expected = expected_files(all_examples())
    if mode == "write":
        write(expected)
        write_schema()
        print(f"wrote {len(expected)} templates under {TEMPLATES}")
        return 0
    diff = stale(expected)
    for path in diff:
        print(f"stale: templates/{path}", file=sys.stderr)
    return 1 if diff else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
