"""What a manual region (shard_map, :mod:`graphs.manual_regions`) allows its ops' strategies.

Inside region ``R`` the manual axes are the body's business: the planner plans
body ops, collectives, ``manual_enter``'s result and ``manual_exit``'s operand
over the **free** axes only. The boundary ops carry the manual axes on their
global side, as ``MANUAL`` factors (:mod:`planner.rules.regions`) fixed to
exactly the manual axes of that dimension, and their global side satisfies the
region's in/out sharding (closed dimensions exactly; open ones the manual axes
then any free axes): so free axes cross the boundary in both directions as
ordinary factors and manual axes stay major.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Sequence

from graphs.ops.collectives import is_collective
from planner.collectives import primitive, result_variance, seed_name
from planner.errors import PlanningError, VarianceError, quote
from planner.ir.mesh import AxisType
from planner.ir.axis import AxisRef
from planner.ir.sharding import DimSharding, TensorSharding
from planner.model.annotations import satisfies
from planner.rules.factors import FactorKind, OpShardingRule
from planner.rules.registry import rule_for


def check_plannable(graph, mesh) -> None:
    """Refuse what regions cannot be planned on: another mesh than the model's (the regions name its axes and
    their local shapes follow its sizes), and a mesh typing an axis Manual everywhere (a region makes its manual
    axes manual inside its body only). Explicit axes are typed by seed 001 through the boundary
    (:func:`boundary_typing`)."""
    if not graph.manual_regions:
        return
    if mesh.axis_names != graph.mesh.axis_names or mesh.shape != graph.mesh.shape:
        raise PlanningError(f"model {graph.name!r} has manual regions, whose local shapes follow its mesh "
                            f"{graph.mesh.short()}; plan it on that mesh (drop --mesh {mesh.short()})")
    manual = [a.name for a in mesh.axes if a.type is AxisType.MANUAL]
    if manual:
        raise PlanningError(f"model {graph.name!r} has manual regions ({', '.join(r.name for r in graph.manual_regions)})"
                            f" on a mesh typing {manual[0]!r} Manual everywhere: a region makes its manual axes "
                            "manual inside its body only; type the mesh's axis Auto or Explicit")


def manual_factor_axes(region, op_name: str, rule: OpShardingRule) -> dict[int, tuple[AxisRef, ...]]:
    """Boundary op ``op_name``'s MANUAL factors -> the manual axes they must carry (major to minor)."""
    sharding = region.boundary_sharding(op_name)
    dims = rule.operands[0] if region.role(op_name) == "enter" else rule.result
    out = {}
    for factors, manual in zip(dims, region.manual_dims(sharding)):
        for f in factors:
            if rule.factor_kinds[f] is FactorKind.MANUAL:
                out[f] = tuple(AxisRef(a) for a in manual)
    return out


def allows(region, op_name: str, rule: OpShardingRule, strategy) -> bool:
    """Whether ``strategy`` of op ``op_name`` of ``region`` respects the region (see the module docstring)."""
    manual = set(region.manual_axes)
    role = region.role(op_name)
    fixed = manual_factor_axes(region, op_name, rule) if role in ("enter", "exit") else {}
    for f, axes in enumerate(strategy.factor_axes):
        if f in fixed:
            if tuple(axes) != fixed[f]:
                return False
        elif any(a.name in manual for a in axes):
            return False
    if role == "enter":
        return satisfies(strategy.operands[0], region.boundary_sharding(op_name))
    if role == "exit":
        return satisfies(strategy.result, region.boundary_sharding(op_name))
    return True


def region_candidates(graph, op, rule: OpShardingRule, candidates: Sequence) -> list:
    """``candidates`` less those op ``op``'s manual region (if any) forbids."""
    region = graph.region_of_op(op.name) if graph.manual_regions else None
    if region is None:
        return list(candidates)
    return [s for s in candidates if allows(region, op.name, rule, s)]


# -- rule-based propagation -------------------------------------------------------------------

def region_boundaries(graph) -> dict[str, TensorSharding]:
    """Outer tensor -> the boundary sharding a region gives it (an enter's operand: its in-sharding; an exit's
    result: its out-sharding), used by propagation as the annotation of a tensor the user did not annotate
    (Shardy's manual_computation in/out shardings, open dimensions included)."""
    out: dict[str, TensorSharding] = {}
    for r in graph.manual_regions:
        for t, s in zip(r.inputs, r.in_shardings):
            out.setdefault(t, s)
        for t, s in zip(r.outputs, r.out_shardings):
            out.setdefault(t, s)
    return out


