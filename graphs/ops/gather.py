"""``gather`` (embedding lookup): rows of a table picked by integer indices; ``take_along_axis``.

Inputs ``[table (V, H...), indices (any shape, i32 or i64)]``; the result has shape
``indices.shape + table.shape[1:]`` and the table's dtype. Indices must lie in
``[0, V)`` (the reference raises otherwise). With ``axis`` (default 0) the slices along that
dimension are picked, as ``jnp.take(table, indices, axis)``: the result is
``table.shape[:axis] + indices.shape + table.shape[axis + 1:]``.

FLOP convention: **0 FLOPs** (a lookup moves data).

Bytes accessed: the indices, the rows they pick (one row of the table per index, not
the whole table) and the result: ``indices + 2 x result`` when the result has the
table's type.

VJP: the table's gradient is the cotangent's rows scatter-added (``np.add.at``) at
their indices, zero for rows never picked; the indices have no gradient. It reads
the indices (and the table's shape).

>>> GATHER.infer([(50257, 768), (8, 1024)], ["f32", "i32"], {})
((8, 1024, 768), 'f32')
>>> GATHER.infer([(16, 32), (8,)], ["f32", "i32"], {"axis": 1})
((16, 8), 'f32')
"""

from __future__ import annotations

import math

import numpy as np

from graphs.ops.common import need_int, need_rank, normalize_axis, operand
from graphs.ops.opdef import REQUIRED, OpDef, check_wrt
from planner.errors import ModelError, RuleError


def _gather_axis(shapes, attrs, names=None) -> int:
    need_rank("gather", shapes, names, 0, 1, "the table")
    return normalize_axis(attrs.get("axis", 0), len(shapes[0]), "gather axis")


def _gather_infer(shapes, dtypes, attrs, names=None):
    axis = _gather_axis(shapes, attrs, names)
    need_int("gather", dtypes[1], names, 1, "indices")
    table = tuple(shapes[0])
    return table[:axis] + tuple(shapes[1]) + table[axis + 1:], dtypes[0]


def _gather_canonical(shapes, attrs):
    return {**attrs, "axis": _gather_axis(shapes, attrs)}


def _gather_flops(in_shapes, out_shape, attrs):
    return 0


def _gather_bytes(in_shapes, out_shape, itemsizes, attrs):
    picked = math.prod(out_shape)  # one table row per index: the result's elements
    return math.prod(in_shapes[1]) * itemsizes[1] + picked * itemsizes[0] + picked * itemsizes[2]


def _gather_reference(arrays, attrs):
    table, idx = np.asarray(arrays[0]), np.asarray(arrays[1])
    axis = attrs.get("axis", 0)
    if idx.size and (idx.min() < 0 or idx.max() >= table.shape[axis]):
        where = "rows" if axis == 0 else f"slices along axis {axis},"
        raise ModelError(f"gather's indices hold {idx.min()} to {idx.max()} with the data drawn for the model's "
                         f"inputs, outside the table's {where} [0, {table.shape[axis]:,}); an index must pick one: "
                         "feed the indices from an input (drawn inside that range) or bound what computes them")
    return np.take(table, idx, axis=axis)


def _scatter_add(shape, axis, positions, cot, idx_ndim, dtype):
    """Zeros of ``shape`` with the cotangent's slices added at ``positions`` (flat) along ``axis``."""
    grad = np.moveaxis(np.zeros(shape, dtype=dtype), axis, 0)
    moved = np.moveaxis(cot, tuple(range(axis, axis + idx_ndim)), tuple(range(idx_ndim)))
    np.add.at(grad, positions, moved.reshape((-1,) + moved.shape[idx_ndim:]))
    return np.moveaxis(grad, 0, axis)


def _gather_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("gather", arrays, wrt, ("table", "indices"))
    table, idx, cot = arrays[0], np.asarray(arrays[1]), np.asarray(cotangent)
    axis = attrs.get("axis", 0)
    return tuple(_scatter_add(np.shape(table), axis, idx.reshape(-1), cot, idx.ndim, cot.dtype) for _ in wrt)


