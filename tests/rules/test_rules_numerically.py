"""Every rule checked numerically: shard by the rule, compute per device, reassemble, compare.

Missing rules (a catalogue op with no registry entry) and wrong rules (a sharding
the rule admits that computes the wrong values) are reported by separate tests.
Shapes are mostly not divisible by the mesh, so padding is exercised, and operand
padding holds NaN / junk so a local op that forgets to mask fails.
"""

from __future__ import annotations

import pytest

from graphs.ops.registry import op_names
from planner.errors import RuleError
from planner.ir.axis import AxisRef
from planner.rules import NO_RULE, RULES, FactorKind, result_sharding
from tests.rules.sharded_run import MESHES, Case, describe, factor_shardings, run_sharded

X, Y = AxisRef("x"), AxisRef("y")

CASES = [
    # pointwise
    Case("relu", "relu", ((5, 3),), {}),
    Case("gelu", "gelu", ((5, 3),), {}),
    Case("tanh", "tanh", ((3, 5),), {}),
    Case("exp", "exp", ((5, 3),), {}),
    Case("log", "log", ((5, 3),), {}),
    Case("sigmoid", "sigmoid", ((5, 3),), {}),
    Case("neg", "neg", ((4, 3),), {}),
    Case("abs", "abs", ((4, 3),), {}),
    Case("erf", "erf", ((5, 3),), {}),
    Case("erfc", "erfc", ((3, 5),), {}),
    Case("is_finite", "is_finite", ((4, 3),), {}),
    Case("argmax", "argmax", ((4, 6),), {"axis": 1}),
    Case("argmin", "argmin", ((4, 6, 2),), {"axis": 1}),
    Case("cumsum", "cumsum", ((6, 4),), {"axis": 0}),
    Case("cumsum_reverse", "cumsum", ((4, 6),), {"axis": 1, "reverse": True}),
    Case("iota", "iota", (), {"shape": (4, 6), "dimension": 1}),
    Case("top_k", "top_k", ((5, 6),), {"k": 2}),
    Case("top_k_indices", "top_k", ((6, 5),), {"k": 3, "axis": 0, "returns": "indices"}),
    Case("expm1", "expm1", ((4, 3),), {}),
    Case("sin", "sin", ((4, 3),), {}),
    Case("cos", "cos", ((3, 4),), {}),
    Case("sign", "sign", ((4, 3),), {}),
    Case("floor", "floor", ((4, 3),), {}),
    Case("ceil", "ceil", ((3, 4),), {}),
    Case("round", "round", ((4, 3),), {}),
    Case("log1p", "log1p", ((4, 3),), {}),
    Case("pow", "pow", ((4, 6), (6,)), {}),
    Case("comparison", "comparison", ((4, 3), (3,)), {"direction": "gt"}),
    Case("select", "select", ((4, 3), (4, 3), (1, 3)), {}, ("bool", "f32", "f32")),
    Case("sqrt", "sqrt", ((5, 3),), {}),
    Case("rsqrt", "rsqrt", ((3, 5),), {}),
    Case("cast_to_int", "cast", ((5, 3),), {"dtype": "i32"}),
    Case("sharding_constraint", "sharding_constraint", ((5, 3),), {}),
    Case("propagation_barrier_int", "propagation_barrier", ((3, 5),), {"allowed_direction": "both"}, ("i32",)),
    Case("stop_gradient", "stop_gradient", ((4, 6),), {}),
    Case("add_broadcast_outer", "add", ((5, 1), (1, 6)), {}),
    Case("add_int_bias", "add", ((4, 6), (6,)), {}, ("i32", "i32")),
    Case("rem_by_row", "rem", ((4, 6), (6,)), {}),
    Case("mask_and_row_mask", "logical", ((4, 6), (6,)), {"operation": "and"}, ("bool", "bool")),
    Case("mask_not", "logical_not", ((5, 3),), {}, ("bool",)),
    Case("sub", "sub", ((3, 5), (3, 5)), {}),
    Case("mul_broadcast_middle", "mul", ((2, 3, 5), (3, 1)), {}),
    Case("div", "div", ((5, 3), (5, 3)), {}),
    Case("maximum_int", "maximum", ((6, 4), (6, 4)), {}, ("i32", "i32")),
    Case("minimum_broadcast", "minimum", ((6, 4), (4,)), {}),
    # contractions
    Case("matmul", "matmul", ((5, 6), (6, 3)), {}),
    Case("matmul_transpose_a", "matmul", ((6, 5), (6, 3)), {"transpose_a": True}),
    Case("matmul_transpose_b", "matmul", ((5, 6), (3, 6)), {"transpose_b": True}),
    Case("matmul_batched_broadcast", "matmul", ((2, 1, 5, 4), (3, 4, 2)), {}),
    Case("matmul_int", "matmul", ((4, 5), (5, 3)), {}, ("i32", "i32")),
    Case("einsum_three_operands", "einsum", ((3, 4), (4, 5), (5, 2)), {"equation": "ij,jk,kl->il"}),
    Case("einsum_batched", "einsum", ((2, 3, 4), (4, 5)), {"equation": "bsh,hf->bsf"}),
    Case("einsum_outer_and_sum", "einsum", ((3, 5), (4,)), {"equation": "ij,k->ik"}),
    # reductions
    Case("sum_axis1", "sum", ((5, 6),), {"axes": [1]}),
    Case("sum_all_keepdims", "sum", ((3, 5),), {"keepdims": True}),
    Case("sum_int", "sum", ((4, 6),), {"axes": [0]}, ("i32",)),
    Case("mean_axes_0_2", "mean", ((3, 4, 5),), {"axes": [0, 2]}),
    Case("mean_all", "mean", ((5, 3),), {}),
    Case("max_axis1", "max", ((5, 6),), {"axes": [1]}),
    Case("min_axis0_keepdims", "min", ((6, 5),), {"axes": [0], "keepdims": True}),
    # normalisations
    Case("softmax_last", "softmax", ((5, 6),), {}),
    Case("softmax_axis0", "softmax", ((5, 6),), {"axis": 0}),
    Case("layernorm_weight_bias", "layernorm", ((3, 5, 6), (6,), (6,)), {}),
    Case("rmsnorm_weight", "rmsnorm", ((5, 6), (6,)), {}),
    # shape ops
    Case("reshape_split", "reshape", ((8,),), {"shape": [2, 4]}),
    Case("reshape_merge", "reshape", ((2, 4),), {"shape": [8]}),
    Case("reshape_4x6_to_8x3", "reshape", ((4, 6),), {"shape": [8, 3]}),
    Case("reshape_2x4_to_4x2", "reshape", ((2, 4),), {"shape": [4, 2]}),
    Case("reshape_no_common_factor", "reshape", ((3, 2),), {"shape": [2, 3]}),
    Case("reshape_partly_common", "reshape", ((6, 4),), {"shape": [4, 6]}),
    Case("reshape_padded_major_dim", "reshape", ((5, 4),), {"shape": [5, 2, 2]}),
    Case("reshape_singletons", "reshape", ((1, 8, 1),), {"shape": [2, 1, 4]}),
    Case("transpose", "transpose", ((2, 3, 5),), {"perm": [2, 0, 1]}),
    Case("concat_axis1", "concat", ((3, 2), (3, 5)), {"axis": 1}),
    Case("concat_axis0", "concat", ((2, 5), (3, 5), (1, 5)), {"axis": 0}),
    Case("slice_rows", "slice", ((6, 5),), {"starts": [1, 0], "stops": [4, 5]}),
    Case("flip_columns", "flip", ((6, 8),), {"axes": [1]}),
    Case("flip_two_dims", "flip", ((4, 6, 2),), {"axes": [0, 1]}),
    Case("roll_columns", "roll", ((6, 8),), {"shift": 3, "axis": 1}),
    Case("roll_rows_back", "roll", ((4, 6, 2),), {"shift": -5, "axis": 0}),
    Case("pad_columns", "pad", ((6, 8),), {"low": [0, 2], "high": [0, 2]}),  # 12 columns of 8
    Case("shift_columns", "pad", ((6, 8),), {"low": [0, 1], "high": [0, -1]}),  # x[:, :-1] after a pad by one
    Case("pad_two_dims", "pad", ((4, 6, 2),), {"low": [1, 0, 0], "high": [1, 2, 0], "value": -1.0}),
    Case("slice_first_column", "slice", ((6, 8),), {"starts": [0, 0], "stops": [6, 1]}),  # x[:, :1]
    Case("slice_last_column", "slice", ((6, 8),), {"starts": [0, 7], "stops": [6, 8]}),  # x[:, -1:]
    Case("slice_position_and_rows", "slice", ((6, 8),), {"starts": [1, 5], "stops": [4, 6]}),
    # windows read and written at starts drawn in [-50, 50) (clamped): over split rows, over two dims, at a
    # constant start
    Case("window_rows", "dynamic_slice", ((8, 6), ()), {"sizes": [3, 6], "starts": [None, 0]}, ("f32", "i32")),
    Case("window_block", "dynamic_slice", ((6, 8, 2), (), ()), {"sizes": [2, 3, 2], "starts": [None, None, 0]},
         ("f32", "i32", "i32")),
    Case("update_rows", "dynamic_update_slice", ((8, 6), (3, 6), (), ()), {}, ("f32", "f32", "i32", "i32")),
    Case("update_block", "dynamic_update_slice", ((6, 8, 2), (2, 3, 2), (), ()), {"starts": [None, None, 0]},
         ("f32", "f32", "i32", "i32")),
    Case("update_constant_row", "dynamic_update_slice", ((8, 6), (1, 6)), {"starts": [5, 0]}),
    # gather, loss, conv
    Case("gather", "gather", ((7, 3), (5,)), {}, ("f32", "i32")),
    Case("gather_3d_table", "gather", ((9, 2, 3), (2, 3)), {}, ("f32", "i32")),
    Case("gather_columns", "gather", ((3, 8, 2), (2, 3)), {"axis": 1}, ("f32", "i32")),
    Case("sort", "sort", ((6, 8),), {"axis": 1}),
    Case("sort_payload", "sort", ((8, 6), (8, 6)), {"axis": 0, "returns": "payload"}),
    Case("take_along_axis", "take_along_axis", ((6, 7), (6, 2)), {"axis": 1}, ("f32", "i32")),
    Case("take_along_axis_0", "take_along_axis", ((5, 4, 6), (3, 4, 6)), {"axis": 0}, ("f32", "i32")),
    Case("cross_entropy", "cross_entropy", ((5, 7), (5,)), {}, ("f32", "i32")),
    Case("cross_entropy_3d", "cross_entropy", ((2, 3, 4), (2, 3)), {}, ("f32", "i32")),
    Case("conv2d", "conv2d", ((3, 3, 5, 5), (4, 3, 3, 3)), {"padding": 1, "stride": 2}),
]

