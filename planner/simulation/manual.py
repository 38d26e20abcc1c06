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
from planner.ir.axis import AxisRef
from planner.ir.sharding import TensorSharding
from planner.model.manual import transposed_primitive
from planner.simulation.collectives import Network, groups, ring_all_gather, ring_all_reduce, ring_reduce_scatter


def collective_groups(mesh, axes) -> list[np.ndarray]:
    """Device ids of each group of a body collective over manual ``axes``, by linear index."""
    return groups(TensorSharding.replicated_on(mesh, 0), [AxisRef(a) for a in axes])




def _all_gather(net: Network, members, blocks, dim: int) -> list[np.ndarray]:
    got = ring_all_gather(net, members, [((r,), b) for r, b in enumerate(blocks)])
    return [np.concatenate([a for _, a in items], axis=dim) for items in got]


def _reduce_scatter(net: Network, members, blocks, dim: int) -> list[np.ndarray]:
    p = len(members)
    chunks = [list(np.split(b, p, axis=dim)) for b in blocks]
    return ring_reduce_scatter(net, members, chunks)


def _all_to_all(net: Network, members, blocks, split_dim: int, concat_dim: int) -> list[np.ndarray]:
    p = len(members)
    pieces = [np.split(b, p, axis=split_dim) for b in blocks]  # pieces[m][n]: from member m to member n
    net.begin_step()
    return [np.concatenate([net.send(int(members[m]), int(members[n]), pieces[m][n]) for m in range(p)],
                           axis=concat_dim) for n in range(p)]


def _ppermute(net: Network, members, blocks, perm) -> list[np.ndarray]:
    out = [np.zeros_like(b) for b in blocks]
    net.begin_step()
    for src, dst in perm:
        out[dst] = net.send(int(members[src]), int(members[dst]), blocks[src])
    return out


def run_collective(op, blocks: list, mesh, net: Network, dtype: str, transposed: bool = False) -> list:
    """Every device's result block of body collective ``op`` from its operand blocks (by device id), bytes
    counted at ``dtype``; ``transposed``: its transpose on cotangent blocks
    (:func:`planner.model.manual.transposed_primitive`: all_to_all with its dims swapped, ppermute with
    its pairs reversed, pmean's pbroadcast scaled by 1/G)."""
    kind = op.op
    axes = tuple(op.attr("axes"))
    net.itemsize = dtype_itemsize(dtype)
    out: list = [None] * mesh.size
    for members in collective_groups(mesh, axes):
        p = len(members)
        if kind == "axis_index":
            for r, d in enumerate(members):
                out[int(d)] = np.asarray(r, dtype=np.int32)
            continue
        group = [np.asarray(blocks[int(d)]) for d in members]
        name = transposed_primitive(kind) if transposed else kind
        if transposed and kind == "pmean":
            name = "pbroadcast_mean"
        if name == "psum":
            res = ring_all_reduce(net, members, group)
        elif name == "pmean":
            res = [r / p for r in ring_all_reduce(net, members, group)]
        elif name == "pbroadcast":
            res = [g.copy() for g in group]
        elif name == "pbroadcast_mean":
            res = [g / p for g in group]
        elif name == "all_gather":
            res = _all_gather(net, members, group, op.attr("dim"))
        elif name == "psum_scatter":
            res = _reduce_scatter(net, members, group, op.attr("dim"))
        elif name == "all_to_all":
            s, c = op.attr("split_dim"), op.attr("concat_dim")
            res = _all_to_all(net, members, group, *((c, s) if transposed else (s, c)))
        elif name == "ppermute":
            perm = op.attr("perm")
            res = _ppermute(net, members, group, tuple((d, s) for s, d in perm) if transposed else perm)
        else:
            raise AssertionError(kind)
        for d, r in zip(members, res):
            out[int(d)] = np.asarray(r)
    return out


__all__ = ["collective_groups", "run_collective"]
