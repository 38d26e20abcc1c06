"""Rules of reductions over any axes: ``sum``, ``mean``, ``max``, ``min``.

Every reduced dimension is a ``REDUCTION`` factor: sharding one leaves each device
a partial result and the value unreduced. ``sum`` and ``mean`` leave a pending sum
(for ``mean`` each device divides its partial sum by the *global* count); ``max``
leaves a pending maximum (``unreduced=max{...}``): each device reduces its block
and the AllReduce that completes the value takes the maximum, as XLA partitions a
reduce over a sharded dimension, instead of gathering the input (``min`` likewise,
pending a minimum). ``argmax``'s and ``argmin``'s axis is a ``STATISTIC`` factor reduced away: sharded, each
device takes the maximum (minimum) of its block and that element's global index, both statistics are
AllGathered over the axis's mesh axes and each device picks the first extreme among them, as XLA partitions
the variadic reduce they lower to (``OpDef.gathered_statistics``). ``cumsum``'s axis is one
``PERMUTATION`` factor of its operand and result read whole (``whole_permutation``): sharded, the operand is
gathered along it and each device keeps its block of the running sum, as XLA partitions the reduce-window
``jnp.cumsum`` lowers to (Shardy keeps the axis sharded). ``top_k``'s axis needs replication in its operand
and its result (of size ``k``). ``sort``'s axis is one ``PERMUTATION`` factor of keys, payload and result: sharded,
each operand moves off it by an AllToAll, the sort runs locally and one AllToAll moves the result back, as XLA
partitions a sort (a concat's exchange). Other dimensions
pass through; with ``keepdims`` a reduced dimension of the result has size 1 and
maps to ``()``.

>>> str(sum_([(4, 8, 16)], (8,), {"axes": (0, 2), "keepdims": False}))
'([i,j,k])->([j]) {i=4,j=8,k=16} reduction={i,k}'
>>> str(max_([(4, 8)], (4, 1), {"axes": (1,), "keepdims": True}))
'([i,j])->([i,1]) {i=4,j=8} reduction=max{j}'
>>> str(min_([(4, 8)], (4,), {"axes": (1,), "keepdims": False}))
'([i,j])->([i]) {i=4,j=8} reduction=min{j}'
>>> str(arg_([(4, 8)], (4,), {"axis": 1}))
'([i,j])->([i]) {i=4,j=8} statistic={j}'
>>> str(cumsum_([(4, 8)], (4, 8), {"axis": 0}))
'([i,j])->([i,j]) {i=4,j=8} permutation=whole{i}'
>>> str(sort_([(4, 8), (4, 8)], (4, 8), {"axis": 1}))
'([i,j],[i,j])->([i,j]) {i=4,j=8} permutation={j}'
>>> str(sort_([(8,)], (8,), {"axis": 0}))
'([i])->([j]) {i=8,j=8} need_replication={i,j}'
>>> str(top_k_([(4, 8)], (4, 2), {"axis": 1, "k": 2}))
'([i,j])->([i,k]) {i=4,j=8,k=2} need_replication={j,k}'
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from planner.rules.builder import RuleBuilder, reduction_rule
from planner.ir.sharding import PENDING_MAX, PENDING_MIN
from planner.rules.factors import FactorKind, OpShardingRule


def _axes(in_shapes, attrs) -> tuple[int, ...]:
    axes = attrs.get("axes")
    return tuple(range(len(in_shapes[0]))) if axes is None else tuple(axes)


def sum_(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """Reduced dimensions are reductions (also used for ``mean``)."""
    return reduction_rule(in_shapes[0], _axes(in_shapes, attrs), bool(attrs.get("keepdims", False)),
                          FactorKind.REDUCTION)


def max_(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """Reduced dimensions are reductions, pending a maximum."""
    return reduction_rule(in_shapes[0], _axes(in_shapes, attrs), bool(attrs.get("keepdims", False)),
                          FactorKind.REDUCTION, PENDING_MAX)


def min_(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """Reduced dimensions are reductions, pending a minimum."""
    return reduction_rule(in_shapes[0], _axes(in_shapes, attrs), bool(attrs.get("keepdims", False)),
                          FactorKind.REDUCTION, PENDING_MIN)


def arg_(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]) -> OpShardingRule:
    """``argmax`` / ``argmin``: the reduced axis a statistic (gathered extremes and their indices); the others pass
    through."""
    return reduction_rule(in_shapes[0], (attrs["axis"],), False, FactorKind.STATISTIC)


def cumsum_(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]
            ) -> OpShardingRule:
    """The summed axis is a permutation factor read whole; the others pass through."""
    b = RuleBuilder()
    factors = [b.factor(n, FactorKind.PERMUTATION if d == attrs["axis"] else FactorKind.PASS_THROUGH)
               for d, n in enumerate(in_shapes[0])]
    b.operand([(f,) for f in factors])
    b.result([(f,) for f in factors])
    return b.build(whole_permutation=True)


def sort_(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]
          ) -> OpShardingRule:
    """The sorted axis is a permutation factor of keys, payload and result: sharded, each operand moves off it
    by an AllToAll, the sort runs locally and the result moves back, as XLA partitions a sort; the others pass
    through. With no other dimension of size > 1 (a 1-D sort) Shardy relates the tensors by no factor along the
    axis: each has its own, which needs replication (XLA gathers)."""
    b = RuleBuilder()
    axis, shape = attrs["axis"], in_shapes[0]
    along = any(n > 1 for d, n in enumerate(shape) if d != axis)
    factors = [b.factor(n, FactorKind.PERMUTATION if along else FactorKind.NEED_REPLICATION) if d == axis
               else b.factor(n) for d, n in enumerate(shape)]

    def dims():  # the axis's own factor per tensor where Shardy relates none
        return [(f if along or d != axis else b.factor(shape[d], FactorKind.NEED_REPLICATION),)
                for d, f in enumerate(factors)]

    b.operand([(f,) for f in factors])
    for _ in in_shapes[1:]:
        b.operand(dims())
    b.result(dims())
    return b.build()


def top_k_(in_shapes: Sequence[tuple[int, ...]], out_shape: tuple[int, ...], attrs: Mapping[str, Any]
           ) -> OpShardingRule:
    """The selected axis needs replication on both sides (its sizes differ: ``n`` in, ``k`` out); the others pass
    through."""
    b = RuleBuilder()
    axis = attrs["axis"]
    factors = [b.factor(n, FactorKind.NEED_REPLICATION if d == axis else FactorKind.PASS_THROUGH)
               for d, n in enumerate(in_shapes[0])]
    b.operand([(f,) for f in factors])
    b.result([(b.factor(out_shape[axis], FactorKind.NEED_REPLICATION),) if d == axis else (f,)
              for d, f in enumerate(factors)])
    return b.build()
