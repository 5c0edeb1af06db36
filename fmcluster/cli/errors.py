"""Exit codes and the one error every command may raise for bad options."""

from __future__ import annotations

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit 2."""
