"""Rule builders: einsum specs with broadcasting, elementwise, reductions, reshape factorisation."""

import pytest

from planner.errors import RuleError
from planner.rules import FactorKind, elementwise_rule, reduction_rule, reshape_rule, rule_from_einsum


def test_einsum_letters_missing_from_output_are_reductions():
    rule = rule_from_einsum("ij,jk->ik", [(2, 3), (3, 4)])
    assert rule.factor_names == ("i", "j", "k")
    assert rule.factor_kinds == (FactorKind.PASS_THROUGH, FactorKind.REDUCTION, FactorKind.PASS_THROUGH)


def test_einsum_need_replication_letters():
    rule = rule_from_einsum("ij->ij", [(2, 3)], need_replication="j")
    assert rule.factor_kinds[1] is FactorKind.NEED_REPLICATION


def test_einsum_size_one_letter_broadcasts():
    rule = rule_from_einsum("bij,bjk->bik", [(1, 2, 3), (4, 3, 5)])
    assert rule.operands[0][0] == () and rule.operands[1][0] == (0,)
    assert rule.factor_sizes[0] == 4


def test_einsum_size_mismatch_is_an_error():
    with pytest.raises(RuleError, match="letter 'j'"):
        rule_from_einsum("ij,jk->ik", [(2, 3), (4, 5)])


def test_elementwise_maps_stretched_dims_to_nothing():
    rule = elementwise_rule([(3, 1, 8), (4, 1)], (3, 4, 8))
    assert rule.operands == (((0,), (), (2,)), ((1,), ()))


def test_reduction_keepdims_maps_reduced_result_dims_to_nothing():
    rule = reduction_rule((4, 8), [1], True, FactorKind.REDUCTION)
    assert rule.result == ((0,), ())


@pytest.mark.parametrize("src, dst, ins, outs, sizes", [
    ((8,), (2, 4), ((0, 1),), ((0,), (1,)), (2, 4)),
    ((2, 4), (8,), ((0,), (1,)), ((0, 1),), (2, 4)),
    ((4, 6), (8, 3), ((0,), (1, 2)), ((0, 1), (2,)), (4, 2, 3)),
    ((6,), (6,), ((0,),), ((0,),), (6,)),
    ((2, 3, 4), (6, 4), ((0,), (1,), (2,)), ((0, 1), (2,)), (2, 3, 4)),
    ((12,), (2, 2, 3), ((0, 1, 2),), ((0,), (1,), (2,)), (2, 2, 3)),
])
def test_reshape_factors_are_the_common_pieces(src, dst, ins, outs, sizes):
    rule = reshape_rule(src, dst)
    assert rule.operands == (ins,) and rule.result == outs and rule.factor_sizes == sizes
    assert set(rule.factor_kinds) == {FactorKind.PASS_THROUGH}


def test_reshape_run_without_common_piece_needs_replication_then_resumes():
    rule = reshape_rule((2, 3, 4), (3, 2, 4))
    assert rule.operands[0][2] == rule.result[2]  # the trailing 4 is shared
    assert rule.factor_kinds[rule.operands[0][2][0]] is FactorKind.PASS_THROUGH
    assert [rule.factor_kinds[f] for (f,) in rule.operands[0][:2]] == [FactorKind.NEED_REPLICATION] * 2


def test_reshape_keeps_common_major_piece_before_a_mismatch():
    rule = reshape_rule((6, 4), (4, 6))  # flat // 12 is common: a piece of size 2
    assert rule.factor_sizes[0] == 2 and rule.factor_kinds[0] is FactorKind.PASS_THROUGH
    assert rule.operands[0][0][0] == rule.result[0][0] == 0


def test_reshape_changing_the_element_count_is_an_error():
    with pytest.raises(RuleError, match="changes the number of elements"):
        reshape_rule((4,), (5,))
