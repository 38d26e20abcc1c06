"""Manual regions on JAX: each region of the graph (:mod:`graphs.manual_regions`) as one ``jax.shard_map``.

A region is flattened into the graph (``manual_enter`` per input, body ops on local shapes, collectives as
ops, ``manual_exit`` per output). :func:`run_region` folds it back into what it was written as:

* ``in_specs`` / ``out_specs``: the region's in- and out-shardings restricted to its **manual** axes
  (``PartitionSpec``; a dimension split by several manual axes names them major to minor, as Shardy and JAX
  both order them);
* ``axis_names``: the manual axes; the mesh's other (free) axes stay automatic inside the body (JAX's partial
  manual mode), so a body block may be further split over them;
* the body runs the body ops with the catalogue's ``jax.numpy`` ops (:mod:`planner.engines.jax_ops`) and the
  collectives with ``jax.lax`` (:func:`collective_op`) over the region's manual axes; a collective over several
  axes passes the tuple of their names, whose linear index JAX takes row-major over the tuple, as
  :mod:`graphs.ops.collectives` does (the first axis major), except ``ppermute``'s, whose pairs are renumbered
  (:func:`planner.collectives.jax_linear_index`);
* inside the body every operand and result is constrained to its planned **free-axis** sharding with a bare
  ``PartitionSpec`` (JAX allows it in partial manual mode; a ``NamedSharding`` on the concrete mesh is refused
  there since the manual axes are typed ``Manual`` inside). A region whose axes are all manual has nothing to
  constrain inside.

``check_vma`` stays on: JAX then types every body value varying or invariant over each manual axis and
inserts the ``pvary`` (our ``pbroadcast``) an op mixing both needs, which is what the planner's variance types
(:func:`planner.model.manual.manual_variance`) assume.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from graphs.ops.collectives import BOUNDARY_OPS, COLLECTIVE_OPS
from planner.collectives import jax_linear_index, jax_lowering
from planner.engines.jax_ops import jax_op
from planner.errors import EngineError

Collective = Callable[[Any, Mapping[str, Any]], Any]


def collective_op(name: str, mesh=None) -> Collective:
    """The ``jax.lax`` version of collective ``name`` (the registry's, :func:`planner.collectives.jax_lowering`),
    run inside ``shard_map`` on ``mesh`` (a ``jax.sharding.Mesh``; only ``ppermute`` over several axes needs it,
    :func:`planner.collectives.jax_linear_index`): ``(operand or None, attrs) -> result`` over ``attrs["axes"]``."""
    return jax_lowering(name, mesh)


def lowered_ops() -> tuple[str, ...]:
    """The op names this module runs (every collective and the two boundary ops), alphabetically."""
    return tuple(sorted((*COLLECTIVE_OPS, *BOUNDARY_OPS)))


def manual_spec(region, sharding):
    """The ``PartitionSpec`` of ``sharding`` over ``region``'s manual axes only (shard_map's in/out specs)."""
    from jax.sharding import PartitionSpec

    dims = region.manual_dims(sharding)
    return PartitionSpec(*[None if not d else d[0] if len(d) == 1 else tuple(d) for d in dims])


def run_region(region, graph, exported: Mapping, mesh, values: Mapping[str, Any],
               outer_sharding: Callable[[dict, int], Any]) -> dict[str, Any]:
    """The outer values of ``region``'s outputs, computed by one ``jax.shard_map`` from ``values`` (which holds
    the region's inputs). ``outer_sharding(entry, rank)`` is the run's ``NamedSharding`` of an exported spec
    (None for a pending sum); its ``.spec`` is what a body value is constrained to inside."""
    import jax
    from jax.sharding import PartitionSpec

    missing = [a for a in region.manual_axes if a not in mesh.axis_names]
    if missing:
        raise EngineError(f"region {region.name!r}: manual axis {missing[0]!r} is split into sub-axes in the JAX "
                          "export of this plan's mesh; running such a region through shard_map is not supported "
                          "(plan without sub-axes of a manual axis)")
    free = [a for a in mesh.axis_names if a not in region.manual_axes]

    def rank(t: str) -> int:
        return len(graph.tensor(t).shape)

    def inside(value, entry: dict, t: str):
        """``value`` constrained to its planned free-axis sharding (a bare PartitionSpec: see the docstring)."""
        s = outer_sharding(entry, rank(t)) if free else None
        if s is None or all(d is None for d in s.spec):
            return value if s is None else jax.lax.with_sharding_constraint(value, PartitionSpec())
        return jax.lax.with_sharding_constraint(value, s.spec)

    def body(*args):
        local: dict[str, Any] = {}
        for enter, arg, a in zip(region.enter_ops, region.arguments, args):
            local[arg] = inside(a, exported["ops"][enter]["result"], arg)
        for name in region.ops:
            op = graph.op(name)
            spec = exported["ops"][name]
            operands = [inside(local[t], spec["operands"][k], t) for k, t in enumerate(op.inputs)]
            if op.op in COLLECTIVE_OPS:
                result = collective_op(op.op, mesh)(operands[0] if operands else None, op.attrs_dict)
            else:
                result = jax_op(op.op)(operands, op.attrs_dict)
            local[op.output] = inside(result, spec["result"], op.output)
        return tuple(inside(local[r], exported["ops"][x]["operands"][0], r)
                     for x, r in zip(region.exit_ops, region.results))

    fn = jax.shard_map(body, mesh=mesh,
                       in_specs=tuple(manual_spec(region, s) for s in region.in_shardings),
                       out_specs=tuple(manual_spec(region, s) for s in region.out_shardings),
                       axis_names=frozenset(region.manual_axes))
    args = []
    for enter, t in zip(region.enter_ops, region.inputs):
        s = outer_sharding(exported["ops"][enter]["operands"][0], rank(t))
        args.append(values[t] if s is None else jax.lax.with_sharding_constraint(values[t], s))
    outs = fn(*args)
    result = {}
    for x, t, v in zip(region.exit_ops, region.outputs, outs):
        s = outer_sharding(exported["ops"][x]["result"], rank(t))
        result[t] = v if s is None else jax.lax.with_sharding_constraint(v, s)
    return result


__all__ = ["collective_op", "jax_linear_index", "lowered_ops", "manual_spec", "run_region"]
