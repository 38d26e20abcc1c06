"""The exit statuses of ``shardplan`` (listed by ``shardplan --help`` and in README.md)."""

from __future__ import annotations

EXIT_OK = 0
#: Only ``check``: the gate found a model that communicates more than its baseline.
EXIT_FAILED = 1
#: Bad arguments or input; the message names the file:line, tensor, op or flag and what to change.
EXIT_USER_ERROR = 2
#: A bug in shardplan (an exception it did not expect, a simulation that does not match its plan).
EXIT_INTERNAL_ERROR = 3
EXIT_INTERRUPTED = 130
#: Ended by SIGHUP and by SIGTERM: 128 + the signal's number (planner.cli.signals).
EXIT_HANGUP = 129
EXIT_TERMINATED = 143
DEBUG_ENV = "SHARDPLAN_DEBUG"

EXIT_CODES = f"""exit status:
  {EXIT_OK}    success
  {EXIT_FAILED}    check only: the gate found a regression (a model communicates more than its baseline)
  {EXIT_USER_ERROR}    user error: bad arguments or input (the message says what to change)
  {EXIT_INTERNAL_ERROR}    internal error: a bug in shardplan, reported in one line (a crash: rerun with
       {DEBUG_ENV}=1 for the traceback; simulate or reshard --verify: the simulated plan does not
       match its prediction)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)
  {EXIT_HANGUP}, {EXIT_TERMINATED}
       ended by SIGHUP or SIGTERM (a file being written with --out is left as it was)"""


def internal_error(what: str) -> str:
    """The one-line report of an internal error that is not an exception (a failed simulation)."""
    return f"shardplan: internal error: {what}; this is a bug in shardplan: please report it with the command and model"
