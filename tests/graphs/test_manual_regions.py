"""Manual computation regions (issue 13): the YAML format, flattening, Shardy's invariants and the reference."""

from pathlib import Path

import numpy as np
import pytest

from graphs import load_model, load_model_text
from graphs.evaluate import example_inputs, run_reference
from graphs.gradients import output_cotangents, reference_gradients
from graphs.graph_builder import GraphBuilder
from graphs.ops.registry import get_op
from planner.errors import ModelError

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

MEGATRON = """\
name: m
mesh: {tp: 4}
tensors:
  x:  {shape: [16, 128]}
  w1: {shape: [128, 512], kind: param}
  w2: {shape: [512, 128], kind: param}
regions:
  - name: mlp
    manual_axes: [tp]
    inputs: [x, w1, w2]
    in_shardings: ['[{}, {}]', '[{}, {"tp"}]', '[{"tp"}, {}]']
    outputs: [y]
    out_shardings: ['[{}, {}]']
    ops:
      - {name: mm1, op: matmul, inputs: [x, w1], output: h}
      - {name: act, op: relu, inputs: [h], output: a}
      - {name: mm2, op: matmul, inputs: [a, w2], output: p}
      - {name: sum, op: psum, axes: [tp], inputs: [p], output: y}
outputs: [y]
"""


def test_region_flattens_into_prefixed_body_ops_between_enter_and_exit_ops():
    g = load_model_text(MEGATRON)
    assert [op.name for op in g.ops] == ["mlp/enter/x", "mlp/enter/w1", "mlp/enter/w2", "mlp/mm1", "mlp/act",
                                         "mlp/mm2", "mlp/sum", "mlp/exit/y"]
    # local shapes: w1's columns and w2's rows are split 4 ways by tp (512 / 4 = 128), x is whole
    assert g.tensor("mlp/w1").shape == (128, 128) and g.tensor("mlp/w2").shape == (128, 128)
    assert g.tensor("mlp/x").shape == (16, 128) and g.tensor("y").shape == (16, 128)
    region = g.manual_regions[0]
    assert region.arguments == ("mlp/x", "mlp/w1", "mlp/w2") and region.results == ("mlp/y",)
    assert g.region_of_op("mlp/mm1") is region and g.region_of_tensor("mlp/h") is region
    assert g.region_of_tensor("x") is None and g.region_of_op("mlp/exit/y").role("mlp/exit/y") == "exit"
    assert g.op("mlp/sum").attr("group_size") == 4  # filled from the mesh


def test_a_manual_axis_left_out_of_a_boundary_sharding_is_stored_replicated():
    region = load_model_text(MEGATRON).manual_regions[0]
    assert [str(a) for a in region.in_shardings[0].replicated] == ['"tp"']  # x: '[{}, {}]'
    assert not region.in_shardings[1].replicated  # w1 is sharded over tp


def test_the_builder_and_yaml_make_the_same_graph():
    b = GraphBuilder("m", {"tp": 4})
    x, w1, w2 = b.tensor("x", [16, 128]), b.param("w1", [128, 512]), b.param("w2", [512, 128])
    b.manual_region("mlp", ["tp"], [x, w1, w2], ['[{}, {}]', '[{}, {"tp"}]', '[{"tp"}, {}]'], ["y"], ['[{}, {}]'], [
        {"name": "mm1", "op": "matmul", "inputs": [x, w1], "output": "h"},
        {"name": "act", "op": "relu", "inputs": ["h"], "output": "a"},
        {"name": "mm2", "op": "matmul", "inputs": ["a", w2], "output": "p"},
        {"name": "sum", "op": "psum", "axes": ["tp"], "inputs": ["p"], "output": "y"}])
    b.outputs("y")
    built, loaded = b.build(), load_model_text(MEGATRON)
    assert [(o.name, o.op, o.inputs, o.output, o.attrs) for o in built.ops] == \
        [(o.name, o.op, o.inputs, o.output, o.attrs) for o in loaded.ops]


def _variant(old: str, new: str) -> str:
    assert old in MEGATRON
    return MEGATRON.replace(old, new)


