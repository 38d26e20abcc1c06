"""How ``shardplan`` ends on a signal (planner.cli.signals), in real processes: Ctrl-C exits 130 with one line
from the first moment the handling is installed, also when a callback swallows the KeyboardInterrupt; SIGTERM and
SIGHUP during an ``--out`` write exit 128 + the signal's number and leave no temporary file; one SIGKILL leaves
behind is swept by the next write into that folder.

Each test waits until the child has installed its handlers (its caught-signal mask in /proc shows SIGTERM), or
until it reports that it is writing, before it signals it: nothing depends on how fast the machine is.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from planner.files import TEMPORARY_NAME, write_output

REPO = Path(__file__).resolve().parents[2]
FFN = str(REPO / "configs" / "ffn.yaml")

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/PID/status (Linux)")


def caught_signals(pid: int) -> int:
    """The mask of signals process ``pid`` has handlers for (bit n-1 for signal n)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def wait_for_handlers(proc: subprocess.Popen, timeout_s: float = 120.0) -> None:
    """Until console_main installed its handlers: Python catches SIGINT from start-up, SIGTERM only ours."""
    deadline = time.monotonic() + timeout_s
    while not caught_signals(proc.pid) >> (signal.SIGTERM - 1) & 1:
        assert proc.poll() is None, "the command ended before it handled signals"
        assert time.monotonic() < deadline, "the command never installed its signal handlers"
        time.sleep(0.001)


def console(*argv: str, prelude: str = "") -> subprocess.Popen:
    """``shardplan ARGV`` through console_main (the installed program's entry point), after ``prelude``."""
    script = prelude + textwrap.dedent(f"""
        import sys
        sys.argv = ["shardplan", *{list(argv)!r}]
        from planner.cli.main import console_main
        console_main()
    """)
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=REPO)


# -- Ctrl-C ----------------------------------------------------------------------------------------------------

