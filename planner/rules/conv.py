"""Rule of ``conv2d`` (NCHW input, OIHW weight, no groups).

``N`` and ``C_out`` pass through; ``C_in`` is a ``REDUCTION`` (each device sums its
channels: a pending sum); the spatial dimensions ``H, W``, the kernel's ``KH, KW``
and the result's ``OH, OW`` need replication (sharding them needs halo exchange,
which the planner does not do).

>>> str(conv2d([(8, 3, 32, 32), (16, 3, 3, 3)], (8, 16, 32, 32), {}))
'([n,c,h,w],[o,c,p,q])->([n,o,r,s]) {c=3,h=32,n=8,o=16,p=3,q=3,r=32,s=32,w=32} reduction={c} need_replication={h,p,q,r,s,w}'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from planner.rules.builder import RuleBuilder
from planner.rules.factors import FactorKind, OpShardingRule

_NR = FactorKind.NEED_REPLICATION


def conv2d(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """N, C_out pass-through; C_in reduction; spatial and kernel dims need replication."""
    (n, c, h, w), (o, _, kh, kw) = in_shapes
    b = RuleBuilder()
    fn = b.factor(n, name="n")
    fc = b.factor(c, FactorKind.REDUCTION, name="c")
    fh, fw = b.factor(h, _NR, name="h"), b.factor(w, _NR, name="w")
    fo = b.factor(o, name="o")
    fkh, fkw = b.factor(kh, _NR, name="p"), b.factor(kw, _NR, name="q")
    foh, fow = b.factor(out_shape[2], _NR, name="r"), b.factor(out_shape[3], _NR, name="s")
    b.operand([(fn,), (fc,), (fh,), (fw,)])
    b.operand([(fo,), (fc,), (fkh,), (fkw,)])
    b.result([(fn,), (fo,), (foh,), (fow,)])
    return b.build()
