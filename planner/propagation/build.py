"""From a model to a :class:`~planner.propagation.problem.SearchProblem`.

One node per op (its candidates are the strategies its rule admits, minus those
the user's constraints forbid) and one per *source* tensor (input, parameter,
constant) that several ops read or that the user annotated (its candidates are
the layouts it may be stored in). A source read by one op has no node: it is
stored as that op reads it.

Nodes are joined by :class:`Link` s, each one kind of data movement:

* ``data``: a tensor from its producer (an op or a source node) to its only
  reader: the forward redistribution to each distinct layout the reader needs;
* ``fanout``: a tensor read by several ops: one forward redistribution per
  *distinct* layout the readers need, shared by every reader of that layout.

With training the backward of each link is the forward program transposed
(seed 004, :mod:`planner.redistribution.transpose`): the cotangents of the readers
of one forward copy that come back pending over the same axes (the psums that
transpose the pbroadcasts of :func:`planner.training.gradients.operand_gradient`)
are added locally, and that sum goes back through the transpose of the copy's
forward redistribution; the producer adds what arrives from its copies.

What a link or a node moves for given candidates is defined once, in
:func:`link_moves` and :func:`node_moves`; the cost tables below price exactly
those moves and the lowering (:mod:`planner.partitioning.program`) emits exactly
those moves, so the objective a search optimises is what the program does.

Costs, all in seconds on the cluster: per op and strategy its compute time
(:func:`op_compute_time_s`), the delivery of a graph output
(:func:`final_layout`) and, with training, its transpose and the gradient
reduction of parameters only this op reads; per link the redistributions above. Edge tables are built
over *classes* (distinct layouts on each side), each distinct redistribution
planned once by the engine and cached; identical layers cost nothing extra.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping

import numpy as np

from costmodels import Cluster, compute_time_s, parameter_bytes
from graphs.dtypes import dtype_itemsize, is_float
from graphs.graph import OUTPUTS_LAYOUTS as OUTPUT_LAYOUTS
from graphs.ops.registry import get_op
from planner.caches import BoundedCache
from planner.enumeration import Strategy, enumerate_extensions, enumerate_strategies, make_strategy, search_pieces
from planner.errors import PlanningError, RuleError, ShardplanError
from planner.ir.axis import AxisRef, merge_adjacent
from planner.ir.mesh import Mesh
from planner.ir.sharding import DimSharding, TensorSharding
from planner.propagation.annotations import restrict_to_priority, satisfies, translate
from planner.propagation.manual import body_collective, manual_pending, manual_variance, region_candidates
from planner.propagation.phases import restrict_annotation, restrict_factor_axes
from planner.progress import SILENT, Progress, task
from planner.propagation.problem import Edge, Fanout, LazyTable, Node, SearchProblem
from planner.redistribution import reshard_for_planning
from planner.redistribution.steps import ReshardPlan
from planner.redistribution.transpose import transpose_plan
from planner.rules.factors import OpShardingRule
from planner.rules.projection import strategy_to_factor_axes
from planner.rules.registry import rule_for
from graphs.gradients import requires_grad
from planner.training.gradients import operand_gradient

OPTIMIZER = "adam"
"""Training keeps Adam's two f32 moments per parameter element (:func:`costmodels.parameter_bytes`)."""


@dataclass(frozen=True)
class Options:
    """What to plan for.

    ``outputs_layout``: how graph outputs the user did not pin are delivered:
    ``free`` (any fully reduced layout: a pending sum may be reduce-scattered)
    or ``replicated`` (every device holds the whole output).
    ``insert_pbroadcast``: with training, track device-variance types so that the
    backward never sums what is already whole (seed 004); off, every cotangent is
    treated as varying (seed 004's wasteful "current" transposes), to compare.
    """

    training: bool = False
    memory_budget: float | None = None
    priority_level: int | None = None  # annotations with a larger priority are not yet active
    allowed_axes: frozenset[str] | None = None  # phase restriction (priorities): axes the search may use
    prefixes: Mapping[str, tuple] = field(default_factory=dict)  # op -> factor axes its strategy must extend
    outputs_layout: str = "free"
    fixed_strategies: Mapping[str, tuple] = field(default_factory=dict)  # op -> the only factor axes it may take
    insert_pbroadcast: bool = True
    # axis phases (planner.propagation.phases): the pieces this phase adds to the ``prefixes``
    # (anywhere among their axes) and every piece allowed so far; None: the whole problem
    phase_new: tuple[AxisRef, ...] | None = None
    phase_allowed: tuple[AxisRef, ...] | None = None
    # op -> its Explicit mesh axes (seed 001, planner.propagation.axis_types): the op's ``prefixes`` hold its
    # factor axes on them, and a candidate uses these axes exactly there (the search never moves them)
    fixed_axes: Mapping[str, frozenset[str]] = field(default_factory=dict)


