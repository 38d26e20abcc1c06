"""Explicit mode (seed 001) as a decided planning model: strategies, real costs, a program that runs.

:func:`explicit_outcome` applies seed 001's consensus rule
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
from planner.errors import PlanningError, RuleError
from planner.ir.axis import merge_adjacent
from planner.model.build import Options, build_model
from planner.model.explicit_types import explicit_shardings
from planner.searches.phased import SearchOutcome, decide_fixed
from planner.model.typed import typed_graph, typed_model
from planner.rules import check_factor_axes, factor_axes_from_tensor, rule_for


def explicit_outcome(graph, mesh, cluster, options: Options) -> SearchOutcome:
    """The decided model of seed 001's explicit mode on ``graph`` (see the module docstring). A model with
    manual regions is planned by :func:`planner.api.plan` with every mesh axis Explicit instead."""
    if mesh != graph.mesh:
        raise PlanningError(f"explicit mode types tensors on the model's mesh @{graph.mesh.name} "
                            f"({graph.mesh.short()}); --mesh {mesh.short()} cannot be used with --search explicit")
    types = explicit_shardings(graph)
    _check_shard_as(graph, types)
    fixed = {}
    for op, in_specs, out_spec in graph.walk():
        rule = rule_for(op, [t.shape for t in in_specs], out_spec.shape, op.attrs_dict)
        fixed[op.name] = factor_axes_computing(rule, [types.sharding(t) for t in op.inputs], types.sharding(op.output), mesh)
    # The budget is checked on the one plan there is (below): BFS would only say it found no candidate.
    typed = {name: types.sharding(name).layout_only() for name in graph.tensors}
    built = build_model(typed_graph(graph, typed, options.outputs_layout), mesh, cluster,
                        replace(options, fixed_strategies=fixed, memory_budget=None))
    m = typed_model(built, graph, typed, lambda t: f"explicit mode: stored as its type {types.type_text(t)}",
                    lambda op: "explicit mode: the strategy that computes its types (seed 001)")
    outcome = decide_fixed(m)
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


def factor_axes_computing(rule, operands, result, mesh) -> tuple:
    """The factor sharding computing ``result`` from ``operands`` as they are, else in ``result``'s."""
    try:
        per_operand = [factor_axes_from_tensor(rule, k, s) for k, s in enumerate(operands)]
    except RuleError:
        per_operand = None
    agreed = [] if per_operand is not None else None
    for f in range(rule.num_factors if per_operand is not None else 0):
        seen = {fa[f] for fa in per_operand if fa[f]}
        if len(seen) > 1:
            agreed = None
            break
        agreed.append(next(iter(seen), ()))
    if agreed is not None:
        try:
            check_factor_axes(rule, tuple(agreed), mesh)
            return tuple(agreed)
        except RuleError:
            pass
    from_result = factor_axes_from_tensor(rule, "result", result)
    return tuple(merge_adjacent(a, mesh) for a in from_result)
