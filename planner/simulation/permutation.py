"""An op along a sharded permuted dimension (a concatenate, a slice, a scan, a flip, a roll), run as the exchanges the
plan prices (:func:`planner.model.op_collectives.permutation_exchanges`).

Forward, a concat: each operand moves off the permuted dimension (an AllToAll onto another dimension, or
an AllGather along it), each device runs the op's ordinary local instance on its blocks, and the result
moves back (an AllToAll, or each device keeping its own part); a slice: XLA's halo exchange brings each
device its window (:class:`_Halo`); a scan: its operand gathered along it, each device keeping its block of the
local result. Backward, as XLA compiles the transposes: a halo exchange per operand
of its window of the cotangent (a concat's piece, a slice's zero pad), or the cotangent gathered once and
each operand's part cut (or padded) locally. Bytes are counted on the phase's
:class:`~planner.simulation.collectives.Network` at the declared dtype, as the plan's
:class:`~planner.model.op_collectives.OpCollective` entries predict.
"""

from __future__ import annotations

import numpy as np

from graphs.dtypes import dtype_itemsize
from planner.errors import SimulationMismatch
from planner.ir.layout import shard_indices
from planner.model.halo_exchange import device_pairs, rotation_pieces
from planner.model.op_collectives import permutation_axes, permutation_exchanges
from planner.redistribution.steps import Step
from planner.simulation.collectives import run_step
from planner.simulation.distributed import DistributedArray
from planner.simulation.local_ops import LocalContext, local_compute
from planner.simulation.local_vjp import local_vjp


def sharded_permutation(rule, strategy) -> bool:
    """Whether ``strategy`` shards a ``PERMUTATION`` factor of ``rule``."""
    return bool(permutation_axes(rule, strategy))


def _run(move, arr: DistributedArray, costs, net, dtype: str | None = None) -> DistributedArray:
    """One exchange on ``arr``, its bytes and time the next of the plan's collectives (none for a slice); its
    bytes counted at ``dtype`` (the moving tensor's declared one), where given."""
    if arr.sharding != move.before:
        raise SimulationMismatch(f"a {move.kind} of a permuted dimension expects {move.before}, got {arr.sharding}")
    if move.kind == "Slice":
        nbytes, seconds = 0, 0.0
    else:
        c = next(costs, None)
        if c is None or c.kind != move.kind:
            raise SimulationMismatch(f"the plan lists no {move.kind} for this exchange of a permuted dimension")
        nbytes, seconds = c.bytes_per_device, c.time_s
    saved = net.itemsize
    if dtype is not None:
        net.itemsize = dtype_itemsize(dtype)
    try:
        return run_step(arr, Step(move.kind, move.axes, move.dims, move.before, move.after, nbytes, seconds), net)
    finally:
        net.itemsize = saved


def _contexts(moves, ins):
    """Each device's local view of the op between its exchanges: the operands and the result laid out with the
    permuted dimension whole (an ordinary local instance of the op)."""
    operands = tuple(m.after for m in moves[:-1])
    result = moves[-1].before
    return [LocalContext.for_device(operands, ins.in_shapes, result, ins.out_shape, d)
            for d in range(result.mesh.size)]


