"""Local op instances: masking of padding, global counts, vocabulary offsets, reshape shapes, refusals."""

import numpy as np
import pytest

from graphs.ops.registry import get_op
from planner.errors import RuleError
from planner.ir import AxisRef, Mesh, parse_sharding
from planner.rules import operand_shardings, result_sharding, rule_for
from planner.simulation.local_ops import LocalBlock, LocalContext, local_compute, valid_mask, zero_padding

X2 = Mesh.from_sizes("m", {"x": 2})
X4 = Mesh.from_sizes("m", {"x": 4})


def _ctx(shardings, shapes, res, out_shape, device):
    return LocalContext.for_device(shardings, shapes, res, out_shape, device)


def test_valid_mask_marks_the_padding_of_the_last_block():
    block = LocalBlock.of(parse_sharding('[{"x"}, {}]', X2), (5, 2), device=1)
    assert block.ranges == ((3, 5), (0, 2)) and block.local_shape == (3, 2)
    assert valid_mask(block).tolist() == [[True, True], [True, True], [False, False]]


def test_zero_padding_clears_nan_padding():
    block = LocalBlock((3,), ((2, 3),), (2,))
    assert zero_padding(np.array([7.0, np.nan]), block).tolist() == [7.0, 0.0]


def test_padding_never_leaks_into_a_contraction():
    rule = rule_for("matmul", [(2, 3), (3, 2)], (2, 2))
    fa = ((), (AxisRef("x"),), ())
    ins, res = operand_shardings(rule, fa, X2), result_sharding(rule, fa, X2)
    ctx = _ctx(ins, [(2, 3), (3, 2)], res, (2, 2), device=1)  # holds k in [2, 3), padded to 2
    a = np.array([[5.0, np.nan], [1.0, np.inf]])
    b = np.array([[1.0, 2.0], [np.nan, np.nan]])
    assert local_compute("matmul", rule, [a, b], ctx).tolist() == [[5.0, 10.0], [1.0, 2.0]]


def test_mean_partial_divides_by_the_global_count():
    rule = rule_for("mean", [(6,)], (), {})
    s = parse_sharding('[{"x"}]', X2)
    res = result_sharding(rule, ((AxisRef("x"),),), X2)
    x = np.arange(6.0)
    parts = [local_compute(("mean", {}), rule, [x[3 * d:3 * d + 3]], _ctx([s], [(6,)], res, (), d))
             for d in range(2)]
    assert [float(p) for p in parts] == [0.5, 2.0] and float(sum(parts)) == x.mean()


def test_gather_looks_up_only_the_devices_vocabulary_rows():
    rule = rule_for("gather", [(5, 2), (3,)], (3, 2))
    table = parse_sharding('[{"x"}, {}]', X2)  # rows [0, 3) and [3, 5)
    idx = parse_sharding('[{}]', X2)
    res = parse_sharding('[{}, {}], unreduced={"x"}', X2)
    t = np.arange(10.0).reshape(5, 2)
    indices = np.array([4, 0, 3])
    out1 = local_compute("gather", rule, [np.vstack([t[3:], [[np.nan, np.nan]]]), indices],
                         _ctx([table, idx], [(5, 2), (3,)], res, (3, 2), 1))
    assert out1.tolist() == [[8.0, 9.0], [0.0, 0.0], [6.0, 7.0]]


def test_cross_entropy_with_sharded_labels_is_a_partial_mean():
    rule = rule_for("cross_entropy", [(3, 4), (3,)], ())
    logits = parse_sharding('[{"x"}, {}]', X2)
    labels = parse_sharding('[{"x"}]', X2)
    res = parse_sharding('[], unreduced={"x"}', X2)
    rng = np.random.default_rng(0)
    lg, lb = rng.standard_normal((3, 4)), np.array([1, 3, 0])
    full = get_op("cross_entropy").reference([lg, lb], {})
    parts = []
    for d, rows in enumerate([slice(0, 2), slice(2, 3)]):
        lgd = np.full((2, 4), np.nan)
        lgd[: rows.stop - rows.start] = lg[rows]
        lbd = np.full((2,), 99)
        lbd[: rows.stop - rows.start] = lb[rows]
        parts.append(local_compute("cross_entropy", rule, [lgd, lbd],
                                   _ctx([logits, labels], [(3, 4), (3,)], res, (), d)))
    assert np.isclose(sum(parts), full) and not np.isclose(parts[0], full)