def _hits(idx: np.ndarray, table_block, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """The indices shifted into a device's table slices ``[v0, v1)`` along ``axis``, and which of them land
    there."""
    v0, v1 = table_block.ranges[axis]
    shifted = idx.astype(np.int64) - v0
    return shifted, (shifted >= 0) & (shifted < v1 - v0)


def _gather_local_reference(arrays, attrs, ctx, rule):
    """With the table sharded along ``axis`` (a vocabulary), a device looks up only its own slices and gives
    zeros for the others."""
    table, idx = np.asarray(arrays[0]), np.asarray(arrays[1])
    axis = attrs.get("axis", 0)
    shifted, hit = _hits(idx, ctx.operands[0], axis)
    picked = np.take(table, np.where(hit, shifted, 0), axis=axis)
    hit = hit.reshape((1,) * axis + hit.shape + (1,) * (table.ndim - axis - 1))
    return np.where(hit, picked, np.zeros((), picked.dtype))


def _gather_local_vjp(arrays, attrs, cotangent, ctx, wrt):
    """The cotangent's slices scatter-added into the table slices this device holds."""
    if wrt != (0,):
        raise RuleError("gather: only the table (operand 0) has a cotangent; the indices are integers")
    table_block = ctx.operands[0]
    idx = np.asarray(arrays[1])
    axis = attrs.get("axis", 0)
    shifted, hit = _hits(idx, table_block, axis)
    # the misses' slices add nothing here: their cotangent zeroed, their position any one held
    held = np.where(hit.reshape((1,) * axis + hit.shape + (1,) * (cotangent.ndim - axis - idx.ndim)), cotangent,
                    np.zeros((), cotangent.dtype))
    return [_scatter_add(table_block.local_shape, axis, np.where(hit, shifted, 0).reshape(-1), held, idx.ndim,
                         cotangent.dtype)]


def _gather_jax(jnp, lax, a, attrs):
    return jnp.take(a[0], a[1], axis=attrs.get("axis", 0))


def _gather_jax_local(jnp, lax, a, attrs, ctx):
    """This device's table slices ``[v0, v0 + n)`` along ``axis`` looked up, zeros for indices outside them."""
    table, idx = a
    axis = attrs.get("axis", 0)
    shifted = idx.astype(jnp.int32) - ctx.start(0, axis)
    hit = (shifted >= 0) & (shifted < table.shape[axis])
    picked = jnp.take(table, jnp.where(hit, shifted, 0), axis=axis)
    hit = hit.reshape((1,) * axis + hit.shape + (1,) * (table.ndim - axis - 1))
    return jnp.where(hit, picked, jnp.zeros((), picked.dtype))


GATHER = OpDef("gather", "indexing", 2, 2, (("axis", 0),), _gather_infer, _gather_flops, _gather_reference,
               _gather_canonical, vjp=_gather_vjp, rule="gather.gather", indexes=((1, 0, "axis"),),
               fan_in_dims=((0, ()),),
               jax_form=_gather_jax,
               local_reference=_gather_local_reference, local_vjp=_gather_local_vjp, local_vjp_reads=(1,),
               jax_local_form=_gather_jax_local, bytes_accessed=_gather_bytes)


# -- take_along_axis: one element per index along an axis ----------------------------------------------------------
#
# Inputs ``[x (..., V, ...), indices (..., K, ...)]`` of one rank, equal outside ``axis``; the result has the
# indices' shape and x's dtype: ``result[..., k, ...] = x[..., indices[..., k, ...], ...]`` (``jnp.take_along_axis``,
# a cross-entropy's pick of each label's log-probability). 0 FLOPs; bytes: the indices and twice the result (the
# elements picked, then written). VJP: the cotangent scatter-added at the indices along ``axis``.


def _along_axis(shapes, attrs, names=None) -> int:
    need_rank("take_along_axis", shapes, names, 0, 1, "the operand")
    x, idx = shapes
    axis = normalize_axis(attrs.get("axis"), len(x), "take_along_axis axis")
    if len(idx) != len(x) or any(a != b for d, (a, b) in enumerate(zip(x, idx)) if d != axis):
        raise ModelError(f"take_along_axis indices {operand(names, shapes, 1)} must have the rank of the operand "
                         f"{operand(names, shapes, 0)} and its size in every dimension but axis {axis}")
    return axis


def _tal_infer(shapes, dtypes, attrs, names=None):
    _along_axis(shapes, attrs, names)
    need_int("take_along_axis", dtypes[1], names, 1, "indices")
    return tuple(shapes[1]), dtypes[0]


def _tal_canonical(shapes, attrs):
    return {**attrs, "axis": _along_axis(shapes, attrs)}


def _tal_reference(arrays, attrs):
    x, idx = np.asarray(arrays[0]), np.asarray(arrays[1])
    axis = attrs["axis"]
    if idx.size and (idx.min() < 0 or idx.max() >= x.shape[axis]):
        raise ModelError(f"take_along_axis's indices hold {idx.min()} to {idx.max()} with the data drawn for the "
                         f"model's inputs, outside [0, {x.shape[axis]:,}) along axis {axis}; feed the indices from "
                         "an input (drawn inside that range) or bound what computes them")
    return np.take_along_axis(x, idx.astype(np.int64), axis=axis)


def _scatter_along(shape, idx, cot, axis, dtype):
    """Zeros of ``shape`` with ``cot`` added at ``idx`` along ``axis`` (repeated indices add up)."""
    grad = np.zeros(shape, dtype=dtype)
    where = list(np.indices(idx.shape, sparse=True))
    where[axis] = idx
    np.add.at(grad, tuple(where), cot)
    return grad


def _tal_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("take_along_axis", arrays, wrt, ("operand", "indices"))
    cot = np.asarray(cotangent)
    idx = np.asarray(arrays[1]).astype(np.int64)
    return tuple(_scatter_along(np.shape(arrays[0]), idx, cot, attrs["axis"], cot.dtype) for _ in wrt)


def _tal_local_reference(arrays, attrs, ctx, rule):
    """With ``axis`` sharded, a device picks only the indices that fall in its positions, zeros for the others."""
    x, idx = np.asarray(arrays[0]), np.asarray(arrays[1])
    shifted, hit = _hits(idx, ctx.operands[0], attrs["axis"])
    picked = np.take_along_axis(x, np.where(hit, shifted, 0), axis=attrs["axis"])
    return np.where(hit, picked, np.zeros((), picked.dtype))


def _tal_local_vjp(arrays, attrs, cotangent, ctx, wrt):
    """The cotangent scatter-added at the indices that fall in this device's positions along ``axis``."""
    if wrt != (0,):
        raise RuleError("take_along_axis: only the operand (operand 0) has a cotangent; the indices are integers")
    block, axis = ctx.operands[0], attrs["axis"]
    shifted, hit = _hits(np.asarray(arrays[1]), block, axis)
    cot = np.where(hit, cotangent, np.zeros((), cotangent.dtype))
    return [_scatter_along(block.local_shape, np.where(hit, shifted, 0), cot, axis, cotangent.dtype)]


def _tal_jax(jnp, lax, a, attrs):
    return jnp.take_along_axis(a[0], a[1], axis=attrs["axis"])


def _tal_jax_local(jnp, lax, a, attrs, ctx):
    """This device's positions ``[p0, p0 + n)`` along ``axis`` picked, zeros for indices outside them."""
    x, idx = a
    axis = attrs["axis"]
    shifted = idx.astype(jnp.int32) - ctx.start(0, axis)
    hit = (shifted >= 0) & (shifted < x.shape[axis])
    picked = jnp.take_along_axis(x, jnp.where(hit, shifted, 0), axis=axis)
    return jnp.where(hit, picked, jnp.zeros((), picked.dtype))


TAKE_ALONG_AXIS = OpDef("take_along_axis", "indexing", 2, 2, (("axis", REQUIRED),), _tal_infer,
                        lambda in_shapes, out_shape, attrs: 0, _tal_reference, _tal_canonical, vjp=_tal_vjp,
                        rule="gather.take_along_axis", indexes=((1, 0, "axis"),), fan_in_dims=((0, ()),),
                        jax_form=_tal_jax, local_reference=_tal_local_reference, local_vjp=_tal_local_vjp,
                        local_vjp_reads=(1,), jax_local_form=_tal_jax_local, bytes_accessed=_gather_bytes)
