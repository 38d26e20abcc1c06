"""An op along a sharded permuted dimension (a concatenate, a slice), run as the exchanges the plan prices
(:func:`planner.model.op_collectives.permutation_exchanges`).

Forward: each operand moves off the permuted dimension (an AllToAll onto another dimension, or an
AllGather along it), each device runs the op's ordinary local instance on its blocks, and the result
moves back (an AllToAll, or each device keeping its own part). Backward, the transposes: the result's
cotangent moves off the dimension, each device runs the op's local VJP (a concat's split, a slice's
zero padding), and each operand's piece a gradient is wanted for moves back. Bytes are counted on the
phase's :class:`~planner.simulation.collectives.Network` at the declared dtype, as the plan's
:class:`~planner.model.op_collectives.OpCollective` entries predict.
"""

from __future__ import annotations

import numpy as np

from graphs.dtypes import dtype_itemsize
from planner.errors import SimulationMismatch
from planner.model.op_collectives import permutation_axes, permutation_exchanges
from planner.redistribution.steps import Step
from planner.simulation.collectives import run_step
from planner.simulation.distributed import DistributedArray
from planner.simulation.local_ops import LocalContext, local_compute
from planner.simulation.local_vjp import local_vjp


def sharded_permutation(rule, strategy) -> bool:
    """Whether ``strategy`` shards a ``PERMUTATION`` factor of ``rule``."""
    return bool(permutation_axes(rule, strategy))


def _run(move, arr: DistributedArray, costs, net) -> DistributedArray:
    """One exchange on ``arr``, its bytes and time the next of the plan's collectives (none for a slice)."""
    if arr.sharding != move.before:
        raise SimulationMismatch(f"a {move.kind} of a permuted dimension expects {move.before}, got {arr.sharding}")
    if move.kind == "Slice":
        nbytes, seconds = 0, 0.0
    else:
        c = next(costs, None)
        if c is None or c.kind != move.kind:
            raise SimulationMismatch(f"the plan lists no {move.kind} for this exchange of a permuted dimension")
        nbytes, seconds = c.bytes_per_device, c.time_s
    return run_step(arr, Step(move.kind, move.axes, move.dims, move.before, move.after, nbytes, seconds), net)


def _contexts(moves, ins):
    """Each device's local view of the op between its exchanges: the operands and the result laid out with the
    permuted dimension whole (an ordinary local instance of the op)."""
    operands = tuple(m.after for m in moves[:-1])
    result = moves[-1].before
    return [LocalContext.for_device(operands, ins.in_shapes, result, ins.out_shape, d)
            for d in range(result.mesh.size)]


def forward(ins, operands, net) -> DistributedArray:
    """The result of ``ins`` (a Compute whose permutation factor is sharded), laid out as its strategy's
    result."""
    moves = permutation_exchanges(ins.rule, ins.strategy, ins.out_shape)
    costs = iter(ins.collectives)
    saved, net.itemsize = net.itemsize, dtype_itemsize(ins.dtype)
    try:
        moved = [_run(m, a, costs, net) for m, a in zip(moves, operands)]
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
    sharded), laid out as the operands."""
    s = ins.strategy
    moves = permutation_exchanges(ins.rule, s, ins.out_shape)
    back = permutation_exchanges(ins.rule, s, ins.out_shape, ins.wrt)
    costs = iter(ins.collectives)
    n = s.result.mesh.size
    saved, net.itemsize = net.itemsize, dtype_itemsize(ins.dtype)
    try:
        whole = _run(back[0], cotangent, costs, net)
        # the op's linear local VJP on the blocks with the permuted dimension whole (its operands' shapes only)
        pieces = [local_vjp(ins.op, ins.rule, [None] * len(ins.in_shapes), None, whole.blocks[d], ctx, ins.wrt)
                  for d, ctx in enumerate(_contexts(moves, ins))]
        grads = []
        for j, (move, layout) in enumerate(zip(back[1:], ins.cotangents)):
            k = move.which
            piece = DistributedArray(move.before, tuple(ins.in_shapes[k]), [pieces[d][j] for d in range(n)])
            got = _run(move, piece, costs, net)
            if got.sharding != layout:
                raise SimulationMismatch(f"the cotangent of operand {k} arrives as {got.sharding}, not {layout}")
            grads.append(got)
    finally:
        net.itemsize = saved
    if next(costs, None) is not None:
        raise SimulationMismatch(f"the backward of op {ins.op.name!r} ran fewer exchanges than its plan lists")
    return [[g.blocks[d] for g in grads] for d in range(n)]


__all__ = ["backward", "forward", "sharded_permutation"]