def region_prefix(graph, op) -> tuple:
    """The factor axes op ``op`` of a region computes with before any propagated axis: a boundary op's
    MANUAL factors carry exactly their manual axes, every other factor nothing."""
    region = graph.region_of_op(op.name)
    rule = rule_for(op, [graph.tensor(t).shape for t in op.inputs], graph.tensor(op.output).shape)
    fixed = manual_factor_axes(region, op.name, rule) if region.role(op.name) in ("enter", "exit") else {}
    return tuple(fixed.get(f, ()) for f in range(rule.num_factors))


def without_manual(sharding: TensorSharding | None, graph, op) -> TensorSharding | None:
    """``sharding`` less the manual axes of ``op``'s region (the prefix places them)."""
    if sharding is None:
        return None
    manual = set(graph.region_of_op(op.name).manual_axes)
    return TensorSharding(sharding.mesh, tuple(replace(d, axes=tuple(a for a in d.axes if a.name not in manual))
                                               for d in sharding.dims),
                          tuple(a for a in sharding.replicated if a.name not in manual),
                          tuple(a for a in sharding.unreduced if a.name not in manual))


# -- manual variance ---------------------------------------------------------------------------

def manual_variance(graph) -> Mapping[str, frozenset]:
    """Body tensor -> the manual axes (names) its value varies over (seed 004's types, static).

    An argument varies over the manual axes its in-sharding shards; a body op's
    result over the union of its operands' (a local op pbroadcasts an operand that
    is invariant where another varies); a collective's as
    :func:`planner.collectives.result_variance` says, after the
    implicit pbroadcast of an operand invariant over its axes (JAX's rule: a psum
    of an invariant value sums its copies). Of the collectives that take an invariant
    operand, a cast (pbroadcast) of one that already varies is the identity, and one
    that scatters (pscatter) refuses it: seed 004's :class:`VarianceError` (psum_scatter
    sums varying values). An exit whose out-sharding replicates
    a manual axis its operand varies over is a :class:`VarianceError`.
    """
    out: dict[str, frozenset] = {}
    for region in graph.manual_regions:
        for op_name, arg, sharding in zip(region.enter_ops, region.arguments, region.in_shardings):
            out[arg] = frozenset(a for d in region.manual_dims(sharding) for a in d)
        for op_name in region.ops:
            op = graph.op(op_name)
            ins = frozenset().union(*(out[t] for t in op.inputs)) if op.inputs else frozenset()
            if is_collective(op):
                axes = tuple(op.attr("axes"))
                name = seed_name(op.op)
                prim = primitive(name)
                needs = prim.operand  # varying, invariant or None (axis_index)
                if needs == "invariant":
                    before = ins - frozenset(axes) if prim.shape == "same" else ins
                else:
                    before = ins | frozenset(axes)
                line = f" ({graph.source}:{op.line})" if graph.source and op.line else ""
                operand = (f"{op.inputs[0]!r} (varying over {', '.join(sorted(before)) or 'no manual axis'})"
                           if op.inputs else "the operand")
                out[op.output] = frozenset(result_variance(name, set(before), axes, where=f"op {op.name!r}{line}",
                                                           operand=operand))
            else:
                out[op.output] = ins
        for op_name, sharding in zip(region.exit_ops, region.out_shardings):
            op = graph.op(op_name)
            sharded = {a for d in region.manual_dims(sharding) for a in d}
            varying = sorted(out[op.inputs[0]] - sharded)
            if varying:
                raise VarianceError(
                    f"output {op.output!r} of region {region.name!r} varies over {', '.join(varying)} but its "
                    f"out-sharding replicates it; reduce it (psum over {', '.join(varying)}) or shard it there",
                    where=f"{graph.source}:{region.line}" if graph.source and region.line else graph.source)
    return out


def manual_types(graph, op, variance: Mapping[str, frozenset]) -> tuple[tuple[frozenset, ...], frozenset] | None:
    """``(per operand, result)``: the manual axes each varies over, for an op of a region; None outside.

    ``manual_enter``'s global operand and ``manual_exit``'s global result carry their
    manual axes in their layouts, so their manual part is empty there."""
    region = graph.region_of_op(op.name) if graph.manual_regions else None
    if region is None:
        return None
    role = region.role(op.name)
    ins = tuple(frozenset() if role == "enter" else variance[t] for t in op.inputs)
    res = frozenset() if role == "exit" else variance[op.output]
    return ins, res


