"""Explicit sharding mode (seed 001, as JAX 0.10.2 types it): consensus per factor, its errors, dots, reductions,
normalisations, concat/slice, reshape. tests/model/test_explicit_vs_jax.py checks the same rules against JAX itself."""

import re

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


def test_contracting_dim_sharded_in_both_inputs_asks_for_an_out_sharding():
    # JAX's dot_general: a contracting dimension sharded on both sides is ambiguous (psum, or scatter?)
    g = _binary("matmul", [8, 16], '[{"X"}, {"Y"}]', [16, 4], '[{"Y"}, {}]')
    with pytest.raises(RuleError) as err:
        explicit_shardings(g)
    assert str(err.value) == (
        "matmul operation with inputs: f32[8@X,16@Y], f32[16@Y,4] shards its contracting dimension over Y in "
        "both inputs, so it is ambiguous how the result is sharded (a pending sum to reduce, or scatter)"
        + ADVICE.format("matmul"))


def test_contracting_dim_sharded_differently_in_the_two_inputs_is_an_error():
    g = _binary("matmul", [8, 16], '[{}, {"X"}]', [16, 4], '[{"Y"}, {}]')
    with pytest.raises(RuleError, match="shards its contracting dimension differently in its two inputs: {X} and {Y}"):
        explicit_shardings(g)


def test_contracting_dim_sharded_in_one_input_is_summed_by_an_all_reduce():
    g = _binary("matmul", [8, 16], '[{"X"}, {"Y"}]', [16, 4], None)
    res = explicit_shardings(g)
    assert res.type_text("out") == "f32[8@X,4]"
    assert res.collectives["matmul"] == (AllReduce("out", (AxisRef("Y"),)),)
    assert str(res.collectives["matmul"][0]) == 'AllReduce(out) over {"Y"}'
    assert "AllReduce" in res.reason("out")


def test_contracting_axis_of_one_input_may_shard_a_result_dimension():
    # the contracting axis of one side is dropped (gathered), so X is free for the result's columns
    g = _binary("matmul", [8, 16], '[{}, {"X"}]', [16, 4], '[{}, {"X"}]')
    res = explicit_shardings(g)
    assert res.type_text("out") == "f32[8,4@X]" and res.collectives["matmul"] == ()


def test_out_sharding_with_the_contracting_axes_pending_types_an_unreduced_result():
    g = _binary("matmul", [8, 16], '[{}, {"Y"}]', [16, 4], '[{"Y"}, {}]', out_sharding='[{}, {}], unreduced={"Y"}')
    assert explicit_shardings(g).type_text("out") == "f32[8,4]{unreduced:Y}"


@pytest.mark.parametrize("b_sharding, unreduced, problem", [
    (None, "Y", "needs its summed dimensions sharded alike in every input"),
    ('[{"Y"}, {}]', "X", "its summed dimensions are sharded over {Y}; the pending sums must be those axes"),
])
def test_out_sharding_with_other_pending_sums_than_the_contraction_is_an_error(b_sharding, unreduced, problem):
    g = _binary("matmul", [8, 16], '[{}, {"Y"}]', [16, 4], b_sharding,
                out_sharding=f'[{{}}, {{}}], unreduced={{"{unreduced}"}}')
    with pytest.raises(RuleError, match=re.escape(problem)):
        explicit_shardings(g)


def test_an_unreduced_result_is_read_only_by_a_constraint_that_reduces_it():
    b = GraphBuilder("g", {"X": 2, "Y": 4})
    a = b.tensor("a", [8, 16], sharding='[{}, {"Y"}]')
    w = b.param("w", [16, 4], sharding='[{"Y"}, {}]')
    b.op("matmul", [a, w], output="h", name="mm", out_sharding='[{}, {}], unreduced={"Y"}')
    b.op("sharding_constraint", ["h"], output="r", name="reduce", out_sharding='[{"X"}, {}]')
    b.op("exp", ["r"], output="e", name="exp")
    res = explicit_shardings(b.build())
    assert res.type_text("r") == "f32[8@X,4]" and res.type_text("e") == "f32[8@X,4]"
    b.op("exp", ["h"], output="bad", name="exp_h")
    with pytest.raises(RuleError, match=r"reads input 0 with pending sums over \{Y\}"):
        explicit_shardings(b.build())


def test_batch_dim_takes_the_left_inputs_sharding():
    # JAX's dot_general keeps the left operand's batch sharding (the right one's may not conflict)
    g = _binary("einsum", [2, 4, 8], None, [2, 8, 4], '[{"X"}, {}, {}]', equation="bij,bjk->bik")
    assert explicit_shardings(g).type_text("out") == "f32[2,4,4]"