# -- nodes and links ---------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class OpNode:
    """An op's candidate strategies and why they are what they are."""

    name: str
    op: object  # graphs.specs.OpSpec
    rule: OpShardingRule
    strategies: tuple[Strategy, ...]
    user: str | None = None  # why the user's annotations pinned or narrowed this op
    manual_pending: tuple = ()  # per operand: manual axes its cotangent is pending over (manual regions)

    def pending(self, s: Strategy, k: int) -> tuple[AxisRef, ...]:
        """The axes operand ``k``'s cotangent comes back pending over under ``s``."""
        return _pending(self.rule, s, k, self.manual_pending[k] if self.manual_pending else ())

    def operand_gradient(self, s: Strategy, k: int) -> TensorSharding:
        """The layout of operand ``k``'s cotangent under ``s`` (:func:`operand_gradient`)."""
        return operand_gradient(self.rule, s, k, self.manual_pending[k] if self.manual_pending else ())

    def candidates(self) -> int:
        return len(self.strategies)


@dataclass(frozen=True, eq=False)
class SourceNode:
    """A source tensor stored in one of ``layouts`` (read by several ops, or annotated)."""

    tensor: str
    layouts: tuple[TensorSharding, ...]
    user: str | None = None

    @property
    def name(self) -> str:
        return self.tensor

    def candidates(self) -> int:
        return len(self.layouts)


PlanNode = OpNode | SourceNode


@dataclass(frozen=True)
class Link:
    """One kind of movement of ``tensor`` between nodes (see the module docstring).

    ``producer`` is where the data comes from; ``readers`` where it goes, with
    ``operands[j]`` the operand positions of reader ``j`` that read the tensor;
    ``backward``: the tensor's gradient is needed (training), so the link also
    carries the transposes of its forward moves. Link ``k`` of a model is link
    ``k`` of its search problem.
    """

    kind: str
    tensor: str
    producer: int
    readers: tuple[int, ...]
    operands: tuple[tuple[int, ...], ...]
    backward: bool = False


@dataclass(frozen=True)
class Move:
    """One redistribution a plan makes, in ``phase``.

    Forward: ``tensor`` from ``source`` to ``destination``. Backward and gradient:
    the *transpose* of that forward move, taking the cotangent of the
    ``destination`` copy (pending over ``pending``) back to ``source``'s
    (:func:`planner.redistribution.transpose.transpose_plan`).
    """

    tensor: str
    source: TensorSharding
    destination: TensorSharding
    phase: str  # "forward", "backward" or "gradient"
    pending: tuple[AxisRef, ...] = ()


