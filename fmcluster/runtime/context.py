"""What a check sees: the node, its profile, the validation level, and facts shared between checks.

Probes memoize their answers here, so two checks asking the same question share one read or one command."""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Optional

from .node import Node
from .profile import LEVELS, NodeProfile


class Ctx:
    """What a check sees: the node, the profile, the level, and facts shared between checks."""

    def __init__(self, node: Node, profile: NodeProfile, level: str, node_name: Optional[str] = None) -> None:
        self.node = node
        self.profile = profile
        self.level = level
        # the orchestrator's name for this node (--node-name); None = the hostname, as actions.act uses
        self.node_name = node_name
        self._lock = threading.Lock()
        self._memo: Dict[str, Any] = {}
        self._memo_locks: Dict[str, threading.Lock] = {}

    def at(self, level: str) -> bool:
        return LEVELS.index(self.level) >= LEVELS.index(level)

    def memo(self, key: str, fn: Callable[[], Any]) -> Any:
        """Compute a shared fact once (other checks asking for it wait for the first)."""
        with self._lock:
            lock = self._memo_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._memo:
                self._memo[key] = fn()
            return self._memo[key]
