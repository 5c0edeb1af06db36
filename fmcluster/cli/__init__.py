"""`fmcluster` command line: init | validate | plan | diagram | schema | catalog | synth | diff | job | accept |
plan-rules | preflight | status.

Exit codes: 0 fine, 1 a check or synthesis failed, 2 bad input (one line per problem,
``field.path: what is wrong and what is allowed``; never a traceback), 3 preflight could not run some check
(docs/preflight.md).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from typing import Any, List, Optional

from fmcluster.cli import (
    accept_command,
    aws_commands,
    diff_command,
    init_command,
    job_command,
    plan_rules_command,
    spec_commands,
)
from fmcluster.cli.errors import EXIT_OK, EXIT_USAGE, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse exits 2 too; keep one format
        self.print_usage(sys.stderr)
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fmcluster", description="A GPU training cluster on AWS from one YAML spec.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    init_command.register(sub)
    spec_commands.register(sub)
    diff_command.register(sub)
    accept_command.register(sub)
    plan_rules_command.register(sub)
    job_command.register(sub)
    aws_commands.register(sub)
    return p


def run() -> int:
    """The process's entry point (the ``fmcluster`` script, ``python -m fmcluster``): `main` in a process tuned to start
    fast and exit fast (bench/command_startup.py measures it)."""
    # Pydantic looks for plugins in the entry points of every installed distribution when it builds its first model
    # (https://docs.pydantic.dev/latest/concepts/plugins/), for plugins the CLI does not use: reading those files is
    # a tenth of a command's start-up in a large environment. Set the variable (empty keeps them on) to choose.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    # Start-up allocates a few hundred thousand objects that live until exit (modules, validation schemas): with the
    # default threshold (700 allocations) the cyclic collector scans them over and over while they are built, and once
    # more at exit. Fewer young-generation passes while it runs, none over what is left at exit (`gc.freeze`: the
    # exit collection skips frozen objects; their memory is freed as the process ends either way).
    gc.set_threshold(50_000, 10, 10)
    try:
        return main()
    finally:
        gc.freeze()


def main(argv: Optional[List[str]] = None) -> int:
    from fmcluster.outputs.write import OutputRefused
    from fmcluster.spec import SpecError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return int(args.func(args))
    except (UsageError, OutputRefused) as e:
        print(f"fmcluster: {e}", file=sys.stderr)
        return EXIT_USAGE
    except SpecError as e:
        for line in e.problems:
            print(line, file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
