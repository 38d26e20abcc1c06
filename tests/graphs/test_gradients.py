"""The single-device reference backward of whole graphs, against central finite differences.

The objective is ``L = sum_o <cotangent_o, output_o>`` (:func:`output_cotangents`);
``dL/dp`` from :func:`reference_gradients` must match ``(L(p + h d) - L(p - h d)) / 2h``
for random directions ``d``, with ``L`` computed by the plain forward ``run_reference``.
Builders at small sizes are checked parameter by parameter; every config file, at full
size, with one random direction over all its parameters at once (two forwards).

Feeds are ``example_inputs`` with weight matrices (not embedding tables) scaled by
``1/sqrt(fan_in)`` (the usual initialisation): with unit-variance weights, GPT-2 small's attention softmaxes
saturate and its losses reach the thousands, and the finite difference measures
rounding noise instead of the derivative. Directions are relative: ``d_p`` has the
scale of ``p``'s values, so ``h`` is a relative step.
"""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from graphs import GraphBuilder, load_model, load_model_text
from graphs import gradients
from graphs.builders import conv, gpt, mlp, moe, transformer
from graphs.evaluate import example_inputs, run_reference
from graphs.gradients import check_differentiable, output_cotangents, reference_gradients, requires_grad
from graphs.ops.registry import get_op
from planner.errors import ModelError

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def scaled_inputs(graph, seed=0):
    """``example_inputs`` with every float parameter rescaled to a chosen rms, whatever scale
    ``example_inputs`` draws: ``1/sqrt(fan_in)`` for weights (rank >= 2, not a gather
    table), 1 for embedding tables and vectors."""
    feeds = example_inputs(graph, seed=seed)
    tables = {op.inputs[0] for op in graph.ops if op.op == "gather"}
    for t in graph.tensors_of_kind("param"):
        x = feeds[t.name]
        if x.dtype.kind != "f" or not x.size:
            continue
        target = 1.0
        if len(t.shape) >= 2 and t.name not in tables:
            fan_in = int(np.prod(t.shape[1:])) if len(t.shape) == 4 else t.shape[-2]  # OIHW conv or [.., in, out]
            target = 1.0 / np.sqrt(fan_in)
        x *= target / np.sqrt(np.mean(np.square(x)))
    return feeds


def objective(graph, feeds, cotangents):
    values = run_reference(graph, feeds)
    return sum(float(np.vdot(c, values[name])) for name, c in cotangents.items())


class Direction:
    """A random direction for one tensor: independent random signs times the rms of its
    values (so ``h`` is a relative step); int8 signs keep GPT-2 small's cheap to draw and hold."""

    def __init__(self, rng, value):
        self.signs = np.frombuffer(rng.bytes(value.size), dtype=np.int8).reshape(value.shape) >> 7 | 1
        self.scale = float(np.sqrt(np.mean(np.square(value)))) or 1.0

    def dot(self, g):
        """``<g, d>``."""
        return self.scale * float(np.vdot(g, self.signs.astype(g.dtype)))

    def step(self, value, t):
        """``value + t d``, freshly allocated."""
        out = self.signs.astype(value.dtype)
        out *= t * self.scale
        out += value
        return out


def central_difference(graph, feeds, cotangents, direction, h):
    """``(L(p + h d) - L(p - h d)) / 2h`` moving every parameter named in ``direction``."""
    def moved(sign):
        return dict(feeds, **{p: d.step(feeds[p], sign * h) for p, d in direction.items()})

    return (objective(graph, moved(1), cotangents) - objective(graph, moved(-1), cotangents)) / (2 * h)


# Builders are smooth at these sizes except for ReLU kinks, which the data keeps O(1)
# away from any h-step: the central difference is then exact up to its O(h^2)
# truncation and O(eps/h) rounding error, both ~1e-10 here; 1e-6 leaves room for
# neither a wrong term nor a wrong sign.
BUILDER_H, BUILDER_RTOL = 1e-6, 1e-6
SMALL_BUILDS = {
    "mlp": lambda: mlp(batch=4, hidden=8, layers=3),
    "conv": lambda: conv(batch=2, channels=3, image=5, classes=4, layers=2, in_channels=2, kernel=3),
    "gpt": lambda: gpt(layers=2, hidden=8, heads=2, seq=4, batch=2, vocab=11),
    "moe": lambda: moe(tokens=6, hidden=4, experts=3, capacity=2, ffn=5),
    "transformer": lambda: transformer(layers=2, hidden=8, heads=2, seq=3, batch=2),
    "transformer_no_norm_params": lambda: transformer(layers=1, hidden=8, heads=4, seq=3, batch=2,
                                                      norm_params=False),
}


