"""Every config simulates exactly under bfs, ilp and rule-based propagation, forward and as a training step (gradients
included), and the simulator measures the predicted bytes in every phase.

gpt2_small (a 12-layer GPT-2 small with its 50,257-word vocabulary) is simulated once, not once per search: its
training step holds 4.8-7.3 GB in float64 on the simulated devices, more than CI's memory allows, so it trains in
float32 (the simulator's faster mode, to its documented tolerance) under the default search, and runs forward in
float64 under the default search; the grids below prove each search's plans exact on every other config."""

from pathlib import Path

import pytest

from planner.api import plan
from planner.simulation.run import FLOAT_RTOL, simulate

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
# the manual-region examples run on the 4 devices (tp = 4, dp = 4, a = b = 2); the others on 8
FOUR_DEVICES = {"dp_training_step", "manual_free_axis", "megatron_by_hand", "ring_matmul"}
GPT2_SMALL = next(c for c in CONFIGS if c.stem == "gpt2_small")
GRID = [c for c in CONFIGS if c != GPT2_SMALL]


@pytest.mark.parametrize("search", ["bfs", "ilp", "propagate"])
@pytest.mark.parametrize("config", GRID, ids=lambda p: p.stem)
def test_config_simulates_and_bytes_match(config, search):
    p = plan(config, search=search)
    r = simulate(p, seed=1)
    assert r.ok, r.outputs
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device == p.totals.comm_bytes_per_device
    assert r.devices == p.mesh.size == (4 if config.stem in FOUR_DEVICES else 8)


@pytest.mark.parametrize("search", ["bfs", "ilp", "propagate"])
@pytest.mark.parametrize("config", GRID, ids=lambda p: p.stem)
def test_config_trains_exactly_and_bytes_match_per_phase(config, search):
    p = plan(config, search=search, training=True)
    r = simulate(p, seed=1)
    assert r.ok, (r.outputs, r.gradients)
    assert set(r.gradients) == {t for t, spec in p.graph.tensors.items() if spec.kind == "param"}
    assert all(g["max_rel_error"] <= 1e-9 for g in r.gradients.values())
    for name, phase in r.phases.items():
        assert phase["measured_comm_bytes_per_device"] == phase["predicted_comm_bytes_per_device"], name
    assert r.measured_comm_bytes_per_device == p.totals.comm_bytes_per_device


@pytest.mark.slow
def test_gpt2_small_simulates_exactly_forward_and_trains_in_float32_with_the_predicted_bytes():
    p = plan(GPT2_SMALL)
    r = simulate(p, seed=1)
    assert r.ok and r.measured_comm_bytes_per_device == p.totals.comm_bytes_per_device
    del r
    p = plan(GPT2_SMALL, training=True)
    r = simulate(p, seed=1, dtype="f32")
    assert r.ok, (r.outputs, r.gradients)
    assert all(g["max_rel_error"] <= FLOAT_RTOL["f32"] for g in r.gradients.values())
    for name, phase in r.phases.items():
        assert phase["measured_comm_bytes_per_device"] == phase["predicted_comm_bytes_per_device"], name
    assert r.measured_comm_bytes_per_device == p.totals.comm_bytes_per_device
