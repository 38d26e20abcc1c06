"""Mixed Auto / Explicit mesh axes (seed 001): Explicit axes are typed, Auto axes are searched.

Seed 001 gives every mesh axis a type. On an **Explicit** axis a value's sharding is
part of its type, decided op by op by the consensus rule (:mod:`planner.propagation.explicit`,
with its errors asking for ``out_sharding``); on an **Auto** axis the compiler decides.
A mesh may mix them (``axis_types: {X: Explicit}``, the others Auto): then
:func:`explicit_prefixes` types the model on the Explicit axes alone (annotations keep
only their Explicit axes, as JAX types name only Explicit axes) and gives every op the
factor axes that compute those types; the search (``bfs``, ``ilp``) keeps them as the
major axes of each factor and decides only the Auto axes: a candidate strategy whose
Explicit axes differ from the op's type is never enumerated
(``Options.fixed_axes``), so the search never moves an Explicit axis. Rule-based
propagation (``propagate``) places only the Auto axes (the Explicit ones are blocked
for it) and puts them minor to each factor's typed axes.

**Manual** axes belong to manual computation regions (shard_map), which models cannot
express yet: a mesh with a Manual axis is refused with that reason rather than planned
as if the axis were Auto.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from graphs import ComputationGraph
from planner.errors import PlanningError
from planner.ir.mesh import AxisType, Mesh
from planner.ir.sharding import DimSharding, TensorSharding
from planner.propagation.build import user_annotation
from planner.propagation.explicit import ExplicitResult, explicit_shardings
from planner.propagation.explicit_plan import factor_axes_computing
from planner.rules import rule_for


def axes_of_type(mesh: Mesh, kind: AxisType) -> frozenset[str]:
    return frozenset(a.name for a in mesh.axes if a.type is kind)


def check_axis_types(mesh: Mesh) -> None:
    """Refuse what mixed axis types cannot plan yet (see the module docstring)."""
    manual = sorted(axes_of_type(mesh, AxisType.MANUAL))
    if manual:
        raise PlanningError(
            f"mesh @{mesh.name} has Manual axes ({', '.join(manual)}): a Manual axis is for manual computation "
            "regions (shard_map), which models cannot express yet; make the axis Auto or Explicit")


def restrict(sharding: TensorSharding | None, axes: frozenset[str]) -> TensorSharding | None:
    """``sharding`` with only the axes named in ``axes`` (dimensions keep their open/closed flags)."""
    if sharding is None:
        return None
    dims = tuple(DimSharding(tuple(a for a in d.axes if a.name in axes), d.is_open) for d in sharding.dims)
    keep = lambda refs: tuple(a for a in refs if a.name in axes)  # noqa: E731
    return TensorSharding(sharding.mesh, dims, keep(sharding.replicated), keep(sharding.unreduced))


def explicit_types(graph, mesh: Mesh, axes: frozenset[str]) -> ExplicitResult:
    """Seed 001's types of every tensor on the Explicit ``axes`` of ``mesh`` (strategies ignored)."""
    tensors = [replace(t, sharding=restrict(user_annotation(graph, t.name, mesh), axes) if t.sharding else None)
               for t in graph.tensors.values() if t.kind != "activation"]
    ops = [replace(op, strategy=None,
                   out_sharding=restrict(user_annotation(graph, op.output, mesh), axes) if op.out_sharding else None)
           for op in graph.ops]
    typed = ComputationGraph(graph.name, {mesh.name: mesh}, tensors, ops, graph.outputs, (),
                             cluster=graph.cluster, outputs_layout=graph.outputs_layout, source=graph.source)
    return explicit_shardings(typed)


def explicit_prefixes(graph, mesh: Mesh, axes: frozenset[str]) -> tuple[Mapping[str, tuple], ExplicitResult]:
    """Per op, the factor axes (on the Explicit ``axes``) that compute its types; and the types."""
    types = explicit_types(graph, mesh, axes)
    prefixes = {}
    for op in graph.ops:
        rule = rule_for(op, [graph.tensor(t).shape for t in op.inputs], graph.tensor(op.output).shape)
        prefixes[op.name] = factor_axes_computing(rule, [types.sharding(t) for t in op.inputs],
                                                  types.sharding(op.output), mesh)
    return prefixes, types
