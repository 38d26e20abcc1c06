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


# -- legal models the program does not spell out: read as the reference reads them --------------------------------

def _model(tmp_path, text: str, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _matmul_model(outputs: str, extra_tensors: str = "", extra_ops: str = "") -> str:
    """y = x @ w on a mesh of 2, split by rows (so w's gradient is a pending sum the gradient phase reduces)."""
    return ("name: m\nmesh: {x: 2}\ntensors:\n"
            "  x: {shape: [8, 4], kind: input, sharding: '[{\"x\"}, {}]'}\n"
            "  w: {shape: [4, 4], kind: param, sharding: '[{}, {}]'}\n" + extra_tensors +
            "ops:\n  - {name: mm, op: matmul, inputs: [x, w], output: y, strategy: [[2, 1], [1, 1]]}\n" + extra_ops + f"outputs: {outputs}\n")


def _reference(path, training=True):
    from graphs.evaluate import example_inputs
    from graphs.gradients import output_cotangents, reference_gradients

    g = plan(path).graph
    feeds = example_inputs(g, seed=0)
    cots = output_cotangents(g, seed=0)
    return feeds, cots, reference_gradients(g, feeds, cots)


def test_a_parameter_no_op_reads_has_a_zero_gradient_as_in_the_reference(tmp_path):
    path = _model(tmp_path, _matmul_model("[y]", "  u: {shape: [4], kind: param}\n"))
    r = simulate(plan(path, training=True))
    assert r.ok and set(r.gradients) == {"w", "u"}
    assert r.gradients["u"] == {"ok": True, "max_abs_error": 0.0, "max_rel_error": 0.0}
    _, _, (_, grads) = _reference(path)
    assert not grads["u"].any()  # L does not depend on u: the reference's gradient is zero too


def test_a_dead_branchs_backward_runs_on_a_zero_cotangent_and_moves_the_predicted_bytes(tmp_path):
    """d = x @ v reaches no output, but the plan's program still differentiates it: v's gradient is a pending sum
    over the batch axis that the gradient phase all-reduces. The cotangent nothing sends is zero, so v's gradient
    is zero (as the reference's) and the all-reduce moves the bytes the plan predicts."""
    path = _model(tmp_path, _matmul_model("[y]", "  v: {shape: [4, 4], kind: param, sharding: '[{}, {}]'}\n",
                                          "  - {name: dead, op: matmul, inputs: [x, v], output: d, strategy: [[2, 1], [1, 1]]}\n"))
    r = simulate(plan(path, training=True))
    assert r.ok and r.gradients["v"]["max_abs_error"] == 0.0
    gradient = r.phases["gradient"]
    # two all-reduces of a 4x4 f32 gradient (64 B) over 2 devices, w's and v's: 2 * 2*(2-1)*(64/2) = 128 bytes
    assert gradient["measured_comm_bytes_per_device"] == gradient["predicted_comm_bytes_per_device"] == 128


def test_a_parameter_listed_as_an_output_gets_its_cotangent_plus_the_losss_gradient(tmp_path):
    path = _model(tmp_path, _matmul_model("[y, w]"))
    r = simulate(plan(path, training=True))
    assert r.ok and set(r.outputs) == {"y", "w"} and set(r.gradients) == {"w"}
    feeds, cots, (_, grads) = _reference(path)
    # L = <c_y, x @ w> + <c_w, w>, so dL/dw = x^T c_y + c_w
    np.testing.assert_allclose(grads["w"], feeds["x"].T @ cots["y"] + cots["w"], rtol=1e-12)


@pytest.mark.parametrize("training", [False, True])
def test_inputs_and_constants_listed_as_outputs_are_their_own_values(tmp_path, training):
    path = _model(tmp_path, _matmul_model("[y, x, c, z]", "  c: {shape: [4], kind: const, value: 2.0}\n"
                                                          "  z: {shape: [3], kind: input}\n"))
    r = simulate(plan(path, training=training))
    assert r.ok and list(r.outputs) == ["y", "x", "c", "z"]
    assert all(o["max_abs_error"] == 0.0 for o in r.outputs.values())


@pytest.mark.parametrize("dtype", ["i32", "bool"])
def test_integer_and_bool_outputs_are_compared_exactly_and_take_no_cotangent(tmp_path, dtype):
    path = _model(tmp_path, _matmul_model("[y, yc]", extra_ops=f"  - {{name: c, op: cast, inputs: [y], output: yc, "
                                                                 f"dtype: {dtype}}}\n"))
    for training in (False, True):
        r = simulate(plan(path, training=training))
        assert r.ok and r.outputs["yc"] == {"ok": True, "max_abs_error": 0.0, "max_rel_error": 0.0}


def test_compare_values_measures_bools_and_non_finite_values_without_warnings():
    from planner.simulation.run import compare_values

    with np.errstate(all="raise"):  # a numpy warning would raise here
        assert compare_values(np.array([True, False]), np.array([True, True]), "bool", 0.0)["max_abs_error"] == 1.0
        entry = compare_values(np.array([np.inf, 1.0]), np.array([1.0, 1.0]), "f32", 1e-4)
    assert not entry["ok"] and entry["max_abs_error"] == np.inf


# -- values that are not finite: the model's, refused naming where they first appear ------------------------------

NON_FINITE = {
    # (model text, the line and the words the error names)
    "nan_const": ("name: m\nmesh: {x: 2}\ntensors:\n  x: {shape: [4, 4], kind: input}\n"
                  "  c: {shape: [4, 4], kind: const, value: .nan}\n"
                  "ops:\n  - {name: a, op: add, inputs: [x, c], output: y}\noutputs: [y]\n",
                  5, ("output 'y' holds nan", "const 'c', which holds nan")),
    "divide_by_zero": ("name: m\nmesh: {x: 2}\ntensors:\n  x: {shape: [4, 4], kind: input}\n"
                       "  c: {shape: [4, 4], kind: const, value: 0.0}\n"
                       "ops:\n  - {name: d, op: div, inputs: [x, c], output: y}\noutputs: [y]\n",
                       7, ("op 'd' (div), whose result 'y' holds inf and -inf",)),
    "layernorm_eps_0": ("name: m\nmesh: {x: 2}\ntensors:\n  c: {shape: [4, 4], kind: const, value: 1.0}\n"
                        "ops:\n  - {name: ln, op: layernorm, inputs: [c], output: y, eps: 0}\n"
                        "  - {name: r, op: relu, inputs: [y], output: z}\noutputs: [z]\n",
                        6, ("output 'z' holds nan", "op 'ln' (layernorm), whose result 'y' holds nan")),
}


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("case", sorted(NON_FINITE))
def test_values_that_are_not_finite_are_the_models_error_naming_where_they_first_appear(tmp_path, case, training):
    import warnings

    from planner.errors import ModelError

    text, line, words = NON_FINITE[case]
    path = _model(tmp_path, text)
    p = plan(path, training=training)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy RuntimeWarning leaks
        with pytest.raises(ModelError) as caught:
            simulate(p)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: the model's values are not finite")
    assert all(w in message for w in words), message


def test_an_infinity_that_vanishes_before_the_outputs_is_simulated_without_warnings(tmp_path):
    """exp(-inf) = 0: a -inf constant (an attention mask's) is fine where the compared values are finite."""
    import warnings

    path = _model(tmp_path, _matmul_model("[o]", "  m: {shape: [8, 4], kind: const, value: -.inf}\n",
                                          "  - {name: e, op: exp, inputs: [m], output: z}\n"
                                          "  - {name: a, op: add, inputs: [y, z], output: o}\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = simulate(plan(path, training=True))
    assert r.ok
