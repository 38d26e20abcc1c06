"""Rules of data-movement ops: ``reshape``, ``transpose``, ``concat``, ``slice``, ``dynamic_slice``,
``dynamic_update_slice``.

- ``reshape``: the pieces common to input and output dims (:func:`~planner.rules.builder.reshape_rule`).
- ``transpose``: result dimension ``d`` carries the factor of input dimension ``perm[d]``.
- ``concat``: the concatenation axis is one ``PERMUTATION`` factor of every operand and
  the result (Shardy's rule: each operand's piece has its own size); sharded, the op
  exchanges blocks itself (:mod:`planner.model.op_collectives`); other dims pass through.
- ``slice``: a sliced dimension (one that does not keep its whole range) is a
  ``PERMUTATION`` factor as Shardy's (the input's piece its own size): sharded, the op
  exchanges blocks itself; where several are sliced each needs replication, with one
  factor for the input side and one for the result; untouched dimensions pass through.
- ``dynamic_slice``: Shardy's: a dimension the window cuts needs replication on both sides, nothing propagating
  through it (XLA gathers the operand along it); the others pass through.
- ``dynamic_update_slice``: Shardy's: the operand's dimensions pass through to the result; the update shares
  those it covers whole and replicates the others, along which the operand stays split (no communication).

>>> str(transpose([(2, 3, 4)], (4, 2, 3), {"perm": (2, 0, 1)}))
'([i,j,k])->([k,i,j]) {i=2,j=3,k=4}'
>>> str(concat([(2, 3), (2, 5)], (2, 8), {"axis": 1}))
'([i,j],[i,j])->([i,j]) {i=2,j=8} permutation={j}'
>>> str(slice_([(8, 6)], (4, 6), {"starts": (2, 0), "stops": (6, 6)}))
'([i,j])->([i,j]) {i=4,j=6} permutation={i}'
>>> str(slice_([(8, 6)], (4, 3), {"starts": (2, 0), "stops": (6, 3)}))
'([i,j])->([k,l]) {i=8,j=6,k=4,l=3} need_replication={i,j,k,l}'
>>> rule = slice_([(6, 8)], (6, 1), {"starts": (0, 7), "stops": (6, 8)})  # x[:, -1]
>>> str(rule), rule.admits(1, 4), rule.admits(1, 16)  # split as the input's 8 positions are, past its size
('([i,j])->([i,j]) {i=6,j=1} permutation={j}', True, False)
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from planner.rules.builder import RuleBuilder, reshape_rule
from planner.rules.factors import FactorKind, OpShardingRule

_NR = FactorKind.NEED_REPLICATION


def reshape(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """Common pieces of input and output dims; runs without one need replication."""
    return reshape_rule(in_shapes[0], out_shape)


def transpose(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """Factors permuted like the dimensions."""
    b = RuleBuilder()
    factors = [b.factor(d) for d in in_shapes[0]]
    b.operand([(f,) for f in factors])
    b.result([(factors[p],) for p in attrs["perm"]])
    return b.build()


def concat(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """The concatenation axis is one permutation factor of the result's size; each operand's piece keeps
    its own size."""
    axis = attrs.get("axis", 0) % len(out_shape)
    b = RuleBuilder()
    factors = [b.factor(size, FactorKind.PERMUTATION if d == axis else FactorKind.PASS_THROUGH)
               for d, size in enumerate(out_shape)]
    for shape in in_shapes:
        b.operand([(f,) for f in factors], {axis: shape[axis]} if shape[axis] != out_shape[axis] else None)
    b.result([(f,) for f in factors])
    return b.build(by_appearance=True)


def slice_(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """One sliced dimension is a permutation factor of the result's size (the input keeps its own size), also
    when it keeps one position (``x[:, 0]``, ``x[:, -1]``: Shardy shards the size-1 dimension, the first device
    along its axes holding the position, :meth:`~planner.rules.factors.OpShardingRule.admits`); several sliced
    dimensions need replication, each with one factor for the input side and one for the result, except one cut
    to one position, a reduction on the input side (the device holding that position gives it, the others zeros,
    and the result is a pending sum over its axes, never a gather of the dimension); untouched dims pass
    through."""
    shape = in_shapes[0]
    cut = [d for d, (size, start, stop) in enumerate(zip(shape, attrs["starts"], attrs["stops"]))
           if (start, stop) != (0, size)]
    picked = {d for d in cut if out_shape[d] == 1} if len(cut) > 1 else set()
    b = RuleBuilder()
    if len(cut) == 1 and not picked:
        factors = [b.factor(size, FactorKind.PERMUTATION if d in cut else FactorKind.PASS_THROUGH)
                   for d, size in enumerate(out_shape)]
        b.operand([(f,) for f in factors], {cut[0]: shape[cut[0]]})
        b.result([(f,) for f in factors])
        return b.build(by_appearance=True, window_start=int(attrs["starts"][cut[0]]))
    ins, outs = [], []
    for d, size in enumerate(shape):
        if d not in cut:
            f = b.factor(size)
            ins.append((f,))
            outs.append((f,))
        else:
            ins.append((b.factor(size, FactorKind.REDUCTION if d in picked else _NR),))
            outs.append(None)
    for d, size in enumerate(out_shape):
        if outs[d] is None:
            outs[d] = (b.factor(size, _NR),)
    b.operand(ins)
    b.result(outs)
    return b.build(by_appearance=True)


def pad(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """One dimension padded by zeros is a permutation factor of the result's size (the input keeps its own size)
    windowed at ``-low``: the result's element ``j`` is the input's ``j - low``, zero outside it, so sharded it is
    XLA's halo exchange (a slice's backward); several padded dimensions, or another pad value, need replication,
    each with one factor for the input side and one for the result; untouched dims pass through."""
    shape = in_shapes[0]
    cut = [d for d, (a, z) in enumerate(zip(attrs["low"], attrs["high"])) if a or z]
    b = RuleBuilder()
    if len(cut) == 1 and attrs.get("value", 0.0) == 0:
        factors = [b.factor(size, FactorKind.PERMUTATION if d in cut else FactorKind.PASS_THROUGH)
                   for d, size in enumerate(out_shape)]
        b.operand([(f,) for f in factors], {cut[0]: shape[cut[0]]})
        b.result([(f,) for f in factors])
        return b.build(by_appearance=True, window_start=-int(attrs["low"][cut[0]]))
    ins, outs = [], []
    for d, size in enumerate(shape):
        f = b.factor(size, _NR if d in cut else FactorKind.PASS_THROUGH)
        ins.append((f,))
        outs.append((b.factor(out_shape[d], _NR),) if d in cut else (f,))
    b.operand(ins)
    b.result(outs)
    return b.build(by_appearance=True)


def dynamic_slice(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...],
                  attrs: Mapping[str, Any]) -> OpShardingRule:
    """Shardy's rule: a dimension the window keeps whole is one factor of the operand and the result; one it cuts
    needs replication and blocks propagation (one factor for the operand side, one for the result: nothing flows
    between them; XLA gathers the operand along it). The start indices have no dimensions."""
    b = RuleBuilder()
    ins, outs = [], []
    for n, k in zip(in_shapes[0], out_shape):
        f = b.factor(n, FactorKind.PASS_THROUGH if k == n else _NR)
        ins.append((f,))
        outs.append((f,) if k == n else (b.factor(k, _NR),))
    b.operand(ins)
    for _ in in_shapes[1:]:
        b.operand([])
    b.result(outs)
    return b.build(by_appearance=True)


def dynamic_update_slice(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...],
                         attrs: Mapping[str, Any]) -> OpShardingRule:
    """Shardy's rule: a dimension the update covers whole is one factor of the operand, the update and the
    result; one it covers in part is a factor of the operand and the result, which stays split (each device writes
    the window's part in its own block, no communication), and one of the update that needs replication. The
    start indices have no dimensions. (XLA's partitioner gathers the operand along a split dimension instead where
    the start there is computed and the update longer than one element; the plan does not.)"""
    operand, update = in_shapes[0], in_shapes[1]
    b = RuleBuilder()
    ins, ups = [], []
    for n, u in zip(operand, update):
        f = b.factor(n)
        ins.append((f,))
        ups.append((f,) if u == n else (b.factor(u, _NR),))
    b.operand(ins)
    b.operand(ups)
    for _ in in_shapes[2:]:
        b.operand([])
    b.result(ins)
    return b.build(by_appearance=True)


def flip(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """Each reversed dimension (of size > 1) is a mirrored permutation factor: sharded, each device's block goes to
    the device holding the mirrored block in every reversed dimension, reversed, as XLA partitions a reverse (one
    CollectivePermute); the others pass through.

    >>> str(flip([(4, 8)], (4, 8), {"axes": (1,)}))
    '([i,j])->([i,j]) {i=4,j=8} permutation=mirror{j}'
    """
    shape = in_shapes[0]
    reversed_ = [d for d in attrs["axes"] if shape[d] > 1]
    b = RuleBuilder()
    factors = [b.factor(n, FactorKind.PERMUTATION if d in reversed_ else FactorKind.PASS_THROUGH)
               for d, n in enumerate(shape)]
    b.operand([(f,) for f in factors])
    b.result([(f,) for f in factors])
    return b.build(mirrored=bool(reversed_))


def roll(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """The rolled dimension (when the roll moves anything) is a rotated permutation factor: sharded, each device's
    block is gathered from the two blocks the rotation brings into it, as XLA partitions a concatenate of two
    slices of one operand (at most two CollectivePermutes); the others pass through.

    >>> str(roll([(4, 8)], (4, 8), {"shift": 3, "axis": 1}))
    '([i,j])->([i,j]) {i=4,j=8} permutation=rotate3{j}'
    >>> str(roll([(4, 8)], (4, 8), {"shift": 0, "axis": 1}))
    '([i,j])->([i,j]) {i=4,j=8}'
    """
    shape = in_shapes[0]
    shift, axis = attrs["shift"] % shape[attrs["axis"]], attrs["axis"]
    b = RuleBuilder()
    factors = [b.factor(n, FactorKind.PERMUTATION if d == axis and shift else FactorKind.PASS_THROUGH)
               for d, n in enumerate(shape)]
    b.operand([(f,) for f in factors])
    b.result([(f,) for f in factors])
    return b.build(rotation=shift or None)


def iota(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """No operands: one factor per result dimension, each device counting its own block."""
    b = RuleBuilder()
    b.result([(b.factor(d),) for d in out_shape])
    return b.build()
