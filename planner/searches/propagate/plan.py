"""The search ``propagate``: from propagated shardings to a plan (seed 003's partitioner step).

:func:`search` runs a rule-based pass
(:mod:`planner.searches.propagate.passes`) and gives every op the strategy that
computes from the shardings around it (:func:`op_factor_axes`), as Shardy's SPMD
partitioner does: a contracting (reduction) factor that every operand carrying it
shards alike is computed so, and the op's result is left a pending sum over those
axes, even where the result's own sharding wants one of them elsewhere (XLA keeps the
operands of such a dot and reduces its result: a weight is not resharded); then a
factor the op's result carries is computed as the result is sharded, unsharded where
the result leaves it unsharded (XLA computes an op in its result's sharding and
reshards the operands to it, e.g. before a closed constraint); a contraction that
some operands of a dot shard and the others do not is computed unsharded (those
operands gathered) where XLA's dot partitioner gathers them, or on the mesh axes
free in its device groups where it moves the one sharding operand there and reduces
(:func:`_gathered_reductions`); any other factor
(a contracting dimension the operands disagree on, a dimension the result does not
have) as the largest operand that shards it has it (ties: the lower operand index),
so a dot whose operands conflict keeps the larger operand's sharding. An op XLA's partitioner has no rule
for (``OpDef.xla_replicates``: its TopK) is computed replicated, its operands gathered and its result sliced
to its sharding, as XLA's DefaultAction does. Where a tensor's
sharding and what its reader computes on disagree, the plan redistributes
explicitly. Sources are stored and graph outputs delivered in their propagated
shardings (:mod:`planner.model.typed`), so the plan is costed, lowered,
explained, simulated and gated like a bfs or ilp plan; it reports each tensor's
propagated sharding with its open marks.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from costmodels.units import format_bytes
from graphs.axis_regions import region_of
from graphs.ops import get_op
from planner.errors import PlanningError, RuleError
from planner.ir.axis import axes_size
from planner.ir.mesh import AxisType, Mesh
from planner.ir.sharding import TensorSharding
from planner.model.axis_types import axes_of_type, combine, explicit_prefixes, op_explicit_axes, restrict
from planner.model.annotations import default_annotations, has_user_annotations, user_annotation
from planner.model.build import build_model
from planner.model.decision import Decision
from planner.model.ignored import ignored_annotations
from planner.model.manual import region_boundaries, region_prefix, without_manual
from planner.model.options import Options
from planner.model.provenance import pinned_reason
from planner.model.request import Request
from planner.model.typed import typed_graph, typed_model
from planner.redistribution.xla_policy import free_in_groups
from planner.searches import bfs, phased
from planner.searches.propagate.engine import user_strategies
from planner.searches.propagate.passes import propagate
from planner.rules import RESULT, FactorKind, OpShardingRule, check_factor_axes, factor_axes_from_tensor, rule_for


def search(request: Request) -> Decision:
    """The search ``propagate``: the request's pass (``request.propagation``) and the plan it gives."""
    notes = ignored_annotations(request.graph, "propagate")
    request = phased.on_planning_mesh(request)
    request.progress.stage(f"propagating ({request.propagation})")
    decision = propagate_outcome(request.graph, request.mesh, request.cluster, request.options, request.propagation)
    return replace(decision, notes=(*notes, *decision.notes))


