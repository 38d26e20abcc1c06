"""An op's own collectives: the communication an op performs itself, beside the redistributions
between ops.

Two kinds of op communicate inside their own instruction:

* a manual region's collective (``psum``, ``all_gather`` ... of seed 004) on its free axes, and
  its transpose collective in the backward (:func:`body_collective`);
* an op with a sharded ``STATISTIC`` factor (a normalisation over a sharded axis): each device
  reduces its block to partial statistics (the tensor with that dimension of size 1), AllReduces
  over the factor's axes complete them, and each device finishes its own block
  (:func:`statistic_collectives`; which statistics each AllReduce carries is the op's
  ``OpDef.statistics``, as XLA compiles it). A statistic factor the op reduces away (argmax's axis) is
  completed by AllGathers of its ``OpDef.gathered_statistics`` instead (the block's extreme and its global
  index), after which each device picks among them;
* an op with a sharded ``PERMUTATION`` factor (a concatenate, a slice or a scan along a sharded dimension):
  each operand's block is moved off that dimension by an AllToAll onto the first other dimension those
  axes divide, the op runs locally, and one AllToAll moves the result back; with no such dimension each
  operand is AllGathered along it and each device slices its block of the local result
  (:func:`permutation_exchanges`), as XLA's SPMD partitioner compiles a concatenate. A slice is XLA's
  halo exchange instead: CollectivePermutes bring each device the window of its result block
  (:mod:`planner.model.halo_exchange`), or an AllGather where XLA gathers; a scan (``cumsum``, a rule's
  ``whole_permutation``) gathers its operand along it and each device keeps its block of the result; a flip
  (``mirrored``) sends each block to the device holding its mirror, one CollectivePermute; a roll (``rotation``)
  brings each block the two pieces the rotation puts there, at most two CollectivePermutes. The
  backward is what XLA compiles for the transposes: a concat's slices of each operand's piece out of the
  cotangent, a slice's zero pad of it, each a halo exchange of that window (or one AllGather of the cotangent
  and local cuts); a scan's gathered cotangent, its transpose local.

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
from planner.ir.sharding import TensorSharding
from planner.model.halo_exchange import device_pairs, halo_permutes, mirror_pairs, rotation_permutes
from planner.rules.factors import RESULT, FactorKind
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
    #: a permute's ``(source, destination)`` device ids (a slice's halo exchange); empty for the others
    pairs: tuple[tuple[int, int], ...] = ()
    #: in the backward, the operand whose cotangent it makes (a concat's piece); the first for the others
    operand: int = 0

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
    the local result with its statistic dimensions of size 1; or the forward's AllGathers of its
    ``OpDef.gathered_statistics``, each of the local result's size per member; empty unless a ``STATISTIC``
    factor is sharded."""
    opdef = get_op(op.op)
    forward, backward = opdef.statistics
    gathered = () if transposed else opdef.gathered_statistics
    reduced = backward if transposed else forward
    if not gathered and not reduced:
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
    link = cluster.link_for(mesh, list(axes))
    collectives = []
    gather = step_kind("AllGather")
    for source in gathered:  # each member's statistic, in the operand's dtype (the extreme) or the result's
        itemsize = dtype_itemsize(graph.tensor(op.inputs[0]).dtype if source == "operand" else out.dtype)
        cost = RING.cost(gather.name, p, gather.unit_bytes(elements, elements * p, p, itemsize), link)
        collectives.append(OpCollective(gather.primitive, gather.name, axes, p, cost.bytes_per_device, cost.time_s))
    reduce = step_kind("AllReduce")
    for reductions in () if gathered else reduced:
        n = elements * len(reductions)
        cost = RING.cost(reduce.name, p, reduce.unit_bytes(n, n, p, dtype_itemsize(out.dtype)), link)
        collectives.append(OpCollective("+".join(reductions), reduce.name, axes, p, cost.bytes_per_device,
                                        cost.time_s))
    return tuple(collectives)


@dataclass(frozen=True)
class Exchange:
    """One move of a tensor of an op with a sharded ``PERMUTATION`` factor: ``kind`` (``AllToAll``,
    ``AllGather``, ``CollectivePermute``: a halo exchange, or ``Slice``: each device keeps its part, nothing
    moves) over ``axes`` takes a tensor from ``before`` to ``after``: operand ``which`` (an index), or
    :data:`~planner.rules.factors.RESULT`, or in the backward the cotangent to the operand ``which`` it makes;
    ``dims``: the dimension the axes leave, then (an AllToAll) the one they join."""

    kind: str
    which: int | str
    axes: tuple[AxisRef, ...]
    dims: tuple[int, ...]
    before: TensorSharding
    after: TensorSharding
    #: a halo exchange's permutes (``kind`` CollectivePermute: the input's window to the output, taken and
    #: moved at once), each ``(start, limit, pairs)`` (:func:`~planner.model.halo_exchange.halo_permutes`); a
    #: flip's, its ``(source, destination)`` device ids (:func:`~planner.model.halo_exchange.mirror_pairs`); a
    #: roll's as a halo exchange's (:func:`~planner.model.halo_exchange.rotation_permutes`)
    permutes: tuple = ()
    #: a window's first element in its input along ``dims[0]`` (a halo exchange, or a ``Slice`` of a gathered
    #: cotangent): the output's element ``j`` is the input's ``window + j``, zero outside the input
    window: int = 0


