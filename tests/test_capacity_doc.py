"""docs/capacity.md's table of capacity types per orchestrator is generated from each kind's declared
capacity_types, and a refused Capacity Block says what the orchestrator takes instead."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict

import pytest
import yaml

from fmcluster.registry import kinds, parse_spec
from fmcluster.spec import SpecError
from fmcluster.spec.node_group import CAPACITY_TYPES

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "capacity.md"


def capacity_table() -> str:
    rows = ["| orchestrator | " + " | ".join(CAPACITY_TYPES) + " |", "|---" * (len(CAPACITY_TYPES) + 1) + "|"]
    for kind in kinds():
        rows.append(f"| {kind.name} | " + " | ".join("yes" if t in kind.nodes.capacity_types else "no"
                                                      for t in CAPACITY_TYPES) + " |")
    return "\n".join(rows)


def test_the_documented_table_is_what_the_kinds_declare():
    text = DOC.read_text()
    found = re.search(r"<!-- capacity-table:start -->\n(.*?)\n<!-- capacity-table:end -->", text, re.S)
    assert found, "docs/capacity.md lost its table markers"
    assert found.group(1) == capacity_table(), "docs/capacity.md's table is stale; paste capacity_table() there"


def test_every_source_link_in_the_capacity_and_teardown_docs_is_a_public_aws_page():
    for doc in (DOC, ROOT / "docs" / "teardown.md"):
        links = re.findall(r"\]\((https?://[^)]+)\)", doc.read_text())
        assert links, doc
        assert all(link.startswith("https://docs.aws.amazon.com/") for link in links), doc


def example_of(kind_name: str) -> Dict[str, Any]:
    """A committed example of the kind (it holds the kind's required settings)."""
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if (data.get("orchestrator") or {}).get("type") == kind_name:
            return data
    raise AssertionError(f"no example for {kind_name}")


@pytest.mark.parametrize("kind", [k for k in kinds() if "capacity-block" not in k.nodes.capacity_types
                                  and "training-plan" in k.nodes.capacity_types], ids=lambda k: k.name)
def test_a_refused_capacity_block_names_the_training_plan_to_buy_instead(kind):
    data = example_of(kind.name)
    data["node_groups"][0]["capacity"] = {"type": "capacity-block", "reservation_id": "cr-0123456789abcdef0"}
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    line = next(p for p in e.value.problems if p.startswith("node_groups[0].capacity.type:"))
    assert "not capacity-block; its reserved capacity is a SageMaker training plan" in line
    assert "docs/capacity.md" in line
