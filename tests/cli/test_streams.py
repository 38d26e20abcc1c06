"""planner.cli.streams: closed standard streams and encodings that cannot spell every character."""

from __future__ import annotations

import io
import sys

import pytest

from planner.cli.streams import ClosedStream, prepare_streams
from planner.errors import OutputError


def test_a_closed_stdout_refuses_writes_and_a_closed_stderr_drops_them():
    with pytest.raises(OutputError, match="standard output: cannot write: it is closed"):
        ClosedStream(refuse=True).write("plan\n")
    assert ClosedStream(refuse=True).write("") == 0  # print() with nothing to print
    assert ClosedStream(refuse=False).write("a warning\n") == len("a warning\n")


def test_prepare_streams_stands_in_for_closed_streams(monkeypatch):
    monkeypatch.setattr(sys, "stdout", None)
    monkeypatch.setattr(sys, "stderr", None)
    prepare_streams()
    assert isinstance(sys.stdout, ClosedStream) and sys.stdout.refuse
    assert isinstance(sys.stderr, ClosedStream) and not sys.stderr.refuse
    print("dropped", file=sys.stderr)  # nowhere to go, and no error


def test_prepare_streams_escapes_what_the_encoding_cannot_spell(monkeypatch):
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", out)
    prepare_streams()
    print("café → 8×8")
    out.flush()
    assert out.buffer.getvalue() == b"caf\\xe9 \\u2192 8\\xd78\n"
