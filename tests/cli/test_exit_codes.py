"""Exit codes of ``shardplan``: 2 user error, 3 internal error (one line, traceback on demand), 130 interrupted."""

import os
import subprocess
import sys
import textwrap

import pytest

from planner.cli import describe
from planner.cli.main import main
from planner.errors import ParseError, SimulationMismatch

ARGV = ["describe", '[{"x"}]', "--mesh", "x=2", "--shape", "4"]
MISMATCH = "a device lacks elements of its new block: the plan is not executable"


def raising(exc):
    def run(args):
        raise exc

    return run


def test_internal_error_exits_3_with_a_one_line_report_and_no_traceback(monkeypatch, capsys):
    monkeypatch.delenv("SHARDPLAN_DEBUG", raising=False)
    monkeypatch.setattr(describe, "run", raising(SimulationMismatch(MISMATCH)))
    assert main(ARGV) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"shardplan: internal error: SimulationMismatch: {MISMATCH}; "
                   "rerun with SHARDPLAN_DEBUG=1 for the traceback\n")
    assert "Traceback" not in err


def test_any_unexpected_exception_is_an_internal_error(monkeypatch, capsys):
    monkeypatch.delenv("SHARDPLAN_DEBUG", raising=False)
    monkeypatch.setattr(describe, "run", raising(KeyError("h4")))
    assert main(ARGV) == 3
    err = capsys.readouterr().err
    assert err.startswith("shardplan: internal error: KeyError: 'h4'; rerun with SHARDPLAN_DEBUG=1")
    assert len(err.splitlines()) == 1


def test_out_of_memory_is_an_internal_error_that_says_so(monkeypatch, capsys):
    monkeypatch.delenv("SHARDPLAN_DEBUG", raising=False)
    monkeypatch.setattr(describe, "run", raising(MemoryError("Unable to allocate 4.31 GiB for an array")))
    assert main(ARGV) == 3
    err = capsys.readouterr().err
    assert err.startswith("shardplan: internal error: out of memory (MemoryError: Unable to allocate 4.31 GiB")
    assert "try a smaller mesh or model" in err and len(err.splitlines()) == 1


def test_user_error_still_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(describe, "run", raising(ParseError("cannot read the mesh 'x=='")))
    assert main(ARGV) == 2
    assert capsys.readouterr().err == "shardplan describe: error: cannot read the mesh 'x=='\n"


def test_keyboard_interrupt_exits_130(monkeypatch, capsys):
    monkeypatch.setattr(describe, "run", raising(KeyboardInterrupt()))
    assert main(ARGV) == 130
    err = capsys.readouterr().err
    assert err == "shardplan describe: interrupted\n"


def test_debug_re_raises_the_internal_error(monkeypatch):
    monkeypatch.setenv("SHARDPLAN_DEBUG", "1")
    monkeypatch.setattr(describe, "run", raising(SimulationMismatch(MISMATCH)))
    with pytest.raises(SimulationMismatch, match="a device lacks elements"):
        main(ARGV)


def test_debug_console_shows_the_traceback_and_exits_3(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from planner.cli import describe
        from planner.cli.main import console_main
        from planner.errors import SimulationMismatch

        def run(args):
            raise SimulationMismatch({MISMATCH!r})

        describe.run = run
        sys.argv = ["shardplan", *{ARGV!r}]
        console_main()
    """)
    env = {**os.environ, "SHARDPLAN_DEBUG": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 3, done.stderr
    assert "Traceback (most recent call last)" in done.stderr
    assert f"planner.errors.SimulationMismatch: {MISMATCH}" in done.stderr
    assert "internal error" not in done.stderr  # the traceback replaces the one-line report


def test_help_lists_the_exit_codes(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "exit status:" in out
    for code, meaning in [("0", "success"), ("1", "regression"), ("2", "user error"), ("3", "internal error"),
                          ("130", "interrupted")]:
        assert any(line.split()[:1] == [code] and meaning in line for line in out.splitlines()), (code, out)
    assert "1    check only:" in out  # 1 is check's regression alone: CI tells it from a crash (3)
