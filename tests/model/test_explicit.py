"""Explicit sharding mode (seed 001): consensus per factor, its errors, reductions, reshape."""

import pytest

from graphs import load_model_text
from graphs.graph_builder import GraphBuilder
from planner.errors import RuleError
from planner.ir import AxisRef
from planner.model.explicit_types import AllReduce, explicit_shardings

ADVICE = ". Pass an explicit out_sharding to op {!r} to choose how its result is sharded"


def _binary(op, a_shape, a_sharding, b_shape, b_sharding, dtype="f32", mesh=None, **kw):
    b = GraphBuilder("g", mesh or {"X": 2, "Y": 4})
    a = b.tensor("a", a_shape, dtype, sharding=a_sharding)
    c = b.tensor("b", b_shape, dtype, sharding=b_sharding)
    b.op(op, [a, c], output="out", name=op, **kw)
    return b.build()


def _unary(op, in_shape, sharding, mesh=None, dtype="f32", **kw):
    b = GraphBuilder("g", mesh or {"X": 2, "Y": 4})
    x = b.tensor("x", in_shape, dtype, sharding=sharding)
    b.op(op, [x], output="out", name=op, **kw)
    return b.build()


# -- seed 001, verbatim ---------------------------------------------------------------------

def test_seed001_outer_dims_keep_their_shardings():
    # arg0: f32[4@X,1], arg1: f32[1,8@Y]  ->  result: f32[4@X,8@Y]
    g = _binary("add", [4, 1], '[{"X"}, {}]', [1, 8], '[{}, {"Y"}]')
    res = explicit_shardings(g)
    assert [res.type_text(t) for t in ("a", "b", "out")] == ["f32[4@X,1]", "f32[1,8@Y]", "f32[4@X,8@Y]"]


def test_seed001_int32_add_types():
    g = _binary("add", [4, 1], '[{"X"}, {}]', [1, 8], '[{}, {"Y"}]', dtype="i32")
    assert explicit_shardings(g).type_text("out") == "i32[4@X,8@Y]"


def test_seed001_add_using_an_axis_twice_is_an_illegally_sharded_result():
    g = _binary("add", [4, 4], '[{"X"}, {}]', [4, 4], '[{}, {"X"}]', dtype="i32")
    with pytest.raises(RuleError) as err:
        explicit_shardings(g)
    seed = "add operation with inputs: i32[4@X,4], i32[4,4@X] produces an illegally sharded result: i32[4@X,4@X]"
    assert str(err.value) == seed + ADVICE.format("add")


def test_seed001_out_sharding_overrides_the_rule():
    # The auto_axes escape hatch: ask for the result f32[4@X,4] explicitly.
    g = _binary("add", [4, 4], '[{"X"}, {}]', [4, 4], '[{}, {"X"}]', dtype="i32", out_sharding='[{"X"}, {}]')
    res = explicit_shardings(g)
    assert res.type_text("out") == "i32[4@X,4]"
    assert res.reason("out") == "out_sharding given on op 'add'"


def test_unary_elementwise_keeps_the_sharding():
    res = explicit_shardings(_unary("exp", [4, 4], '[{"X"}, {"Y"}]'))
    assert res.type_text("out") == "f32[4@X,4@Y]"


# -- consensus ---------------------------------------------------------------------------------

def test_one_sided_sharding_is_the_consensus():
    res = explicit_shardings(_binary("mul", [8, 4], '[{"X"}, {}]', [8, 4], None))
    assert res.type_text("out") == "f32[8@X,4]"
    assert res.reason("b") == "input 'b' has no sharding: replicated"
    assert res.reason("a") == "annotation on input 'a'"


def test_same_sharding_on_both_sides_is_the_consensus():
    res = explicit_shardings(_binary("sub", [8, 4], '[{"X"}, {"Y"}]', [4], '[{"Y"}]'))
    assert res.type_text("out") == "f32[8@X,4@Y]"


def test_two_different_shardings_of_one_dimension_conflict():
    g = _binary("add", [8], '[{"X"}]', [8], '[{"Y"}]')
    with pytest.raises(RuleError) as err:
        explicit_shardings(g)
    assert str(err.value) == (
        "add operation with inputs: f32[8@X], f32[8@Y] has conflicting shardings for one dimension: "
        "{X} (input 0 dimension 0) and {Y} (input 1 dimension 0)" + ADVICE.format("add")
    )


def test_sharded_contracting_dim_is_reduced_at_once_with_an_all_reduce():
    g = _binary("matmul", [8, 16], '[{"X"}, {"Y"}]', [16, 4], '[{"Y"}, {}]')
    res = explicit_shardings(g)
    assert res.type_text("out") == "f32[8@X,4]"
    assert res.collectives["matmul"] == (AllReduce("out", (AxisRef("Y"),)),)
    assert str(res.collectives["matmul"][0]) == 'AllReduce(out) over {"Y"}'
    assert "AllReduce" in res.reason("out")


def test_matmul_using_an_axis_for_rows_and_contraction_is_illegal():
    g = _binary("matmul", [8, 16], '[{}, {"X"}]', [16, 4], '[{}, {"X"}]')
    with pytest.raises(RuleError, match=r"produces an illegally sharded result: f32\[8,4@X\]\{unreduced:X\}"):
        explicit_shardings(g)


