"""Progress on stderr (planner/cli/terminal.py): a bar on a terminal only, nothing with --quiet, stages with --verbose."""

import io
import sys
import time
from pathlib import Path

import pytest

from planner.api import plan
from planner.cli import terminal
from planner.cli.main import main
from planner.cli.terminal import Terminal

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
FFN = str(CONFIGS / "ffn.yaml")


class FakeStream(io.StringIO):
    """stderr as a test sees it: a terminal when ``tty``."""

    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.fixture
def stderr(monkeypatch):
    """Install a fake stderr; tasks are drawn at once (no 0.5 s delay) so that a quick plan shows its bar."""
    monkeypatch.setattr(terminal, "DELAY_S", 0.0)

    def install(tty: bool) -> FakeStream:
        stream = FakeStream(tty)
        monkeypatch.setattr(sys, "stderr", stream)
        return stream

    return install


def cost_table_steps(path: str, **options) -> int:
    """How many steps the cost-table task has: one per node and link of the planning model."""
    m = plan(path, **options).decision.model
    return len(m.nodes) + len(m.flows)


def test_a_bar_and_a_solver_spinner_are_drawn_on_a_terminal(stderr, capsys):
    err = stderr(tty=True)
    assert main(["plan", FFN, "--search", "ilp"]) == 0
    text = err.getvalue()
    total = cost_table_steps(FFN, search="ilp")
    assert "\r" in text
    assert "shardplan plan: cost tables [" in text and f"/{total:,}" in text
    assert "ILP solve (elimination) " in text  # the spinner names the solver that runs
    assert text.endswith("\r") and text.rsplit("\r", 2)[-2].strip() == ""  # the bar is wiped at the end
    assert "totals:" in capsys.readouterr().out  # the result itself still goes to stdout


def test_simulate_counts_the_program_instructions(stderr):
    err = stderr(tty=True)
    assert main(["simulate", FFN]) == 0
    instructions = len(plan(FFN).program.instructions)
    assert f"shardplan simulate: simulating [" in err.getvalue() and f"/{instructions}" in err.getvalue()


def test_nothing_is_drawn_when_stderr_is_not_a_terminal(stderr):
    err = stderr(tty=False)
    assert main(["plan", FFN, "--search", "ilp"]) == 0
    assert err.getvalue() == ""


@pytest.mark.parametrize("command", [["plan", FFN], ["simulate", FFN],
                                     ["reshard", "--mesh", "x=2,y=4", "--shape", "64x32", "--from", '[{"x"}, {}]',
                                      "--to", '[{"y"}, {}]', "--verify"]])
def test_quiet_draws_nothing_on_a_terminal(stderr, command):
    err = stderr(tty=True)
    assert main([*command, "--quiet"]) == 0
    assert err.getvalue() == ""


def test_verbose_prints_each_stage_even_off_a_terminal(stderr):
    err = stderr(tty=False)
    assert main(["plan", FFN, "--verbose"]) == 0
    lines = err.getvalue().splitlines()
    n_ops = len(plan(FFN).ops)
    assert any(line.startswith("shardplan plan: [") and line.endswith(f"loaded ffn: {n_ops} ops") for line in lines)
    assert any(line.startswith("shardplan plan: cost tables: ") and " done in " in line for line in lines)
    assert "\r" not in err.getvalue()  # no bar off a terminal


def test_verbose_and_quiet_exclude_each_other(stderr):
    stderr(tty=False)
    assert main(["plan", FFN, "--verbose", "--quiet"]) == 2


def test_a_task_shorter_than_the_delay_draws_nothing(monkeypatch):
    monkeypatch.setattr(terminal, "DELAY_S", 60.0)
    out = FakeStream(tty=True)
    t = Terminal(out, bar=True)
    t.begin("cost tables", 10)
    t.advance(10)
    t.end()
    assert out.getvalue() == ""


def test_the_spinner_turns_with_the_elapsed_time(monkeypatch):
    monkeypatch.setattr(terminal, "DELAY_S", 0.0)
    monkeypatch.setattr(terminal, "REDRAW_S", 0.01)
    out = FakeStream(tty=True)
    t = Terminal(out, bar=True, prefix="shardplan plan")
    t.begin("ILP solve")
    time.sleep(0.3)
    t.end()
    drawn = [part.strip() for part in out.getvalue().split("\r") if part.strip()]
    assert len(drawn) >= 2  # redrawn while it ran
    marks = {d.split()[4] for d in drawn}  # "shardplan plan: ILP solve | 12.0 ms"
    assert marks <= set(terminal.SPINNER) and len(marks) >= 2
    assert all(d.startswith("shardplan plan: ILP solve ") and d.endswith(("s", "ms", "us", "ns")) for d in drawn)
    spins_after_end = out.getvalue()
    time.sleep(0.05)
    assert out.getvalue() == spins_after_end  # the spinner stops with its task


def test_the_bar_fills_in_proportion_to_the_steps_done():
    t = Terminal(FakeStream(tty=True), bar=True, prefix="p")
    t.begin("work", 8)
    t.done = 2  # a quarter
    line = t.render(t.task_started)
    filled = terminal.BAR_WIDTH // 4
    assert line.startswith("p: work [" + "#" * filled + "." * (terminal.BAR_WIDTH - filled) + "] 2/8  ")
    t.close()


def test_a_warning_line_does_not_tear_the_bar(monkeypatch):
    monkeypatch.setattr(terminal, "DELAY_S", 0.0)
    out = FakeStream(tty=True)
    t = Terminal(out, bar=True, prefix="p")
    t.begin("work", 4)
    t.line("p: warning: something")
    text = out.getvalue()
    # the bar line is wiped (carriage return, blanks, carriage return) before the warning is written
    assert text.endswith("\r" + " " * (len(text.split("\r")[2])) + "\rp: warning: something\n")
    t.close()


def test_every_command_takes_verbose_and_quiet(capsys):
    import argparse

    from planner.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert len(sub.choices) >= 9  # describe, graph, plan, explain, reshard, simulate, check, compare, export
    for name in sub.choices:
        assert main([name, "--help"]) == 0
        text = capsys.readouterr().out
        assert "-v, --verbose" in text and "-q, --quiet" in text, name


def test_the_spinner_shows_what_its_task_says_about_itself(monkeypatch):
    monkeypatch.setattr(terminal, "DELAY_S", 0.0)
    out = FakeStream(tty=True)
    t = Terminal(out, bar=True, verbose=True, prefix="shardplan plan")
    t.begin("ILP solve (HiGHS)")
    t.detail("best bound 1.20 ms, gap 3.00%")
    assert t.render(time.monotonic()).endswith("  best bound 1.20 ms, gap 3.00%")
    t.end()
    last = out.getvalue().rstrip("\r ").splitlines()[-1].strip("\r ")
    assert last.startswith("shardplan plan: ILP solve (HiGHS): done in ") and last.endswith(
        " (best bound 1.20 ms, gap 3.00%)")
    t.begin("cost tables", 3)  # a new task starts without the old one's detail
    assert "best bound" not in t.render(time.monotonic())
    t.end()
