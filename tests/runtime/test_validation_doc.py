"""docs/validation.md is the operator's reference: it lists every check with its layer and level, and the floors
of every GPU type as the catalog has them."""

from __future__ import annotations

import re

from fmcluster import catalog
from fmcluster.runtime.checks import all_checks

from .conftest import REPO

DOC = (REPO / "docs" / "validation.md").read_text()


def test_every_check_is_documented_with_its_layer_and_level():
    rows = {m.group(1): (m.group(2), m.group(3)) for m in re.finditer(r"^\| ([\w.]+) \| (\w+) \| (\w+) \|", DOC, re.M)}
    for c in all_checks():
        assert rows.get(c.id) == (c.layer, c.level), c.id
    assert set(rows) - {c.id for c in all_checks()} <= {"type", "id"}


def test_the_documented_floors_are_the_catalogs():
    for name in catalog.gpu_types():
        floors = catalog.get(name).min_versions
        row = re.search(rf"^\| {re.escape(name)} \| (.+) \|$", DOC, re.M)
        assert row, name
        cells = [c.strip(" *") for c in row.group(1).split("|")]
        documented = dict(zip(("driver", "cuda", "nccl", "aws_ofi_nccl", "efa_installer"), cells))
        assert {k: v for k, v in documented.items() if v != "—"} == floors, name
