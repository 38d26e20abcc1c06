"""``gather`` (embedding lookup): rows of a table picked by integer indices.

Inputs ``[table (V, H...), indices (any shape, i32 or i64)]``; the result has shape
``indices.shape + table.shape[1:]`` and the table's dtype. Indices must lie in
``[0, V)`` (the reference raises otherwise).

FLOP convention: **0 FLOPs** (a lookup moves data).

VJP: the table's gradient is the cotangent's rows scatter-added (``np.add.at``) at
their indices, zero for rows never picked; the indices have no gradient. It reads
the indices (and the table's shape).

>>> GATHER.infer([(50257, 768), (8, 1024)], ["f32", "i32"], {})
((8, 1024, 768), 'f32')
"""

from __future__ import annotations

import numpy as np

from graphs.ops.common import need_int, need_rank
from graphs.ops.opdef import OpDef, check_wrt


def _gather_infer(shapes, dtypes, attrs, names=None):
    need_rank("gather", shapes, names, 0, 1, "the table")
    need_int("gather", dtypes[1], names, 1, "indices")
    return tuple(shapes[1]) + tuple(shapes[0][1:]), dtypes[0]


def _gather_flops(in_shapes, out_shape, attrs):
    return 0


def _gather_reference(arrays, attrs):
    table, idx = np.asarray(arrays[0]), np.asarray(arrays[1])
    if idx.size and (idx.min() < 0 or idx.max() >= table.shape[0]):
        raise IndexError(f"gather index out of range [0, {table.shape[0]})")
    return np.take(table, idx, axis=0)


def _gather_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("gather", arrays, wrt, ("table", "indices"))
    table, idx, cot = arrays[0], np.asarray(arrays[1]), np.asarray(cotangent)
    shape = np.shape(table)
    out = []
    for _ in wrt:
        g = np.zeros(shape, dtype=cot.dtype)
        np.add.at(g, idx.reshape(-1), cot.reshape((-1,) + shape[1:]))
        out.append(g)
    return tuple(out)


GATHER = OpDef("gather", "gather", 2, 2, (), _gather_infer, _gather_flops, _gather_reference, vjp=_gather_vjp)
