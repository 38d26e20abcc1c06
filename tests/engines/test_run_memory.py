"""``shardplan run``'s memory: estimated from the plan before JAX starts, a run this machine
cannot hold refused with exit 2 naming the estimate, and the estimate an upper bound of what a run holds."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import planner.limits
from planner.api import plan
from planner.cli.main import main
from planner.engines import run_memory
from planner.engines.run_memory import check_run_memory, estimate_run_memory, reference_peak_bytes
from planner.errors import LimitError
from planner.limits import format_bytes

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"

HUGE = """name: huge_gpt
mesh: {dp: 2, tp: 4}
model: {builder: gpt, layers: 2, hidden: 8192, heads: 8, seq: 8192, batch: 64, vocab: 65536}
"""

TINY = """name: tiny_gpt
mesh: {dp: 2, tp: 4}
model: {builder: gpt, layers: 2, hidden: 64, heads: 4, seq: 64, batch: 8, vocab: 512}
"""


def _machine(monkeypatch, gib: int) -> None:
    monkeypatch.setattr(planner.limits, "machine_memory_bytes", lambda: gib * 2**30)


@pytest.mark.filterwarnings("ignore::planner.errors.PlanWarning")  # it does not fit a device either
def test_a_run_larger_than_the_machine_is_refused_with_the_estimate(tmp_path, monkeypatch):
    model = tmp_path / "huge.yaml"
    model.write_text(HUGE)
    _machine(monkeypatch, 16)
    p = plan(model, training=True)
    estimate = estimate_run_memory(p)
    assert estimate.total > 16 * 2**30
    with pytest.raises(LimitError) as e:
        check_run_memory(p)
    text = str(e.value)
    assert f"needs up to {format_bytes(estimate.total)} of memory, more than this machine's 16 GiB" in text
    assert "XLA buffers on 8 devices" in text and "float64 reference" in text and "--memory-budget" in text


def test_the_command_refuses_it_with_exit_2_before_jax_starts(tmp_path, monkeypatch, capsys):
    model = tmp_path / "huge.yaml"
    model.write_text(HUGE)
    _machine(monkeypatch, 16)
    monkeypatch.setattr("planner.engines.jax_env.jax_installed", lambda: True)  # the check needs no JAX

    def no_jax(*args, **kwargs):
        raise AssertionError("JAX was started for a run the estimate refuses")

    monkeypatch.setattr("planner.engines.jax_run.ensure_devices", no_jax)
    assert main(["run", str(model), "--training"]) == 2
    err = capsys.readouterr().err
    assert "needs up to" in err and "of memory, more than this machine's 16 GiB" in err
    assert "Traceback" not in err


def test_a_small_model_is_not_refused(monkeypatch):
    _machine(monkeypatch, 16)
    estimate = check_run_memory(plan(CONFIGS / "ffn.yaml", training=True))
    assert 0 < estimate.total < 2**30


def test_the_reference_bound_counts_what_it_keeps_for_the_backward():
    g = plan(CONFIGS / "megatron_mlp.yaml").graph
    sources = sum(t.numel * 8 for t in g.tensors.values() if t.kind != "activation")
    forward, training = reference_peak_bytes(g, False), reference_peak_bytes(g, True)
    assert sources < forward < training
    assert training <= 2 * sum(t.numel * 8 for t in g.tensors.values()) + \
        run_memory.TRANSIENT_FACTOR * max(t.numel * 8 for t in g.tensors.values())


_MEASURE = """
import json, sys
from planner.api import plan
from planner.engines.jax_run import run_on_jax
from planner.engines.run_memory import estimate_run_memory
p = plan(sys.argv[1], training=sys.argv[2] == "training")
r = run_on_jax(p, lowering=sys.argv[3])
peak = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM"))
estimate = estimate_run_memory(p, r.lowering).total  # the bound of the lowering the run used
print(json.dumps({"ok": r.ok, "peak": peak, "estimate": estimate}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
@pytest.mark.parametrize("model, phase, lowering", [("ffn", "forward", "auto"), ("tiny", "training", "auto"),
                                                    ("tiny", "training", "constraints")])
def test_the_estimate_bounds_the_measured_peak(tmp_path, model, phase, lowering):
    pytest.importorskip("jax")
    path = CONFIGS / "ffn.yaml" if model == "ffn" else tmp_path / "tiny.yaml"
    if model == "tiny":
        path.write_text(TINY)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-c", _MEASURE, str(path), phase, lowering], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["ok"]
    assert out["peak"] <= out["estimate"], f"peak {out['peak']:,} B above the estimate {out['estimate']:,} B"


def test_the_compiled_step_is_checked_with_xlas_own_figure(monkeypatch):
    from types import SimpleNamespace

    from planner.engines.run_memory import check_compiled_memory

    p = plan(CONFIGS / "ffn.yaml")
    stats = SimpleNamespace(argument_size_in_bytes=2**30, output_size_in_bytes=2**30, temp_size_in_bytes=2**31)
    compiled = SimpleNamespace(memory_analysis=lambda: stats)
    _machine(monkeypatch, 64)
    assert check_compiled_memory(compiled, p, 0) == 8 * 2**32  # 4 GiB on each of the 8 devices
    _machine(monkeypatch, 16)
    with pytest.raises(LimitError, match=r"32 GiB of XLA buffers on 8 devices.*more than this machine's 16 GiB"):
        check_compiled_memory(compiled, p, 0)
    assert check_compiled_memory(SimpleNamespace(), p, 0) == 0  # a backend that does not say


def test_the_refusal_names_a_memory_budget_that_would_fit(monkeypatch):
    p = plan(ROOT / "benchmarks" / "run_memory" / "gpt_run.yaml", training=True)  # the model: ~20 GiB
    _machine(monkeypatch, 8)
    with pytest.raises(LimitError, match=r"more than this machine's 8 GiB; .*--search ilp --memory-budget 256MiB\)"):
        check_run_memory(p)


def test_xla_buffers_on_accelerators_are_not_counted_against_the_machine(monkeypatch):
    # breadth-first's plan: its XLA buffers on host devices would pass 8 GiB (auto's plan needs less)
    p = plan(ROOT / "benchmarks" / "run_memory" / "gpt_run.yaml", training=True, search="bfs")
    _machine(monkeypatch, 8)
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    estimate = check_run_memory(p)  # 1.7 GiB of reference and data on the host: it fits
    assert estimate.xla == 0 and "XLA's buffers on the 8 accelerators not counted" in estimate.text()
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert estimate_run_memory(p).xla > 8 * 2**30