def permutation_axes(rule, strategy) -> tuple[AxisRef, ...]:
    """The mesh axes of ``rule``'s sharded ``PERMUTATION`` factors under ``strategy``; empty when none is."""
    return tuple(a for f in rule.factors_of_kind(FactorKind.PERMUTATION) for a in strategy.factor_axes[f])


def permutation_exchanges(rule, strategy, out_shape, wrt: tuple[int, ...] | None = None) -> tuple[Exchange, ...]:
    """The moves of an op whose ``PERMUTATION`` factor ``strategy`` shards (see the module docstring), in the
    order they run: the forward's, or with ``wrt`` the backward's for the operand cotangents in ``wrt``. Empty
    when the factor is whole."""
    axes = permutation_axes(rule, strategy)
    if not axes or wrt == ():
        return ()
    if rule.mirrored:  # a flip, and its backward (itself): each block to its mirror, reversed there
        dims = tuple(d for d, factors in enumerate(rule.result) if any(
            strategy.factor_axes[f] for f in factors if rule.factor_kinds[f] is FactorKind.PERMUTATION))
        before, after = (strategy.result, strategy.operands[0]) if wrt is not None else \
            (strategy.operands[0], strategy.result)
        return (Exchange("CollectivePermute", 0, axes, dims, before, after, mirror_pairs(before, dims)),)
    mesh = strategy.result.mesh
    [f] = rule.factors_of_kind(FactorKind.PERMUTATION)
    ax = next(d for d, factors in enumerate(rule.result) if f in factors)
    p = math.prod(a.size_in(mesh) for a in axes)
    if rule.rotation is not None:  # a roll: each block from the blocks the rotation brings (its backward rolls back)
        n = out_shape[ax]
        before, after, shift = (strategy.result, strategy.operands[0], -rule.rotation) if wrt is not None else \
            (strategy.operands[0], strategy.result, rule.rotation)
        return (Exchange("CollectivePermute", 0, axes, (ax,), before, after, rotation_permutes(n, p, shift)),)
    held = strategy.result.dim_axes
    result, operands = strategy.result, strategy.operands
    # XLA moves a concat's axes onto the first other dimension they divide beside the axes it already has; it
    # never moves a slice's, nor a scan's (it gathers the dimension)
    target = None if rule.window_start is not None or rule.whole_permutation else next(
        (d for d, n in enumerate(out_shape) if d != ax and n % (p * math.prod(a.size_in(mesh) for a in held[d])) == 0),
        None)

    def bare(layout: TensorSharding) -> TensorSharding:  # the permuted axes gone
        return layout.with_dims([[a for a in d if a not in axes] for d in layout.dim_axes])

    def off(layout: TensorSharding) -> TensorSharding:  # the permuted axes moved onto the target, if any
        if target is None:
            return bare(layout)
        dims = [[a for a in d if a not in axes] for d in layout.dim_axes]
        dims[target] += list(axes)
        return layout.with_dims(dims)

    def halo(which, before, after, n_in, n_out, window):
        permutes = halo_permutes(n_in, n_out, -window, p)
        return None if permutes is None else Exchange("CollectivePermute", which, axes, (ax,), before, after,
                                                     permutes, window)

    sizes = [rule.tensor_shape(k)[ax] for k in range(len(operands))]
    if wrt is not None:
        if rule.whole_permutation:  # a scan's backward: the cotangent gathered, its transpose local, each block kept
            return (Exchange("AllGather", RESULT, axes, (ax,), result, off(result)),
                    Exchange("Slice", 0, axes, (ax,), off(operands[0]), operands[0]))
        if rule.window_start is not None:  # a slice's backward: XLA's exchange for the zero pad of the cotangent
            move = halo(0, result, operands[0], out_shape[ax], sizes[0], -rule.window_start)
            if move is not None:
                return (move,)
            return (Exchange("AllGather", RESULT, axes, (ax,), result, off(result)),  # ... or a gather of it
                    Exchange("Slice", 0, axes, (ax,), off(operands[0]), operands[0]))
        # a concat's backward: XLA slices each operand's piece of the cotangent (a slice's halo exchange), or
        # gathers the cotangent once and cuts the pieces locally
        moves, gathered = [], False
        for k in wrt:
            start = sum(sizes[:k])
            move = halo(k, result, operands[k], out_shape[ax], sizes[k], start)
            if move is None and not gathered:
                moves.append(Exchange("AllGather", RESULT, axes, (ax,), result, bare(result)))
                gathered = True
            moves.append(move or Exchange("Slice", k, axes, (ax,), bare(operands[k]), operands[k], window=start))
        return tuple(moves)
    if rule.window_start is not None:  # a slice: XLA's halo exchange, or a gather where it gathers
        move = halo(0, operands[0], result, sizes[0], out_shape[ax], rule.window_start)
        if move is not None:
            return (move,)
    layouts = list(enumerate(operands)) + [(RESULT, result)]
    if target is None:
        return tuple(Exchange("AllGather", k, axes, (ax,), layout, off(layout)) if k != RESULT
                     else Exchange("Slice", k, axes, (ax,), off(layout), layout) for k, layout in layouts)
    return tuple(Exchange("AllToAll", k, axes, (ax, target), layout, off(layout)) if k != RESULT
                 else Exchange("AllToAll", k, axes, (target, ax), off(layout), layout) for k, layout in layouts)