@pytest.mark.parametrize("name", SMALL_BUILDS)
def test_builder_gradients_match_central_differences_parameter_by_parameter(name):
    g = SMALL_BUILDS[name]()
    feeds = scaled_inputs(g)
    cots = output_cotangents(g)
    outputs, grads = reference_gradients(g, feeds, cots)
    reference = run_reference(g, feeds)
    assert set(outputs) == set(g.outputs)
    for o in g.outputs:
        np.testing.assert_allclose(outputs[o], reference[o], rtol=1e-12, atol=1e-12)
    params = [t.name for t in g.tensors_of_kind("param")]
    assert sorted(grads) == sorted(params)
    rng = np.random.default_rng(3)
    for p in params:
        assert grads[p].shape == g.tensor(p).shape and grads[p].dtype == np.float64
        d = Direction(rng, feeds[p])
        fd = central_difference(g, feeds, cots, {p: d}, BUILDER_H)
        assert d.dot(grads[p]) == pytest.approx(fd, rel=BUILDER_RTOL, abs=1e-9), p


# Full-size configs, one direction over all parameters. h = 1e-5 (relative) keeps the
# O(h^2) truncation error ~1e-10 and the rounding error ~eps·|L|/h below 1e-8 for
# these objectives; conv_net's 12.5M ReLUs are different: a step crosses a handful of
# kinks, an error growing with h, so it takes h = 1e-7 (rounding still < 1e-7).
CONFIG_H = {"conv_net": 1e-7}
CONFIG_RTOL = 1e-6
# gpt2_small and embedding_head carry GPT-2's 50257-word head (67 GFLOP a forward): five
# forwards each would cost minutes. Their ops are all checked op by op above, the gpt
# builder is checked parameter by parameter at a small size, and the simulator compares
# both configs' gradients with this reference (tests/simulation/test_configs_simulate.py).
FD_CONFIGS = [p for p in CONFIGS if p.stem not in ("gpt2_small", "embedding_head")]


@pytest.mark.parametrize("path", FD_CONFIGS, ids=[p.stem for p in FD_CONFIGS])
def test_config_gradients_match_a_central_difference_along_a_random_direction(path):
    g = load_model(path)
    feeds = scaled_inputs(g)
    cots = output_cotangents(g)
    outputs, grads = reference_gradients(g, feeds, cots)
    assert sorted(grads) == sorted(t.name for t in g.tensors_of_kind("param"))
    rng = np.random.default_rng(4)
    direction = {p: Direction(rng, feeds[p]) for p in grads}
    predicted = sum(d.dot(grads[p]) for p, d in direction.items())
    fd = central_difference(g, feeds, cots, direction, CONFIG_H.get(path.stem, 1e-5))
    assert predicted == pytest.approx(fd, rel=CONFIG_RTOL)


SHARED = """
name: shared
tensors:
  x: {shape: [3, 4], kind: input}
  w: {shape: [4, 4], kind: param}
  b: {shape: [4], kind: param}
  unused: {shape: [2], kind: param}
ops:
  - {name: mm1, op: matmul, inputs: [x, w], output: h1}
  - {name: bias, op: add, inputs: [h1, b], output: h2}
  - {name: mm2, op: matmul, inputs: [h2, w], output: h3}
  - {name: sq, op: mul, inputs: [h3, h2], output: h4}
  - {name: total, op: sum, inputs: [h4], output: loss}
outputs: [loss, h2]
"""


def test_shared_reads_an_output_read_again_and_an_unused_param():
    # w is read by two ops, h2 by two ops and also an output (its cotangent adds up
    # from both readers and the seed); `unused` reaches nothing: its gradient is zero
    g = load_model_text(SHARED)
    feeds = example_inputs(g, seed=2)
    cots = output_cotangents(g)
    assert set(cots) == {"loss", "h2"} and float(cots["loss"]) == 1.0
    outputs, grads = reference_gradients(g, feeds, cots)
    assert np.array_equal(grads["unused"], np.zeros(2))
    rng = np.random.default_rng(5)
    for p in ("w", "b"):
        d = Direction(rng, feeds[p])
        fd = central_difference(g, feeds, cots, {p: d}, 1e-6)
        assert d.dot(grads[p]) == pytest.approx(fd, rel=1e-6)


