"""OpShardingRule: validation, shapes, admits() and the divisibility requirement."""

import pytest

from planner.errors import RuleError
from planner.rules import RESULT, FactorKind, OpShardingRule, reshape_rule, rule_for

P, R, N = FactorKind.PASS_THROUGH, FactorKind.REDUCTION, FactorKind.NEED_REPLICATION


def test_rule_fixes_every_tensor_shape():
    rule = rule_for("add", [(4, 1), (1, 8)], (4, 8))
    assert rule.tensor_shape(0) == (4, 1) and rule.tensor_shape(1) == (1, 8)
    assert rule.tensor_shape(RESULT) == (4, 8)


def test_lone_factor_tolerates_padding_up_to_its_size():
    rule = rule_for("matmul", [(5, 6), (6, 3)], (5, 3))
    assert not any(rule.needs_divisible)
    assert rule.admits(0, 2) and rule.admits(0, 4) and rule.admits(0, 5)
    assert not rule.admits(2, 4)  # j = 3 cannot be split 4 ways


def test_factor_sharing_a_dimension_needs_divisible_axes():
    rule = reshape_rule((4, 6), (8, 3))  # i=4, j=2, k=3; j and k share input dim 1, i and j output dim 0
    assert rule.needs_divisible == (True, True, True)
    assert rule.admits(0, 2) and rule.admits(0, 4) and not rule.admits(0, 3)
    assert not rule.admits(2, 2)


def test_reshape_lone_factor_is_not_forced_divisible():
    rule = reshape_rule((5, 4), (5, 2, 2))
    assert rule.needs_divisible == (False, True, True)
    assert rule.admits(0, 2)


def test_need_replication_and_size_one_factors_admit_nothing():
    K = FactorKind
    rule = OpShardingRule(factor_sizes=(4,), factor_kinds=(K.NEED_REPLICATION,), factor_names=("i",),
                          operands=(((0,),),), result=((0,),))
    assert not rule.admits(0, 2)
    rule = rule_for("softmax", [(4, 1)], (4, 1), {"axis": 0})
    assert not rule.admits(1, 2)  # size 1
    assert rule.admits(0, 1) and rule.admits(1, 1)  # no axes always fit


def test_a_minor_most_pass_through_factor_admits_padding_past_its_size_only_when_asked():
    # propagation's op shardings: a slice's one position ([8, 1, 32]) split over 4 devices stays split through the
    # ops that read it, computed on padded blocks; the enumerated strategies keep to admits()
    rule = rule_for("tanh", [(8, 1, 32)], (8, 1, 32))
    assert not rule.admits(1, 4) and rule.admits_padded(1, 4)
    dot = rule_for("matmul", [(8, 3), (3, 16)], (8, 16))
    assert dot.factor_kinds[1] is FactorKind.REDUCTION and not dot.admits_padded(1, 4)  # padding would enter a sum
    assert rule_for("matmul", [(1, 3), (3, 16)], (1, 16)).admits_padded(0, 2)  # the rows, past their size
    reshaped = reshape_rule((2, 6), (12,))  # i=2, j=6 share the result's dimension, i the more major
    assert not reshaped.admits_padded(0, 4)  # only the minor-most factor of a dimension pads at its end
    assert not rule_for("softmax", [(4, 1)], (4, 1), {"axis": 0}).admits_padded(0, 8)  # a statistic never pads


def test_statistic_factors_admit_only_dividing_axes():
    # padding would enter a statistic (a padded element of a row changes its max, sum and mean)
    rule = rule_for("softmax", [(6, 3)], (6, 3), {"axis": 0})
    assert rule.admits(0, 2) and rule.admits(0, 3) and rule.admits(0, 6)
    assert not rule.admits(0, 4)
    assert str(rule) == "([i,j])->([i,j]) {i=6,j=3} statistic={i}"


def test_reduction_factor_may_not_appear_in_the_result():
    with pytest.raises(RuleError, match="reduction factor k may not appear in the result"):
        OpShardingRule((2, 3), (P, R), ("i", "k"), (((0,), (1,)),), ((0,), (1,)))


def test_pass_through_factor_must_appear_in_the_result():
    with pytest.raises(RuleError, match="pass-through factor k must appear in the result"):
        OpShardingRule((2, 3), (P, P), ("i", "k"), (((0,), (1,)),), ((0,),))


def test_need_replication_factor_may_appear_in_the_result():
    rule = OpShardingRule((2, 3), (P, N), ("i", "k"), (((0,), (1,)),), ((0,), (1,)))
    assert str(rule) == "([i,k])->([i,k]) {i=2,k=3} need_replication={k}"


def test_unknown_factor_index_is_an_error():
    with pytest.raises(RuleError, match="out of range"):
        OpShardingRule((2,), (P,), ("i",), (((0,), (1,)),), ((0,),))
