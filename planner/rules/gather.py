"""Rule of ``gather`` (embedding lookup): ``table [V, H...]``, ``indices [I...]`` -> ``[I..., H...]``.

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
    """``V`` reduction, ``H...`` and index dims pass-through."""
    table, indices = in_shapes
    b = RuleBuilder()
    v = b.factor(table[0], FactorKind.REDUCTION, name="v")
    hidden = [b.factor(d, name="h" if len(table) == 2 else None) for d in table[1:]]
    idx = [b.factor(d) for d in indices]
    b.operand([(v,)] + [(f,) for f in hidden])
    b.operand([(f,) for f in idx])
    b.result([(f,) for f in idx + hidden])
    return b.build()
