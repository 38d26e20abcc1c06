"""Rules of ``gather`` (embedding lookup): ``table [V, H...]``, ``indices [I...]`` -> ``[I..., H...]``, and of
``take_along_axis``.

The vocabulary ``V`` is a ``REDUCTION`` factor: a device holding rows ``[v0, v1)``
looks up the indices that fall there and contributes zeros for the others, so
the result is a pending sum over ``V``'s axes (vocabulary-parallel embedding).
``H...`` and the index dimensions pass through.

>>> str(gather([(100, 16), (4, 8)], (4, 8, 16), {}))
'([v,h],[i,j])->([i,j,h]) {h=16,i=4,j=8,v=100} reduction={v}'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from planner.rules.builder import RuleBuilder
from planner.rules.factors import FactorKind, OpShardingRule


def gather(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """``V`` (the table's ``axis``) reduction, the table's other dims and the index dims pass-through.

    >>> str(gather([(16, 32), (8,)], (16, 8), {"axis": 1}))
    '([i,v],[j])->([i,j]) {i=16,j=8,v=32} reduction={v}'
    """
    table, indices = in_shapes
    axis = attrs.get("axis", 0)
    b = RuleBuilder()
    before = [b.factor(d) for d in table[:axis]]
    v = b.factor(table[axis], FactorKind.REDUCTION, name="v")
    after = [b.factor(d, name="h" if len(table) == 2 and axis == 0 else None) for d in table[axis + 1:]]
    idx = [b.factor(d) for d in indices]
    b.operand([(f,) for f in before] + [(v,)] + [(f,) for f in after])
    b.operand([(f,) for f in idx])
    b.result([(f,) for f in before + idx + after])
    return b.build()


def take_along_axis(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...],
                    attrs: Mapping[str, Any]) -> OpShardingRule:
    """``x [..., V, ...]``, ``indices [..., K, ...]`` -> ``[..., K, ...]`` along ``axis``: ``V`` a reduction (a
    device holding positions ``[v0, v1)`` picks the indices that fall there and gives zeros for the others, a
    pending sum, as XLA's masked gather and AllReduce); ``K`` and every other dimension pass through, the others
    shared by all three.

    >>> str(take_along_axis([(8, 100), (8, 1)], (8, 1), {"axis": 1}))
    '([i,v],[i,k])->([i,k]) {i=8,k=1,v=100} reduction={v}'
    """
    x, indices = in_shapes
    axis = attrs["axis"]
    b = RuleBuilder()
    factors = [b.factor(x[d], FactorKind.REDUCTION, name="v") if d == axis else b.factor(x[d], name=None)
               for d in range(len(x))]
    k = b.factor(indices[axis], name="k")
    picked = [(k,) if d == axis else (f,) for d, f in enumerate(factors)]
    b.operand([(f,) for f in factors])
    b.operand(picked)
    b.result(picked)
    return b.build()