def manual_pending(graph, op, variance: Mapping[str, frozenset]) -> tuple[tuple[AxisRef, ...], ...]:
    """Per operand of op ``op``: the manual axes (mesh order) its cotangent comes back pending over.

    A body op varies over the union of its operands' and result's manual axes; an operand
    invariant over some of them was pbroadcast there (implicitly), so its cotangent is pending
    over them: the psum that transposes that pbroadcast, made by the redistribution that takes it
    home. A collective's own transpose handles its axes (psum -> pbroadcast ...), but an operand
    invariant over them was pbroadcast first (JAX's rule), and ``pbroadcast`` is that cast written
    out: pending over their axes; one that needs its operand invariant and scatters it (``pscatter``,
    whose transpose ``all_gather_invariant`` gives the whole cotangent) pbroadcasts nothing.
    ``manual_exit`` pends its operand over the out-sharding's manual
    axes it does not vary over. Empty outside regions and for ``manual_enter``."""
    region = graph.region_of_op(op.name) if graph.manual_regions else None
    if region is None or region.role(op.name) == "enter":
        return ()
    mesh = graph.mesh
    order = lambda names: tuple(AxisRef(a) for a in mesh.axis_names if a in names)  # noqa: E731
    role = region.role(op.name)
    ins = [variance[t] for t in op.inputs]
    if role == "exit":
        sharded = {a for d in region.manual_dims(region.boundary_sharding(op.name)) for a in d}
        return (order(sharded - ins[0]),)
    if is_collective(op):
        prim = primitive(seed_name(op.op))
        if prim.operand == "invariant" and prim.shape != "same":
            return tuple(() for _ in ins)
        axes = frozenset(op.attr("axes"))
        return tuple(order(axes - v) for v in ins)
    every = frozenset().union(variance[op.output], *ins)
    return tuple(order(every - v) for v in ins)


__all__ = ["allows", "check_plannable", "region_boundaries", "region_prefix", "without_manual", "manual_factor_axes", "manual_pending", "manual_types", "manual_variance",
           "region_candidates"]


# -- Explicit axes at the boundary (seed 001) -----------------------------------------------------------

def boundary_typing(graph, op, rule: OpShardingRule, operand: TensorSharding, explicit: frozenset[str],
                    mesh) -> tuple[tuple, TensorSharding]:
    """Seed 001's typing of region boundary op ``op`` on the Explicit axes ``explicit``: its factor axes there and
    its result's type, given its ``operand``'s type (restricted to ``explicit``).

    Manual axes stay major (a MANUAL factor carries its region's manual axes where they are Explicit), the free
    Explicit axes pass through the boundary in each dimension. An enter whose operand's type disagrees with the
    in-sharding on an Explicit axis (closed dimensions exactly, open ones as a prefix) is a PlanningError: only an
    explicit reshard moves an Explicit axis.
    """
    region = graph.region_of_op(op.name)
    manual = manual_factor_axes(region, op.name, rule)
    enter = region.role(op.name) == "enter"
    boundary = region.boundary_sharding(op.name)
    if enter:
        _check_agrees(graph, region, "in", op.inputs[0], operand, boundary, explicit)
    taken = set(region.manual_axes)
    factor_axes = [()] * rule.num_factors
    for f, axes in manual.items():
        factor_axes[f] = tuple(a for a in axes if a.name in explicit)
    free_dims = rule.result if enter else rule.operands[0]
    for d, factors in enumerate(free_dims):
        free = tuple(a for a in operand.dims[d].axes if a.name in explicit and a.name not in taken)
        if factors:
            factor_axes[factors[-1]] = free
    factor_axes = tuple(factor_axes)
    if enter:
        dims = tuple(DimSharding(factor_axes[fs[-1]] if fs else (), is_open=False) for fs in rule.result)
    else:
        dims = tuple(DimSharding(tuple(a for f in fs for a in factor_axes[f]), is_open=False) for fs in rule.result)
    result = TensorSharding(mesh, dims)
    if not enter:
        _check_agrees(graph, region, "out", op.output, result, boundary, explicit)
    return factor_axes, result


def _check_agrees(graph, region, side: str, tensor: str, typed: TensorSharding, boundary: TensorSharding,
                  explicit: frozenset[str]) -> None:
    """PlanningError unless ``typed`` and the ``side``-sharding ``boundary`` agree on the Explicit axes (closed
    dimensions exactly, open ones as a prefix)."""
    for d, (have, want) in enumerate(zip(typed.dims, boundary.dims)):
        have_axes = tuple(a for a in have.axes if a.name in explicit)
        want_axes = tuple(a for a in want.axes if a.name in explicit)
        if have_axes == want_axes or (want.is_open and have_axes[: len(want_axes)] == want_axes):
            continue
        fix = (f"annotate {quote(tensor)} with the sharding the region reads or reshard it to that with a "
               "sharding_constraint before the region, or change the in-sharding" if side == "in" else
               "write into the out-sharding the Explicit axes the body gives it, or open that dimension with ?")
        raise PlanningError(
            f"region {quote(region.name)}: the {side}-sharding {boundary.dims_text()} of {quote(tensor)} disagrees "
            f"with its type {typed.dims_text()} on the Explicit axes (dimension {d}; seed 001: only an explicit "
            f"reshard moves an Explicit axis): {fix}", where=_where(graph, region.line))


def _where(graph, line: int | None) -> str | None:
    return f"{graph.source}:{line}" if graph.source and line else graph.source
