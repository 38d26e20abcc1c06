"""Redistribution as XLA's SPMD partitioner reshards (``PartitionedHlo::ReshardNoCache`` in
xla/service/spmd/spmd_partitioner.cc), not the cheapest plan the engine finds.

The rules, in XLA's order:

* the same sharding moves nothing;
* a value pending a sum over axes the destination does not keep pending is completed first by one
  ``AllReduce`` over all of them (XLA's partial-replicate-to-replicated; it does not reduce-scatter into a
  sharded destination: the product is all-reduced whole and the shard sliced from it); the result of a
  reduction (sum, mean, max, min) is completed one reduced dimension at a time instead, the last first, as XLA
  partitions a reduce (``groups``);
* the layout then changes along XLA's route (:mod:`planner.redistribution.xla_route`: a CollectivePermute
  where only the devices' order differs, an AllToAll per pair of dimensions that trade tiles, a slice out of
  the replicas, an AllGather of what the target tiles less, the dimensions whose tile counts agree set aside,
  two dimensions trading a factor split and merged back, else every dimension gathered and the target
  sliced), each hop one collective of the engine. The goldens of tests/redistribution/test_xla_policy.py
  compile every reshard of a matrix on a 2x4 mesh, and samples on 2x2x2 and of rank 3, with XLA and compare
  each collective in order. Where the route leaves a named layout (a dimension tiled unevenly, XLA's padding
  and halos) the engine's cheapest plan stands in;
* a dimension split into at least twice as many blocks as positions (a slice's window of fewer positions than
  devices, a position on each of the first devices along its axes) that the destination does not split is
  replicated by one ``AllReduce`` of those positions over its axes, each put in place in the zeroed dimension
  (:func:`_padded_steps`), even where gathering it moves as many bytes;
* an operand of a dot that groups the devices (:func:`regrouped`: XLA's dot partitioner groups them by the mesh
  axes the result takes from the other operand) and holds one of those axes that it must give up is first moved
  onto the axes free inside each group by one CollectivePermute, then resharded along the route
  (tests/frontends/test_shardy_suite.py compiles such dots).

Mesh changes and pending maxima keep the engine's plan (XLA has no rule of its own to emulate there).
"""

from __future__ import annotations

import math

from graphs.dtypes import dtype_itemsize
from planner.caches import memoize
from planner.errors import ReshardError
from planner.ir.axis import AxisRef
from planner.ir.sharding import PENDING_SUM, TensorSharding
from planner.redistribution.engine import all_reduce_step, reshard, reshard_for_planning
from planner.redistribution.moves import replicates_in_place
from planner.redistribution.steps import ReshardPlan, Step
from planner.redistribution.xla_route import xla_route

__all__ = ["POLICIES", "free_in_groups", "regrouped", "reshard_like_xla", "reshard_with_policy"]

POLICIES = ("cheapest", "xla")
"""``cheapest``: the engine's cheapest plan (bfs, ilp, auto); ``xla``: XLA's partitioner's moves (propagate)."""


def reshard_with_policy(shape, dtype, source, destination, cluster, within=None, policy="cheapest",
                        groups=(), regroup=()) -> ReshardPlan:
    """The planner's redistribution of one tensor under ``policy`` (one of :data:`POLICIES`); ``groups``: the
    order the ``xla`` policy completes the source's pending reduction in, ``regroup``: how the reading dot groups
    the devices (see :func:`reshard_like_xla`)."""
    if policy not in POLICIES:
        raise ReshardError(f"unknown redistribution policy {policy!r}; use one of {', '.join(POLICIES)}")
    if policy == "xla":
        return reshard_like_xla(tuple(shape), dtype, source, destination, cluster, within, tuple(groups),
                                tuple(regroup))
    return reshard_for_planning(shape, dtype, source, destination, cluster, within)


