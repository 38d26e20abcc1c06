"""Rule of ``cross_entropy``: ``logits [B..., V]``, ``labels [B...]`` -> scalar mean loss.

The class dimension ``V`` needs replication (the log-sum-exp reads a whole row).
The label (batch) dimensions are ``REDUCTION`` factors: the result is the mean
over them, so a device with a block of positions computes the sum of its losses
divided by the *global* number of positions, a partial sum.

>>> str(cross_entropy([(4, 8, 10), (4, 8)], (), {}))
'([i,j,v],[i,j])->([]) {i=4,j=8,v=10} reduction={i,j} need_replication={v}'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from planner.rules.builder import RuleBuilder
from planner.rules.factors import FactorKind, OpShardingRule


def cross_entropy(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...],
                  attrs: Mapping[str, Any]) -> OpShardingRule:
    """Label dims reductions, class dim need-replication."""
    logits = in_shapes[0]
    b = RuleBuilder()
    batch = [b.factor(d, FactorKind.REDUCTION) for d in logits[:-1]]
    v = b.factor(logits[-1], FactorKind.NEED_REPLICATION, name="v")
    b.operand([(f,) for f in batch] + [(v,)])
    b.operand([(f,) for f in batch])
    b.result([])
    return b.build()
