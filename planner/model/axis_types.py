"""Mixed Auto / Explicit mesh axes (seed 001): Explicit axes are typed, Auto axes are searched.

Seed 001 gives every mesh axis a type. On an **Explicit** axis a value's sharding is
part of its type, decided op by op by the consensus rule (:mod:`planner.model.explicit_types`,
with its errors asking for ``out_sharding``); on an **Auto** axis the compiler decides.
A mesh may mix them (``axis_types: {X: Explicit}``, the others Auto): then
:func:`explicit_prefixes` types the model on the Explicit axes alone (annotations keep
only their Explicit axes, as JAX types name only Explicit axes) and gives every op the
factor axes that compute those types; the search (``bfs``, ``ilp``) keeps them as the
major axes of each factor and decides only the Auto axes: a candidate strategy whose
Explicit axes differ from the op's type is never enumerated
(``Options.fixed_axes``), so the search never moves an Explicit axis. Rule-based
propagation (``propagate``) places only the Auto axes (the Explicit ones are blocked
for it) and puts them minor to each factor's typed axes. ``auto_axes`` / ``explicit_axes``
regions (:mod:`graphs.axis_regions`) change an op's Explicit axes (:func:`op_explicit_axes`).

**Manual** axes are made by manual computation regions (shard_map, ``regions:``,
:mod:`graphs.manual_regions`): a region's ``manual_axes`` are manual inside its body.
A mesh that types an axis Manual everywhere is refused with that advice rather than
planned as if the axis were Auto.
"""

from __future__ import annotations

from dataclasses import replace

from graphs.axis_regions import region_of
from planner.errors import PlanningError
from planner.ir.mesh import AxisType, Mesh
from planner.ir.sharding import DimSharding, TensorSharding
from planner.model.annotations import translate
from planner.model.annotations import user_annotation
from planner.model.explicit_types import decide_op, factor_axes_computing
from planner.model.manual import boundary_typing
from planner.ir.axis import merge_adjacent
from planner.rules import RESULT, FactorKind, factor_axes_from_tensor, rule_for


def axes_of_type(mesh: Mesh, kind: AxisType) -> frozenset[str]:
    return frozenset(a.name for a in mesh.axes if a.type is kind)


def check_axis_types(mesh: Mesh) -> None:
    """Refuse what mixed axis types cannot plan yet (see the module docstring)."""
    manual = sorted(axes_of_type(mesh, AxisType.MANUAL))
    if manual:
        raise PlanningError(
            f"mesh @{mesh.name} has Manual axes ({', '.join(manual)}): an axis is manual only inside a manual "
            "computation region (regions:, whose manual_axes name it); type the axis Auto on the mesh")


def restrict(sharding: TensorSharding | None, axes: frozenset[str]) -> TensorSharding | None:
    """``sharding`` with only the axes named in ``axes`` (dimensions keep their open/closed flags and their
    priorities; a dimension left closed and empty takes none, as the grammar requires)."""
    if sharding is None:
        return None
    dims = tuple(_restrict_dim(d, axes) for d in sharding.dims)
    keep = lambda refs: tuple(a for a in refs if a.name in axes)  # noqa: E731
    return TensorSharding(sharding.mesh, dims, keep(sharding.replicated), keep(sharding.unreduced))


def _restrict_dim(dim: DimSharding, axes: frozenset[str]) -> DimSharding:
    kept = tuple(a for a in dim.axes if a.name in axes)
    return DimSharding(kept, dim.is_open, dim.priority if kept or dim.is_open else 0)


def op_explicit_axes(graph, mesh: Mesh) -> dict[str, frozenset[str]]:
    """Per op, the mesh axes that are Explicit where it runs: the mesh's Explicit axes, less those of an
    ``auto_axes`` region it is in, plus those of an ``explicit_axes`` region (:mod:`graphs.axis_regions`)."""
    explicit = axes_of_type(mesh, AxisType.EXPLICIT)
    out = {}
    for op in graph.ops:
        r = region_of(graph.axis_regions, op.name)
        if r is None:
            out[op.name] = explicit
        elif r.kind == "auto":
            out[op.name] = explicit - set(r.axes)
        else:
            out[op.name] = explicit | set(r.axes)
    return out