@pytest.mark.parametrize("text, line, fragment", [
    (_variant("manual_axes: [tp]", "manual_axes: [tq]"), 8, "region 'mlp': manual axis 'tq' is not an axis of the mesh"),
    (_variant("manual_axes: [tp]", "manual_axes: [tp, tp]"), 8, "region 'mlp' names manual axis 'tp' twice"),
    (_variant("manual_axes: [tp]", "manual_axes: ['tp:(1)2']"), 8, "a manual axis is a whole mesh axis, not a sub-axis"),
    (_variant("in_shardings: ['[{}, {}]', ", "in_shardings: ["), 8,
     "region 'mlp' has 3 inputs (x, w1, w2) but 2 in_shardings"),
    (_variant("out_shardings: ['[{}, {}]']", "out_shardings: ['[{}, {}], unreduced={\"tp\"}']"), 8,
     "has manual axis 'tp' in unreduced"),
    (_variant("mesh: {tp: 4}", "mesh: {tp: 4, dp: 2}").replace("'[{}, {\"tp\"}]'", "'[{}, {\"dp\", \"tp\"}]'"), 8,
     "has free axis \"dp\" major to manual axis 'tp' in dimension 1; free axes must be minor to manual axes"),
    (_variant("inputs: [x, w1, w2]\n", "inputs: [x, w1]\n").replace(", '[{\"tp\"}, {}]']", "]"), 17,  # mm2's line
     "body op 'mm2' reads outer tensor 'w2', which is not an input of the region (x, w1)"),
    (_variant("psum, axes: [tp]", "psum, axes: [dp]").replace("mesh: {tp: 4}", "mesh: {tp: 4, dp: 2}"), 18,
     "collective 'sum' (psum) is over axis 'dp', which is not a manual axis of the region (tp)"),
    (_variant("w1: {shape: [128, 512]", "w1: {shape: [128, 510]").replace("w2: {shape: [512,", "w2: {shape: [510,"),
     8, "dimension 1 of input 'w1' has size 510, which its manual axes tp (4 blocks) do not divide"),
    (_variant("output: h}", "output: h, out_sharding: '[{}, {\"tp\"}]'}"), 15,
     "body op 'mm1' has out_sharding [{}, {\"tp\"}], which names a manual axis (tp)"),
    (_variant("outputs: [y]\n    out", "outputs: [z]\n    out").replace("outputs: [y]\n", "outputs: [z]\n", 1), 8,
     "region 'mlp' lists output 'z', which no body op makes"),
])
def test_region_errors_name_the_region_the_line_and_the_rule(text, line, fragment):
    with pytest.raises(ModelError) as info:
        load_model_text(text, source="m.yaml")
    assert info.value.where == f"m.yaml:{line}"
    assert fragment in info.value.message


def test_a_collective_outside_a_region_is_refused_with_its_line():
    text = """\
name: c
mesh: {tp: 2}
tensors: {x: {shape: [4]}}
ops:
  - {name: s, op: psum, axes: [tp], inputs: [x], output: y}
"""
    with pytest.raises(ModelError, match="psum is a collective: it is valid only inside a manual region") as info:
        load_model_text(text, source="c.yaml")
    assert info.value.where == "c.yaml:5"


# -- the reference: one array per manual coordinate ---------------------------------------------------

def test_megatron_by_hand_computes_the_mlp_and_its_exact_gradients():
    g = load_model(CONFIGS / "megatron_by_hand.yaml")
    feeds = example_inputs(g, seed=0)
    x, w1, w2 = feeds["x"], feeds["w1"], feeds["w2"]
    values = run_reference(g, feeds)
    # the column blocks of w1 and row blocks of w2 split relu(x w1) w2 into a sum of four partial products
    h = x @ w1
    np.testing.assert_allclose(values["y"], np.maximum(h, 0) @ w2, rtol=1e-12, atol=1e-12)
    assert values["mlp/h"].shape == (4, 16, 128)  # one local block per coordinate of tp
    np.testing.assert_array_equal(values["mlp/h"][2], x @ w1[:, 256:384])
    _, grads = reference_gradients(g, feeds)
    c = output_cotangents(g)["y"]  # L = <c, y>: dL/dw2 = relu(h)^T c, dL/dw1 = x^T ((c w2^T) * [h > 0])
    np.testing.assert_allclose(grads["w2"], np.maximum(h, 0).T @ c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads["w1"], x.T @ ((c @ w2.T) * (h > 0)), rtol=1e-12, atol=1e-12)