def test_sharded_softmax_axis_needs_an_out_sharding():
    g = _unary("softmax", [4, 8], '[{}, {"X"}]')
    with pytest.raises(RuleError) as err:
        explicit_shardings(g)
    assert str(err.value) == (
        "softmax operation with inputs: f32[4,8@X] shards dimension 1 of input 0 over X, but softmax needs that "
        "dimension replicated" + ADVICE.format("softmax")
    )


def test_megatron_mlp_column_then_row_parallel():
    b = GraphBuilder("mlp", {"x": 2, "y": 4})
    x = b.tensor("x", [8, 16])
    w1 = b.param("w1", [16, 32], sharding='[{}, {"y"}]')
    w2 = b.param("w2", [32, 16], sharding='[{"y"}, {}]')
    h = b.op("matmul", [x, w1], output="h", name="dense1")
    r = b.op("relu", [h], output="r", name="relu")
    b.op("matmul", [r, w2], output="y", name="dense2")
    res = explicit_shardings(b.build())
    assert [res.type_text(t) for t in ("h", "r", "y")] == ["f32[8,32@y]", "f32[8,32@y]", "f32[8,16]"]
    assert res.collectives == {"dense1": (), "relu": (), "dense2": (AllReduce("y", (AxisRef("y"),)),)}


def test_errors_from_a_model_file_name_the_line():
    g = load_model_text(
        "name: bad\n"
        "mesh: {X: 2}\n"
        "tensors:\n"
        "  a: {shape: [4, 4], dtype: i32, sharding: '[{\"X\"}, {}]'}\n"
        "  b: {shape: [4, 4], dtype: i32, sharding: '[{}, {\"X\"}]'}\n"
        "ops:\n"
        "  - {name: s, op: add, inputs: [a, b], output: c}\n",
        source="bad.yaml",
    )
    with pytest.raises(RuleError) as err:
        explicit_shardings(g)
    assert str(err.value).startswith("bad.yaml:7: add operation with inputs: i32[4@X,4], i32[4,4@X]")
    assert str(err.value).endswith(ADVICE.format("s"))


# -- reshape (seed 001 rule, plus sub-axis splits) --------------------------------------------------

def _reshape(in_shape, sharding, shape, mesh=None):
    return explicit_shardings(_unary("reshape", in_shape, sharding, mesh=mesh, shape=shape))


def test_reshape_split_of_an_unsharded_dim_keeps_the_other_dims():
    res = _reshape([4, 6], '[{"X"}, {}]', [4, 2, 3])
    assert res.type_text("out") == "f32[4@X,2,3]"


def test_reshape_merge_of_unsharded_dims_keeps_the_other_dims():
    res = _reshape([4, 2, 3], '[{"X"}, {}, {}]', [4, 6])
    assert res.type_text("out") == "f32[4@X,6]"


def test_reshape_strips_singleton_dims():
    res = _reshape([4, 1, 6], '[{"X"}, {}, {"Y"}]', [4, 6, 1])
    assert res.type_text("out") == "f32[4@X,6@Y,1]"


def test_reshape_split_of_a_sharded_dim_makes_sub_axes():
    # seed 000: tensor<8> [{"x"}] on x=4 reshaped to 2x4 -> [{"x":(1)2}, {"x":(2)2}]
    res = _reshape([8], '[{"x"}]', [2, 4], mesh={"x": 4})
    assert res.sharding("out").dims_text() == '[{"x":(1)2}, {"x":(2)2}]'
    assert "sub-axes" in res.reason("out")


def test_reshape_split_of_a_sharded_dim_whose_axes_fit_the_major_piece():
    res = _reshape([8], '[{"x"}]', [4, 2], mesh={"x": 4})
    assert res.sharding("out").dims_text() == '[{"x"}, {}]'


def test_reshape_uneven_split_of_a_sharded_dim_needs_an_out_sharding():
    with pytest.raises(RuleError) as err:
        _reshape([6], '[{"X"}]', [2, 3], mesh={"X": 3})
    assert str(err.value) == (
        "reshape operation with inputs: f32[6@X] splits dimension 0 sharded over X into sizes 2x3, and those "
        "axes do not split evenly over them major to minor" + ADVICE.format("reshape")
    )


def test_reshape_merge_of_sharded_dims_needs_an_out_sharding():
    with pytest.raises(RuleError, match=r"f32\[4@X,6\] merges dimensions \[0, 1\] of which some are sharded"):
        _reshape([4, 6], '[{"X"}, {}]', [24])


def test_reshape_regrouping_sharded_dims_needs_an_out_sharding():
    with pytest.raises(RuleError, match=r"regroups dimensions \[0, 1\] into \[0, 1\]"):
        _reshape([2, 3], '[{"X"}, {}]', [3, 2])


def test_reshape_regrouping_unsharded_dims_stays_unsharded():
    res = _reshape([2, 3, 8], '[{}, {}, {"Y"}]', [3, 2, 8])
    assert res.type_text("out") == "f32[3,2,8@Y]"
