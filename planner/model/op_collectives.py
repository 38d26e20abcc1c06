"""An op's own collectives: the communication an op performs itself, beside the redistributions
between ops.

Two kinds of op communicate inside their own instruction:

* a manual region's collective (``psum``, ``all_gather`` ... of seed 004) on its free axes, and
  its transpose collective in the backward (:func:`body_collective`);
* an op with a sharded ``STATISTIC`` factor (a normalisation over a sharded axis): each device
  reduces its block to partial statistics (the tensor with that dimension of size 1), AllReduces
  over the factor's axes complete them, and each device finishes its own block
  (:func:`statistic_collectives`; which statistics each AllReduce carries is the op's
  ``OpDef.statistics``, as XLA compiles it).

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
from graphs.ops import get_op
from planner.collectives import backprop_primitive, primitive, seed_name, step_kind
from planner.ir.axis import AxisRef
from planner.rules.factors import FactorKind
from planner.rules.registry import rule_for


@dataclass(frozen=True)
class OpCollective:
    """One collective an op itself communicates on each device's local block: the seed-004
    ``primitive`` it is (a statistics AllReduce: the reductions of its statistics, ``sum+sum``),
    the step ``kind`` it lowers to (``AllReduce`` ...), the mesh ``axes`` it runs over (a manual
    region's axes, or the sub-axes a statistic is sharded by) and ``group_size``, and the bytes each
    device receives and the time it takes (ring formulas of :mod:`costmodels.collectives`)."""

    primitive: str
    kind: str
    axes: tuple[AxisRef, ...]
    group_size: int
    bytes_per_device: int
    time_s: float

    def axis_names(self) -> tuple[str, ...]:
        """The axes as text: a whole axis by its name, a sub-axis as ``"x":(2)2``."""
        return tuple(a.name if a.is_full else str(a) for a in self.axes)


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
    axes = tuple(AxisRef(a) for a in op.attr("axes"))
    p = int(op.attr("group_size"))
    mesh = strategy.result.mesh
    itemsize = dtype_itemsize(graph.tensor(op.output).dtype)
    operand = math.prod(strategy.operands[0].local_shape(graph.tensor(op.inputs[0]).shape))
    result = math.prod(strategy.result.local_shape(graph.tensor(op.output).shape))
    if transposed:
        operand, result = result, operand
    link = cluster.link_for(mesh, list(axes))
    kind = step_kind(prim.lowering)
    unit = kind.unit_bytes(operand, result, p, itemsize)
    if kind.name == "CollectivePermute" and not any(src != dst for src, dst in op.attr("perm")):
        unit = 0  # every pair keeps its block: nothing moves
    cost = RING.cost(kind.name, p, unit, link)
    return OpCollective(name, prim.lowering, axes, p, cost.bytes_per_device, cost.time_s)


def statistic_axes(rule, strategy) -> tuple[AxisRef, ...]:
    """The mesh axes of ``rule``'s sharded ``STATISTIC`` factors under ``strategy`` (the groups its
    statistics are AllReduced over); empty when none is sharded."""
    return tuple(a for f in rule.factors_of_kind(FactorKind.STATISTIC) for a in strategy.factor_axes[f])


def statistic_collectives(graph, op, strategy, cluster, transposed: bool = False) -> tuple[OpCollective, ...]:
    """The AllReduces of ``op``'s statistics under ``strategy`` (forward, or backward with ``transposed``):
    one per entry of its ``OpDef.statistics``, each of as many statistics as the entry names, every statistic
    the local result with its statistic dimensions of size 1; empty unless a ``STATISTIC`` factor is sharded."""
    forward, backward = get_op(op.op).statistics
    if not forward and not backward:
        return ()
    out = graph.tensor(op.output)
    rule = rule_for(op, [graph.tensor(t).shape for t in op.inputs], out.shape)
    axes = statistic_axes(rule, strategy)
    if not axes:
        return ()
    mesh = strategy.result.mesh
    p = math.prod(a.size_in(mesh) for a in axes)
    local = list(strategy.result.local_shape(out.shape))
    for f in rule.factors_of_kind(FactorKind.STATISTIC):
        for d, factors in enumerate(rule.result):
            if f in factors:
                local[d] = 1
    elements = math.prod(local)
    itemsize = dtype_itemsize(out.dtype)
    link = cluster.link_for(mesh, list(axes))
    kind = step_kind("AllReduce")
    collectives = []
    for reductions in backward if transposed else forward:
        n = elements * len(reductions)
        cost = RING.cost(kind.name, p, kind.unit_bytes(n, n, p, itemsize), link)
        collectives.append(OpCollective("+".join(reductions), kind.name, axes, p, cost.bytes_per_device, cost.time_s))
    return tuple(collectives)


def op_collectives(graph, op, strategy, cluster, transposed: bool = False) -> tuple[OpCollective, ...]:
    """The collectives ``op`` under ``strategy`` communicates itself, in the order it runs them: its forward's,
    or with ``transposed`` its backward's (empty for an op that communicates only through redistributions)."""
    c = body_collective(graph, op, strategy, cluster, transposed)
    if c is not None:
        return (c,)
    return statistic_collectives(graph, op, strategy, cluster, transposed)


def op_collectives_time_s(graph, op, strategy, cluster, backward: bool) -> float:
    """Seconds ``op``'s own collectives take under ``strategy``: the forward's, plus the backward's when
    ``backward`` (training, and the op's backward runs)."""
    phases = (False, True) if backward else (False,)
    return sum(c.time_s for t in phases for c in op_collectives(graph, op, strategy, cluster, t))


__all__ = ["OpCollective", "body_collective", "op_collectives", "op_collectives_time_s", "statistic_axes",
           "statistic_collectives"]
