"""The planner's side of the storage seam: each registered store's figures (`Store.figures`, its folder's
figures.py), the spec's section of it, and `KIT`, the helpers the planner hands a store so that a store imports
nothing of the planner. Nothing here names a store."""

from __future__ import annotations

from html import escape
from types import SimpleNamespace
from typing import Any, Iterator, List, Optional, Tuple

from fmcluster.planner import figures

FALLBACK_REGION = "us-east-1"
# (auto import, auto export) -> how data moves between the path nodes see and S3; neither: lazy load on first read.
ARROWS = {(True, True): "<->", (True, False): "<-", (False, True): "->", (False, False): "<- (lazy load)"}


def regional(table: Any, region: str) -> Tuple[Any, Optional[str]]:
    """(the figure for `region`, or us-east-1's with why) from a region -> figure mapping."""
    if region in table:
        return table[region], None
    return table[FALLBACK_REGION], f"estimate: {region} not in the data, {FALLBACK_REGION} price"


KIT = SimpleNamespace(fig=figures.fig, val=figures.val, plain=figures.plain, human_bytes=figures.human_bytes,
                      percent=figures.percent, money=figures.money, escape=escape, regional=regional, arrows=ARROWS,
                      GB=figures.GB)


def registered() -> List[Any]:
    """The registered stores, for a renderer that has the report and not the spec."""
    from fmcluster import registry

    return registry.stores()


def stores(spec: Any) -> Iterator[Tuple[Any, Any, Any]]:
    """(store, its figures, the spec's section or None) of every registered store, in the registry's order."""
    for store in spec.stores:
        yield store, store.figures(), store.section(spec)


def file_system_figures(spec: Any) -> Optional[Tuple[Any, Any, Any]]:
    """The registered store whose section is the shared file system, given or not: (store, figures, section)."""
    return next(((s, f, section) for s, f, section in stores(spec)
                 if s.settings is not None and s.settings.shared_file_system), None)


def verdict_store(data_path: Any) -> Optional[Tuple[str, str]]:
    """(key, short name) of the summarised store whose figures give a data path's verdict, where it has one."""
    return next(((s.spec_key, f.short) for s in registered() for f in [s.figures()]
                 if f.summarised and s.spec_key in data_path), None)
