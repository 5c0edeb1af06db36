"""dashboards/: the Grafana dashboards users import, composed from the package's dashboards and every registered
store's panels (`fmcluster.observability.dashboards`, `Store.dashboard`); committed so a pull request shows what
changes on screen. A repository tool, not part of the package: `python scripts/dashboards.py write|check`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's fmcluster, also when run as a script
OUT = ROOT / "dashboards"


def expected_files() -> Dict[str, str]:
    """File name under dashboards/ -> its text (the package's own layout: two-space indent, newline at the end)."""
    from fmcluster import observability, registry

    panels = [s.dashboard for s in registry.stores() if s.dashboard is not None]
    return {f"{name}.json": json.dumps(d, indent=2) + "\n" for name, d in observability.dashboards(panels).items()}


UID_PREFIX = "fmcluster-"  # every dashboard fmcluster ships has a uid of its own below it


def ours(path: Path) -> bool:
    """A dashboard this tool wrote (its uid is fmcluster's): only those are replaced, checked or removed; a file a
    person put beside them is left as it is."""
    try:
        return str(json.loads(path.read_text(encoding="utf-8")).get("uid", "")).startswith(UID_PREFIX)
    except (OSError, ValueError, AttributeError):
        return False


def stale(expected: Dict[str, str]) -> List[str]:
    """fmcluster's files under dashboards/ that differ from `expected`, are missing or are no longer shipped."""
    actual = {p.name: p.read_text(encoding="utf-8") for p in OUT.glob("*.json") if ours(p)}
    return sorted(k for k in set(actual) | set(expected) if actual.get(k) != expected.get(k))


def write(expected: Dict[str, str]) -> None:
    OUT.mkdir(exist_ok=True)
    for p in OUT.glob("*.json"):
        if p.name not in expected and ours(p):
            p.unlink()
    for name, text in expected.items():
        path = OUT / name
        if path.exists() and not ours(path):
            raise SystemExit(f"dashboards/{name} is not a dashboard fmcluster wrote; move it away and run again")
        path.write_text(text, encoding="utf-8")


def main(argv: list) -> int:
    mode = argv[0] if argv else "check"
    expected = expected_files()
    if mode == "write":
        write(expected)
        print(f"wrote {len(expected)} dashboards under {OUT}")
        return 0
    diff = stale(expected)
    for name in diff:
        print(f"stale: dashboards/{name} (python scripts/dashboards.py write)", file=sys.stderr)
    return 1 if diff else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
