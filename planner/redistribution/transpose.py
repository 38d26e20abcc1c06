"""Transposing a redistribution (seed 004): the backward of a forward reshard plan.

A forward :class:`~planner.redistribution.steps.ReshardPlan` takes a value through
layouts ``L0 -> L1 -> ... -> Ln``. Its transpose takes the *cotangent* of the
value back from ``Ln`` to ``L0``, hop by hop in reverse order, and each hop is the
transpose of the forward step (seed 004's table, :mod:`planner.collectives`):

================================  ===========================================  ===============
forward step (primitive)          transposed hop                               communication
================================  ===========================================  ===============
AllReduce (psum)                  pbroadcast: the cotangent is already whole   none
AllGather (all_gather_invariant)  pscatter: keep this device's piece           none (a slice)
AllGather, cotangent pending      psum_scatter (the all_gather + pbroadcast    ReduceScatter
over the gathered axes            the reader fused)
ReduceScatter (psum_scatter)      all_gather                                   AllGather
Slice (pscatter)                  all_gather_invariant                         AllGather
AllToAll                          AllToAll with the dimensions swapped         AllToAll
CollectivePermute (ppermute)      the inverse permutation                      CollectivePermute
================================  ===========================================  ===============

Cotangents are held in *stripped* layouts: a pending sum's cotangent is the whole
value on every device (the transpose of psum is pbroadcast, a no-op), so the
cotangent of a value in layout ``L`` lives in ``L`` without its unreduced axes.
A reader that used a device-invariant operand inside device-varying computation
(the pbroadcast the type rules insert, see
:func:`planner.training.gradients.operand_gradient`) hands back a cotangent
*pending* over those axes; the transpose of that pbroadcast is a psum. The pending
axes travel with the cotangent and are summed where it is cheapest: fused with a
transposed AllGather into a ReduceScatter, before a hop that makes the buffer
grow, or at the end (``L0``'s cotangent has no pending sums). Each hop is realised
by the redistribution engine between the two cotangent layouts (a single
collective, or nothing), so the bytes the planner prices are the bytes the
simulator moves; under the ``xla`` policy (``--search propagate``) by XLA's route
(:func:`~planner.redistribution.xla_policy.reshard_with_policy`): a pending sum
completed into a sharded layout is all-reduced whole and sliced, as XLA's partitioner
writes the backward of an FSDP weight's gather (its CPU pipeline forms no
reduce-scatter), where the engine reduce-scatters.

With ``insert_pbroadcast=False`` (seed 004's "current" scheme, kept to show what
the device-variance types save) no value is known to be device-invariant: every
cotangent is treated as pending over every mesh axis its layout does not use, so
each hop sums what is already whole.

>>> from planner.ir import parse_mesh, parse_sharding
>>> from planner.redistribution.engine import reshard_for_planning
>>> m = parse_mesh('@m = <["dp"=2, "tp"=4]>')
>>> fwd = reshard_for_planning((8, 16), "f32", parse_sharding('[{"tp"}, {}]', m), parse_sharding('[{}, {}]', m), None)
>>> [s.kind for s in fwd.steps]                                    # all_gather_invariant
['AllGather']
>>> [s.kind for s in transpose_plan(fwd, (), None).steps]           # pscatter: a local slice
['Slice']
"""

from __future__ import annotations

from typing import Sequence

from planner.caches import memoize
from planner.ir.axis import AxisRef
from planner.ir.sharding import TensorSharding
from planner.redistribution.engine import reshard_for_planning
from planner.redistribution.steps import ReshardPlan
from planner.redistribution.xla_policy import reshard_with_policy


def cotangent_layout(layout: TensorSharding, pending: Sequence[AxisRef] = ()) -> TensorSharding:
    """Where the cotangent of a value in ``layout`` lives: no pending sums of its own, plus ``pending``."""
    layout = layout.layout_only()
    return layout.with_unreduced(tuple(pending)) if (layout.unreduced or pending) else layout


def transpose_plan(forward: ReshardPlan, pending: Sequence[AxisRef], cluster, *,
                   insert_pbroadcast: bool = True, within: Sequence[AxisRef] | None = None,
                   policy: str = "cheapest", groups: Sequence[Sequence[AxisRef]] = ()) -> ReshardPlan:
    """The backward of ``forward`` for a cotangent pending over ``pending`` (see the module docstring).

    The result goes from ``cotangent_layout(forward.destination, pending)`` to
    ``cotangent_layout(forward.source)``. ``within``: the mesh pieces its redistributions may
    use (see :func:`~planner.redistribution.engine.reshard`); ``policy``: how each hop is
    realised (:data:`~planner.redistribution.xla_policy.POLICIES`); ``groups``: the order the
    ``xla`` policy completes ``pending`` in, one group of axes at a time
    (:meth:`~planner.model.nodes.OpNode.cotangent_groups`).
    """
    return _transpose(forward, tuple(pending), cluster, insert_pbroadcast, None if within is None else tuple(within),
                      policy, tuple(tuple(g) for g in groups))


@memoize("transposed redistribution plans", maxsize=65536)
def _transpose(forward: ReshardPlan, pending: tuple, cluster, insert_pbroadcast: bool, within=None,
               policy: str = "cheapest", groups: tuple = ()) -> ReshardPlan:
    layouts = [forward.source] + [s.after for s in forward.steps]
    if not forward.steps:
        layouts = [forward.source, forward.destination]
    shape, dtype = forward.shape, forward.dtype
    start = cotangent_layout(layouts[-1], pending)
    current = start
    steps = []
    if not insert_pbroadcast:  # the cotangent is not known to be whole: split it into a pending sum
        current = _all_free_pending(current)
        if current != start:
            steps += reshard_for_planning(shape, dtype, start, current, cluster, within).steps
    for i in range(len(layouts) - 1, 0, -1):
        target = _next_layout(current, layouts[i - 1], shape, insert_pbroadcast, last=(i == 1))
        if target != current:
            steps += reshard_with_policy(shape, dtype, current, target, cluster, within, policy,
                                         groups if current.unreduced else ()).steps
        current = target
    return ReshardPlan(tuple(shape), dtype, start, cotangent_layout(forward.source), tuple(steps))


def _next_layout(current: TensorSharding, previous: TensorSharding, shape, insert_pbroadcast: bool,
                 last: bool) -> TensorSharding:
    """The cotangent layout one hop back: ``previous`` stripped, keeping the pending axes worth carrying."""
    base = cotangent_layout(previous)
    if last:
        return base
    if not insert_pbroadcast:
        return _all_free_pending(base)
    pending = current.unreduced
    if not pending or base.mesh != current.mesh:
        return base
    if _local_elements(base, shape) > _local_elements(current, shape):
        return base  # the buffer grows: sum the pending axes first, on the smaller buffer
    mesh = base.mesh
    used = base.used_axes()
    keep = [a for a in pending if not any(a.overlaps(u, mesh) for u in used)]
    return base.with_unreduced(keep) if keep else base


def _all_free_pending(layout: TensorSharding) -> TensorSharding:
    """``layout`` pending over every whole mesh axis it does not use (no device-invariance known)."""
    mesh = layout.mesh
    used = [u for d in layout.dim_axes for u in d]
    free = [AxisRef(a) for a in mesh.axis_names if not any(AxisRef(a).overlaps(u, mesh) for u in used)]
    return layout.with_unreduced(free) if free else layout


def _local_elements(layout: TensorSharding, shape) -> int:
    n = 1
    for d in layout.local_shape(shape):
        n *= d
    return n