_BY_NAME = {c.name: c for c in CASES}


def case(name: str) -> Case:
    return _BY_NAME[name]


# -- missing rules ------------------------------------------------------------------------

def test_every_catalogue_op_has_a_rule_or_is_listed_without_one():
    missing = [op for op in op_names() if op not in RULES and op not in NO_RULE]
    assert not missing, f"ops with no sharding rule and no NO_RULE entry: {missing}"


def test_registry_names_only_catalogue_ops_and_is_alphabetical():
    assert set(RULES) <= set(op_names())
    assert not set(RULES) & NO_RULE
    assert list(RULES) == sorted(RULES)


def test_every_op_with_a_rule_has_a_numerical_case():
    # Manual regions' ops compute per manual coordinate / per group, not on one global array: their
    # rules are checked by simulating whole regions (tests/simulation/test_manual_regions.py).
    from graphs.ops.collectives import BOUNDARY_OPS, COLLECTIVE_OPS

    assert set(RULES) - set(COLLECTIVE_OPS) - set(BOUNDARY_OPS) <= {c.op for c in CASES}


# -- wrong rules ------------------------------------------------------------------------------

@pytest.mark.parametrize("mesh_name", list(MESHES))
@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_sharded_op_matches_reference(c: Case, mesh_name: str):
    mesh = MESHES[mesh_name]
    rule = c.rule()
    wrong = []
    for fa in factor_shardings(rule, mesh):
        run = run_sharded(c, fa, mesh)
        problems = run.mismatches()
        if problems:
            wrong.append(f"{describe(rule, fa, mesh)}: {problems[0]}")
        elif run.sharding.unreduced and not run.partials_differ():
            wrong.append(f"{describe(rule, fa, mesh)}: every device of a partial-sum group holds the same block")
    assert not wrong, f"wrong rule {rule} for {c.name}:\n" + "\n".join(wrong)


