"""Rules of manual regions' ops (:mod:`graphs.manual_regions`): the boundary and the collectives.

**Boundary.** ``manual_enter`` maps each dimension ``i`` of its global operand to
``(m_i, f_i)`` and of its local result to ``(f_i)``: ``m_i`` is a ``MANUAL`` factor
(the blocks of the in-sharding's manual axes in that dimension; absent where it
has none), ``f_i`` a pass-through factor of the local size. ``manual_exit`` is the
mirror image (local operand ``(f_i)``, global result ``(m_i, f_i)``). So free axes
pass through the boundary in both directions as ordinary factors, while manual
axes stay major on the global side; the planner fixes ``m_i`` to exactly the
manual axes of the boundary sharding (:mod:`planner.model.build`).

>>> attrs = {"manual_axes": ("tp",), "manual_sizes": (4,), "dims": ((), ("tp",))}
>>> str(manual_enter([(16, 512)], (16, 128), attrs))
'([i,mj])->([i,j]) {i=16,j=128,m=4} manual={m}'

**Collectives** compute on local blocks; the dimensions they do not touch pass
through, a gathered, scattered, split or concatenated dimension needs
replication (it changes size between operand and result).

>>> str(collective([(4, 8)], (16, 8), {"axes": ("x",), "dim": 0, "group_size": 4}))
'([i,j])->([k,j]) {i=4,j=8,k=16} need_replication={i,k}'

Every collective's ``OpDef`` names :func:`collective`; the boundary ops name
:func:`manual_enter` and :func:`manual_exit`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from planner.collectives import PRIMITIVES
from planner.rules.builder import RuleBuilder, elementwise_rule
from planner.rules.factors import FactorKind, OpShardingRule

Shape = tuple[int, ...]


def _boundary(global_shape: Shape, local_shape: Shape, attrs: Mapping[str, Any], enter: bool) -> OpShardingRule:
    size = dict(zip(attrs["manual_axes"], attrs["manual_sizes"]))
    b = RuleBuilder()
    global_dims, local_dims = [], []
    free = [b.factor(n) for n in local_shape]
    manual = []
    for i, axes in enumerate(attrs["dims"]):
        k = 1
        for a in axes:
            k *= size[a]
        if axes:
            m = b.factor(k, FactorKind.MANUAL, name="m" if i == 0 or not manual else f"m{i}")
            manual.append(m)
            global_dims.append((m, free[i]))
        else:
            global_dims.append((free[i],))
        local_dims.append((free[i],))
    if enter:
        b.operand(global_dims)
        b.result(local_dims)
    else:
        b.operand(local_dims)
        b.result(global_dims)
    return b.build()


def manual_enter(in_shapes: Sequence[Shape], out_shape: Shape, attrs: Mapping[str, Any]) -> OpShardingRule:
    """The global operand's dimension ``i`` is ``(m_i, f_i)``, the local result's ``(f_i)``."""
    return _boundary(in_shapes[0], out_shape, attrs, enter=True)


def manual_exit(in_shapes: Sequence[Shape], out_shape: Shape, attrs: Mapping[str, Any]) -> OpShardingRule:
    """The local operand's dimension ``i`` is ``(f_i)``, the global result's ``(m_i, f_i)``."""
    return _boundary(out_shape, in_shapes[0], attrs, enter=False)


def _changed_dims(attrs: Mapping[str, Any]) -> tuple[int, ...]:
    """The dimensions a collective gathers, scatters or exchanges: the attributes the registry names for
    them (:attr:`planner.collectives.Primitive.dim_attrs`); none for the others."""
    keys = {key for p in PRIMITIVES.values() for key in p.dim_attrs}
    return tuple(sorted({attrs[key] for key in keys if key in attrs}))


def collective(in_shapes: Sequence[Shape], out_shape: Shape, attrs: Mapping[str, Any]) -> OpShardingRule:
    """The rule of every collective: untouched dimensions pass through, resized ones need replication."""
    if not in_shapes:  # axis_index: a scalar from nothing
        b = RuleBuilder()
        b.result([])
        return b.build()
    changed = _changed_dims(attrs)
    if not changed:
        return elementwise_rule(in_shapes, out_shape)
    b = RuleBuilder()
    shape = in_shapes[0]
    ins, outs = [], []
    for i, n in enumerate(shape):
        if i in changed:
            ins.append((b.factor(n, FactorKind.NEED_REPLICATION),))
            outs.append(None)
        else:
            f = b.factor(n)
            ins.append((f,))
            outs.append((f,))
    for i in changed:
        outs[i] = (b.factor(out_shape[i], FactorKind.NEED_REPLICATION),)
    b.operand(ins)
    b.result(outs)
    return b.build()


__all__ = ["collective", "manual_enter", "manual_exit"]
