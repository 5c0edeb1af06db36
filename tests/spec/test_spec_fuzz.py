"""Fuzz: seeded mutants of every example spec, alias bombs among them, are answered with exit 0 or 2 and never a
traceback; a bomb past the alias bound is always the one line naming its position. A fixed seed and a fixed number
of mutants, validated in this process: the same few seconds of work on every run."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, List, Tuple

import pytest
import yaml

from fmcluster.cli import main
from fmcluster.spec.yaml_aliases import MAX_ALIAS_NODES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
SEED, MUTANTS = 20261203, 60
PLACEHOLDER = "fmcluster-fuzz-placeholder"


def laughs(rng: random.Random) -> Tuple[str, int]:
    """Lists of aliases of the list before (billion laughs): its YAML and the nodes its aliases add."""
    levels, width = rng.randint(2, 12), rng.randint(2, 9)
    size, added = 1 + width, 0
    rows = [f"&l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        rows.append(f"&l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
        added, size = added + width * size, 1 + width * size
    return "[" + ", ".join(rows) + "]", added


def merges(rng: random.Random) -> Tuple[str, int]:
    """Mappings merging the mapping before several times (merge keys): its YAML and the nodes its aliases add."""
    levels, width = rng.randint(2, 10), rng.randint(2, 9)
    size, added = 5, 0
    rows = ["&m0 {a: 1, b: 2}"]
    for i in range(1, levels):
        rows.append(f"&m{i} {{<<: [{', '.join([f'*m{i - 1}'] * width)}]}}")
        added, size = added + width * size, 3 + width * size
    return "[" + ", ".join(rows) + "]", added


def recursive(rng: random.Random) -> Tuple[str, int]:
    return rng.choice(["&r [1, *r]", "&r {k: *r}", "&r [[[*r]]]"]), -1


def paths(data: Any, prefix: Tuple[Any, ...] = ()) -> List[Tuple[Any, ...]]:
    found = [prefix] if prefix else []
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for k, v in items:
        found += paths(v, prefix + (k,))
    return found


def mutant(rng: random.Random) -> Tuple[str, int]:
    """An example with one value replaced by an alias bomb (or a recursive alias), or an alias written into the
    text at a random place; the nodes its aliases add (-1: recursive, 0: not a bomb)."""
    text = rng.choice(EXAMPLES).read_text()
    kind = rng.choice(["laughs", "merges", "recursive", "text"])
    if kind == "text":
        at = rng.randint(0, len(text))
        return text[:at] + rng.choice(["*a", "&a ", "<<: *a\n", "&a [*a]", "? *a\n: x\n", "*a: 1\n"]) + text[at:], 0
    bomb, added = {"laughs": laughs, "merges": merges, "recursive": recursive}[kind](rng)
    data = yaml.safe_load(text)
    parent: Any = data
    path = rng.choice(paths(data))
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = PLACEHOLDER
    return yaml.safe_dump(data, sort_keys=False).replace(PLACEHOLDER, bomb, 1), added


def test_seeded_mutants_and_alias_bombs_are_exit_0_or_2_never_a_traceback(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(SEED)
    spec = tmp_path / "cluster.yaml"
    bombs = 0
    for _ in range(MUTANTS):
        text, added = mutant(rng)
        spec.write_text(text, encoding="utf-8")
        rc = main(["validate", str(spec)])
        err = capsys.readouterr().err
        assert rc in (0, 2) and "Traceback" not in err, text
        assert all(len(line) <= 2200 for line in err.splitlines())
        if added > MAX_ALIAS_NODES or added < 0:
            bombs += 1
            [line] = err.splitlines()
            assert line.startswith(f"{spec}: {'too many aliases' if added > 0 else 'recursive alias'} at line "), line
    assert bombs >= MUTANTS // 4  # the seed draws bombs past the bound, not only small ones
