"""Rules of normalisations: ``softmax`` over one axis, ``layernorm`` / ``rmsnorm`` over the last.

The normalised axis is a ``STATISTIC`` factor: every element of a row enters its
statistics (max and sum, mean and variance, mean square), so with the axis sharded
each device reduces its block, small AllReduces of the statistics over the axis's
mesh axes complete them, and each device normalises its own block (as XLA's SPMD
partitioner compiles it); the other dimensions pass through. ``weight`` and
``bias`` (shape ``[H]``) map to the normalised factor.

>>> str(softmax([(4, 8)], (4, 8), {"axis": 0}))
'([i,j])->([i,j]) {i=4,j=8} statistic={i}'
>>> str(layernorm([(2, 3, 8), (8,), (8,)], (2, 3, 8), {}))
'([i,j,k],[k],[k])->([i,j,k]) {i=2,j=3,k=8} statistic={k}'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from planner.rules.builder import RuleBuilder
from planner.rules.factors import FactorKind, OpShardingRule


def _normalize_over(shape: tuple[int, ...], axis: int, n_params: int) -> OpShardingRule:
    b = RuleBuilder()
    factors = [b.factor(d, FactorKind.STATISTIC if i == axis else FactorKind.PASS_THROUGH)
               for i, d in enumerate(shape)]
    b.operand([(f,) for f in factors])
    for _ in range(n_params):
        b.operand([(factors[axis],)])
    b.result([(f,) for f in factors])
    return b.build()


def softmax(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """The softmax axis is a statistic factor."""
    shape = tuple(in_shapes[0])
    return _normalize_over(shape, attrs.get("axis", -1) % len(shape), 0)


def layernorm(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """The last axis is a statistic factor; weight and bias map to it (also used for ``rmsnorm``)."""
    shape = tuple(in_shapes[0])
    return _normalize_over(shape, len(shape) - 1, len(in_shapes) - 1)
