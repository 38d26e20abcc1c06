"""Entry point of the ``shardplan`` command: parse arguments, run one command, map errors to exit codes.

Exit codes (:mod:`planner.cli.status`, also in ``shardplan --help``): 0 success; 1 only
``check``: the gate found a regression; 2 a user error (:class:`~planner.errors.ShardplanError`,
or bad arguments); 3 an internal error (:class:`~planner.errors.InternalError` or any other
unexpected exception: a bug, reported in one line, with the traceback when
``SHARDPLAN_DEBUG=1``; also a simulation, or a run on JAX, that does not match its reference); 130 interrupted (Ctrl-C);
129 and 143 ended by SIGHUP and SIGTERM (:mod:`planner.cli.signals`).

:func:`console_main` (the ``shardplan`` program) installs the signal handling before it imports any command:
besides what ``import planner`` loads, this module imports only argparse and small modules of its own.
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
from planner.errors import OutputError, ShardplanError, one_line
from planner.files import STDOUT
from planner.cli import signals
from planner.cli.streams import prepare_streams


def commands() -> tuple:
    """The command modules, in pipeline order; each exposes ``add_parser(subparsers)``. Imported here, not at
    the top, so that :func:`console_main` handles signals before they load."""
    from planner.cli import calibrate, check, compare, describe, export, graph, import_jax, plan, reshard, run, simulate

    return (import_jax, describe, graph, plan, reshard, simulate, run, calibrate, check, compare, export)

#: Commands whose numpy work is on small arrays (no large matrix products): for them OpenBLAS's
#: thread pool, which numpy starts on import (a noticeable part of a short command's CPU time,
#: ``benchmarks/startup.py``), is not started, unless the user set
#: ``OPENBLAS_NUM_THREADS``. ``simulate`` and ``check`` multiply real tensors and keep it.
SMALL_ARRAY_COMMANDS = ("import-jax", "describe", "graph", "plan", "reshard", "compare", "export")


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors in one line like every other bad input: the message and where to read
    the usage (``shardplan plan: error: argument --search: invalid choice: ...; see shardplan plan --help``),
    not the usage first. Each command's own parser (``add_parser`` makes them of this class too) names
    arguments it does not know."""

    def error(self, message: str):
        print(f"{self.prog}: error: {one_line(message)}; see {self.prog} --help", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)

    def parse_args(self, args=None, namespace=None):
        known, extra = self.parse_known_args(args, namespace)
        if extra:
            command = self._command_parsers().get(getattr(known, "command", None), self)
            command.error(f"unrecognized arguments: {' '.join(extra)}")
        return known

    def _command_parsers(self) -> dict:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="shardplan",
        description="Plan how to shard a model over a device mesh, explain the plan, and prove it\n"
        "on a numpy device simulator.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"shardplan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in commands():
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
    except SystemExit as e:  # argparse already printed usage or help
        return int(e.code or 0)
    except OutputError as e:  # help or --version on a closed standard output
        print(f"shardplan: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    if not getattr(args, "command", None):
        commands = ", ".join(parser._command_parsers())
        print(f"shardplan: error: give a command, one of {commands}; see shardplan --help", file=sys.stderr)
        return EXIT_USER_ERROR
    if args.command in SMALL_ARRAY_COMMANDS and "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    signals.name_command(args.command)
    try:
        status = int(args.run(args) or 0)
        if signals.interrupted():  # a Ctrl-C that a callback swallowed (JAX's garbage-collection callback)
            raise KeyboardInterrupt
        return status
    except ShardplanError as e:
        if isinstance(e, OutputError) and e.where == STDOUT:
            _drop_stdout()
        print(f"shardplan {args.command}: error: {one_line(str(e))}", file=sys.stderr)
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
    message = one_line(str(e))
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


def console_main() -> None:
    """The ``shardplan`` program: signal handling first (:mod:`planner.cli.signals`), then :func:`main`."""
    signals.install(sys.argv[1:])
    try:
        code = main()
    except KeyboardInterrupt:  # outside a command's run (importing the commands, parsing the arguments)
        print(f"{signals.program()}: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    except Exception:  # only with SHARDPLAN_DEBUG set: show the traceback, keep the exit code
        import traceback

        traceback.print_exc()
        code = EXIT_INTERNAL_ERROR
    signals.finish(code)
    if code == EXIT_INTERRUPTED:
        # an interrupted native computation (JAX's) can crash Python's clean-up at exit: leave without it
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)