def test_reshape_uses_the_local_shape_the_rule_implies():
    rule = rule_for("reshape", [(8,)], (2, 4), {"shape": [2, 4]})
    src = parse_sharding('[{"x"}]', X4)
    dst = parse_sharding('[{"x":(1)2}, {"x":(2)2}]', X4)
    out = local_compute(("reshape", {"shape": [2, 4]}), rule, [np.array([4.0, 5.0])],
                        _ctx([src], [(8,)], dst, (2, 4), 2))
    assert out.tolist() == [[4.0, 5.0]]


def test_sharded_statistic_dim_is_refused_locally():
    # a sharded softmax axis needs its statistics AllReduced: no device can compute its block alone
    rule = rule_for("softmax", [(4, 4)], (4, 4))
    s = parse_sharding('[{}, {"x"}]', X2)
    with pytest.raises(RuleError, match="factor j .* is a statistic factor"):
        local_compute("softmax", rule, [np.zeros((4, 2))], _ctx([s], [(4, 4)], s, (4, 4), 0))


def test_slice_of_an_unsharded_dim_keeps_the_sharded_one_local():
    rule = rule_for("slice", [(4, 6)], (4, 3), {"starts": [0, 1], "stops": [4, 4]})
    s_in = parse_sharding('[{"x"}, {}]', X2)
    s_out = parse_sharding('[{"x"}, {}]', X2)
    x = np.arange(24.0).reshape(4, 6)
    out = local_compute(("slice", {"starts": [0, 1], "stops": [4, 4]}), rule, [x[2:]],
                        _ctx([s_in], [(4, 6)], s_out, (4, 3), 1))
    assert out.tolist() == x[2:, 1:4].tolist()


def test_local_result_shape_must_match_the_result_sharding():
    rule = rule_for("relu", [(4,)], (4,))
    s = parse_sharding('[{"x"}]', X2)
    wrong = parse_sharding('[{}]', X2)
    with pytest.raises(RuleError, match="local result has shape"):
        local_compute("relu", rule, [np.zeros(2)], _ctx([s], [(4,)], wrong, (4,), 0))


@pytest.mark.parametrize("name", ["sharding_constraint", "propagation_barrier"])
def test_annotation_ops_pass_a_padded_block_through_forward_and_backward(name):
    from planner.simulation.local_vjp import local_vjp

    rule = rule_for(name, [(5, 2)], (5, 2))
    s = parse_sharding('[{"x"}, {}]', X2)
    ctx = _ctx([s], [(5, 2)], s, (5, 2), device=1)  # holds rows [3, 5), padded to 3
    block = np.array([[1.0, 2.0], [3.0, 4.0], [np.nan, np.nan]])
    # forward: the valid rows unchanged (padding zeroed, as for every op)
    assert local_compute(name, rule, [block], ctx).tolist() == [[1.0, 2.0], [3.0, 4.0], [0.0, 0.0]]
    # backward: the cotangent block itself, padding zeroed, fresh
    cot = np.array([[0.5, -1.0], [2.0, 0.0], [np.inf, 7.0]])
    (g,) = local_vjp(name, rule, [None], None, cot, ctx, (0,))
    assert g.tolist() == [[0.5, -1.0], [2.0, 0.0], [0.0, 0.0]] and not np.shares_memory(g, cot)


def test_max_over_a_sharded_dim_ignores_padding_even_below_zero():
    # x = 6 negative numbers per row split 4 ways: blocks of 2, the last one all padding. A zero in the padding
    # would beat every element; the local max must see only real elements (-inf where a block has none), so
    # that the maximum of the four local maxima is the row's maximum.
    rule = rule_for("max", [(2, 6)], (2,), {"axes": [1]})
    fa = ((), (AxisRef("x"),))
    ins, res = operand_shardings(rule, fa, X4), result_sharding(rule, fa, X4)
    assert res.dims_text() == '[{}], unreduced=max{"x"}'
    x = -1.0 - np.arange(12.0).reshape(2, 6)
    blocks = []
    for d in range(4):
        ctx = _ctx(ins, [(2, 6)], res, (2,), device=d)
        lo, hi = ctx.operands[0].ranges[1]
        block = np.full((2, 2), np.nan)
        block[:, : hi - lo] = x[:, lo:hi]
        blocks.append(local_compute(("max", {"axes": [1]}), rule, [block], ctx))
    assert blocks[3].tolist() == [-np.inf, -np.inf]
    assert np.maximum.reduce(blocks).tolist() == np.max(x, axis=1).tolist() == [-1.0, -7.0]