@dataclass(frozen=True, eq=False)
class Model:
    """The built problem and everything needed to read a choice of it.

    ``nodes[i]`` is decision ``i`` of ``problem``; ``links[k]`` is its link ``k``
    (``problem.edges`` then ``problem.fanouts``).
    """

    graph: object
    mesh: Mesh
    cluster: Cluster
    options: Options
    pieces: tuple[AxisRef, ...]
    nodes: tuple[PlanNode, ...]
    links: tuple[Link, ...]
    problem: SearchProblem
    needs_grad: Mapping[str, bool]
    annotations: Mapping[str, TensorSharding]  # tensor -> its active annotation on the planning mesh
    op_index: Mapping[str, int]
    source_index: Mapping[str, int]  # sources with a node
    private_sources: Mapping[str, tuple[str, int]]  # source read by one op -> (that op, first operand)

    @property
    def reshard_pieces(self) -> tuple[AxisRef, ...] | None:
        """The mesh pieces its redistributions may use: in an axis phase those of the phases so far
        (the later pieces are not in this problem yet, so its collectives do not borrow them);
        None: every piece (the whole problem, or the last phase)."""
        allowed = self.options.phase_allowed
        if allowed is None or not set(self.pieces) - set(allowed):
            return None
        return allowed

    # -- reading a choice ---------------------------------------------------------------------
    def strategy(self, op: str, choice) -> Strategy:
        i = self.op_index[op]
        return self.nodes[i].strategies[choice[i]]

    def deciding_node(self, tensor: str) -> int | None:
        """The node whose choice decides ``tensor``'s layout (None for a tensor nobody reads or makes)."""
        producer = self.graph.producer(tensor)
        if producer is not None:
            return self.op_index[producer]
        if tensor in self.source_index:
            return self.source_index[tensor]
        if tensor in self.private_sources:
            return self.op_index[self.private_sources[tensor][0]]
        return None

    def layout(self, tensor: str, choice) -> TensorSharding:
        """Where ``tensor`` lives under ``choice``: its producer's result or how its source is stored."""
        producer = self.graph.producer(tensor)
        if producer is not None:
            return self.strategy(producer, choice).result
        if tensor in self.source_index:
            i = self.source_index[tensor]
            return self.nodes[i].layouts[choice[i]]
        op, k = self.private_sources[tensor]
        return self.strategy(op, choice).operands[k]

    def reported_sharding(self, tensor: str, choice) -> TensorSharding:
        """The sharding a plan reports for ``tensor``: its layout (a typed model reports its type)."""
        return self.layout(tensor, choice)

    def keeps_pending(self, tensor: str) -> bool:
        """A training loss (a scalar graph output) keeps its pending sum: its value is only reported."""
        return self.options.training and self.graph.tensor(tensor).rank == 0

    def final_layout(self, op: str, strategy: Strategy) -> TensorSharding:
        """The layout graph output ``op`` delivers under ``strategy`` (see :func:`final_layout`)."""
        out = self.graph.tensor(self.graph.op(op).output)
        if self.keeps_pending(out.name):
            return strategy.result
        return final_layout(strategy.result, self.annotations.get(out.name), self.options.outputs_layout,
                            out.shape, out.dtype, self.cluster, self.reshard_pieces)


# -- the moves (one definition for costs and lowering) ---------------------------------------

def final_layout(result: TensorSharding, annotation: TensorSharding | None, policy: str, shape, dtype,
                 cluster: Cluster, within: tuple[AxisRef, ...] | None = None) -> TensorSharding:
    """The layout a graph output is delivered in.

    A closed annotation is delivered as written. Otherwise, with ``policy``
    ``replicated`` every device gets the whole value; with ``free`` the result keeps
    its layout and a pending sum is resolved the cheapest way: reduced in place
    (AllReduce) or reduce-scattered onto one of its dimensions (ties: in place, then
    the lowest dimension).
    """
    if annotation is not None and all(d.is_closed for d in annotation.dims):
        return annotation.layout_only()
    if policy == "replicated":
        return TensorSharding.replicated_on(result.mesh, result.rank)
    if not result.unreduced:
        return result
    options = [result.with_unreduced(())]
    for d in range(result.rank):
        dims = [list(x.axes) for x in result.dims]
        dims[d] += list(result.unreduced)
        try:
            candidate = result.with_unreduced(()).with_dims(dims)
        except ShardplanError:
            continue
        if annotation is None or satisfies(candidate, annotation):
            options.append(candidate)
    return min(options, key=lambda lay: reshard_for_planning(shape, dtype, result, lay, cluster, within).time_s)


def _grad_phase(m: Model, tensor: str) -> str:
    """A parameter's gradient reduction is the ``gradient`` phase; any other cotangent is ``backward``."""
    return "gradient" if m.graph.tensor(tensor).kind == "param" else "backward"


def link_moves(m: Model, k: int, choice) -> list[Move]:
    """The redistributions link ``k`` makes under ``choice`` (the costs price exactly these)."""
    link = m.links[k]
    t = link.tensor
    u = m.nodes[link.producer]
    src = u.layouts[choice[link.producer]] if isinstance(u, SourceNode) else u.strategies[choice[link.producer]].result
    layouts: dict[TensorSharding, None] = {}
    grads: dict[tuple, None] = {}
    for v, ks in zip(link.readers, link.operands):
        node = m.nodes[v]
        lays, gs = _reader_entry(node, node.strategies[choice[v]], ks, link.backward)
        layouts.update(dict.fromkeys(lays))
        grads.update(dict.fromkeys(gs))
    out = [Move(t, src, lay, "forward") for lay in layouts]
    phase = _grad_phase(m, t)
    out += [Move(t, src, lay, phase, pending) for lay, pending in grads]
    return out


