"""tests/planner: the test modules import planner_helpers by module name, whatever pytest's import mode."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