def test_psum_of_the_loss_has_the_gradient_of_the_whole_batch():
    g = load_model(CONFIGS / "dp_training_step.yaml")
    feeds = example_inputs(g, seed=1)
    x, w = feeds["x"], feeds["w"]
    outputs, grads = reference_gradients(g, feeds)
    # loss = sum((x w)^2) over the whole batch, so dloss/dw = 2 x^T (x w)
    np.testing.assert_allclose(outputs["loss"], np.sum((x @ w) ** 2), rtol=1e-12)
    np.testing.assert_allclose(grads["w"], 2 * x.T @ (x @ w), rtol=1e-12, atol=1e-12)


def test_ring_of_ppermutes_gives_every_device_the_whole_product():
    g = load_model(CONFIGS / "ring_matmul.yaml")
    feeds = example_inputs(g, seed=0)
    y = run_reference(g, feeds)["y_per_device"]
    product = feeds["x"] @ feeds["w"]  # the four partial products x[:, b] w[b, :] summed around the ring
    for d in range(4):
        np.testing.assert_allclose(y[16 * d:16 * (d + 1)], product, rtol=1e-12, atol=1e-12)


def test_an_output_that_varies_over_a_manual_axis_it_replicates_is_refused_by_the_reference():
    g = load_model_text(MEGATRON.replace("{name: sum, op: psum, axes: [tp], inputs: [p], output: y}",
                                         "{name: sum, op: relu, inputs: [p], output: y}"))
    with pytest.raises(ModelError, match="output 'y' of region 'mlp' varies over tp but its out-sharding "
                                         "replicates it"):
        run_reference(g, example_inputs(g))


# -- collectives on a group, hand-derived ---------------------------------------------------------------

GROUP = np.arange(12.0).reshape(3, 4)  # three devices, each with a block of 4


@pytest.mark.parametrize("name, attrs, want", [
    ("psum", {}, [[12, 15, 18, 21]] * 3),  # column sums of GROUP, on every device
    ("pmean", {}, [[4, 5, 6, 7]] * 3),
    ("all_gather", {"dim": 0}, [list(range(12))] * 3),  # the blocks concatenated in device order
])
def test_collective_reference_combines_the_group(name, attrs, want):
    got = get_op(name).reference([GROUP], {"axes": ("i",), "group_size": 3, **attrs})
    np.testing.assert_array_equal(got, want)


def test_psum_scatter_gives_device_c_block_c_of_the_sum():
    x = np.arange(9.0).reshape(3, 3)  # column sums 9, 12, 15: one element per device
    got = get_op("psum_scatter").reference([x], {"axes": ("i",), "group_size": 3, "dim": 0})
    np.testing.assert_array_equal(got, [[9], [12], [15]])


def test_ppermute_moves_blocks_and_zeroes_devices_no_pair_reaches():
    got = get_op("ppermute").reference([GROUP], {"axes": ("i",), "group_size": 3, "perm": ((0, 1), (1, 0))})
    np.testing.assert_array_equal(got, [GROUP[1], GROUP[0], np.zeros(4)])


def test_all_to_all_sends_block_c_of_every_device_to_device_c():
    x = np.arange(8.0).reshape(2, 4)  # device d holds [4d, 4d+1, 4d+2, 4d+3]
    got = get_op("all_to_all").reference([x], {"axes": ("i",), "group_size": 2, "split_dim": 0, "concat_dim": 0})
    np.testing.assert_array_equal(got, [[0, 1, 4, 5], [2, 3, 6, 7]])


@pytest.mark.parametrize("name, attrs", [("all_gather", {"dim": 0}), ("psum_scatter", {"dim": 0}),
                                         ("all_to_all", {"split_dim": 0, "concat_dim": 0}),
                                         ("ppermute", {"perm": ((0, 1), (1, 2), (2, 0))}), ("psum", {})])
def test_collective_vjp_is_the_adjoint_of_its_reference(name, attrs):
    # <vjp(c), x> == <c, f(x)> for linear f, on random data
    rng = np.random.default_rng(0)
    op = get_op(name)
    attrs = {"axes": ("i",), "group_size": 3, **attrs}
    x = rng.standard_normal((3, 6))
    y = op.reference([x], attrs)
    c = rng.standard_normal(y.shape)
    (g,) = op.vjp([x], attrs, None, c, (0,))
    assert np.isclose(np.sum(g * x), np.sum(c * y), rtol=1e-12)


def test_axis_index_is_each_devices_linear_index():
    got = get_op("axis_index").reference([], {"axes": ("i",), "group_size": 3})
    np.testing.assert_array_equal(got, [0, 1, 2])