def fanout_layouts(m: Model, k: int, choice) -> list[TensorSharding]:
    """The distinct layouts the readers of fanout link ``k`` need under ``choice``, in reader order."""
    return [mv.destination for mv in link_moves(m, k, choice) if mv.phase == "forward"]


def node_moves(m: Model, i: int, choice) -> list[Move]:
    """The redistributions op node ``i`` itself makes: its graph output's delivery and its own parameters' gradients."""
    node = m.nodes[i]
    if not isinstance(node, OpNode):
        return []
    return _op_moves(m.graph, node, node.strategies[choice[i]], m)


def _op_moves(graph, node: OpNode, s: Strategy, m: Model, own=None) -> list[Move]:
    op = node.op
    out: list[Move] = []
    if op.output in graph.outputs:
        final = m.final_layout(op.name, s)
        out.append(Move(op.output, s.result, final, "forward"))
        if m.options.training and m.needs_grad.get(op.output, False):
            out.append(Move(op.output, s.result, final, "backward"))  # the seeded cotangent goes back
    if m.options.training:
        for t, k in own if own is not None else _own_params(graph, node, m.private_sources):
            if m.needs_grad.get(t, False):
                out.append(Move(t, s.operands[k], s.operands[k], "gradient", node.pending(s, k)))
    return out


def _own_params(graph, node: OpNode, private) -> list[tuple[str, int]]:
    return [(t, k) for k, t in enumerate(node.op.inputs)
            if t in private and private[t][0] == node.name and private[t][1] == k
            and graph.tensor(t).kind == "param"]


def op_compute_time_s(graph, op, strategy: Strategy, cluster: Cluster, training: bool, needs_grad) -> float:
    """Forward compute, plus with training one forward's worth per operand whose gradient is needed."""
    return compute_time_s(op_flops(graph, op, training, needs_grad) / strategy.work_divisor, cluster)


def collective_time_s(m: Model, op, s: Strategy) -> float:
    """Seconds a manual region's collective ``op`` communicates under ``s`` (forward, plus its transpose
    with training when its operand needs a gradient); 0 for every other op."""
    total = 0.0
    for transposed in (False, True) if m.options.training and op.inputs and m.needs_grad.get(op.inputs[0]) \
            else (False,):
        c = body_collective(m.graph, op, s, m.cluster, transposed)
        total += c.time_s if c is not None else 0.0
    return total


def op_flops(graph, op, training: bool, needs_grad) -> float:
    """FLOPs of ``op`` on one device: its forward, plus one forward's worth per needed operand gradient."""
    grads = sum(1 for t in op.inputs if needs_grad.get(t, False)) if training else 0
    return graph.op_flops(op.name) * (1 + grads)


def stored_bytes(layout: TensorSharding, spec, training: bool) -> int:
    """Bytes one device holds for a source tensor stored in ``layout``.

    With training a parameter also has its gradient and Adam's two f32 moments,
    plus an f32 master copy when it is stored in a narrower float type
    (:func:`costmodels.parameter_bytes`).
    """
    elements = math.prod(layout.local_shape(spec.shape))
    itemsize = dtype_itemsize(spec.dtype)
    if training and spec.kind == "param":
        return parameter_bytes(elements, itemsize, optimizer=OPTIMIZER, gradients=True,
                               master_weights=is_float(spec.dtype) and itemsize < 4)
    return elements * itemsize


# -- annotations -------------------------------------------------------------------------------

def user_annotation(graph, name: str, mesh: Mesh) -> TensorSharding:
    """Tensor ``name``'s sharding on ``mesh``, translated from the mesh it was given on.

    A sharding with no equivalent on ``mesh`` is a :class:`PlanningError` naming the
    tensor (and its line in the model file).
    """
    t = graph.tensor(name)
    try:
        return translate(t.sharding, mesh, t.shape)
    except PlanningError as e:
        raise PlanningError(f"tensor {name!r}: {e.message}", where=_where(graph, t.line)) from None