@memoize("XLA redistribution plans", maxsize=65536)
def reshard_like_xla(shape, dtype, source: TensorSharding, destination: TensorSharding, cluster,
                     within=None, groups=(), regroup=()) -> ReshardPlan:
    """The moves XLA's partitioner makes from ``source`` to ``destination`` (see the module docstring).

    ``groups`` (a reduction that completes by dimension: :meth:`planner.model.nodes.OpNode.pending_groups`): the
    pending axes are completed one group at a time, in order, each by an AllReduce (of the kind pending: a
    maximum too); otherwise by one AllReduce over all of them (a pending maximum keeps the engine's plan).
    ``regroup`` (the reader is a dot: :meth:`planner.model.nodes.OpNode.regroup`): where :func:`regrouped` gives
    a layout, the source goes there first."""
    src, dst = source.layout_only(), destination.layout_only()
    if (src.mesh != dst.mesh or (src.unreduced and src.reduction != PENDING_SUM and not groups)
            or not set(dst.unreduced) <= set(src.unreduced)):
        return reshard_for_planning(shape, dtype, source, destination, cluster, within)
    steps: list[Step] = []
    state = src
    completed = tuple(a for a in src.unreduced if a not in dst.unreduced)
    for group in [*(tuple(a for a in g if a in completed) for g in groups), completed]:
        group = tuple(a for a in group if a in state.unreduced)
        if not group:
            continue
        after = state.with_unreduced(tuple(a for a in state.unreduced if a not in group))
        steps.append(all_reduce_step(shape, dtype_itemsize(dtype), state, after, group, cluster))
        state = after
    if state != dst and regroup and not steps:
        steps += _regroup_steps(shape, dtype, state, dst, cluster, regroup)
        state = steps[-1].after if steps else state
    if state != dst:
        padded = _padded_steps(shape, dtype, state, dst, cluster)
        steps += padded
        state = padded[-1].after if padded else state
    if state != dst:
        steps += _layout_steps(shape, dtype, state, dst, cluster, within)
    return ReshardPlan(shape, dtype, source, destination, tuple(steps))


def regrouped(shape, source: TensorSharding, destination: TensorSharding, axes) -> TensorSharding | None:
    """Where XLA's dot partitioner moves an operand in ``source`` before resharding it to ``destination`` inside
    the device groups of ``axes`` (:meth:`planner.model.nodes.OpNode.regroup`: the axes the devices are grouped
    by); None: straight along the route.

    The grouping axes the source holds and the destination drops (all on one dimension) are replaced, where they
    stood, by every mesh axis free inside a group (unused by the source, the destination and the grouping axes),
    in mesh order, when those are at least as many devices; the dimension must divide evenly. The destination
    must only drop axes (XLA then gathers inside each group). JAX 0.10.2, probed on 2x4 and 2x2x2: ``[{}, {"a"}]``
    read whole by a dot grouped by ``a`` goes to ``[{}, {"b", "c"}]``, then is gathered over b and c, on a kept
    dimension or a contracting one; with no free axis (``[{"b", "c"}, {"a"}]``) or too few (``tp`` of 4 against
    ``dp`` of 2 free) XLA gathers over the grouping axis itself. A contraction XLA keeps split on the free axes
    (:func:`planner.searches.propagate.plan.op_factor_axes`) is a destination with those axes: one permute along
    the route. Whole axes only."""
    if not axes or source.unreduced or destination.unreduced:
        return None
    held = source.sharding_axes()
    kept = set(destination.sharding_axes())
    grouped = [a for a in axes if a in held and a not in kept]
    if not grouped or not all(a.is_full for a in (*held, *axes)):
        return None
    where = {i for i, d in enumerate(source.dims) if any(a in grouped for a in d.axes)}
    if len(where) != 1 or not kept <= set(held) - set(grouped):
        return None
    (d,) = where
    mesh = source.mesh
    free = free_in_groups(mesh, (*held, *axes, *kept))
    if not free or math.prod(a.size_in(mesh) for a in free) < math.prod(a.size_in(mesh) for a in grouped):
        return None
    old = source.dims[d].axes
    at = min(old.index(a) for a in grouped)
    new = [a for a in old if a not in grouped]
    new[at:at] = free
    if shape[d] % math.prod(a.size_in(mesh) for a in new):
        return None
    return source.with_dims([new if i == d else dim.axes for i, dim in enumerate(source.dims)])