class _Halo:
    """XLA's halo exchange of a windowed dimension on the simulated devices (``move``: a slice's forward, its
    backward's pad of the cotangent, or a concat's backward slice of it): each permute's sender of every device
    it serves, and where each element of a device's output block comes from (:attr:`segments`).
    ``move.window``: where output block 0 starts in the input (a slice's start, a concat piece's offset; a
    slice's backward, minus its start); elements outside the input are zeros."""

    def __init__(self, move, in_shape, out_shape):
        [self.ax] = move.dims
        self.permutes = move.permutes
        self.bi, self.bo = move.before.local_shape(in_shape)[self.ax], move.after.local_shape(out_shape)[self.ax]
        size = in_shape[self.ax]
        end = move.window + out_shape[self.ax]  # past the window: the output's padding
        ordinal = [int(o) for o in shard_indices(move.before)[:, self.ax]]
        self.senders = [dict((dst, src) for src, dst in device_pairs(move.before, move.axes, self.ax, pairs))
                        for _, _, pairs in self.permutes]
        # per device, its output block as segments (piece, first, stop, offset in the piece's buffer): the
        # piece is "own" (its input block), a permute's index (the range that permute sends of a block) or
        # None (padding); each element from the first piece holding it, the own block first
        self.segments: list[list[tuple]] = []
        for d in range(move.before.mesh.size):
            i = ordinal[d]
            lo = move.window + self.bo * i
            pieces = [("own", i * self.bi, (i + 1) * self.bi)]
            pieces += [(k, ordinal[senders[d]] * self.bi + a, ordinal[senders[d]] * self.bi + b)
                       for k, ((a, b, _), senders) in enumerate(zip(self.permutes, self.senders)) if d in senders]
            segments, at = [], lo
            while at < lo + self.bo:
                if at < 0 or at >= size or at >= end:  # the pad's zeros, up to the input or the window's end
                    stop = min(0, lo + self.bo) if at < 0 else lo + self.bo
                    segments.append((None, at - lo, stop - lo, 0))
                    at = stop
                    continue
                piece = next((q for q in pieces if q[1] <= at < q[2]), None)
                if piece is None:
                    raise SimulationMismatch(f"the halo exchange leaves device {d} without element {at} of the "
                                             "windowed dimension")
                stop = min(piece[2], lo + self.bo, size)
                segments.append((piece[0], at - lo, stop - lo, at - piece[1]))
                at = stop
            self.segments.append(segments)

    def cut(self, block: np.ndarray, lo: int, hi: int) -> np.ndarray:
        index = [slice(None)] * block.ndim
        index[self.ax] = slice(lo, hi)
        return block[tuple(index)]

    def run(self, arr: DistributedArray, layout, out_shape, costs, net) -> DistributedArray:
        """The permutes (bytes counted, one network step each), then each device's output block read from its
        own block and what it received."""
        received: dict = {}
        for k, (lo, hi, _) in enumerate(self.permutes):
            if next(costs, None) is None:
                raise SimulationMismatch("the plan lists fewer permutes than the halo exchange runs")
            net.begin_step()
            for d, src in self.senders[k].items():
                received[(d, k)] = net.send(src, d, self.cut(np.asarray(arr.blocks[src]), lo, hi))
        blocks = []
        for d in range(len(arr.blocks)):
            own = np.asarray(arr.blocks[d])
            shape = list(own.shape)
            shape[self.ax] = self.bo
            out = np.zeros(shape, own.dtype)
            for piece, a, b, at in self.segments[d]:
                if piece is not None:
                    buffer = own if piece == "own" else received[(d, piece)]
                    self.cut(out, a, b)[...] = self.cut(buffer, at, at + b - a)
            blocks.append(out)
        return DistributedArray(layout, tuple(out_shape), blocks)


def _mirror(move, arr: DistributedArray, axes, costs, net) -> DistributedArray:
    """A flip's exchange (``move``: one CollectivePermute of whole blocks to their mirrors, bytes counted), each
    received block reversed along the flip's ``axes``; a device that is its own mirror reverses its own block."""
    if next(costs, None) is None:
        raise SimulationMismatch("the plan lists no permute for this flip of a permuted dimension")
    out = [np.flip(np.asarray(b), axes) for b in arr.blocks]
    net.begin_step()
    for src, dst in move.permutes:
        out[dst] = np.flip(net.send(src, dst, np.asarray(arr.blocks[src])), axes)
    return DistributedArray(move.after, arr.shape, out)


def _rotate(move, arr: DistributedArray, shift: int, costs, net) -> DistributedArray:
    """A roll by ``shift`` (``move``: its permutes, one network step each, bytes counted): each device's block
    joined from the pieces :func:`~planner.model.halo_exchange.rotation_pieces` gives, its own block's read in
    place, the others' received."""
    [ax] = move.dims
    p = int(np.prod([a.size_in(move.before.mesh) for a in move.axes]))
    pieces = rotation_pieces(arr.shape[ax], p, shift)
    permutes = iter(move.permutes)

    def cut(block, lo, hi):
        index = [slice(None)] * np.ndim(block)
        index[ax] = slice(lo, hi)
        return np.asarray(block)[tuple(index)]

    parts: list[list[np.ndarray]] = [[] for _ in arr.blocks]
    for offset, start, limit in pieces:
        if not offset % p:
            for d, block in enumerate(arr.blocks):
                parts[d].append(cut(block, start, limit))
            continue
        permute = next(permutes, None)
        if next(costs, None) is None or permute is None or permute[:2] != (start, limit):
            raise SimulationMismatch("the plan's permutes for this roll are not the pieces its rotation moves")
        net.begin_step()
        senders = dict((dst, src) for src, dst in device_pairs(move.before, move.axes, ax, permute[2]))
        for d in range(len(arr.blocks)):
            parts[d].append(net.send(senders[d], d, cut(arr.blocks[senders[d]], start, limit)))
    if next(permutes, None) is not None:
        raise SimulationMismatch("the plan lists more permutes for this roll than its rotation moves")
    return DistributedArray(move.after, arr.shape, [np.concatenate(ps, axis=ax) for ps in parts])