def propagate_outcome(graph, mesh: Mesh, cluster, options: Options, how: str = "user-priority") -> Decision:
    """The decided model of rule-based propagation pass ``how`` on ``graph`` (see the module docstring)."""
    mixed = any(op_explicit_axes(graph, mesh).values())
    prefixes, typed_at, types = explicit_prefixes(graph, mesh) if mixed else ({}, {}, None)
    every = frozenset(a.name for a in mesh.axes)
    typed = _typed_axes(graph, mesh, typed_at) if mixed else {}
    boundary = region_boundaries(graph) if graph.manual_regions else {}
    if graph.manual_regions:  # a region's manual axes are blocked on its body tensors (free axes only there)
        typed = dict(typed)
        for r in graph.manual_regions:
            for t in r.body_tensors:
                typed[t] = typed.get(t, frozenset()) | frozenset(r.manual_axes)
        prefixes = dict(prefixes)
        for op in graph.ops:
            if graph.region_of_op(op.name):  # a boundary op's MANUAL factors carry the manual axes, the others
                manual = region_prefix(graph, op)  # their Explicit axes, if any
                explicit = prefixes.get(op.name, ((),) * len(manual))
                prefixes[op.name] = tuple(m or e for m, e in zip(manual, explicit))
    defaults = {} if has_user_annotations(graph) or boundary else default_annotations(graph, mesh)
    if mixed:  # mixed axis types: each tensor's typed axes are typed, propagation places the others
        defaults = {t: restrict(s, every - typed[t]) for t, s in defaults.items()}
    prop = propagate(graph, mesh, how, defaults=defaults, typed_axes=typed, boundaries=boundary,
                     annotation=lambda t: restrict(user_annotation(graph, t, mesh), every - typed.get(t, frozenset())))
    shardings = dict(prop.shardings) if not mixed else {
        name: combine(types[name], s) for name, s in prop.shardings.items()}
    pinned = {} if mixed else user_strategies(graph, mesh)
    fixed = {}
    for op in graph.ops:
        if op.name in pinned:
            fixed[op.name] = pinned[op.name]
            continue
        rule = rule_for(op, [graph.tensor(t).shape for t in op.inputs], graph.tensor(op.output).shape)
        sizes = [graph.tensor(t).nbytes for t in op.inputs]
        free = every - typed_at.get(op.name, frozenset())  # the axes this op computes on as propagated
        prefix = prefixes.get(op.name)
        if get_op(op.op).xla_replicates and prefix is None:  # XLA runs it whole: operands gathered, result sliced
            fixed[op.name] = ((),) * rule.num_factors
            continue
        if graph.manual_regions and prefix is not None:  # a boundary's global side: its manual axes come first
            ins = [restrict(shardings[t], free) for t in op.inputs]
            out = restrict(shardings[op.output], free)
            fixed[op.name] = op_factor_axes(rule, [without_manual(s, graph, op) for s in ins],
                                            without_manual(out, graph, op), sizes, mesh, prefix,
                                            graph.tensor(op.output).nbytes)
            continue
        fixed[op.name] = op_factor_axes(rule, [restrict(shardings[t], free) for t in op.inputs],
                                        restrict(shardings[op.output], free), sizes, mesh, prefix,
                                        graph.tensor(op.output).nbytes)
    layouts = {name: s.layout_only() for name, s in shardings.items()}
    built = build_model(typed_graph(graph, layouts, options.outputs_layout), mesh, cluster,
                        replace(options, fixed_strategies=fixed, memory_budget=None, reshard_policy="xla"))
    m = typed_model(built, graph, shardings,
                    lambda t: f"propagation ({how}): stored as propagated, {shardings[t].dims_text()}", pinned_reason)
    outcome = bfs.decide_fixed(m)
    budget = options.memory_budget
    if budget is not None and m.problem.memory(outcome.choice) > budget * (1 + 1e-9):
        raise PlanningError(f"the propagated plan needs {format_bytes(m.problem.memory(outcome.choice))} per device, "
                            f"more than the memory budget of {format_bytes(budget)}; annotate the largest tensors with more "
                            "axes, or use --search ilp, which honours the budget")
    return replace(outcome, search="propagate", propagation=prop)


def _typed_axes(graph, mesh: Mesh, typed_at) -> dict[str, frozenset[str]]:
    """Per tensor, the axes its type is on: its producer's Explicit axes (an ``auto_axes`` region's output
    also its region's, from its out-sharding); a source's, the mesh's Explicit axes."""
    explicit = axes_of_type(mesh, AxisType.EXPLICIT)
    out = {}
    for t in graph.tensors:
        producer = graph.producer(t)
        if producer is None:
            out[t] = explicit
            continue
        region = region_of(graph.axis_regions, producer)
        leaving = region is not None and region.kind == "auto" and region.sharding(t) is not None
        out[t] = typed_at[producer] | (frozenset(region.axes) if leaving else frozenset())
    return out


