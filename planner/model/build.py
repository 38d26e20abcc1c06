"""From a model to a :class:`~planner.model.nodes.Model` and its :class:`~planner.model.problem.SearchProblem`.

:func:`build_model` enumerates each op's strategies (:mod:`planner.enumeration`),
narrows them by the user's annotations, manual regions and the phase's axes, adds a
node per shared source and a flow per tensor read (:mod:`planner.model.nodes`), and
prices them in cost tables (:mod:`planner.model.tables`).
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from costmodels import Cluster
from planner.caches import ByIdentity
from planner.enumeration import enumerate_extensions, enumerate_strategies, make_strategy, search_pieces
from planner.errors import PlanningError, RuleError, ShardplanError
from planner.ir.axis import AxisRef, merge_adjacent
from planner.ir.mesh import Mesh
from planner.ir.sharding import PENDING_SUM, TensorSharding
from planner.model.annotations import annotations_at, satisfies, where
from planner.model.axis_types import region_result_bound, restrict
from planner.model.manual import manual_pending, manual_variance, region_candidates
from planner.model.op_collectives import permutation_axes
from planner.model.nodes import Flow, Model, OpNode, PlanNode, SourceNode
from planner.model.options import OUTPUT_LAYOUTS, Options
from planner.model.phases import restrict_annotation, restrict_factor_axes
from planner.model.problem import SearchProblem
from planner.model.tables import data_edge, fanout_edge, node_costs, same_groups
from planner.progress import SILENT, Progress, counted, task
from planner.rules.projection import strategy_to_factor_axes
from planner.rules.registry import rule_for
from graphs.gradients import requires_grad
from graphs.ops import get_op

__all__ = ["build_model", "constraints"]


def _cut_sizes(graph) -> set[int]:
    """Factor sizes of reshape pieces: the planner cuts mesh axes so they can follow a reshape."""
    sizes = set()
    for op in graph.ops:
        if op.op == "reshape":
            rule = rule_for(op, [graph.tensor(t).shape for t in op.inputs], graph.tensor(op.output).shape)
            sizes.update(s for f, s in enumerate(rule.factor_sizes) if rule.needs_divisible[f])
    return sizes


# -- building ----------------------------------------------------------------------------------

def constraints(graph, mesh: Mesh, options: Options) -> tuple[dict, dict, tuple[AxisRef, ...]]:
    """The user's active annotations, the strategies the model gives (factor axes per op) and the
    search pieces: the mesh axes cut wherever those, the explicit strategies and reshapes need."""
    if options.outputs_layout not in OUTPUT_LAYOUTS:
        raise PlanningError(f"outputs_layout must be one of {', '.join(OUTPUT_LAYOUTS)}, "
                            f"got {options.outputs_layout!r}")
    annotations = annotations_at(graph, mesh, options.priority_level)
    refs = [a for ann in annotations.values() for a in ann.used_axes()]
    user_strategies = {}
    for op in graph.ops:
        if op.strategy is not None:
            rule = rule_for(op, [graph.tensor(t).shape for t in op.inputs], graph.tensor(op.output).shape)
            try:
                fa = strategy_to_factor_axes(rule, op.strategy, mesh)
            except (RuleError, ShardplanError) as e:
                raise PlanningError(f"op {op.name!r}: strategy {op.strategy}: {e.message}",
                                    where=where(graph, op.line)) from None
            user_strategies[op.name] = fa
            refs += [a for axes in fa for a in axes]
    for fa in options.fixed_strategies.values():
        refs += [a for axes in fa for a in axes]
    return annotations, user_strategies, search_pieces(mesh, refs, _cut_sizes(graph))


def build_model(graph, mesh: Mesh, cluster: Cluster, options: Options = Options(),
                progress: Progress | None = None) -> Model:
    """Enumerate, constrain and cost every node and link of ``graph`` on ``mesh``.

    ``progress`` (a :class:`~planner.progress.Progress`), if given, hears how far table
    building has got: one step per node and link.
    """
    annotations, user_strategies, pieces = constraints(graph, mesh, options)
    allowed = options.phase_allowed
    if allowed is not None and set(pieces) - set(allowed):  # an axis phase: what the constraints ask of it
        annotations = {t: restrict_annotation(a, allowed) for t, a in annotations.items()}
        user_strategies = {o: restrict_factor_axes(fa, allowed, mesh) for o, fa in user_strategies.items()}
    needs = requires_grad(graph) if options.training else {t: False for t in graph.tensors}

    # -- which sources get a node ---------------------------------------------------------------
    reads: dict[str, list[tuple[str, tuple[int, ...]]]] = {name: [] for name in graph.tensors}
    for op in graph.ops:
        grouped: dict[str, list[int]] = {}
        for k, t in enumerate(op.inputs):
            grouped.setdefault(t, []).append(k)
        for t, ks in grouped.items():
            reads[t].append((op.name, tuple(ks)))
    sources = [name for name, t in graph.tensors.items() if t.kind != "activation" and reads[name]]
    # A source gets a node when several ops (or several operands of one op) read it, or
    # when the user fixed how it is stored (its readers may still redistribute it, at a cost).
    shared = [s for s in sources if len(reads[s]) > 1 or len(reads[s][0][1]) > 1 or s in annotations]
    private = {s: (reads[s][0][0], reads[s][0][1][0]) for s in sources if s not in shared}

    # -- nodes ------------------------------------------------------------------------------------
    nodes: list[PlanNode] = []
    op_index: dict[str, int] = {}
    variance = manual_variance(graph) if graph.manual_regions else {}
    progress = progress or SILENT
    for op in counted(progress, "strategies", graph.ops):
        op_index[op.name] = len(nodes)
        node = _op_node(graph, op, mesh, pieces, annotations, user_strategies, options, needs)
        if variance:
            node = replace(node, manual_pending=manual_pending(graph, op, variance))
        nodes.append(node)
    source_index: dict[str, int] = {}
    for s in shared:
        source_index[s] = len(nodes)
        nodes.append(_source_node(graph, s, reads[s], nodes, op_index, annotations))

    def producer_node(t: str) -> int | None:
        producer = graph.producer(t)
        return op_index[producer] if producer is not None else source_index.get(t)

    edges: list[Flow] = []
    fanouts: list[Flow] = []
    for t, rs in reads.items():
        u = producer_node(t)
        if u is None or not rs:
            continue
        back = options.training and needs.get(t, False)
        if len(rs) == 1:
            op_name, ks = rs[0]
            edges.append(Flow("data", t, u, (op_index[op_name],), (ks,), back))
        else:
            fanouts.append(Flow("fanout", t, u, tuple(op_index[o] for o, _ in rs), tuple(ks for _, ks in rs), back))
    flows = tuple(edges + fanouts)

    nodes_t = tuple(nodes)
    stub = Model(graph, mesh, cluster, options, pieces, nodes_t, flows, SearchProblem(()), MappingProxyType(needs),
                 MappingProxyType(annotations), MappingProxyType(op_index), MappingProxyType(source_index),
                 MappingProxyType(private))
    with task(progress, "cost tables", len(nodes_t) + len(flows)):

        def tick(item):
            progress.advance()
            return item

        op_memo: dict = {}  # identical layers' ops priced once
        sides = ByIdentity()  # and their links' producer and reader classes worked out once
        problem_nodes = tuple(tick(node_costs(stub, i, op_memo)) for i in range(len(nodes_t)))
        problem = SearchProblem(
            problem_nodes,
            tuple(tick(data_edge(stub, flow, sides)) for flow in edges),
            same_groups(stub),
            options.memory_budget,
            fanouts=tuple(tick(fanout_edge(stub, flow, sides)) for flow in fanouts),
        )
    return replace(stub, problem=problem)


def _op_node(graph, op, mesh, pieces, annotations, user_strategies, options, needs) -> OpNode:
    shapes = [graph.tensor(t).shape for t in op.inputs]
    out = graph.tensor(op.output)
    rule = rule_for(op, shapes, out.shape)
    # an op whose backward runs only with its permutation factor whole (sort), in a step that runs that backward
    # (its result needs a gradient: not an argsort's integer indices)
    whole_for_backward = options.training and not get_op(op.op).permutation_backward and needs.get(op.output, False)
    if op.name in options.fixed_strategies:  # explicit mode, propagation: the op computes its tensors' shardings
        # (checked where they were made: propagation's may split a pass-through factor past its size)
        fixed = make_strategy(rule, options.fixed_strategies[op.name], mesh, padded=True)
        if whole_for_backward and permutation_axes(rule, fixed):
            raise PlanningError(
                f"op {op.name!r} ({op.op}) runs along a dimension sharded by "
                f"{{{', '.join(map(str, permutation_axes(rule, fixed)))}}}, and a training step needs its operand "
                "gradients, whose backward (a scatter by the keys' order) is planned with that dimension whole; "
                "replicate it for training", where=where(graph, op.line))
        if (options.training and needs.get(op.output, False) and fixed.result.unreduced
                and rule.reduction != PENDING_SUM):
            raise PlanningError(
                f"op {op.name!r} ({op.op}) reduces over dimensions sharded by "
                f"{{{', '.join(map(str, fixed.result.unreduced))}}}, leaving a pending {rule.reduction}imum, which "
                "has no backward (JAX's pmax has no transpose); replicate its reduced dimensions for training",
                where=where(graph, op.line))
        return OpNode(op.name, op, rule, (fixed,), "the strategy that computes its tensors' fixed shardings")
    if options.phase_new is not None:  # an axis phase: extend what earlier phases chose
        prefix = options.prefixes.get(op.name, ((),) * rule.num_factors)
        held = [a for axes in prefix for a in axes]
        new = tuple(p for p in options.phase_new if not any(a.overlaps(p) for a in held))
        enumerated = tuple(enumerate_extensions(rule, mesh, prefix, new))
    else:
        enumerated = enumerate_strategies(rule, mesh, pieces)  # cached: one tuple for alike ops
    candidates = list(enumerated)
    candidates = region_candidates(graph, op, rule, candidates)
    if whole_for_backward:
        candidates = [s for s in candidates if not permutation_axes(rule, s)]
    if options.training and needs.get(op.output, False) and rule.reduction != PENDING_SUM:
        # a pending maximum has no transpose (JAX's pmax none): a training step that differentiates a max reduces
        # its axes unsharded (one whose result needs no gradient, a stopped shift, is free)
        candidates = [s for s in candidates if not s.result.unreduced]
    user = []
    if op.name in user_strategies:
        fa = user_strategies[op.name]
        match = [s for s in candidates if s.factor_axes == fa]
        candidates = match or [make_strategy(rule, fa, mesh)]
        user.append(f"strategy {candidates[0].text()} given in the model")
    if options.allowed_axes is not None:
        allowed = options.allowed_axes | {a.name for axes in options.prefixes.get(op.name, ()) for a in axes}
        candidates = [s for s in candidates if all(a.name in allowed for axes in s.factor_axes for a in axes)]
    if op.name in options.prefixes and options.phase_new is None:
        prefix = options.prefixes[op.name]
        candidates = [s for s in candidates if all(tuple(s.factor_axes[f][: len(p)]) == tuple(p)
                                                   for f, p in enumerate(prefix))]
    fixed = options.fixed_axes.get(op.name)
    if fixed:
        prefix = options.prefixes.get(op.name, ((),) * rule.num_factors)
        candidates = [s for s in candidates
                      if all(merge_adjacent([a for a in axes if a.name in fixed], mesh) == tuple(p)
                             for axes, p in zip(s.factor_axes, prefix))]
    if op.output in annotations:
        ann = annotations[op.output]
        candidates = [s for s in candidates if satisfies(s.result, ann)]
        user.append(f"annotation {ann.dims_text()} on its result {op.output!r}")
    bound = region_result_bound(graph, op, mesh) if graph.axis_regions else None
    if bound is not None:  # an auto_axes region's output leaves typed by the region's out-sharding on its axes
        region, axes, want = bound
        if options.phase_allowed is not None:
            want = restrict_annotation(want, options.phase_allowed)
        candidates = [s for s in candidates if satisfies(restrict(s.result, axes), want)]
        user.append(f"out_shardings {want.dims_text()} of auto_axes region {region!r} on its result {op.output!r}")
    if not candidates:
        raise PlanningError(
            f"op {op.name!r} ({op.op}) has no strategy that satisfies {'; '.join(user) or 'its constraints'}; "
            "loosen one of them (open a dimension with ?, or drop a replicated axis)",
            where=where(graph, op.line),
        )
    kept = tuple(candidates)
    # nothing filtered: the enumeration's own tuple, which identical layers' ops then share (their cost tables'
    # sides are worked out once, :func:`~planner.model.tables.data_edge`)
    return OpNode(op.name, op, rule, enumerated if kept == enumerated else kept, "; ".join(user) or None)


def _source_node(graph, s: str, reads, nodes, op_index, annotations) -> SourceNode:
    layouts: dict[TensorSharding, None] = {}
    ann = annotations.get(s)
    if ann is not None and all(d.is_closed for d in ann.dims):
        layouts[ann.layout_only()] = None  # stored exactly as annotated
    for op_name, ks in reads:
        for strat in nodes[op_index[op_name]].strategies:
            for k in ks:
                lay = strat.operands[k]
                if ann is None or satisfies(lay, ann):
                    layouts.setdefault(lay, None)
    if not layouts and ann is not None:  # an open annotation no reader reads as is: stored as written, as if closed
        layouts[ann.layout_only()] = None
    if not layouts:
        raise PlanningError(f"no layout of tensor {s!r} satisfies its annotation {ann} and is readable by its ops",
                            where=where(graph, graph.tensor(s).line))
    user = f"annotation {ann.dims_text()} on tensor {s!r}" if ann is not None else None
    return SourceNode(s, tuple(layouts), user)