def test_softmax_over_a_sharded_axis_keeps_its_sharding():
    assert explicit_shardings(_unary("softmax", [4, 8], '[{}, {"X"}]', axis=1)).type_text("out") == "f32[4,8@X]"


@pytest.mark.parametrize("keepdims, expected", [(False, "f32[4@X]"), (True, "f32[4@X,1]")])
def test_max_over_a_sharded_axis_drops_it(keepdims, expected):
    # each device takes the maximum of its block, then the blocks' maxima are reduced over Y (JAX's pmax)
    res = explicit_shardings(_unary("max", [4, 8], '[{"X"}, {"Y"}]', axes=[1], keepdims=keepdims))
    assert res.type_text("out") == expected
    assert res.collectives["max"] == (AllReduce("out", (AxisRef("Y"),), "max"),)
    assert str(res.collectives["max"][0]) == 'AllReduce(out) over {"Y"} by max'


def test_concat_along_a_sharded_axis_keeps_it_when_every_input_is_sharded_alike():
    g = _binary("concat", [4, 8], '[{}, {"X"}]', [4, 8], '[{}, {"X"}]', axis=1)
    assert explicit_shardings(g).type_text("out") == "f32[4,16@X]"
    g = _binary("concat", [4, 8], '[{}, {"X"}]', [4, 8], None, axis=0)
    with pytest.raises(RuleError, match="needs every input sharded alike"):
        explicit_shardings(g)


def test_slice_of_a_sharded_axis_keeps_it_where_its_shards_divide_the_slice():
    res = explicit_shardings(_unary("slice", [4, 8], '[{}, {"X"}]', starts=[0, 2], stops=[4, 6]))
    assert res.type_text("out") == "f32[4,4@X]"
    with pytest.raises(RuleError, match="keeps 3 of the 8 elements of dimension 1, sharded over X, and 2 shards"):
        explicit_shardings(_unary("slice", [4, 8], '[{}, {"X"}]', starts=[0, 1], stops=[4, 4]))


def test_megatron_mlp_written_explicitly_needs_an_out_sharding_on_the_row_parallel_matmul():
    def mlp(out_sharding):
        b = GraphBuilder("mlp", {"x": 2, "y": 4})
        x = b.tensor("x", [8, 16])
        w1 = b.param("w1", [16, 32], sharding='[{}, {"y"}]')
        w2 = b.param("w2", [32, 16], sharding='[{"y"}, {}]')
        h = b.op("matmul", [x, w1], output="h", name="dense1")
        r = b.op("relu", [h], output="r", name="relu")
        b.op("matmul", [r, w2], output="y", name="dense2", out_sharding=out_sharding)
        return b.build()

    with pytest.raises(RuleError, match=r"f32\[8,32@y\], f32\[32@y,16\] shards its contracting dimension over y"):
        explicit_shardings(mlp(None))
    res = explicit_shardings(mlp('[{}, {}]'))
    assert [res.type_text(t) for t in ("h", "r", "y")] == ["f32[8,32@y]", "f32[8,32@y]", "f32[8,16]"]


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
    res = _reshape([4, 1, 8], '[{"X"}, {}, {"Y"}]', [4, 8, 1])
    assert res.type_text("out") == "f32[4@X,8@Y,1]"


def test_an_input_sharded_into_unequal_shards_is_refused_as_jax_refuses_its_type():
    # 6 rows over Y (4 devices): JAX's types hold equal shards only ("does not evenly divide the dimension size")
    with pytest.raises(RuleError, match=r"input 'x' f32\[6@Y,8\]: its sharding splits dimension 0 4 ways \(over Y\), "
                                        r"which does not evenly divide the dimension size 6"):
        explicit_shardings(_unary("neg", [6, 8], '[{"Y"}, {}]'))


RESHAPE_ERROR = ("reshape operation with inputs: {} reshapes to {} in a way JAX does not type: only a split of one "
                 "dimension whose axes, major to minor, each divide the piece they fall in, or a merge of one run "
                 "of dimensions whose sharded ones are its most major, keeps a sharding")


def test_reshape_split_of_a_sharded_dim_gives_its_axes_to_the_major_pieces():
    # JAX deals whole axes to the pieces, major to minor: x (2) fills the piece of size 2
    assert _reshape([8], '[{"x"}]', [2, 4], mesh={"x": 2}).type_text("out") == "f32[2@x,4]"
    assert _reshape([8], '[{"x", "y"}]', [2, 4], mesh={"x": 2, "y": 4}).type_text("out") == "f32[2@x,4@y]"


