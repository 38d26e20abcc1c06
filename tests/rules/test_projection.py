"""Projection between tensor and factor shardings, and MindSpore strategies (seed 002)."""

import pytest

from planner.errors import RuleError
from planner.rules.factors import FactorKind, OpShardingRule
from planner.ir import AxisRef, Mesh, parse_sharding
from planner.rules import (
    RESULT,
    check_factor_axes,
    factor_axes_from_tensor,
    factor_axes_to_strategy,
    operand_shardings,
    reshape_rule,
    result_sharding,
    rule_for,
    strategy_to_factor_axes,
)

D8 = Mesh.from_sizes("mesh", {"d": 8})
XY = Mesh.from_sizes("m", {"x": 2, "y": 4})
X4 = Mesh.from_sizes("m", {"x": 4})


def _mm(n=64):
    return rule_for("matmul", [(n, n), (n, n)], (n, n))


def _text(fa):
    return [tuple(map(str, a)) for a in fa]


def test_seed002_matmul_strategy_2_1__1_4_on_eight_devices():
    rule = _mm()
    fa = strategy_to_factor_axes(rule, ((2, 1), (1, 4)), D8)
    x, w = operand_shardings(rule, fa, D8)
    assert x.dims_text() == '[{"d":(1)2}, {}]'
    assert w.dims_text() == '[{}, {"d":(2)4}]'
    assert result_sharding(rule, fa, D8).dims_text() == '[{"d":(1)2}, {"d":(2)4}]'


def test_seed002_matmul_strategy_2_4__4_1_leaves_the_result_unreduced():
    rule = _mm()
    fa = strategy_to_factor_axes(rule, ((2, 4), (4, 1)), D8)
    res = result_sharding(rule, fa, D8)
    assert res.dims_text() == '[{"d":(1)2}, {}], unreduced={"d":(2)4}'
    assert [str(a) for a in res.unreduced] == ['"d":(2)4']


def test_seed002_bias_add_strategy_2_4__4():
    rule = rule_for("add", [(64, 64), (64,)], (64, 64))
    fa = strategy_to_factor_axes(rule, ((2, 4), (4,)), D8)
    h, b = operand_shardings(rule, fa, D8)
    assert (h.dims_text(), b.dims_text()) == ('[{"d":(1)2}, {"d":(2)4}]', '[{"d":(2)4}]')


def test_strategy_with_fewer_splits_than_devices_leaves_a_minor_repeat():
    rule = _mm()
    fa = strategy_to_factor_axes(rule, ((2, 1), (1, 2)), D8)
    assert _text(fa) == [('"d":(1)2',), (), ('"d":(2)2',)]


def test_strategy_operands_disagreeing_on_a_factor_name_both():
    with pytest.raises(RuleError, match=r"disagrees on factor k .*operand 0 dimension 1 splits it 2 ways but "
                                        r"operand 1 dimension 0 splits it 4 ways"):
        strategy_to_factor_axes(_mm(), ((1, 2), (4, 1)), D8)


def test_strategy_round_trips_through_factor_axes():
    rule = _mm()
    for strategy in [((2, 1), (1, 4)), ((2, 4), (4, 1)), ((1, 8), (8, 1)), ((8, 1), (1, 1))]:
        fa = strategy_to_factor_axes(rule, strategy, D8)
        assert factor_axes_to_strategy(rule, fa, D8) == strategy


def test_strategy_sharding_a_need_replication_factor_is_refused():
    rule = OpShardingRule(factor_sizes=(8,), factor_kinds=(FactorKind.NEED_REPLICATION,), factor_names=("i",),
                          operands=(((0,),),), result=((0,),))
    with pytest.raises(RuleError, match="needs replication"):
        strategy_to_factor_axes(rule, ((2,),), D8)


def test_strategy_sharding_a_statistic_factor_is_kept():
    # the softmax axis is a statistic factor: split 2 ways it stays split (its op AllReduces its statistics)
    rule = rule_for("softmax", [(8, 8)], (8, 8))
    fa = strategy_to_factor_axes(rule, ((1, 2),), D8)
    assert factor_axes_to_strategy(rule, fa, D8) == ((1, 2),)


def test_strategy_not_dividing_the_devices_is_a_rule_error():
    with pytest.raises(RuleError, match="does not divide"):
        strategy_to_factor_axes(_mm(), ((3, 1), (1, 1)), D8)


def test_tensor_axes_split_over_reshape_factors_with_sub_axes():
    rule = reshape_rule((8,), (2, 4))
    fa = factor_axes_from_tensor(rule, 0, parse_sharding('[{"x"}]', X4))
    assert _text(fa) == [('"x":(1)2',), ('"x":(2)2',)]
    assert result_sharding(rule, fa, X4).dims_text() == '[{"x":(1)2}, {"x":(2)2}]'


def test_tensor_axes_that_fit_the_major_factor_stay_whole():
    rule = reshape_rule((8,), (4, 2))
    fa = factor_axes_from_tensor(rule, 0, parse_sharding('[{"x"}]', X4))
    assert _text(fa) == [('"x"',), ()]


def test_result_axes_project_back_onto_operand_factors():
    rule = reshape_rule((2, 4), (8,))
    fa = factor_axes_from_tensor(rule, RESULT, parse_sharding('[{"x", "y"}]', XY))
    assert _text(fa) == [('"x"',), ('"y"',)]
    assert [s.dims_text() for s in operand_shardings(rule, fa, XY)] == ['[{"x"}, {"y"}]']


def test_axes_that_cannot_split_evenly_over_factors_are_an_error():
    rule = reshape_rule((6,), (2, 3))
    with pytest.raises(RuleError, match="cannot be split evenly"):
        factor_axes_from_tensor(rule, 0, parse_sharding('[{"x"}]', X4))


def test_lone_factor_takes_axes_larger_than_it_with_padding():
    rule = rule_for("relu", [(3,)], (3,))
    fa = factor_axes_from_tensor(rule, 0, parse_sharding('[{"x"}]', X4))
    assert _text(fa) == [('"x"',)]
    with pytest.raises(RuleError, match="at most its size"):
        check_factor_axes(rule, fa, X4)


def test_minor_factor_needs_fully_sharded_major_factor():
    rule = reshape_rule((8,), (2, 4))
    with pytest.raises(RuleError, match="more-major factor i"):
        check_factor_axes(rule, ((), (AxisRef("x", 1, 2),)), X4)


def test_axis_used_by_two_factors_is_an_error():
    with pytest.raises(RuleError, match="used by factors i and j"):
        check_factor_axes(_mm(), ((AxisRef("x"),), (), (AxisRef("x"),)), XY)


def test_operand_axes_give_the_factor_sharding():
    rule = _mm()
    fa = factor_axes_from_tensor(rule, 1, parse_sharding('[{"x"}, {"y"}]', XY))
    assert _text(fa) == [(), ('"x"',), ('"y"',)]
