"""``gather`` (embedding lookup): rows of a table picked by integer indices.

Inputs ``[table (V, H...), indices (any shape, i32 or i64)]``; the result has shape
``indices.shape + table.shape[1:]`` and the table's dtype. Indices must lie in
``[0, V)`` (the reference raises otherwise).

FLOP convention: **0 FLOPs** (a lookup moves data).

>>> GATHER.infer([(50257, 768), (8, 1024)], ["f32", "i32"], {})
((8, 1024, 768), 'f32')
"""

from __future__ import annotations

import numpy as np

from graphs.ops.common import need_int, need_rank
from graphs.ops.opdef import OpDef


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


GATHER = OpDef("gather", "gather", 2, 2, (), _gather_infer, _gather_flops, _gather_reference)