def _annotations(graph, mesh: Mesh, level: int | None) -> dict[str, TensorSharding]:
    out = {}
    for name, t in graph.tensors.items():
        if t.sharding is None:
            continue
        ann = user_annotation(graph, name, mesh)
        if level is not None:
            ann = restrict_to_priority(ann, level)
        if ann is not None:
            out[name] = ann
    return out


def default_annotations(graph, mesh: Mesh) -> dict[str, TensorSharding]:
    """With no annotation at all, graph inputs are batch-sharded on the first mesh axis."""
    axis = mesh.axes[0]
    out = {}
    for name, t in graph.tensors.items():
        if t.kind == "input" and t.rank and t.shape[0] >= axis.size and axis.size > 1:
            dims = (DimSharding((AxisRef(axis.name),), is_open=True),) + tuple(
                DimSharding((), is_open=True) for _ in t.shape[1:])
            out[name] = TensorSharding(mesh, dims)
    return out


def has_user_annotations(graph) -> bool:
    return any(t.sharding is not None for t in graph.tensors.values()) or any(
        op.strategy is not None or op.out_sharding is not None for op in graph.ops)


def _cut_sizes(graph) -> set[int]:
    """Factor sizes of reshape pieces: the planner cuts mesh axes so they can follow a reshape."""
    sizes = set()
    for op in graph.ops:
        if op.op == "reshape":
            rule = rule_for(op, [graph.tensor(t).shape for t in op.inputs], graph.tensor(op.output).shape)
            sizes.update(s for f, s in enumerate(rule.factor_sizes) if rule.needs_divisible[f])
    return sizes


def _where(graph, line) -> str | None:
    if graph.source and line:
        return f"{graph.source}:{line}"
    return graph.source


# -- building ----------------------------------------------------------------------------------

def constraints(graph, mesh: Mesh, options: Options) -> tuple[dict, dict, tuple[AxisRef, ...]]:
    """The user's active annotations, the strategies the model gives (factor axes per op) and the
    search pieces: the mesh axes cut wherever those, the explicit strategies and reshapes need."""
    if options.outputs_layout not in OUTPUT_LAYOUTS:
        raise PlanningError(f"outputs_layout must be one of {', '.join(OUTPUT_LAYOUTS)}, "
                            f"got {options.outputs_layout!r}")
    annotations = _annotations(graph, mesh, options.priority_level)
    refs = [a for ann in annotations.values() for a in ann.used_axes()]
    user_strategies = {}
    for op in graph.ops:
        if op.strategy is not None:
            rule = rule_for(op, [graph.tensor(t).shape for t in op.inputs], graph.tensor(op.output).shape)
            try:
                fa = strategy_to_factor_axes(rule, op.strategy, mesh)
            except (RuleError, ShardplanError) as e:
                raise PlanningError(f"op {op.name!r}: strategy {op.strategy}: {e.message}",
                                    where=_where(graph, op.line)) from None
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
    for op in graph.ops:
        op_index[op.name] = len(nodes)
        node = _op_node(graph, op, mesh, pieces, annotations, user_strategies, options)
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

    edges: list[Link] = []
    fanouts: list[Link] = []
    for t, rs in reads.items():
        u = producer_node(t)
        if u is None or not rs:
            continue
        back = options.training and needs.get(t, False)
        if len(rs) == 1:
            op_name, ks = rs[0]
            edges.append(Link("data", t, u, (op_index[op_name],), (ks,), back))
        else:
            fanouts.append(Link("fanout", t, u, tuple(op_index[o] for o, _ in rs), tuple(ks for _, ks in rs), back))
    links = tuple(edges + fanouts)

    nodes_t = tuple(nodes)
    stub = Model(graph, mesh, cluster, options, pieces, nodes_t, links, SearchProblem(()), MappingProxyType(needs),
                 MappingProxyType(annotations), MappingProxyType(op_index), MappingProxyType(source_index),
                 MappingProxyType(private))
    progress = progress or SILENT
    with task(progress, "cost tables", len(nodes_t) + len(links)):

        def tick(item):
            progress.advance()
            return item

        problem_nodes = tuple(tick(_node_costs(stub, i)) for i in range(len(nodes_t)))
        problem = SearchProblem(
            problem_nodes,
            tuple(tick(_edge(stub, link)) for link in edges),
            _same_groups(stub),
            options.memory_budget,
            fanouts=tuple(tick(_fanout(stub, link)) for link in fanouts),
        )
    return replace(stub, problem=problem)


