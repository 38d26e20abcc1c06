"""Operator sharding rules: factor mappings, their registry and projections.

- :mod:`planner.rules.factors`: :class:`FactorKind`, :class:`OpShardingRule`.
- :mod:`planner.rules.builder`: einsum specs, broadcasting, reductions, reshapes.
- one module per op family (pointwise, matmul, reductions, normalization,
  shape_ops, gather, loss, conv), registered in :mod:`planner.rules.registry`.
- :mod:`planner.rules.projection`: tensor shardings <-> factor shardings, strategies.

>>> str(rule_for("reshape", [(8,)], (2, 4), {"shape": [2, 4]}))
'([ij])->([i,j]) {i=2,j=4}'
"""

from planner.rules.builder import RuleBuilder, elementwise_rule, reduction_rule, reshape_rule, rule_from_einsum
from planner.rules.factors import RESULT, FactorKind, OpShardingRule
from planner.rules.projection import (
    FactorAxes,
    check_factor_axes,
    factor_axes_from_tensor,
    factor_axes_to_strategy,
    operand_shardings,
    result_sharding,
    strategy_to_factor_axes,
    unsharded,
)
from planner.rules.registry import NO_RULE, RULES, no_rule_error, rule_for

__all__ = [
    "FactorAxes",
    "FactorKind",
    "NO_RULE",
    "OpShardingRule",
    "RESULT",
    "RULES",
    "RuleBuilder",
    "check_factor_axes",
    "elementwise_rule",
    "factor_axes_from_tensor",
    "factor_axes_to_strategy",
    "no_rule_error",
    "operand_shardings",
    "reduction_rule",
    "reshape_rule",
    "result_sharding",
    "rule_for",
    "rule_from_einsum",
    "strategy_to_factor_axes",
    "unsharded",
]
