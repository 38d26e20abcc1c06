"""Standard output and error made safe for any text before a command runs.

:func:`prepare_streams` handles the two ways a stream the CLI writes to can fail whatever the
command: a stream the process was started without (``>&-``; Python sets it to None) becomes a
:class:`ClosedStream`, so that writing a result to a closed stdout is a user error (exit 2, said
on stderr) and what goes to a closed stderr is dropped; and a stream whose encoding cannot
spell a character (``PYTHONIOENCODING=ascii`` and a tensor named ``café``, or the report's own
``→`` and ``×``) writes it as a backslash escape (``\\xe9``, ``\\u2192``) instead of failing.

Imported by ``planner.cli.main`` at start-up: it imports nothing heavy.
"""

from __future__ import annotations

import io
import os
import sys

from planner.errors import OutputError
from planner.files import STDOUT

__all__ = ["ClosedStream", "prepare_streams"]


class ClosedStream(io.TextIOBase):
    """What stands for a standard stream that was closed when the process started.

    With ``refuse`` (standard output) writing raises :class:`~planner.errors.OutputError`: the command's
    result has nowhere to go. Without it (standard error) what is written is dropped, as there is nowhere to
    say anything.
    """

    def __init__(self, *, refuse: bool):
        super().__init__()
        self.refuse = refuse

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.refuse and text:
            raise OutputError("cannot write: it is closed (was the command run with >&-?); redirect it to a file "
                              "(> out.txt), or give --out FILE where the command takes it", where=STDOUT)
        return len(text)


def prepare_streams() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` safe to write any text to (see the module docstring)."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        stream = getattr(sys, name)
        if stream is None:
            _hold_descriptor(fd)
            setattr(sys, name, ClosedStream(refuse=name == "stdout"))
        elif hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream already closed, or one that cannot change now
                pass


def _hold_descriptor(fd: int) -> None:
    """Open /dev/null on the closed descriptor ``fd``, so that no file opened later gets it and receives what a
    library writes to fd 1 or 2 directly."""
    try:
        os.fstat(fd)
        return  # open after all (the stream was set to None in-process)
    except OSError:
        pass
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)
    except OSError:
        pass
