"""A concatenate along a sharded dimension, run as the exchanges the plan prices
(:func:`planner.model.op_collectives.permutation_exchanges`).

Forward: each operand moves off the concatenated dimension (an AllToAll onto another dimension, or an
AllGather along it), each device concatenates its blocks, and the result moves back (an AllToAll, or
each device keeping its own part). Backward, the transposes: the result's cotangent moves off the
dimension, each device splits it into the operands' pieces, and each piece a gradient is wanted for
moves back. Bytes are counted on the phase's :class:`~planner.simulation.collectives.Network` at the
declared dtype, as the plan's :class:`~planner.model.op_collectives.OpCollective` entries predict.
"""

from __future__ import annotations

import numpy as np

from graphs.dtypes import dtype_itemsize
from planner.errors import SimulationMismatch
from planner.model.op_collectives import permutation_axes, permutation_exchanges
from planner.redistribution.steps import Step
from planner.rules.factors import FactorKind
from planner.simulation.collectives import run_step
from planner.simulation.distributed import DistributedArray


def sharded_permutation(rule, strategy) -> bool:
    """Whether ``strategy`` shards a ``PERMUTATION`` factor of ``rule``."""
    return bool(permutation_axes(rule, strategy))


def _axis(rule) -> int:
    """The permuted (concatenated) dimension of the result."""
    [f] = rule.factors_of_kind(FactorKind.PERMUTATION)
    return next(d for d, factors in enumerate(rule.result) if f in factors)


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


def forward(ins, operands, net) -> DistributedArray:
    """The result of ``ins`` (a Compute of a concat whose permutation factor is sharded), laid out as its
    strategy's result."""
    s = ins.strategy
    moves = permutation_exchanges(ins.rule, s, ins.out_shape)
    costs = iter(ins.collectives)
    ax = _axis(ins.rule)
    saved, net.itemsize = net.itemsize, dtype_itemsize(ins.dtype)
    try:
        moved = [_run(m, a, costs, net) for m, a in zip(moves, operands)]
        blocks = [np.concatenate([np.asarray(a.blocks[d]) for a in moved], axis=ax)
                  for d in range(s.result.mesh.size)]
        out = _run(moves[-1], DistributedArray(moves[-1].before, tuple(ins.out_shape), blocks), costs, net)
    finally:
        net.itemsize = saved
    if next(costs, None) is not None:
        raise SimulationMismatch("a concat ran fewer exchanges than its plan lists")
    return out


def backward(ins, cotangent: DistributedArray, net) -> list[list[np.ndarray]]:
    """Every device's cotangents of the operands in ``ins.wrt`` (a Backprop of a concat whose permutation
    factor is sharded), laid out as the operands."""
    s = ins.strategy
    moves = permutation_exchanges(ins.rule, s, ins.out_shape, ins.wrt)
    costs = iter(ins.collectives)
    ax = _axis(ins.rule)
    n = s.result.mesh.size
    starts = np.cumsum([0] + [shape[ax] for shape in ins.in_shapes])
    saved, net.itemsize = net.itemsize, dtype_itemsize(ins.dtype)
    try:
        whole = _run(moves[0], cotangent, costs, net)
        grads = []
        for move, layout in zip(moves[1:], ins.cotangents):
            k = move.which
            index = (slice(None),) * ax + (slice(int(starts[k]), int(starts[k + 1])),)
            piece = DistributedArray(move.before, tuple(ins.in_shapes[k]),
                                     [np.asarray(whole.blocks[d])[index] for d in range(n)])
            got = _run(move, piece, costs, net)
            if got.sharding != layout:
                raise SimulationMismatch(f"the cotangent of operand {k} arrives as {got.sharding}, not {layout}")
            grads.append(got)
    finally:
        net.itemsize = saved
    if next(costs, None) is not None:
        raise SimulationMismatch("a concat's backward ran fewer exchanges than its plan lists")
    return [[g.blocks[d] for g in grads] for d in range(n)]


__all__ = ["backward", "forward", "sharded_permutation"]
