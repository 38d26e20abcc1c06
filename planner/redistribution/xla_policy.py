"""Redistribution as XLA's SPMD partitioner reshards (``PartitionedHlo::ReshardNoCache`` in
xla/service/spmd/spmd_partitioner.cc), not the cheapest plan the engine finds.

The rules, in XLA's order:

* the same sharding moves nothing;
* a value pending a sum over axes the destination does not keep pending is completed first by one
  ``AllReduce`` over all of them (XLA's partial-replicate-to-replicated; it does not reduce-scatter into a
  sharded destination: the product is all-reduced whole and the shard sliced from it); the result of a
  reduction (sum, mean, max, min) is completed one reduced dimension at a time instead, the last first, as XLA
  partitions a reduce (``groups``);
* the layout then changes as the engine's cheapest plan changes it: XLA slices before it gathers, gathers
  trailing axes only, and swaps an axis between two dimensions with one ``AllToAll``, as the engine does (the
  goldens of tests/redistribution/test_xla_policy.py compile such reshards with XLA). Where XLA moves an
  axis between dimensions of unlike extent it may slice, ``CollectivePermute`` the slices and gather them
  (``[{"tp"}, {"dp"}]`` to ``[{"dp"}, {}]``); the engine finds its own cheapest there.

Mesh changes and pending maxima keep the engine's plan (XLA has no rule of its own to emulate there).
"""

from __future__ import annotations

from graphs.dtypes import dtype_itemsize
from planner.caches import memoize
from planner.errors import ReshardError
from planner.ir.sharding import PENDING_SUM, TensorSharding
from planner.redistribution.engine import all_reduce_step, reshard_for_planning
from planner.redistribution.steps import ReshardPlan, Step

__all__ = ["POLICIES", "reshard_like_xla", "reshard_with_policy"]

POLICIES = ("cheapest", "xla")
"""``cheapest``: the engine's cheapest plan (bfs, ilp, auto); ``xla``: XLA's partitioner's moves (propagate)."""


def reshard_with_policy(shape, dtype, source, destination, cluster, within=None, policy="cheapest",
                        groups=()) -> ReshardPlan:
    """The planner's redistribution of one tensor under ``policy`` (one of :data:`POLICIES`); ``groups``: the
    order the ``xla`` policy completes the source's pending reduction in (see :func:`reshard_like_xla`)."""
    if policy not in POLICIES:
        raise ReshardError(f"unknown redistribution policy {policy!r}; use one of {', '.join(POLICIES)}")
    if policy == "xla":
        return reshard_like_xla(tuple(shape), dtype, source, destination, cluster, within, tuple(groups))
    return reshard_for_planning(shape, dtype, source, destination, cluster, within)


@memoize("XLA redistribution plans", maxsize=65536)
def reshard_like_xla(shape, dtype, source: TensorSharding, destination: TensorSharding, cluster,
                     within=None, groups=()) -> ReshardPlan:
    """The moves XLA's partitioner makes from ``source`` to ``destination`` (see the module docstring).

    ``groups`` (a reduction that completes by dimension: :meth:`planner.model.nodes.OpNode.pending_groups`): the
    pending axes are completed one group at a time, in order, each by an AllReduce (of the kind pending: a
    maximum too); otherwise by one AllReduce over all of them (a pending maximum keeps the engine's plan)."""
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
    if state != dst:
        steps += reshard_for_planning(shape, dtype, state, dst, cluster, within).steps
    return ReshardPlan(shape, dtype, source, destination, tuple(steps))