def free_in_groups(mesh, used) -> tuple[AxisRef, ...]:
    """The whole mesh axes (of size > 1) none of ``used`` names, in mesh order: where XLA's dot partitioner moves
    an operand inside each device group (:func:`regrouped`, and the contractions
    :func:`planner.searches.propagate.plan.op_factor_axes` keeps split there)."""
    taken = {a.name for a in used}
    return tuple(AxisRef(n) for n in mesh.axis_names if n not in taken and mesh.axis_size(n) > 1)


def _regroup_steps(shape, dtype, source, destination, cluster, regroup) -> list[Step]:
    """The CollectivePermute to :func:`regrouped`'s layout (the engine's one collective), or none."""
    target = regrouped(shape, source, destination, regroup)
    if target is None or target == destination:
        return []
    try:
        return _one_hop(shape, dtype, source, target, cluster)
    except ReshardError:
        return []


def _padded_steps(shape, dtype, source: TensorSharding, destination: TensorSharding, cluster) -> list[Step]:
    """XLA's replication of the dimensions ``source`` splits into at least twice as many blocks as positions and
    ``destination`` does not split (a slice's window of fewer positions than devices, a position on each of the
    first devices along the axes): every device puts its position in place in the zeroed dimension (the others
    zero their padding) and one AllReduce over those axes completes the value (the engine's masked ``Slice``,
    then its AllReduce), as XLA replicates such a dimension (``ReplicatePartial``); none where there is no such
    dimension. Probed on JAX 0.10.2: ``x[:, 0]`` of a dimension split over 2 or 4 devices, then squeezed,
    all-reduces the position over them, as ``x[:, 5:7]`` on 4 devices all-reduces its 2 positions; ``x[1, 2]`` of
    two dimensions over dp and tp, squeezed, puts its position in place in both and all-reduces over dp and tp."""
    shards = source.shard_counts()
    masking = [k for k, (n, c) in enumerate(zip(shape, shards))
               if replicates_in_place(n, c) and not destination.dims[k].axes]
    axes = [a for k in masking for a in source.dims[k].axes]
    if not axes or source.unreduced:
        return []
    masked = source.with_dims([[] if k in masking else d.axes for k, d in enumerate(source.dims)]
                              ).with_unreduced(tuple(axes))
    try:
        hop = _one_hop(shape, dtype, source, masked, cluster)
    except ReshardError:
        return []
    if not hop or any(step.kind != "Slice" for step in hop):  # a masked Slice per dimension, nothing moved
        return []
    return hop + [all_reduce_step(shape, dtype_itemsize(dtype), masked, masked.with_unreduced(()), tuple(axes),
                                  cluster)]


def _layout_steps(shape, dtype, source: TensorSharding, destination: TensorSharding, cluster, within) -> list[Step]:
    """XLA's route between two layouts (:func:`~planner.redistribution.xla_route.xla_route`), each hop the
    engine's one collective; the engine's cheapest plan where the route is not modelled."""
    route = xla_route(shape, source, destination)
    if route is not None:
        steps, state = [], source
        try:
            for _, layout in route:
                steps += _one_hop(shape, dtype, state, layout, cluster)
                state = layout
            return steps
        except ReshardError:
            pass
    return list(reshard_for_planning(shape, dtype, source, destination, cluster, within).steps)


def _one_hop(shape, dtype, source: TensorSharding, destination: TensorSharding, cluster) -> list[Step]:
    """The engine's plan of one hop of XLA's route: one collective (whole axes where they do, sub-axes where the
    hop splits an axis), fewest bytes."""
    plans = []
    for pieces in ("axes", "primes"):
        try:
            plans.append(reshard(shape, dtype, source, destination, cluster, objective="bytes", pieces=pieces,
                                 ties="any").steps)
        except ReshardError:
            continue
        if len(plans[-1]) == 1:
            return list(plans[-1])
    if not plans:
        raise ReshardError(f"no plan from {source} to {destination}")
    return list(min(plans, key=len))
