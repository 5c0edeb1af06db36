"""CLI commands backed by AWS calls (preflight, status); registered by fmcluster.cli."""

from __future__ import annotations

import argparse


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the AWS-backed subcommands to the `fmcluster` parser."""
    del sub
