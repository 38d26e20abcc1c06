"""Rules of normalisations: ``softmax`` over one axis, ``layernorm`` / ``rmsnorm`` over the last.

The normalised axis is a ``NEED_REPLICATION`` factor (every element of a row is
needed to normalise it); the other dimensions pass through. ``weight`` and
``bias`` (shape ``[H]``) map to the normalised factor.

>>> str(softmax([(4, 8)], (4, 8), {"axis": 0}))
'([i,j])->([i,j]) {i=4,j=8} need_replication={i}'
>>> str(layernorm([(2, 3, 8), (8,), (8,)], (2, 3, 8), {}))
'([i,j,k],[k],[k])->([i,j,k]) {i=2,j=3,k=8} need_replication={k}'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from planner.rules.builder import RuleBuilder
from planner.rules.factors import FactorKind, OpShardingRule


def _normalize_over(shape: tuple[int, ...], axis: int, n_params: int) -> OpShardingRule:
    b = RuleBuilder()
    factors = [b.factor(d, FactorKind.NEED_REPLICATION if i == axis else FactorKind.PASS_THROUGH)
               for i, d in enumerate(shape)]
    b.operand([(f,) for f in factors])
    for _ in range(n_params):
        b.operand([(factors[axis],)])
    b.result([(f,) for f in factors])
    return b.build()


def softmax(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """The softmax axis needs replication."""
    shape = tuple(in_shapes[0])
    return _normalize_over(shape, attrs.get("axis", -1) % len(shape), 0)


def layernorm(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """The last axis needs replication; weight and bias map to it (also used for ``rmsnorm``)."""
    shape = tuple(in_shapes[0])
    return _normalize_over(shape, len(shape) - 1, len(in_shapes) - 1)