def test_ctrl_c_during_start_up_imports_exits_130_with_one_line():
    """SIGINT as soon as the handling is installed: the commands, numpy and networkx are still being imported."""
    proc = subprocess.Popen([sys.executable, "-m", "planner", "plan", FFN], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    wait_for_handlers(proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err == "shardplan plan: interrupted\n"
    assert out == ""


def test_ctrl_c_exits_130_without_a_traceback(tmp_path):
    """SIGINT while planning ends the process at once: the pipeline search of an 18B-parameter GPT on 256 devices
    runs for about 25 s of CPU (benchmarks/pipeline.py; a search of plain SPMD plans can end within the 2 s this
    test waits)."""
    model = tmp_path / "gpt.yaml"
    model.write_text("name: gpt\ncluster: a100\nmodel: {builder: gpt, layers: 40, hidden: 6144, heads: 48, seq: 2048, "
                     "batch: 1024, vocab: 51200, dtype: bf16}\n")
    proc = subprocess.Popen([sys.executable, "-m", "planner", "plan", str(model), "--devices", "256"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    wait_for_handlers(proc)
    time.sleep(2.0)  # well inside the planning (start-up takes about 0.5 s)
    assert proc.poll() is None, "plan finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err == "shardplan plan: interrupted\n"
    assert out == ""


#: A command whose garbage collection runs a callback in which the SIGINT lands, as JAX's does: Python reports
#: the KeyboardInterrupt raised there as "Exception ignored in ..." and carries on.
SWALLOWING_COMMAND = """
import gc, signal, time
from planner.cli import graph

fired = []

def callback(phase, info):
    if phase == "start" and not fired:
        fired.append(phase)
        signal.raise_signal(signal.SIGINT)
        for _ in range(1000):  # Python runs the handler between these bytecodes: inside the callback
            pass

def run(args):
    gc.callbacks.append(callback)
    gc.collect()
    gc.callbacks.remove(callback)
    time.sleep({after_s})
    print("finished")
    return 0

graph.run = run
"""


@pytest.mark.parametrize("after_s", [30, 0], ids=["still-running", "returns-at-once"])
def test_ctrl_c_swallowed_by_a_callback_still_exits_130(after_s):
    """Still running: the interrupt is raised again outside the callback and ends the sleep at once. Returning
    at once: main sees the interrupt it missed and exits 130 all the same."""
    start = time.monotonic()
    proc = console("graph", FFN, prelude=SWALLOWING_COMMAND.format(after_s=after_s))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err == "shardplan graph: interrupted\n"  # no "Exception ignored in ..." report
    assert out == ("finished\n" if after_s == 0 else "")
    assert time.monotonic() - start < 20


def wait_for_jax(proc: subprocess.Popen, timeout_s: float = 300.0) -> None:
    """Until the process has loaded JAX's native library (its memory map shows jaxlib's _jax module)."""
    deadline = time.monotonic() + timeout_s
    while "jaxlib/_jax" not in Path(f"/proc/{proc.pid}/maps").read_text():
        assert proc.poll() is None, "run ended before it loaded JAX"
        assert time.monotonic() < deadline, "run never loaded JAX"
        time.sleep(0.005)


@pytest.mark.slow
@pytest.mark.parametrize("after_s", [0.0, 0.3, 0.6, 0.9])
def test_ctrl_c_during_a_run_on_jax_exits_130_with_one_line(after_s):
    """JAX compiles and runs the step for seconds after it loads; its garbage-collection callback is where a
    KeyboardInterrupt used to be reported and dropped."""
    pytest.importorskip("jax")
    # megatron_mlp's step timed 20 times: the run goes on for seconds after JAX loads (ffn's whole run can end
    # within 0.9 s of it, and a SIGINT after the result is printed rightly exits 0)
    proc = subprocess.Popen([sys.executable, "-m", "planner", "run", str(REPO / "configs" / "megatron_mlp.yaml"),
                             "--training", "--repeat", "20"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    wait_for_handlers(proc)
    wait_for_jax(proc)
    time.sleep(after_s)
    assert proc.poll() is None, "run finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    assert err == "shardplan run: interrupted\n"


# -- SIGTERM, SIGHUP, SIGKILL during an --out write -------------------------------------------------------------

#: The data is written and about to be synced when the process says so on stderr, then waits to be signalled.
SLOW_WRITE = """
import os, time
_fsync = os.fsync

def fsync(fd):
    os.fsync = _fsync
    os.write(2, b"writing\\n")
    time.sleep(60)
    _fsync(fd)

os.fsync = fsync
"""


def writing(out: Path) -> subprocess.Popen:
    """``shardplan plan ffn.yaml --out OUT`` stopped mid-write: its temporary file beside ``out`` is complete."""
    proc = console("plan", FFN, "--out", str(out), prelude=SLOW_WRITE)
    assert proc.stderr.readline() == "writing\n"
    assert temporaries(out.parent), "no temporary file while writing"
    return proc


def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".shardplan-"))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("existing", [False, True], ids=["new-file", "existing-file"])
def test_terminating_signal_mid_write_leaves_no_temporary(tmp_path, signum, existing):
    out = tmp_path / "plan.txt"
    if existing:
        out.write_text("old\n")
    proc = writing(out)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum
    assert err == f"shardplan plan: terminated by {signal.Signals(signum).name}\n"
    assert temporaries(tmp_path) == []
    assert (out.read_text() == "old\n") if existing else not out.exists()  # never half a file


def test_temporary_left_by_sigkill_is_swept_by_the_next_write(tmp_path):
    proc = writing(tmp_path / "plan.txt")
    left = temporaries(tmp_path)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert temporaries(tmp_path) == left  # SIGKILL cannot be handled: the temporary stays ...
    m = TEMPORARY_NAME.fullmatch(left[0])
    assert m is not None and int(m["pid"]) == proc.pid  # ... named for its writer, which is gone
    write_output(tmp_path / "other.txt", "x\n")  # ... until the next write into the folder
    assert temporaries(tmp_path) == []
    assert not (tmp_path / "plan.txt").exists() and (tmp_path / "other.txt").read_text() == "x\n"