def test_reshape_split_of_a_sharded_dim_whose_axis_does_not_divide_its_piece_is_an_error():
    # x (4) does not divide the major piece of size 2: JAX would need a sub-axis, and asks for out_sharding
    with pytest.raises(RuleError) as err:
        _reshape([8], '[{"x"}]', [2, 4], mesh={"x": 4})
    assert str(err.value) == RESHAPE_ERROR.format("f32[8@x]", "2x4") + ADVICE.format("reshape")


def test_reshape_split_of_a_sharded_dim_whose_axes_fit_the_major_piece():
    res = _reshape([8], '[{"x"}]', [4, 2], mesh={"x": 4})
    assert res.sharding("out").dims_text() == '[{"x"}, {}]'


def test_reshape_uneven_split_of_a_sharded_dim_needs_an_out_sharding():
    with pytest.raises(RuleError) as err:
        _reshape([6], '[{"X"}]', [2, 3], mesh={"X": 3})
    assert str(err.value) == RESHAPE_ERROR.format("f32[6@X]", "2x3") + ADVICE.format("reshape")


def test_reshape_merge_whose_major_dim_is_sharded_keeps_its_axes():
    assert _reshape([4, 6], '[{"X"}, {}]', [24]).type_text("out") == "f32[24@X]"
    assert _reshape([2, 4, 8], '[{}, {"X"}, {"Y"}]', [2, 32]).type_text("out") == "f32[2,32@(X,Y)]"


def test_reshape_merge_whose_minor_dim_alone_is_sharded_needs_an_out_sharding():
    with pytest.raises(RuleError, match=re.escape(RESHAPE_ERROR.format("f32[4,6@X]", "24"))):
        _reshape([4, 6], '[{}, {"X"}]', [24])


@pytest.mark.parametrize("sharding", ['[{"X"}, {}]', "[{}, {}]"])
def test_reshape_regrouping_dims_is_typed_only_when_unsharded(sharding):
    if sharding == "[{}, {}]":
        assert _reshape([2, 3], sharding, [3, 2]).type_text("out") == "f32[3,2]"
        return
    with pytest.raises(RuleError, match=re.escape(RESHAPE_ERROR.format("f32[2@X,3]", "3x2"))):
        _reshape([2, 3], sharding, [3, 2])


def test_reshape_regrouping_unsharded_dims_beside_a_sharded_one_needs_an_out_sharding():
    with pytest.raises(RuleError, match=re.escape(RESHAPE_ERROR.format("f32[2,3,8@Y]", "3x2x8"))):
        _reshape([2, 3, 8], '[{}, {}, {"Y"}]', [3, 2, 8])


# -- auto_axes regions -------------------------------------------------------------------------------------

def test_seed001_auto_axes_region_types_its_result_by_its_out_sharding():
    # seed 001: some_x + some_y inside auto_axes (every axis Auto there), out_shardings P("X", None)
    b = GraphBuilder("g", {"X": 2, "Y": 4})
    x = b.tensor("x", [4, 4], "i32", sharding='[{"X"}, {}]')
    y = b.tensor("y", [4, 4], "i32", sharding='[{}, {"X"}]')
    b.op("add", [x, y], output="z", name="add")
    b.op("neg", ["z"], output="w", name="neg")
    with pytest.raises(RuleError, match=re.escape("illegally sharded result: i32[4@X,4@X]")):
        explicit_shardings(b.build())
    b.auto_axes("g", ["X", "Y"], ["add"], {"z": '[{"X"}, {}]'})
    res = explicit_shardings(b.build())
    assert res.type_text("z") == "i32[4@X,4]" and res.type_text("w") == "i32[4@X,4]"
    assert res.reason("z").endswith("leaves auto_axes region 'g' typed by its out_shardings [{\"X\"}, {}]")


def test_inside_an_auto_axes_region_types_name_only_the_other_axes():
    # seed 001's g: axes X Auto inside, so y inside is f32[4,4@Y]; z leaves typed P("X", "Y")
    b = GraphBuilder("g", {"X": 2, "Y": 4})
    a = b.tensor("a", [4, 4], sharding='[{"X"}, {"Y"}]')
    b.op("exp", [a], output="y", name="sin")
    b.op("neg", ["y"], output="y2", name="times2")
    b.op("tanh", ["y2"], output="z", name="scale")
    b.auto_axes("g", ["X"], ["times2", "scale"], {"z": '[{"X"}, {"Y"}]'})
    res = explicit_shardings(b.build())
    assert [res.type_text(t) for t in ("y", "y2", "z")] == ["f32[4@X,4@Y]", "f32[4,4@Y]", "f32[4@X,4@Y]"]