def op_factor_axes(rule: OpShardingRule, operands: Sequence[TensorSharding], result: TensorSharding,
                   operand_bytes: Sequence[int], mesh: Mesh, prefix: tuple | None = None,
                   result_bytes: int | None = None) -> tuple:
    """The factor sharding an op computes in, given its tensors' shardings (see the module docstring).

    Reduction factors the operands agree on come first; then tensors are read in order
    (the result, then operands by decreasing size, then index); each factor takes its
    axes from the first tensor that shards it with axes no other factor holds yet, as
    long as the factor sharding stays valid. A factor the result carries with no axes
    stays unsharded.
    ``prefix``: factor axes that come first (a mixed mesh's typed Explicit axes).
    ``result_bytes``: the result's global size; given, a contraction only some operands
    shard is computed unsharded where XLA's dot partitioner gathers those operands
    (:func:`_gathered_reductions`).
    """
    order = [(RESULT, result)] + sorted(enumerate(operands), key=lambda ks: (-operand_bytes[ks[0]], ks[0]))
    chosen: list[tuple] = list(prefix) if prefix is not None else [()] * rule.num_factors
    decided = [False] * rule.num_factors

    def take(f: int, axes) -> None:
        """Factor ``f`` decided with ``axes`` added, where the factor sharding stays valid."""
        nonlocal chosen
        trial = list(chosen)
        trial[f] = tuple(chosen[f]) + tuple(axes)
        try:
            check_factor_axes(rule, tuple(trial), mesh, padded=True)
        except RuleError:
            return
        chosen, decided[f] = trial, True

    for f, axes in _agreed_reductions(rule, operands).items():  # the operands' agreed contraction stays
        take(f, axes)
    if result_bytes is not None:
        for f, axes in _gathered_reductions(rule, operands, result, operand_bytes, result_bytes, mesh, decided).items():
            take(f, axes)
    for which, sharding in order:
        try:
            proj = factor_axes_from_tensor(rule, which, sharding)
        except RuleError:
            continue  # a sharding the op's factors cannot read (a reshape's misfit): the others decide
        carried = {f for dim in rule.tensor_dims(which) for f in dim}
        for f, axes in enumerate(proj):
            if decided[f]:
                continue
            if not axes:  # a factor the result carries unsharded is computed unsharded (its operands are resharded)
                decided[f] = which == RESULT and f in carried
                continue
            if any(a.overlaps(b) for g, held in enumerate(chosen) if g != f for b in held for a in axes):
                continue
            take(f, axes)
    return tuple(chosen)


