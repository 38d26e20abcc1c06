"""Rules of elementwise ops: unary (relu, gelu, tanh, exp, sigmoid, neg, cast) and binary with broadcasting.

The identities of :mod:`graphs.ops.annotation` (``sharding_constraint``,
``propagation_barrier``) use the same pass-through rule: the result is its operand.

Every result dimension is a pass-through factor; an operand dimension of size 1
that numpy stretches maps to ``()`` (it is replicated along that factor's axes).

>>> str(elementwise([(64, 64), (64,)], (64, 64), {}))
'([i,j],[j])->([i,j]) {i=64,j=64}'
>>> str(elementwise([(4, 8)], (4, 8), {"dtype": "i32"}))
'([i,j])->([i,j]) {i=4,j=8}'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from planner.rules.builder import elementwise_rule
from planner.rules.factors import OpShardingRule


def elementwise(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...],
                attrs: Mapping[str, Any]) -> OpShardingRule:
    """One pass-through factor per result dimension, numpy broadcasting for the operands."""
    return elementwise_rule(in_shapes, out_shape)