def region_result_bound(graph, op, mesh: Mesh) -> tuple[str, frozenset[str], TensorSharding] | None:
    """What an ``auto_axes`` region's out-sharding asks of the op making that output: the region's name, its
    axes, and the out-sharding on those axes, which the op's result must satisfy (seed 001: the result goes
    back to the caller typed by it); None for any other op."""
    region = region_of(graph.axis_regions, op.name)
    out = region.sharding(op.output) if region is not None and region.kind == "auto" else None
    if out is None:
        return None
    axes = frozenset(region.axes)
    return region.name, axes, restrict(translate(out, mesh, graph.tensor(op.output).shape), axes)


def combine(a: TensorSharding, b: TensorSharding) -> TensorSharding:
    """Two shardings on disjoint axis sets as one: per dimension the axes of ``a`` then those of ``b``
    (a dimension open if either is), and both's replicated and unreduced axes."""
    dims = tuple(DimSharding(x.axes + y.axes, x.is_open or y.is_open) for x, y in zip(a.dims, b.dims))
    return TensorSharding(a.mesh, dims, a.replicated + b.replicated, a.unreduced + b.unreduced)


def _computing_out_sharding(rule, computing, out: TensorSharding, mesh: Mesh) -> tuple:
    """``computing`` if it makes ``out`` as it is (pending sums included), else the factor axes of ``out``."""
    made = tuple(tuple(a for f in factors for a in computing[f]) for factors in rule.result)
    pending = [a for f in rule.factors_of_kind(FactorKind.REDUCTION) for a in computing[f]]
    if made == out.dim_axes and set(pending) == set(out.unreduced):
        return computing
    return tuple(merge_adjacent(a, mesh) for a in factor_axes_from_tensor(rule, RESULT, out))


def explicit_prefixes(graph, mesh: Mesh) -> tuple[dict[str, tuple], dict[str, frozenset[str]], dict[str, TensorSharding]]:
    """Seed 001's typing where axes are Explicit: per op, the factor axes that compute its types and the
    axes they are on; per tensor, its type (on the Explicit axes where it is made; an ``auto_axes``
    region's output carries its out-sharding on the region's axes).

    Ops are typed by the consensus rule (:func:`planner.model.explicit_types.decide_op`, with its
    errors) on their own Explicit axes; an ``explicit_axes`` region's input is read with its
    in-sharding on the region's axes. Strategies are ignored on Explicit axes.
    """
    fixed = op_explicit_axes(graph, mesh)
    explicit = axes_of_type(mesh, AxisType.EXPLICIT)
    types: dict[str, TensorSharding] = {}
    for t in graph.tensors.values():
        if t.kind != "activation":
            types[t.name] = (restrict(user_annotation(graph, t.name, mesh), explicit) if t.sharding is not None
                             else TensorSharding.replicated_on(mesh, t.rank))
    prefixes = {}
    for op, in_specs, out_spec in graph.walk():
        axes = fixed[op.name]
        region = region_of(graph.axis_regions, op.name)
        ins = []
        for t in op.inputs:
            s = types[t]
            entering = region.sharding(t) if region is not None and region.kind == "explicit" else None
            if entering is not None:  # enters the region with its in-sharding on the region's axes
                s = combine(restrict(s, axes - set(region.axes)),
                             restrict(translate(entering, mesh, graph.tensor(t).shape), frozenset(region.axes)))
            ins.append(restrict(s, axes))
        manual = graph.region_of_op(op.name)
        if manual is not None and manual.role(op.name) in ("enter", "exit"):  # manual axes major, free ones through
            rule = rule_for(op, [s.shape for s in in_specs], out_spec.shape)
            prefixes[op.name], types[op.output] = boundary_typing(graph, op, rule, ins[0], axes, mesh)
            continue
        out = user_annotation(graph, op.output, mesh) if op.out_sharding is not None else None
        typed_op = replace(op, strategy=None, out_sharding=restrict(out, axes))
        decision, _ = decide_op(graph, typed_op, ins, in_specs, out_spec)
        rule = rule_for(op, [s.shape for s in in_specs], out_spec.shape)
        prefixes[op.name] = factor_axes_computing(rule, ins, decision.sharding, mesh)
        if typed_op.out_sharding is not None:  # the search gives the result its out_sharding: computed in it
            prefixes[op.name] = _computing_out_sharding(rule, prefixes[op.name], decision.sharding, mesh)
        result = decision.sharding
        leaving = region.sharding(op.output) if region is not None and region.kind == "auto" else None
        if leaving is not None:  # goes back to the caller typed by its out-sharding on the region's axes
            result = combine(result, restrict(translate(leaving, mesh, out_spec.shape), frozenset(region.axes)))
        types[op.output] = result
    return prefixes, fixed, types