#: Cases whose rule admits no sharding at all (every factor needs replication).
UNSHARDABLE = {"reshape_no_common_factor"}


def test_every_case_is_checked_under_some_sharding():
    checked = {c.name for c in CASES if any(factor_shardings(c.rule(), m) for m in MESHES.values())}
    assert checked == {c.name for c in CASES} - UNSHARDABLE


#: Factors the test meshes are too small for: k (size 3) of 4x6 -> 8x3 sits below i (4) and j (2),
#: which must be fully sharded first, so it needs 24 devices. reshape_2x4_to_4x2 covers the pattern.
TOO_BIG = {("reshape_4x6_to_8x3", "k")}


def test_every_shardable_factor_is_tried():
    """Every factor that is not need-replication, statistic or permutation and larger than 1 is sharded on some
    mesh (the other two communicate when sharded: tests/simulation/test_statistics.py, test_permutation.py)."""
    for c in CASES:
        rule = c.rule()
        tried = {f for m in MESHES.values() for fa in factor_shardings(rule, m) for f, a in enumerate(fa) if a}
        shardable = {f for f in range(rule.num_factors)
                     if rule.factor_kinds[f] not in (FactorKind.NEED_REPLICATION, FactorKind.STATISTIC,
                                                     FactorKind.PERMUTATION)
                     and rule.factor_sizes[f] > 1
                     and (c.name, rule.factor_names[f]) not in TOO_BIG}
        assert shardable <= tried, f"{c.name}: factors {shardable - tried} are never sharded"