def _op_node(graph, op, mesh, pieces, annotations, user_strategies, options) -> OpNode:
    shapes = [graph.tensor(t).shape for t in op.inputs]
    out = graph.tensor(op.output)
    rule = rule_for(op, shapes, out.shape)
    if op.name in options.fixed_strategies:  # explicit mode, propagation: the op computes its tensors' shardings
        return OpNode(op.name, op, rule, (make_strategy(rule, options.fixed_strategies[op.name], mesh),),
                      "the strategy that computes its tensors' fixed shardings")
    if options.phase_new is not None:  # an axis phase: extend what earlier phases chose
        prefix = options.prefixes.get(op.name, ((),) * rule.num_factors)
        held = [a for axes in prefix for a in axes]
        new = tuple(p for p in options.phase_new if not any(a.overlaps(p) for a in held))
        candidates = list(enumerate_extensions(rule, mesh, prefix, new))
    else:
        candidates = list(enumerate_strategies(rule, mesh, pieces))
    candidates = region_candidates(graph, op, rule, candidates)
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
    if not candidates:
        raise PlanningError(
            f"op {op.name!r} ({op.op}) has no strategy that satisfies {'; '.join(user) or 'its constraints'}; "
            "loosen one of them (open a dimension with ?, or drop a replicated axis)",
            where=_where(graph, op.line),
        )
    return OpNode(op.name, op, rule, tuple(candidates), "; ".join(user) or None)


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
    if not layouts:
        raise PlanningError(f"no layout of tensor {s!r} satisfies its annotation {ann} and is readable by its ops",
                            where=_where(graph, graph.tensor(s).line))
    user = f"annotation {ann.dims_text()} on tensor {s!r}" if ann is not None else None
    return SourceNode(s, tuple(layouts), user)


def _node_costs(m: Model, i: int) -> Node:
    node = m.nodes[i]
    graph = m.graph
    if isinstance(node, SourceNode):
        spec = graph.tensor(node.tensor)
        memory = np.array([stored_bytes(l, spec, m.options.training) for l in node.layouts], dtype=float)
        return Node(f"tensor:{node.tensor}", np.zeros(len(node.layouts)), memory,
                    labels=tuple(l.dims_text() for l in node.layouts))
    op = node.op
    out = graph.tensor(op.output)
    own = _own_params(graph, node, m.private_sources)
    cost = np.zeros(len(node.strategies))
    memory = np.zeros(len(node.strategies))
    flops = op_flops(graph, op, m.options.training, m.needs_grad)  # once per op, not per strategy
    for c, s in enumerate(node.strategies):
        t = compute_time_s(flops / s.work_divisor, m.cluster)
        t += sum(move_time_s(m, mv) for mv in _op_moves(graph, node, s, m, own))
        t += collective_time_s(m, op, s)
        cost[c] = t
        mem = math.prod(s.result.local_shape(out.shape)) * dtype_itemsize(out.dtype)
        for p, k in own:
            mem += stored_bytes(s.operands[k], graph.tensor(p), m.options.training)
        memory[c] = mem
    return Node(op.name, cost, memory, labels=tuple(s.text() for s in node.strategies))


def move_time_s(m: Model, move: Move) -> float:
    """Seconds the engine's plan for ``move`` takes on the model's cluster."""
    return move_plan(m, move).time_s


def move_plan(m: Model, move: Move) -> ReshardPlan:
    """The engine's plan for ``move``: forward, or the transpose of the forward move (backward, gradient)."""
    spec = m.graph.tensor(move.tensor)
    return _plan(spec.shape, spec.dtype, move.source, move.destination, move.phase != "forward", move.pending,
                 m.cluster, m.options.insert_pbroadcast, m.reshard_pieces)


def _plan(shape, dtype, source, destination, backward: bool, pending, cluster, insert_pbroadcast=True,
          within=None) -> ReshardPlan:
    forward = reshard_for_planning(shape, dtype, source, destination, cluster, within)
    if not backward:
        return forward
    return transpose_plan(forward, pending, cluster, insert_pbroadcast=insert_pbroadcast, within=within)


def _pending(rule: OpShardingRule, s: Strategy, k: int, manual: tuple = ()) -> tuple[AxisRef, ...]:
    """The axes operand ``k``'s cotangent comes back pending over (the transposes of its pbroadcasts)."""
    return PENDING.get_or_compute((rule, s, k, manual), _pending_now, rule, s, k, manual)


