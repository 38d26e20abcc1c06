"""Manual regions on the simulated devices: boundary ops, body collectives run for real.

A body tensor's block on device ``d`` is its block (under the free axes of its
layout) of the local value at ``d``'s manual coordinate, so blocks differ between
devices that differ in manual coordinates even where the layout says
"replicated": body ops are computed per device (never deduplicated over
replicas), ``manual_enter`` and ``manual_exit`` pass each device's block through
unchanged (a device's block of the global input under the in-sharding and free
axes *is* its block of the local argument), and a collective runs across the
devices of each group (those differing only in its ``axes``, linear index
row-major over ``axes``) moving blocks through the :class:`Network`, which counts
the bytes each device receives: ring AllReduce (reduce-scatter then all-gather of
the padded flat block) for ``psum`` / ``pmean``, ring AllGather, ring
ReduceScatter, one chunk per peer for AllToAll, one block per pair for
``ppermute``; ``pbroadcast`` and ``axis_index`` move nothing.
"""

from __future__ import annotations

import numpy as np

from graphs.dtypes import dtype_itemsize
from planner.collectives import backprop_primitive, primitive, run_kernel, transpose_params
from planner.ir.axis import AxisRef
from planner.ir.sharding import TensorSharding
from planner.simulation.collectives import Network, groups


def collective_groups(mesh, axes) -> list[np.ndarray]:
    """Device ids of each group of a body collective over manual ``axes``, by linear index."""
    return groups(TensorSharding.replicated_on(mesh, 0), [AxisRef(a) for a in axes])


def run_collective(op, blocks: list, mesh, net: Network, dtype: str, transposed: bool = False) -> list:
    """Every device's result block of body collective ``op`` from its operand blocks (by device id), bytes
    counted at ``dtype``; ``transposed``: its transpose on cotangent blocks
    (:func:`planner.collectives.backprop_primitive` with :func:`~planner.collectives.transpose_params`:
    all_to_all with its dims swapped, ppermute with its pairs reversed, pmean's pbroadcast scaled by 1/G).
    The kernels are the registry's (:mod:`planner.collectives`)."""
    kind = op.op
    attrs = op.attrs_dict
    transposed = transposed and bool(op.inputs)  # axis_index takes nothing: no transpose
    name, params = (backprop_primitive(kind), transpose_params(kind, attrs)) if transposed else (kind, attrs)
    scale = transposed and primitive(kind).mean_of is not None  # pmean's transpose: pbroadcast / G
    net.itemsize = dtype_itemsize(dtype)
    out: list = [None] * mesh.size
    net.begin_step()  # every group at once: one step
    for members in collective_groups(mesh, tuple(attrs["axes"])):
        group = [np.asarray(blocks[int(d)]) for d in members] if op.inputs else []
        res = run_kernel(name, net, members, group, params)
        if scale:
            res = [r / len(members) for r in res]
        for d, r in zip(members, res):
            out[int(d)] = np.asarray(r)
    return out


__all__ = ["collective_groups", "run_collective"]