# -- behaviour, one sharding each --------------------------------------------------------------

def _factor_axes(c: Case, /, **by_name):
    rule = c.rule()
    return tuple(tuple(by_name.get(n, ())) for n in rule.factor_names)


def _run(c: Case, mesh_name: str, /, **by_name):
    mesh = MESHES[mesh_name]
    run = run_sharded(c, _factor_axes(c, **by_name), mesh)
    assert not run.mismatches(), run.mismatches()
    return run


def test_matmul_contracting_dim_sharded_gives_partial_sum():
    run = _run(case("matmul"), "x2", k=[X])  # k = 6 split 3 + 3
    assert run.sharding.unreduced == (X,)
    assert run.partials_differ()


def test_matmul_contracting_dim_split_unevenly_still_sums_right():
    run = _run(case("matmul"), "x4", k=[X])  # k = 6 split 2 + 2 + 2 + 0 (padding)
    assert run.sharding.unreduced == (X,) and run.partials_differ()


def test_matmul_rows_and_columns_sharded_need_no_reduction():
    run = _run(case("matmul"), "x2y2", i=[X], j=[Y])
    assert run.sharding.dims_text() == '[{"x"}, {"y"}]'


def test_matmul_transpose_b_shards_the_weight_rows_for_output_columns():
    c = case("matmul_transpose_b")
    rule = c.rule()
    fa = _factor_axes(c, j=[X])
    run = _run(c, "x2", j=[X])
    assert run.sharding.dims_text() == '[{}, {"x"}]'
    from planner.rules import operand_shardings
    assert operand_shardings(rule, fa, MESHES["x2"])[1].dims_text() == '[{"x"}, {}]'


def test_three_operand_einsum_with_two_sharded_contractions_is_unreduced_on_both():
    run = _run(case("einsum_three_operands"), "x2y2", j=[X], k=[Y])
    assert run.sharding.unreduced == (X, Y) and run.partials_differ()


def test_two_axes_on_one_contracting_factor():
    run = _run(case("einsum_batched"), "x2y2", h=[X, Y])
    assert run.sharding.unreduced == (X, Y)


def test_broadcast_operand_is_replicated_along_the_stretched_dim():
    c = case("add_broadcast_outer")
    from planner.rules import operand_shardings
    fa = _factor_axes(c, i=[X], j=[Y])
    a, b = operand_shardings(c.rule(), fa, MESHES["x2y2"])
    assert (a.dims_text(), b.dims_text()) == ('[{"x"}, {}]', '[{}, {"y"}]')
    _run(c, "x2y2", i=[X], j=[Y])


def test_sum_over_sharded_dim_gives_partial_sum():
    run = _run(case("sum_axis1"), "x2", j=[X])
    assert run.sharding.unreduced == (X,) and run.partials_differ()


def test_mean_over_sharded_dims_divides_by_the_global_count():
    run = _run(case("mean_axes_0_2"), "x2y2", i=[X], k=[Y])
    assert run.sharding.unreduced == (X, Y) and run.partials_differ()


def test_max_over_sharded_dim_gives_a_pending_maximum():
    # the run combines each group's blocks with np.maximum (sharded_run): local maxima, then the AllReduce's max
    rule = case("max_axis1").rule()
    assert rule.factor_kinds[1] is FactorKind.REDUCTION and rule.reduction == "max" and rule.admits(1, 2)
    run = _run(case("max_axis1"), "x2", j=[X])
    assert run.sharding.unreduced == (X,) and run.sharding.reduction == "max" and run.partials_differ()
    run = _run(case("max_axis1"), "x4", j=[X])  # j = 6 split 2 + 2 + 2 + 0: the last block is all padding
    assert run.sharding.dims_text() == '[{}], unreduced=max{"x"}'