def forward(ins, operands, net) -> DistributedArray:
    """The result of ``ins`` (a Compute whose permutation factor is sharded), laid out as its strategy's
    result."""
    moves = permutation_exchanges(ins.rule, ins.strategy, ins.out_shape)
    costs = iter(ins.collectives)
    saved, net.itemsize = net.itemsize, dtype_itemsize(ins.dtype)
    try:
        if ins.rule.mirrored:
            out = _mirror(moves[0], operands[0], tuple(ins.op.attr("axes")), costs, net)
        elif ins.rule.rotation is not None:
            out = _rotate(moves[0], operands[0], ins.rule.rotation, costs, net)
        elif moves[0].kind == "CollectivePermute":  # a slice's halo exchange: the operand straight to the result
            halo = _Halo(moves[0], ins.in_shapes[0], ins.out_shape)
            out = halo.run(operands[0], moves[0].after, ins.out_shape, costs, net)
        else:
            dtypes = ins.in_dtypes or (ins.dtype,) * len(operands)
            moved = [_run(m, a, costs, net, dtype) for m, a, dtype in zip(moves, operands, dtypes)]
            blocks = [local_compute(ins.op, ins.rule, [a.blocks[d] for a in moved], ctx)
                      for d, ctx in enumerate(_contexts(moves, ins))]
            out = _run(moves[-1], DistributedArray(moves[-1].before, tuple(ins.out_shape), blocks), costs, net)
    finally:
        net.itemsize = saved
    if next(costs, None) is not None:
        raise SimulationMismatch(f"op {ins.op.name!r} ran fewer exchanges than its plan lists")
    return out


def backward(ins, cotangent: DistributedArray, net) -> list[list[np.ndarray]]:
    """Every device's cotangents of the operands in ``ins.wrt`` (a Backprop whose permutation factor is
    sharded), laid out as the operands: each by a halo exchange of its window of the cotangent (a concat's
    piece; a slice's zero pad), or cut from the cotangent gathered once (a slice's pad by its local VJP)."""
    s = ins.strategy
    back = permutation_exchanges(ins.rule, s, ins.out_shape, ins.wrt)
    costs = iter(ins.collectives)
    n = s.result.mesh.size
    if cotangent.sharding != back[0].before:
        raise SimulationMismatch(f"the backward of op {ins.op.name!r} expects {back[0].before}, got "
                                 f"{cotangent.sharding}")
    grads: dict = {}
    gathered = None
    saved, net.itemsize = net.itemsize, dtype_itemsize(ins.dtype)
    try:
        for move in back:
            k = move.which
            if ins.rule.mirrored:  # a flip's backward: the cotangent flipped back the same way
                grads[k] = _mirror(move, cotangent, tuple(ins.op.attr("axes")), costs, net)
                continue
            if ins.rule.rotation is not None:  # a roll's backward: the cotangent rolled back
                grads[k] = _rotate(move, cotangent, -ins.rule.rotation, costs, net)
                continue
            if move.kind == "CollectivePermute":
                halo = _Halo(move, ins.out_shape, ins.in_shapes[k])
                grads[k] = halo.run(cotangent, move.after, ins.in_shapes[k], costs, net)
                continue
            if move.kind == "AllGather":
                gathered = _run(move, cotangent, costs, net)
                continue
            if ins.rule.window_start is not None or ins.rule.whole_permutation:  # a slice (its pad), a scan: its
                # VJP on the gathered cotangent
                blocks = [local_vjp(ins.op, ins.rule, [None], None, gathered.blocks[d], LocalContext.for_device(
                    (move.before,), ins.in_shapes, gathered.sharding, ins.out_shape, d), (0,))[0] for d in range(n)]
            else:  # a concat: the operand's piece of the gathered cotangent
                [ax] = move.dims
                index = (slice(None),) * ax + (slice(move.window, move.window + ins.in_shapes[k][ax]),)
                blocks = [np.asarray(gathered.blocks[d])[index] for d in range(n)]
            grads[k] = _run(move, DistributedArray(move.before, tuple(ins.in_shapes[k]), blocks), costs, net)
    finally:
        net.itemsize = saved
    if next(costs, None) is not None:
        raise SimulationMismatch(f"the backward of op {ins.op.name!r} ran fewer exchanges than its plan lists")
    for k, layout in zip(ins.wrt, ins.cotangents):
        if grads[k].sharding != layout:
            raise SimulationMismatch(f"the cotangent of operand {k} arrives as {grads[k].sharding}, not {layout}")
    return [[grads[k].blocks[d] for k in ins.wrt] for d in range(n)]


__all__ = ["backward", "forward", "sharded_permutation"]
