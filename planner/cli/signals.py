"""How the ``shardplan`` command ends on a signal.

:func:`install` is the first thing :func:`planner.cli.main.console_main` does, before the commands
(and numpy, networkx, PuLP or JAX) are imported, so that a signal at any later point ends the same way:

* **SIGINT** (Ctrl-C): the handler notes the interrupt and raises :class:`KeyboardInterrupt`; the
  command line prints one line and exits 130. Python runs a handler between two bytecodes of the main
  thread, which may be inside a callback whose exceptions Python reports and drops ("Exception ignored
  in ..."), such as JAX's garbage-collection callback. For those, :func:`_unraisable` drops a
  KeyboardInterrupt silently and raises it again in the main thread a moment later
  (:data:`REDELIVER_AFTER_S`), outside the callback; and :func:`interrupted` lets ``main`` end with 130
  after a command that returned although it was interrupted.
* **SIGTERM** and **SIGHUP**: the handler deletes the temporary file of an ``--out`` being written
  (:func:`planner.files.remove_temporary_files`; the target keeps its old content), prints one line
  where it can and ends the process at once with 128 + the signal's number, as the default action
  would, without unwinding (nothing for a callback to swallow).

Once the command has finished (:func:`finish`), a Ctrl-C is ignored: the process exits with the status it has.

This module imports nothing of shardplan, and of the standard library only os, re, signal and sys.
"""

from __future__ import annotations

import os
import re
import signal
import sys

#: Seconds after a swallowed KeyboardInterrupt before it is raised again in the main thread.
REDELIVER_AFTER_S = 0.05

#: The signals that end the process at once after removing our temporary files.
TERMINATING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))

_state = {"interrupted": False, "finished": False, "command": None}


def install(argv: list[str]) -> None:
    """Handle SIGINT, SIGTERM and SIGHUP as the module docstring says (main thread only); ``argv``'s first word
    (the command, until :func:`name_command` says) names it in the line a signal prints. A signal the parent
    process set to be ignored (``nohup``, a background job) stays ignored."""
    word = next((a for a in argv if not a.startswith("-")), None)
    command = word if word is not None and re.fullmatch(r"[a-z][a-z0-9-]{0,30}", word) else None
    _state.update(interrupted=False, finished=False, command=command)
    for signum, handler in ((signal.SIGINT, _on_interrupt), *((s, _on_terminate) for s in TERMINATING)):
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, handler)
    sys.unraisablehook = _unraisable


def name_command(command: str) -> None:
    """The command being run, for the line a terminating signal prints (``shardplan plan: ...``)."""
    _state["command"] = command


def program() -> str:
    """``shardplan COMMAND`` (``shardplan`` before the command is known): how a message names the program."""
    return f"shardplan {_state['command']}" if _state["command"] else "shardplan"


def interrupted() -> bool:
    """Whether a SIGINT arrived since :func:`install`."""
    return _state["interrupted"]


def finish(status: int) -> None:
    """The command ended with ``status``: from now on SIGINT is ignored, so that the process exits with that
    status. Python's own clean-up runs next (JAX's takes a while) and sets Python's handlers back to the
    default actions on the way, where a Ctrl-C would kill the process without a word and with no status of ours;
    an ignored signal stays ignored."""
    _state["finished"] = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _on_interrupt(signum, frame) -> None:
    _state["interrupted"] = True
    raise KeyboardInterrupt


def _on_terminate(signum, frame) -> None:
    files = sys.modules.get("planner.files")  # not imported yet: no file is being written
    if files is not None:
        files.remove_temporary_files()
    if not _state["finished"]:
        try:
            os.write(2, f"{program()}: terminated by {signal.Signals(signum).name}\n".encode())
        except OSError:  # the terminal is gone (SIGHUP) or stderr is closed
            pass
    os._exit(128 + signum)


def _unraisable(report) -> None:
    """Drop a KeyboardInterrupt raised where Python cannot raise it (a callback) and raise it again in the main
    thread; report anything else as Python does."""
    if isinstance(report.exc_value, KeyboardInterrupt):
        _state["interrupted"] = True
        if not _state["finished"]:
            import threading

            timer = threading.Timer(REDELIVER_AFTER_S, _redeliver)
            timer.daemon = True
            timer.start()
        return
    sys.__unraisablehook__(report)


def _redeliver() -> None:
    """SIGINT to the main thread, which interrupts a sleep or a blocking call there as a Ctrl-C would."""
    import threading

    if hasattr(signal, "pthread_kill"):
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    else:  # runs the handler at the main thread's next bytecode, without waking it
        import _thread

        _thread.interrupt_main(signal.SIGINT)