def _gathered_reductions(rule: OpShardingRule, operands: Sequence[TensorSharding], result: TensorSharding,
                         operand_bytes: Sequence[int], result_bytes: int, mesh: Mesh, decided) -> dict[int, tuple]:
    """Reduction factors of a multi-operand op (a dot, an einsum) that some operands shard and the others do
    not, as XLA's dot partitioner computes them: ``{factor: ()}`` where it gathers the sharded operands rather
    than compute partial sums, ``{factor: axes}`` where it moves the one sharding operand onto ``axes`` and
    computes partial sums over them.

    XLA first groups the devices by the axes on which an operand already shards a batch or non-contracting
    dimension exactly as the result does (each group then partitions the rest of the dot alone). An operand that
    alone shards the contraction, on grouping axes, is first moved onto the mesh axes no operand and not the result
    use, free in each group, where they are as many devices (the ``xla`` policy's
    :func:`~planner.redistribution.xla_policy.regrouped`: ``x[{"a"}, {}] @ w[{"a"}, {}]`` on 2x2x2 moves ``w`` to
    ``[{"b", "c"}, {}]``). Where the contraction's axes do not partition a whole group, it gathers the operand,
    whatever the bytes (``x[{}, {"dp"}] @ w[{}, {}]`` on a 2x4 ``dp``, ``tp`` mesh). Where they do and one operand
    shards the contraction, it gathers that operand where the result is at least as large as it, each counted in
    one group (its share over the grouping axes), and otherwise slices the other operands to match and all-reduces
    the partial products, whatever the bytes either moves: scores ``q[b, s, d] . k[b, t, d]`` with ``q``'s ``d``
    split all-reduce with fewer keys ``t`` than features ``d`` and gather ``q`` from as many on (JAX 0.10.2,
    ``tests/frontends/shardy_suite.py``'s ``one_sided_*``). Where several operands shard it on different axes
    (one that shards it on grouping axes first spread over every other axis, as above), each splitting it as many
    ways, the operands of smaller shards are permuted onto the axes of the largest shard (on a tie, the last
    operand's) and the partial products all-reduced; split different ways (``x[{}, {"dp"}] @ w[{"tp"}, {}]`` on
    2x4), every operand is gathered."""
    if len(operands) < 2:
        return {}
    try:
        projs = [factor_axes_from_tensor(rule, k, s) for k, s in enumerate(operands)]
        wanted = factor_axes_from_tensor(rule, RESULT, result)
    except RuleError:
        return {}
    grouped = {a for f, axes in enumerate(wanted) if axes and rule.factor_kinds[f] is not FactorKind.REDUCTION
               and any(tuple(proj[f]) == tuple(axes) for proj in projs) for a in axes}
    free = free_in_groups(mesh, [a for axes in (*wanted, *(axes for proj in projs for axes in proj)) for a in axes])
    out: dict[int, tuple] = {}
    for f in range(rule.num_factors):
        if decided[f] or rule.factor_kinds[f] is not FactorKind.REDUCTION:
            continue
        sharding = [k for k, proj in enumerate(projs) if proj[f]]
        if not sharding:
            continue
        axes = {k: tuple(projs[k][f]) for k in sharding}
        moved = ()
        if len(sharding) > 1:
            # several, on other axes: one that splits it over grouping axes is first spread over its group (every
            # other whole axis) where the group has as many devices, else gathered (it leaves the contraction)
            spread = free_in_groups(mesh, list(grouped))
            room = axes_size(spread, mesh)
            onto = {k: spread if set(axes[k]) & grouped else axes[k] for k in sharding
                    if not (set(axes[k]) & grouped) or room >= axes_size(axes[k], mesh)}
            if not onto:
                out[f] = ()
                continue
            if len(onto) > 1:  # the smaller shards permuted onto the largest's where they split as many ways
                if len({axes_size(axes, mesh) for axes in onto.values()}) > 1:
                    out[f] = ()
                else:
                    out[f] = onto[max(onto, key=lambda k: (operand_bytes[k] / operands[k].num_shards(), k))]
                continue
            sharding = list(onto)
            moved = axes[sharding[0]] = onto[sharding[0]]  # the one left keeps them unless gathered below
        elif free and set(axes[sharding[0]]) <= grouped and all(a.is_full for a in axes[sharding[0]]) \
                and axes_size(free, mesh) >= axes_size(axes[sharding[0]], mesh):
            moved = axes[sharding[0]] = free
        # one operand: gathered unless the result is smaller, group for group
        (k,) = sharding
        if axes_size(grouped | set(axes[k]), mesh) < mesh.size:
            out[f] = ()  # the contraction does not partition a whole group
            continue
        gathers = result_bytes / _group_pieces(rule, wanted, grouped, mesh) >= \
            operand_bytes[k] / _group_pieces(rule, projs[k], grouped, mesh)
        if gathers:
            out[f] = ()
        elif moved:
            out[f] = moved
    return out


def _group_pieces(rule: OpShardingRule, factor_axes, grouped: set, mesh: Mesh) -> int:
    """Into how many pieces the device groups of ``grouped`` split a tensor whose factor axes are
    ``factor_axes`` (its batch and non-contracting factors on grouping axes): each group holds one."""
    return axes_size((a for f, axes in enumerate(factor_axes) if rule.factor_kinds[f] is not FactorKind.REDUCTION
                      for a in axes if a in grouped), mesh)


def _agreed_reductions(rule: OpShardingRule, operands: Sequence[TensorSharding]) -> dict[int, tuple]:
    """Reduction factors every operand that has them shards alike (and not empty): factor -> those axes."""
    agreed: dict[int, tuple] = {}
    seen: dict[int, set] = {}
    for k, sharding in enumerate(operands):
        try:
            proj = factor_axes_from_tensor(rule, k, sharding)
        except RuleError:
            return {}
        for f in range(rule.num_factors):
            if rule.factor_kinds[f] is FactorKind.REDUCTION and any(f in d for d in rule.tensor_dims(k)):
                seen.setdefault(f, set()).add(tuple(proj[f]))
    for f, lists in seen.items():
        if len(lists) == 1 and next(iter(lists)):
            agreed[f] = next(iter(lists))
    return agreed


__all__ = ["op_factor_axes", "propagate_outcome", "search"]