def test_feeds_and_cotangents_are_not_modified():
    g = load_model_text(SHARED)
    feeds = example_inputs(g, seed=2)
    cots = {"loss": np.array(2.0), "h2": np.ones((3, 4))}
    before = {k: v.copy() for k, v in {**feeds, **cots}.items()}
    _, grads = reference_gradients(g, feeds, cots)
    assert all(np.array_equal(v, before[k]) for k, v in {**feeds, **cots}.items())
    assert not any(np.shares_memory(grads[p], feeds[p]) for p in grads)


def test_output_cotangents_seed_scalars_with_one_and_skip_integer_outputs():
    b = GraphBuilder("outs")
    x = b.param("x", [2, 3])
    s = b.op("sum", [x], output="s")
    i = b.op("cast", [x], output="i", dtype="i32")
    b.outputs(x, s, i)
    cots = output_cotangents(b.build(), seed=7, float_dtype=np.float32)
    assert list(cots) == ["x", "s"]
    assert cots["s"].shape == () and float(cots["s"]) == 1.0 and cots["s"].dtype == np.float32
    np.testing.assert_array_equal(cots["x"], np.random.default_rng(8).standard_normal((2, 3)).astype(np.float32))


def _cast_to_index_graph():
    b = GraphBuilder("cast_index")
    p = b.param("p", [4])
    idx = b.op("cast", [p], output="idx", dtype="i32")
    table = b.param("table", [5, 3])
    rows = b.op("gather", [table, idx], output="rows")
    b.outputs(b.op("sum", [rows], output="loss"))
    return b.build()


def test_requires_grad_stops_at_a_cast_to_an_integer_type():
    g = _cast_to_index_graph()
    assert requires_grad(g) == {"p": True, "table": True, "idx": False, "rows": True, "loss": True}
    feeds = {"p": np.array([0.2, 1.7, 3.1, 4.9]), "table": np.arange(15.0).reshape(5, 3)}
    _, grads = reference_gradients(g, feeds)
    # the indices 0, 1, 3, 4 each pick one row once; p only reaches the loss through integers
    np.testing.assert_array_equal(grads["table"], np.array([[1.0] * 3, [1.0] * 3, [0.0] * 3, [1.0] * 3, [1.0] * 3]))
    np.testing.assert_array_equal(grads["p"], np.zeros(4))


def test_an_op_without_a_vjp_on_the_path_from_a_parameter_is_refused_before_any_work(monkeypatch):
    g = load_model(Path(__file__).resolve().parents[2] / "configs" / "megatron_mlp.yaml")
    untrainable = dataclasses.replace(get_op("gelu"), vjp=None)
    monkeypatch.setattr(gradients, "get_op", lambda name: untrainable if name == "gelu" else get_op(name))
    with pytest.raises(ModelError) as e:
        reference_gradients(g, {})  # no feeds: the check comes first
    message = str(e.value)
    assert "op 'act' (gelu) of model 'megatron_mlp' has no gradient" in message
    assert "it cannot be trained; remove it from the path to the loss or plan without --training" in message
    assert "megatron_mlp.yaml:" in message  # located at the op's line
    # an op that only sees inputs needs no gradient, VJP or not
    b = GraphBuilder("inputs_only")
    b.outputs(b.op("gelu", [b.tensor("x", [2])], output="y"))
    check_differentiable(b.build())
    assert get_op("gelu").vjp is not None  # the real registry is untouched


@pytest.mark.parametrize("outputs, named", [("[]", "outputs: none"), ("[yi]", "outputs: 'yi' (i32)")])
def test_training_without_a_float_output_has_nothing_to_differentiate(outputs, named):
    g = load_model_text("name: m\nmesh: {x: 2}\ntensors:\n  x: {shape: [4, 4], kind: input}\n"
                        "  w: {shape: [4, 4], kind: param}\nops:\n"
                        "  - {name: mm, op: matmul, inputs: [x, w], output: y}\n"
                        f"  - {{name: c, op: cast, inputs: [y], output: yi, dtype: i32}}\noutputs: {outputs}\n")
    assert output_cotangents(g) == {}  # L is the empty sum: no parameter's gradient could be anything but zero
    with pytest.raises(ModelError, match="no float output to differentiate") as caught:
        check_differentiable(g)
    assert named in str(caught.value) and "'w'" in str(caught.value) and "without --training" in str(caught.value)


def test_a_model_without_trained_parameters_needs_no_float_output():
    g = load_model_text("name: m\nmesh: {x: 2}\ntensors:\n  x: {shape: [4], kind: input}\n"
                        "ops:\n  - {name: r, op: relu, inputs: [x], output: y}\noutputs: []\n")
    check_differentiable(g)  # nothing needs a gradient: a forward-only backward is fine