def _pending_now(rule: OpShardingRule, s: Strategy, k: int, manual: tuple) -> tuple[AxisRef, ...]:
    return operand_gradient(rule, s, k, manual).unreduced


PENDING = BoundedCache("operand cotangent pending axes", maxsize=262144)
"""By (rule, strategy, operand): strategies are made once per enumeration, so the key is cheap."""


# -- cost tables ---------------------------------------------------------------------------------

def _classes(items) -> tuple[np.ndarray, list]:
    seen: dict = {}
    idx = np.empty(len(items), dtype=np.int64)
    for i, it in enumerate(items):
        idx[i] = seen.setdefault(it, len(seen))
    return idx, list(seen)


def _reader_side(consumer: OpNode, ks, backward: bool) -> list:
    """Per strategy of a reader: the distinct layouts its reads need and, with ``backward``,
    the distinct ``(layout, pending)`` its cotangents come back in."""
    return [_reader_entry(consumer, s, ks, backward) for s in consumer.strategies]


def _reader_entry(consumer: OpNode, s: Strategy, ks, backward: bool) -> tuple:
    """One strategy's entry of :func:`_reader_side`."""
    layouts = tuple(dict.fromkeys(s.operands[k] for k in ks))
    grads = tuple(dict.fromkeys((s.operands[k], consumer.pending(s, k)) for k in ks)) if backward else ()
    return layouts, grads


def _producer_side(node) -> list:
    """Per candidate of a producer: the layout its result (or stored source) has."""
    if isinstance(node, SourceNode):
        return list(node.layouts)
    return [s.result for s in node.strategies]


TABLES = BoundedCache("cost tables", maxsize=4096)
"""Edge and fanout cost tables by value (shape, dtype, layouts, cluster): identical layers share them."""


def _label(m: Model, link: Link) -> str:
    readers = ", ".join(m.nodes[v].name for v in link.readers)
    return f"{link.tensor}: {m.nodes[link.producer].name} -> {readers}"


def link_table(m: Model, link: Link) -> np.ndarray:
    """Seconds of an edge link for every (producer candidate, reader candidate) pair."""
    return _edge(m, link).cost


def _edge(m: Model, link: Link) -> Edge:
    spec = m.graph.tensor(link.tensor)
    u_class, u_uniq = _classes(_producer_side(m.nodes[link.producer]))
    v_class, v_uniq = _classes(_reader_side(m.nodes[link.readers[0]], link.operands[0], link.backward))
    table = _table("data", spec.shape, spec.dtype, tuple(u_uniq), tuple(v_uniq), m.cluster, m.options.insert_pbroadcast,
                   m.reshard_pieces)
    return Edge(link.producer, link.readers[0], u_class, v_class, table, _label(m, link))


def _fanout(m: Model, link: Link) -> Fanout:
    """Columns: each distinct layout a reader needs (forward) and each distinct ``(layout, pending)``
    cotangent coming back (backward); a reader candidate needs a set of columns."""
    spec = m.graph.tensor(link.tensor)
    u_class, u_uniq = _classes(_producer_side(m.nodes[link.producer]))
    column: dict[tuple, int] = {}
    needs = []
    for v, ks in zip(link.readers, link.operands):
        per_candidate = []
        for layouts, grads in _reader_side(m.nodes[v], ks, link.backward):
            cols = {column.setdefault(("forward", lay), len(column)) for lay in layouts}
            cols |= {column.setdefault(("backward", lay, pending), len(column)) for lay, pending in grads}
            per_candidate.append(tuple(sorted(cols)))
        needs.append(tuple(per_candidate))
    table = _table("fanout", spec.shape, spec.dtype, tuple(u_uniq), tuple(column), m.cluster,
                   m.options.insert_pbroadcast, m.reshard_pieces)
    return Fanout(link.producer, u_class, link.readers, tuple(needs), table, _label(m, link))


