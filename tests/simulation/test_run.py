"""Whole-plan simulation: it detects wrong programs, and it counts what really moved."""

from pathlib import Path

import numpy as np
import pytest

from dataclasses import replace

from planner.errors import SimulationMismatch
from planner.partitioning import render
from planner.api import plan
from planner.simulation.run import simulate

FFN = Path(__file__).resolve().parents[2] / "configs" / "ffn.yaml"


def test_ffn_program_listing_matches_seed_002_local_shapes():
    # seed 002's local shapes, with seed 004's device-variance types: x varies over the
    # batch half of "d", w1 over the column quarter, so each is pbroadcast over the other's
    text = render(plan(FFN, search="bfs").program)
    assert ('%h1 = matmul(%x, %w1) {name: dense1.matmul, strategy: ((2, 1), (1, 4)), pbroadcast %x over '
            '{"d":(2)4}; %w1 over {"d":(1)2}} : (f32[32,64]{"d":(1)2}, f32[64,16]{"d":(2)4}) -> f32[32,16]{"d"}') in text
    assert ('%h4 = ReduceScatter(%h4) {axes: "d":(2)4, dims: [1]} : f32[32,64]{"d"} -> f32[32,16]{"d"}'
            '   // psum_scatter') in text
    assert text.index("dense2.matmul") < text.index("ReduceScatter") < text.index("dense2.add")


def test_simulation_catches_a_wrong_local_op(monkeypatch):
    """Break relu's local instance on the devices: the comparison with one device must fail."""
    import planner.simulation.run as run

    real = run.local_compute

    def broken(op, rule, arrays, ctx):
        out = real(op, rule, arrays, ctx)
        return out + 1.0 if op.op == "relu" else out

    monkeypatch.setattr(run, "local_compute", broken)
    r = simulate(plan(FFN))
    assert not r.ok and r.max_abs_error > 0.5


def test_simulation_catches_a_missing_reduction():
    """Drop the ReduceScatter from the program: the pending sums never get added."""
    p = plan(FFN, search="bfs")
    program = p.program
    from planner.partitioning import Redistribute

    trimmed = replace(program, instructions=tuple(i for i in program.instructions if not isinstance(i, Redistribute)))
    with pytest.raises(SimulationMismatch, match="'dense2.add' reads 'h4' .* the program lacks a redistribution"):
        # the add would read h4 as pending sums: the simulator refuses rather than guess
        simulate(replace(p, program=trimmed))


def test_same_seed_same_result_and_bytes():
    a, b = simulate(plan(FFN), seed=3), simulate(plan(FFN), seed=3)
    assert a.max_abs_error == b.max_abs_error and a.measured_comm_bytes_per_device == b.measured_comm_bytes_per_device
    assert np.isfinite(a.max_rel_error)


def test_one_op_reading_a_tensor_in_two_layouts_gets_each_copy():
    """x @ x^T with the two reads of x wanting different layouts: each read its own copy."""
    text = """
name: gram
mesh: {d: 2}
tensors:
  x: {shape: [8, 8], kind: input}
ops:
  - {name: pre, op: relu, inputs: [x], output: h, out_sharding: '[{"d"}, {}]'}
  - {name: gram, op: matmul, inputs: [h, h], output: y}
outputs: [y]
"""
    p = plan(text, search="ilp")
    r = simulate(p)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device
