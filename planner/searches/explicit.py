"""The search ``explicit``: seed 001's typed mode as a decided planning model, costed and run like the others.

:func:`search` applies seed 001's consensus rule
(:func:`planner.model.explicit_types.explicit_shardings`; its errors, with
``out_sharding`` advice, surface unchanged) and turns each op's types into the
one strategy that computes them:

* without ``out_sharding`` the op computes on its operands as they are: the
  consensus factor sharding (a sharded contracting factor leaves a pending sum,
  reduced by an AllReduce before anything reads it, as JAX's psum);
* with ``out_sharding`` the op still computes on its operands as they are when
  their factor shardings agree, and its result is then redistributed to the
  ``out_sharding``; when they disagree, the op computes in the ``out_sharding``'s
  factor sharding and its operands are redistributed to it.

The model is then the same as every search's (:func:`planner.model.build.build_model`
with each op fixed), so explicit plans are costed, lowered, simulated and gated
like the others, with the cluster, ``--training`` and ``--memory-budget``
honoured. Explicit types live on the model's mesh: another ``--mesh`` is refused.

Every tensor lives in its type: inputs, parameters and constants are stored in
it, graph outputs are delivered in it (a pending sum is reduced in place, as
JAX's psum, not reduce-scattered; ``outputs_layout: replicated`` still
replicates outputs without an ``out_sharding``), and the plan reports each
tensor's type as its sharding (the op table keeps what each op computes, pending
sums included). A plan over the memory budget is refused naming the budget; a
``shard_as`` group whose types differ is refused too (types are not chosen).
"""

from __future__ import annotations

from dataclasses import replace

from costmodels.units import format_bytes
from graphs.ops.registry import get_op
from planner.errors import PlanningError, RuleError
from planner.ir.mesh import AxisType
from planner.model.build import build_model
from planner.model.decision import Decision
from planner.model.explicit_types import explicit_shardings, factor_axes_computing
from planner.model.ignored import ignored_annotations
from planner.model.options import Options
from planner.model.request import Request
from planner.model.typed import typed_graph, typed_model
from planner.rules import check_factor_axes, rule_for
from planner.searches import bfs, phased


def search(request: Request) -> Decision:
    """The search ``explicit``: seed 001's explicit mode (see the module docstring).

    A model with manual regions or ``auto_axes`` / ``explicit_axes`` regions is typed with every mesh axis
    Explicit (each manual region's manual axes manual in its body; an ``auto_axes`` region's axes Auto
    inside it, its outputs typed by its out-shardings), as for mixed axis types, which leaves the
    breadth-first search nothing to choose but the sources' layouts and the Auto axes inside regions."""
    notes = ignored_annotations(request.graph, "explicit")
    if request.graph.manual_regions or request.graph.axis_regions:
        mesh = request.mesh.with_types({a.name: AxisType.EXPLICIT for a in request.mesh.axes})
        # explicit types live on the model's mesh: the graph stays on it
        typed = phased.with_explicit_types(phased.checked(replace(request, mesh=mesh, time_limit=None,
                                                                  axes_per_phase="auto")))
        decision = replace(phased.run(typed, "bfs", bfs.decide), search="explicit")
    else:
        phased.checked(request)
        decision = explicit_outcome(request.graph, request.mesh, request.cluster, request.options)
    return replace(decision, notes=(*notes, *decision.notes))


def explicit_outcome(graph, mesh, cluster, options: Options) -> Decision:
    """The decided model of seed 001's explicit mode on ``graph``, a model without manual regions."""
    if mesh != graph.mesh:
        raise PlanningError(f"explicit mode types tensors on the model's mesh @{graph.mesh.name} "
                            f"({graph.mesh.short()}); --mesh {mesh.short()} cannot be used with --search explicit")
    types = explicit_shardings(graph)
    _check_shard_as(graph, types)
    fixed = {}
    for op, in_specs, out_spec in graph.walk():
        rule = rule_for(op, [t.shape for t in in_specs], out_spec.shape, op.attrs_dict)
        operands, result = [types.sharding(t) for t in op.inputs], types.sharding(op.output)
        if result.unreduced and get_op(op.op).keeps_pending:
            # typed pending as its inputs are; every tensor is stored reduced, so it computes on reduced operands
            operands, result = [s.layout_only() for s in operands], result.layout_only()
        fixed[op.name] = factor_axes_computing(rule, operands, result, mesh)
        try:
            check_factor_axes(rule, fixed[op.name], mesh)
        except RuleError as e:  # typed as JAX types it, but no strategy of its rule computes that type
            raise PlanningError(
                f"op {op.name!r} ({op.op}): explicit mode types its result {types.type_text(op.output)} as JAX "
                f"does, but no strategy of its sharding rule computes that: {e.message}; give the op an "
                "out_sharding that replicates that dimension", where=_where(graph, op)) from None
    # The budget is checked on the one plan there is (below): BFS would only say it found no candidate.
    typed = {name: types.sharding(name).layout_only() for name in graph.tensors}
    built = build_model(typed_graph(graph, typed, options.outputs_layout), mesh, cluster,
                        replace(options, fixed_strategies=fixed, memory_budget=None))
    m = typed_model(built, graph, typed, lambda t: f"explicit mode: stored as its type {types.type_text(t)}",
                    lambda op: "explicit mode: the strategy that computes its types (seed 001)")
    outcome = bfs.decide_fixed(m)
    budget = options.memory_budget
    if budget is not None and m.problem.memory(outcome.choice) > budget * (1 + 1e-9):
        raise PlanningError(f"the explicit plan needs {format_bytes(m.problem.memory(outcome.choice))} per device, "
                            f"more than the memory budget of {format_bytes(budget)}; shard the largest tensors further")
    return outcome


def _check_shard_as(graph, types) -> None:
    for group in graph.shard_as:
        if len({types.sharding(t).layout_only().dims_text() for t in group}) > 1:
            raise PlanningError(
                f"shard_as group [{', '.join(group)}] cannot hold in explicit mode: the types are "
                f"{', '.join(f'{t} {types.type_text(t)}' for t in group)}; give them the same sharding "
                "(an out_sharding on their ops)")


def _where(graph, op) -> str | None:
    return None if op.line is None else f"{graph.source or '<string>'}:{op.line}"