def _table(kind, shape, dtype, u_items, v_items, cluster, insert_pbroadcast=True, within=None) -> LazyTable:
    """Seconds for every (producer class, reader class) of a link; the moves of :func:`link_moves`.

    A :class:`~planner.propagation.problem.LazyTable`: a cell's redistributions are planned
    when a search first reads it (breadth-first propagation reads a row per decided
    neighbour; the ILP reads every cell).

    ``data``: a reader class is ``(layouts, cotangents)``: the forward redistribution
    of the result to each distinct layout, plus the transpose back of each distinct
    ``(layout, pending)`` cotangent. ``fanout``: a column is one forward
    redistribution ``("forward", layout)`` or one transpose ``("backward", layout, pending)``.
    ``within``: the mesh pieces the redistributions may use (:attr:`Model.reshard_pieces`).
    """
    key = (kind, tuple(shape), dtype, u_items, v_items, cluster, insert_pbroadcast, within)

    def cost(src, lay, backward=False, pending=()):
        return _plan(shape, dtype, src, lay, backward, pending, cluster, insert_pbroadcast, within).time_s

    def cell(a: int, b: int) -> float:
        src, item = u_items[a], v_items[b]
        if kind == "data":
            layouts, grads = item
            return sum(cost(src, lay) for lay in layouts) + sum(cost(src, lay, True, p) for lay, p in grads)
        if item[0] == "forward":
            return cost(src, item[1])
        return cost(src, item[1], True, item[2])

    return TABLES.get_or_compute(key, lambda: LazyTable((len(u_items), len(v_items)), cell))


# -- shard_as groups ------------------------------------------------------------------------------

def _same_groups(m: Model) -> tuple:
    """shard_as groups as equal-layout constraints between the nodes that lay the tensors out."""
    out = []
    for group in m.graph.shard_as:
        sides = [_layout_classes(m, t) for t in group]
        for (a, ak), (b, bk) in zip(sides, sides[1:]):
            keys = {k: i for i, k in enumerate(dict.fromkeys(ak + bk))}
            out.append((a, np.array([keys[k] for k in ak]), b, np.array([keys[k] for k in bk])))
    return tuple(out)


def _layout_classes(m: Model, tensor: str):
    """(node, per-candidate layout key) of the node that decides ``tensor``'s layout."""
    graph = m.graph
    n = m.deciding_node(tensor)
    node = m.nodes[n]
    if graph.producer(tensor) is not None:
        return n, [_dims_key(s.result) for s in node.strategies]
    if isinstance(node, SourceNode):
        return n, [_dims_key(l) for l in node.layouts]
    k = m.private_sources[tensor][1]
    return n, [_dims_key(s.operands[k]) for s in node.strategies]


def _dims_key(sharding: TensorSharding) -> tuple:
    """A layout's axes per dimension (what shard_as compares; pending sums are resolved first)."""
    return tuple(d.axes for d in sharding.dims)


# -- shrinking hints for the ILP ------------------------------------------------------------------

_LAYER = re.compile(r"^(tensor:|grad:)?layer(\d+)\.(.*)$")


def with_shrink_hints(m: Model) -> SearchProblem:
    """The model's problem with the two hints of :mod:`planner.propagation.problem` filled in.

    * an elementwise unary op reading one op's result follows it: it takes the
      layout that result has once its pending sums are reduced;
    * nodes of repeated layers (``layer<i>.rest``) with identical candidates and
      costs get the signature ``rest`` and index ``i``.

    Both restrict the problem; the planner checks the answer against BFS on the
    unrestricted problem and solves that one exactly when the hints cost something.
    """
    nodes = list(m.problem.nodes)
    for i, node in enumerate(m.nodes):
        if not isinstance(node, OpNode) or not get_op(node.op.op).follows_operand:
            continue
        producer = m.graph.producer(node.op.inputs[0])
        if producer is None:
            continue
        parent = m.nodes[m.op_index[producer]]
        by_layout = {}
        for c, s in enumerate(node.strategies):
            by_layout.setdefault(s.operands[0], c)
        mapping = [by_layout.get(s.result.with_unreduced(()) if s.result.unreduced else s.result)
                   for s in parent.strategies]
        if all(c is not None for c in mapping):
            nodes[i] = replace(nodes[i], follows=m.op_index[producer], follow_map=np.array(mapping))
    for i, node in enumerate(m.problem.nodes):
        match = _LAYER.match(node.name)
        if match:
            digest = (node.labels, node.cost.round(15).tobytes())
            signature = f"{match.group(1) or ''}{match.group(3)}#{hash(digest)}"
            nodes[i] = replace(nodes[i], layer=(signature, int(match.group(2))))
    return replace(m.problem, nodes=tuple(nodes))
