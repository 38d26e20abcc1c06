"""The simulator's memory bound: it bounds what a simulation holds from above, and a simulation that would not fit
is refused from the program alone, before anything is allocated."""

import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from planner.api import plan
from planner.errors import LimitError
from planner.simulation.memory import BLOCK_OVERHEAD_BYTES, simulation_memory
from planner.simulation.run import simulate

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

REPLICATED_MATMUL = """
name: replicated
mesh: {d: 4}
tensors:
  x: {shape: [64, 32], kind: input, sharding: '[{}, {}]'}
  w: {shape: [32, 16], kind: param, sharding: '[{}, {}]'}
ops: [{name: mm, op: matmul, inputs: [x, w], output: y, out_sharding: '[{}, {}]'}]
outputs: [y]
"""

GPT_ON_64X64 = """
name: gpt64
mesh: {dp: 64, tp: 64}
model: {builder: gpt, layers: 2, hidden: 768, heads: 12, seq: 1024, batch: 8, vocab: 50257}
"""


def test_every_device_holds_its_own_copy_of_a_replicated_value():
    """Replicated x (64x32), w (32x16) and y (64x16) are all held on each of the 4 devices once mm ran: one device
    holds (2048 + 512 + 1024) f64 elements, and the device run at least 4 times that (plus each block's object)."""
    p = plan(REPLICATED_MATMUL, search="explicit")
    m = simulation_memory(p.program, p.graph, 8)
    one_device = (64 * 32 + 32 * 16 + 64 * 16) * 8
    assert m.per_device == one_device
    assert m.devices_peak >= 4 * (one_device + 3 * BLOCK_OVERHEAD_BYTES)
    assert simulate(p).peak_device_bytes == one_device


@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("config", ["ffn", "ring_matmul", "dp_training_step", "megatron_by_hand", "constraints",
                                    "manual_free_axis"])
def test_estimate_bounds_the_measured_peak(config, training):
    """The busiest device's measured bytes times the devices, beside what the reference keeps, is within the bound;
    so is every byte the process really allocated while simulating (numpy's buffers are traced)."""
    p = plan(CONFIGS / f"{config}.yaml", search="bfs", training=training)
    m = simulation_memory(p.program, p.graph, 8)
    tracemalloc.start()
    try:
        r = simulate(p, seed=1)
        _, allocated = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.ok
    assert m.per_device >= r.peak_device_bytes
    assert m.total >= r.peak_device_bytes * r.devices + m.kept
    assert m.total >= allocated


def test_f32_halves_the_float_bytes():
    p = plan(CONFIGS / "ffn.yaml", search="bfs", training=True)
    f64, f32 = simulation_memory(p.program, p.graph, 8), simulation_memory(p.program, p.graph, 4)
    assert f32.per_device * 2 == f64.per_device  # ffn's tensors are all floats


def test_gpt_of_two_layers_on_a_64x64_mesh_is_refused_before_allocating(monkeypatch):
    """Every value is replicated over the 4,096 devices (no annotation, explicit search): far past 16 GiB. The
    refusal comes from the program's shapes: drawing the seeded data would call default_rng."""
    p = plan(GPT_ON_64X64, search="explicit")
    p.program  # lowered here, so that the timing below is simulate's own

    def refuse(*args, **kwargs):
        raise AssertionError("the simulator allocated")

    monkeypatch.setattr(np.random, "default_rng", refuse)
    start = time.perf_counter()
    with pytest.raises(LimitError) as e:
        simulate(p)
    assert time.perf_counter() - start < 3.0
    message = str(e.value)
    assert "simulating model 'gpt64' on 4,096 devices in f64 needs up to" in message
    assert "more than the simulator's limit of 16 GiB" in message and "on a smaller mesh" in message


@pytest.mark.slow
@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("config", ["megatron_mlp", "transformer_block", "moe", "conv_net", "embedding_head"])
def test_estimate_bounds_what_larger_configs_allocate(config, training):
    """As above, on configs whose arrays (megabytes a device), not Python's objects, make the peak."""
    test_estimate_bounds_the_measured_peak(config, training)
