"""An op's own collectives: the communication an op performs itself, beside the redistributions
between ops.

Two kinds of op communicate inside their own instruction:

* a manual region's collective (``psum``, ``all_gather`` ... of seed 004) on its free axes, and
  its transpose collective in the backward (:func:`body_collective`);

Each :class:`~planner.partitioning.program.Compute` carries its forward collectives and each
:class:`~planner.partitioning.program.Backprop` its backward ones (:func:`op_collectives`); the cost
tables price them (:func:`op_collectives_time_s`) so every search optimises them, and the program
counts them in its bytes, collective counts, schedule and report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from costmodels import RING
from graphs.dtypes import dtype_itemsize
from graphs.ops.collectives import is_collective
from planner.collectives import backprop_primitive, primitive, seed_name, step_kind
from planner.ir.axis import AxisRef


@dataclass(frozen=True)
class OpCollective:
    """One collective an op itself communicates on each device's local block: the seed-004
    ``primitive`` it is (or whose reduction it performs), the step ``kind`` it lowers to (``AllReduce`` ...), its manual ``axes`` and
    ``group_size``, and the bytes each device receives and the time it takes (ring formulas of
    :mod:`costmodels.collectives`)."""

    primitive: str
    kind: str
    axes: tuple[str, ...]
    group_size: int
    bytes_per_device: int
    time_s: float


def body_collective(graph, op, strategy, cluster, transposed: bool = False) -> OpCollective | None:
    """What collective op ``op`` under ``strategy`` (free axes) communicates; None for one that does not
    (``pbroadcast``, ``axis_index``) and for every other op. ``transposed``: its backward, the transpose
    collective on the cotangents (psum -> pbroadcast: nothing; all_gather -> psum_scatter ...)."""
    if not is_collective(op):
        return None
    name = seed_name(backprop_primitive(op.op) if transposed else op.op)
    prim = primitive(name)
    if prim.lowering is None:
        return None
    axes = tuple(op.attr("axes"))
    p = int(op.attr("group_size"))
    mesh = strategy.result.mesh
    itemsize = dtype_itemsize(graph.tensor(op.output).dtype)
    operand = math.prod(strategy.operands[0].local_shape(graph.tensor(op.inputs[0]).shape))
    result = math.prod(strategy.result.local_shape(graph.tensor(op.output).shape))
    if transposed:
        operand, result = result, operand
    link = cluster.link_for(mesh, [AxisRef(a) for a in axes])
    kind = step_kind(prim.lowering)
    unit = kind.unit_bytes(operand, result, p, itemsize)
    if kind.name == "CollectivePermute" and not any(src != dst for src, dst in op.attr("perm")):
        unit = 0  # every pair keeps its block: nothing moves
    cost = RING.cost(kind.name, p, unit, link)
    return OpCollective(name, prim.lowering, axes, p, cost.bytes_per_device, cost.time_s)


def op_collectives(graph, op, strategy, cluster, transposed: bool = False) -> tuple[OpCollective, ...]:
    """The collectives ``op`` under ``strategy`` communicates itself, in the order it runs them: its forward's,
    or with ``transposed`` its backward's (empty for an op that communicates only through redistributions)."""
    c = body_collective(graph, op, strategy, cluster, transposed)
    return (c,) if c is not None else ()


def op_collectives_time_s(graph, op, strategy, cluster, backward: bool) -> float:
    """Seconds ``op``'s own collectives take under ``strategy``: the forward's, plus the backward's when
    ``backward`` (training, and the op's backward runs)."""
    phases = (False, True) if backward else (False,)
    return sum(c.time_s for t in phases for c in op_collectives(graph, op, strategy, cluster, t))


__all__ = ["OpCollective", "body_collective", "op_collectives", "op_collectives_time_s"]
