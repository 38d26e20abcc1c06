"""Entry point of the ``shardplan`` command: parse arguments, run one command, map errors to exit codes.

Exit codes (:mod:`planner.cli.status`, also in ``shardplan --help``): 0 success; 1 only
``check``: the gate found a regression; 2 a user error (:class:`~planner.errors.ShardplanError`,
or bad arguments); 3 an internal error (:class:`~planner.errors.InternalError` or any other
unexpected exception: a bug, reported in one line, with the traceback when
``SHARDPLAN_DEBUG=1``; also a simulation, or a run on JAX, that does not match its reference); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from planner import __version__
from planner.cli.status import (  # noqa: F401  (re-exported: the statuses are main's contract)
    DEBUG_ENV,
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_INTERNAL_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USER_ERROR,
)
from planner.errors import OutputError, ShardplanError
from planner.files import STDOUT
from planner.cli.streams import prepare_streams

# Each command module exposes add_parser(subparsers); keep this list in pipeline order.
from planner.cli import calibrate, check, compare, describe, export, graph, import_jax, plan, reshard, run, simulate

COMMANDS = (import_jax, describe, graph, plan, reshard, simulate, run, calibrate, check, compare, export)

#: Commands whose numpy work is on small arrays (no large matrix products): for them OpenBLAS's
#: thread pool, which numpy starts on import (a noticeable part of a short command's CPU time,
#: ``benchmarks/startup.py``), is not started, unless the user set
#: ``OPENBLAS_NUM_THREADS``. ``simulate`` and ``check`` multiply real tensors and keep it.
SMALL_ARRAY_COMMANDS = ("import-jax", "describe", "graph", "plan", "reshard", "compare", "export")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shardplan",
        description="Plan how to shard a model over a device mesh, explain the plan, and prove it\n"
        "on a numpy device simulator.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"shardplan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (see :data:`EXIT_CODES`).

    With ``SHARDPLAN_DEBUG=1`` an internal error is re-raised instead, so that its
    traceback shows.
    """
    prepare_streams()  # a closed stdout, an ASCII-only encoding: before argparse prints help or usage
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
    except SystemExit as e:  # argparse already printed usage or help
        return int(e.code or 0)
    except OutputError as e:  # help or --version on a closed standard output
        print(f"shardplan: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    if args.command in SMALL_ARRAY_COMMANDS and "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        return int(args.run(args) or 0)
    except ShardplanError as e:
        if isinstance(e, OutputError) and e.where == STDOUT:
            _drop_stdout()
        print(f"shardplan {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except BrokenPipeError:  # the reader went away (| head): not an error
        _drop_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        print(f"shardplan {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except MemoryError as e:  # legal input, but too much work for this machine: shardplan's limit, said plainly
        if _debug():
            raise
        print(f"shardplan: internal error: out of memory ({_one_line(e)}): the problem is too large for this "
              f"machine; try a smaller mesh or model; rerun with {DEBUG_ENV}=1 for the traceback", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    except Exception as e:  # InternalError, or any bug that escaped as another exception
        if _debug():
            raise
        print(f"shardplan: internal error: {_one_line(e)}; rerun with {DEBUG_ENV}=1 for the traceback",
              file=sys.stderr)
        return EXIT_INTERNAL_ERROR


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so that what is still buffered is not flushed again at exit
    (which would print "Exception ignored ..." and change the exit status)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout replaced by an object without a file (tests)
        pass


def _debug() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")


def _one_line(e: BaseException) -> str:
    """``Type: message`` on one line (the type names the bug for a report)."""
    message = " ".join(str(e).split())
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


def console_main() -> None:
    try:
        code = main()
    except KeyboardInterrupt:  # outside a command's run (parsing the arguments): the same quiet 130
        print("shardplan: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    except Exception:  # only with SHARDPLAN_DEBUG set: show the traceback, keep the exit code
        import traceback

        traceback.print_exc()
        code = EXIT_INTERNAL_ERROR
    sys.exit(code)