def permutation_collectives(graph, op, strategy, cluster, wrt: tuple[int, ...] | None = None, rule=None
                            ) -> tuple[OpCollective, ...]:
    """The collectives of :func:`permutation_exchanges` (its local slices move nothing), priced by the ring
    formulas: forward, or the backward's with ``wrt``; ``rule``: the op's, where the caller holds it."""
    out = graph.tensor(op.output)
    rule = rule or rule_for(op, [graph.tensor(t).shape for t in op.inputs], out.shape)
    if FactorKind.PERMUTATION not in rule.factor_kinds:
        return ()
    exchanges = permutation_exchanges(rule, strategy, out.shape, wrt)
    if not exchanges:
        return ()
    mesh = strategy.result.mesh
    link = cluster.link_for(mesh, list(exchanges[0].axes))
    collectives = []
    for e in exchanges:
        if e.kind == "Slice":
            continue
        # the tensor that moves: the operand or the result (forward), the result's cotangent (backward)
        moved = out if e.which == RESULT or wrt is not None else graph.tensor(op.inputs[e.which])
        shape, itemsize = moved.shape, dtype_itemsize(moved.dtype)
        p = math.prod(a.size_in(mesh) for a in e.axes)
        if rule.mirrored:  # a flip's one permute of whole blocks
            nbytes = math.prod(e.before.local_shape(shape)) * itemsize if e.permutes else 0
            cost = RING.cost(e.kind, p, nbytes, link)
            collectives.append(OpCollective(step_kind(e.kind).primitive, e.kind, e.axes, p, cost.bytes_per_device,
                                            cost.time_s, e.permutes))
            continue
        kind = step_kind(e.kind)
        if e.kind == "CollectivePermute":  # each permute's buffer: its range of a block, times the other dims
            [ax] = e.dims
            local = e.before.local_shape(shape)
            rest = math.prod(local) // local[ax]
            for lo, hi, pairs in e.permutes:
                cost = RING.cost(kind.name, p, (hi - lo) * rest * itemsize, link)
                collectives.append(OpCollective(kind.primitive, kind.name, e.axes, p, cost.bytes_per_device,
                                                cost.time_s, device_pairs(e.before, e.axes, ax, pairs),
                                                e.which if wrt is not None else 0))
            continue
        unit = kind.unit_bytes(math.prod(e.before.local_shape(shape)), math.prod(e.after.local_shape(shape)), p,
                               itemsize)
        cost = RING.cost(kind.name, p, unit, link)
        collectives.append(OpCollective(kind.primitive, kind.name, e.axes, p, cost.bytes_per_device, cost.time_s))
    return tuple(collectives)


def op_collectives(graph, op, strategy, cluster, transposed: bool = False,
                   wrt: tuple[int, ...] = (0,), rule=None) -> tuple[OpCollective, ...]:
    """The collectives ``op`` under ``strategy`` communicates itself, in the order it runs them: its forward's,
    or with ``transposed`` its backward's for the operand gradients ``wrt`` (empty for an op that communicates
    only through redistributions). A manual collective's and a normalisation's backward run for operand 0.
    ``rule``: the op's sharding rule, where the caller holds it (else looked up)."""
    c = body_collective(graph, op, strategy, cluster, transposed)
    if c is not None:
        return (c,) if not transposed or 0 in wrt else ()
    if transposed and not wrt:
        return ()
    if get_op(op.op).statistics != ((), ()) or get_op(op.op).gathered_statistics:
        return statistic_collectives(graph, op, strategy, cluster, transposed) if not transposed or 0 in wrt else ()
    return permutation_collectives(graph, op, strategy, cluster, tuple(wrt) if transposed else None, rule)


def op_collectives_time_s(graph, op, strategy, cluster, wrt: tuple[int, ...] = (), rule=None) -> float:
    """Seconds ``op``'s own collectives take under ``strategy``: the forward's, plus the backward's for the
    operand gradients ``wrt`` (training: those that need one)."""
    total = sum(c.time_s for c in op_collectives(graph, op, strategy, cluster, rule=rule))
    if wrt:
        total += sum(c.time_s for c in op_collectives(graph, op, strategy, cluster, True, wrt, rule))
    return total


__all__ = ["Exchange", "OpCollective", "body_collective", "op_collectives", "op_collectives_time_s",
           "permutation_axes", "permutation_collectives", "permutation_exchanges", "statistic_axes",
           "statistic_collectives"]
