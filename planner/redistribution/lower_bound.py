"""The lower bound a redistribution is scored against (SPEC §5).

Without pending sums it is information-theoretic: the largest number of bytes any
device must receive because its destination block holds elements its source
block does not (valid elements only; padding never needs to move).

For a source with pending sums over a group of ``p`` devices we use the bandwidth
bound of reduce-scatter followed by all-gather (Patarasuk and Yuan, "Bandwidth
optimal all-reduce algorithms for clusters of workstations", JPDC 2009): if the
group's destination blocks together cover ``U`` elements and device ``d`` ends with
``B_d`` of them, ``d`` must receive at least ``(p-1)/p * |U|`` partial values for
its share of the reduction plus ``|B_d| - |U|/p`` reduced values it did not
compute, i.e. ``(p-1)/p * |U|`` for a ReduceScatter and ``2(p-1)/p * |U|`` for an
AllReduce, which the ring algorithms meet.

>>> from planner.ir import parse_mesh, parse_sharding
>>> m = parse_mesh('@m = <["x"=2, "y"=4]>')
>>> src, dst = parse_sharding('[{"x"}, {}]', m), parse_sharding('[{}, {"x"}]', m)
>>> lower_bound_bytes(src, dst, (64, 32), 4)   # half of the 32x32 local block moves
2048
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from planner.ir.axis import AxisRef
from planner.ir.layout import device_index_ranges, devices_to_positions
from planner.ir.sharding import TensorSharding
from planner.redistribution.state import box_volume, overlap_volume

NOTE = (
    "elements each device must receive that it did not hold; pending sums use the "
    "reduce-scatter + all-gather bandwidth bound (p-1)/p*|U| + (|B| - |U|/p)"
)


def _reduced_axes(src: TensorSharding, dst: TensorSharding) -> tuple[AxisRef, ...]:
    """Source pending-sum axes the destination does not keep (compared as device digits)."""
    keep = {r.digit(dst.mesh) for r in dst.unreduced}
    return tuple(r for r in src.unreduced if r.digit(src.mesh) not in keep)


def lower_bound_bytes(src: TensorSharding, dst: TensorSharding, shape: Sequence[int], itemsize: int) -> int:
    """Bytes per device any plan must receive at least (see the module docstring)."""
    sb = device_index_ranges(src, shape)
    db = device_index_ranges(dst, shape)
    reduced = _reduced_axes(src, dst)
    if not reduced:
        need = box_volume(db) - overlap_volume(sb, db)
        return int(need.max(initial=0)) * itemsize
    mesh = src.mesh
    positions = devices_to_positions(mesh)
    key = positions.copy()
    p = 1
    for ref in reduced:
        stride, size = ref.digit(mesh)
        key -= ((positions // stride) % size) * stride
        p *= size
    _, labels = np.unique(key, return_inverse=True)
    # the part of each destination block the device's group holds partial sums of
    inter = np.stack([np.maximum(sb[..., 0], db[..., 0]), np.minimum(sb[..., 1], db[..., 1])], axis=-1)
    inter[..., 1] = np.maximum(inter[..., 1], inter[..., 0])
    held = box_volume(inter)
    outside = box_volume(db) - held  # must arrive from elsewhere, already reduced
    best = 0.0
    for g in range(labels.max() + 1):
        members = np.flatnonzero(labels == g)
        # blocks of one layout are equal or disjoint: |U| sums the distinct ones
        distinct = np.unique(inter[members].reshape(len(members), -1), axis=0)
        union = float(box_volume(distinct.reshape(len(distinct), -1, 2)).sum())
        reduce_part = (p - 1) / p * union
        gather_part = np.maximum(held[members] - union / p, 0.0)
        best = max(best, float(np.max(reduce_part + gather_part + outside[members])))
    return int(np.ceil(best - 1e-9)) * itemsize
