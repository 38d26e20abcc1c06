"""Entry point of the ``shardplan`` command: parse arguments, run one command, map errors to exit 2."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from planner import __version__
from planner.errors import ShardplanError

# Each command module exposes add_parser(subparsers); keep this list in pipeline order.
from planner.cli import check, describe, graph, plan, reshard, simulate

COMMANDS = (describe, graph, plan, reshard, simulate, check)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shardplan",
        description="Plan how to shard a model over a device mesh, explain the plan, and prove it on a "
        "numpy device simulator.",
    )
    parser.add_argument("--version", action="version", version=f"shardplan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (0 ok, 1 a check failed, 2 a user error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse already printed usage or help
        return int(e.code or 0)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except ShardplanError as e:
        print(f"shardplan {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


def console_main() -> None:
    sys.exit(main())