def test_min_over_sharded_dim_gives_a_pending_minimum():
    # local minima (padding masked by min's identity, +inf), then the AllReduce's np.minimum (sharded_run)
    rule = case("min_axis0_keepdims").rule()
    assert rule.factor_kinds[0] is FactorKind.REDUCTION and rule.reduction == "min"
    run = _run(case("min_axis0_keepdims"), "x4", i=[X])  # i = 6 split 2 + 2 + 2 + 0
    assert run.sharding.dims_text() == '[{}, {}], unreduced=min{"x"}' and run.partials_differ()


def test_softmax_and_norm_axes_are_statistic_factors():
    for name, f in (("softmax_last", 1), ("softmax_axis0", 0), ("layernorm_weight_bias", 2), ("rmsnorm_weight", 1)):
        rule = case(name).rule()
        assert rule.factor_kinds[f] is FactorKind.STATISTIC, name


def test_layernorm_rows_sharded_keep_whole_weights():
    _run(case("layernorm_weight_bias"), "x2y2", i=[X], j=[Y])


def test_reshape_split_makes_sub_axes():
    # seed 000: tensor<8> [{"x"}] on x=4 reshaped to 2x4 -> [{"x":(1)2}, {"x":(2)2}]
    c = case("reshape_split")
    run = _run(c, "x4", i=[AxisRef("x", 1, 2)], j=[AxisRef("x", 2, 2)])
    assert run.sharding.dims_text() == '[{"x":(1)2}, {"x":(2)2}]'


def test_reshape_merge_of_sharded_dims_keeps_the_layout():
    run = _run(case("reshape_merge"), "x2y2", i=[X], j=[Y])
    assert run.sharding.dims_text() == '[{"x", "y"}]'


def test_reshape_common_piece_of_two_dims_is_shardable():
    run = _run(case("reshape_4x6_to_8x3"), "x2y2", i=[X, Y])  # i = 4 on x, y
    assert run.sharding.dims_text() == '[{"x", "y"}, {}]'


def test_reshape_minor_piece_sharded_below_fully_sharded_major_pieces():
    run = _run(case("reshape_2x4_to_4x2"), "x2y2z2", i=[X], j=[Y], k=[AxisRef("z")])
    assert run.sharding.dims_text() == '[{"x", "y"}, {"z"}]'


def test_reshape_padded_lone_factor_shards_unevenly():
    run = _run(case("reshape_padded_major_dim"), "x2", i=[X])  # 5 rows split 3 + 2
    assert run.sharding.dims_text() == '[{"x"}, {}, {}]'


def test_gather_vocab_sharded_gives_partial_sum():
    run = _run(case("gather"), "x2", v=[X])  # vocabulary 7 split 4 + 3
    assert run.sharding.unreduced == (X,) and run.partials_differ()


def test_gather_vocab_and_indices_sharded_together():
    run = _run(case("gather_3d_table"), "x2y2", v=[X], i=[Y])
    assert run.sharding.unreduced == (X,)


def test_cross_entropy_batch_sharded_gives_partial_mean():
    run = _run(case("cross_entropy_3d"), "x2y2", i=[X], j=[Y])
    assert run.sharding.unreduced == (X, Y) and run.partials_differ()


def test_cross_entropy_class_dim_needs_replication():
    rule = case("cross_entropy").rule()
    v = rule.factor_names.index("v")
    assert not rule.admits(v, 2)


def test_conv2d_input_channels_sharded_gives_partial_sum():
    run = _run(case("conv2d"), "x2y2", c=[X], o=[Y])
    assert run.sharding.unreduced == (X,) and run.sharding.dims_text() == '[{}, {"y"}, {}, {}], unreduced={"x"}'


def test_slice_and_concat_run_locally_only_on_untouched_dims():
    _run(case("slice_rows"), "x2", j=[X])
    _run(case("concat_axis1"), "x2", i=[X])
    # the cut (concatenated) dimension is a permutation factor: sharded, the op exchanges blocks first
    # (planner/simulation/permutation.py), and a local instance alone refuses it
    rule = case("slice_rows").rule()
    assert [rule.factor_kinds[f] for (f,) in rule.operands[0]] == [FactorKind.PERMUTATION, FactorKind.PASS_THROUGH]
    even = Case("slice_even", "slice", ((6, 4),), {"starts": [2, 0], "stops": [4, 4]})  # 6 and 2 rows split 2 ways
    with pytest.raises(RuleError, match="permutation factor .* runs as planner.simulation.permutation"):
        run_sharded(even, _factor_axes(even, i=[X]), MESHES["x2"])


def test_result_sharding_lists_unreduced_axes_in_mesh_order():
    c = case("einsum_three_operands")
    fa = _factor_axes(c, j=[Y], k=[X])
    assert result_sharding(c.rule(), fa, MESHES["x2y2"]).unreduced == (X, Y)
