"""The rule registry: rule_for on op names and OpSpecs, attribute defaults, errors."""

import pytest

from graphs.specs import OpSpec
from planner.errors import RuleError
from planner.rules import NO_RULE, no_rule_error, rule_for


def test_rule_for_accepts_an_opspec_and_uses_its_attributes():
    op = OpSpec("mm", "matmul", ["a", "b"], "c", {"transpose_b": True})
    assert str(rule_for(op, [(8, 4), (6, 4)], (8, 6))) == "([i,k],[j,k])->([i,j]) {i=8,j=6,k=4} reduction={k}"


def test_rule_for_canonicalises_raw_attributes():
    a = rule_for("sum", [(4, 8)], (4,), {"axes": [-1]})
    b = rule_for("sum", [(4, 8)], (4,), {"axes": (1,), "keepdims": False})
    assert a == b


def test_rule_for_is_cached():
    assert rule_for("relu", [(4, 8)], (4, 8)) is rule_for("relu", [[4, 8]], [4, 8])


def test_rule_for_checks_the_result_shape():
    with pytest.raises(RuleError, match="gives the result the shape"):
        rule_for("matmul", [(8, 4), (4, 6)], (8, 5))


def test_unknown_op_is_a_rule_error():
    with pytest.raises(RuleError, match="unknown op 'matmull'"):
        rule_for("matmull", [(2, 2), (2, 2)], (2, 2))


def test_no_rule_sentence_is_one_greppable_message():
    assert not NO_RULE
    assert str(no_rule_error("sort")) == "op 'sort' has no sharding rule; it can only run replicated"


def test_an_op_naming_a_rule_that_is_no_function_of_planner_rules_is_an_internal_error():
    from dataclasses import replace

    from graphs.ops.registry import get_op
    from planner.errors import InternalError
    from planner.rules.registry import _named_rule

    assert _named_rule(get_op("softmax")).__qualname__ == "softmax"
    with pytest.raises(InternalError, match=r"op 'relu' names the sharding rule 'pointwise.elementwsie', which is no "
                                            r"function of planner.rules \(rule modules: conv, gather, "):
        _named_rule(replace(get_op("relu"), rule="pointwise.elementwsie"))
