"""From a model to a :class:`~planner.propagation.problem.SearchProblem` (SPEC §6.1-6.2).

One node per op (its candidates are the strategies its rule admits, minus those
the user's constraints forbid) and one per *source* tensor (input, parameter,
constant) that several ops read (its candidates are the layouts its readers ask
for). A source read by one op has no node: it is laid out as that op reads it.

Costs, all in seconds on the cluster:

* per op and strategy: compute time (FLOPs split over the devices that divide
  the work), the reduction of a graph output's pending sums, and with training
  the backward compute (one forward's worth per operand whose gradient is
  needed) and the gradient reduction of parameters only this op reads;
* per edge (a tensor from its producer, or a shared source, to one reader): the
  redistribution between the producer's result layout and the reader's operand
  layout, and with training the redistribution of the gradient back
  (:mod:`planner.training.gradients`).

Edge tables are built over *classes* (distinct layouts on each side), each
distinct (shape, dtype, source, destination) redistribution planned once by the
engine and cached; identical layers therefore cost nothing extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from costmodels import Cluster, compute_time_s
from graphs.dtypes import dtype_itemsize
from planner.enumeration import Strategy, enumerate_strategies, make_strategy, search_pieces
from planner.errors import PlanningError, RuleError, ShardplanError
from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh
from planner.ir.sharding import DimSharding, TensorSharding
from planner.propagation.annotations import restrict_to_priority, satisfies, translate
from planner.propagation.problem import Edge, Node, SearchProblem
from planner.redistribution import reshard_for_planning
from planner.rules.projection import strategy_to_factor_axes
from planner.rules.registry import rule_for
from planner.training.gradients import operand_gradient, requires_grad, result_gradient

OPTIMIZER_COPIES = 4  # training keeps the parameter, its gradient and two Adam moments


@dataclass(frozen=True)
class Options:
    """What to plan for."""

    training: bool = False
    memory_budget: float | None = None
    priority_level: int | None = None  # annotations with a larger priority are not yet active
    allowed_axes: frozenset[str] | None = None  # phase restriction (priorities): axes the search may use
    prefixes: dict = field(default_factory=dict)  # op -> factor axes the strategy must extend (earlier phases)


@dataclass
class OpNode:
    """An op's candidates and why they are what they are."""

    name: str
    spec: object
    rule: object
    strategies: tuple[Strategy, ...]
    user: str | None = None  # why the user's annotations pinned or narrowed this op


@dataclass
class SourceNode:
    """A tensor read by several ops, with the layouts it may take."""

    name: str
    layouts: tuple[TensorSharding, ...]
    user: str | None = None


@dataclass
class GradNode:
    """With training: where the gradient of a tensor read by several ops is summed.

    Contributions that arrive in the node's layout are added locally (pending sums
    included) and the sum goes back to the producer once: one AllReduce for the
    three projections that read a layer-norm output, not three.
    """

    name: str  # the tensor
    layouts: tuple[TensorSharding, ...]
    user: str | None = None


@dataclass
class EdgeInfo:
    """Which tensor an edge carries, between which nodes, to which operands of the reader.

    An op that reads one tensor twice (``mul(h, h)``) has one edge with both
    operand positions: the tensor is redistributed once per distinct layout the
    reads need, and their gradients are summed before going back.
    """

    tensor: str
    producer: int  # node index (an op or a source node)
    consumer: int
    operands: tuple[int, ...]
    backward: bool  # the tensor's gradient flows back along it
    kind: str = "data"  # "data", "grad_in" (reader -> GradNode) or "grad_out" (GradNode -> producer)

    @property
    def operand(self) -> int:
        return self.operands[0]


@dataclass
class Model:
    """The built problem with everything needed to report a choice."""

    graph: object
    mesh: Mesh
    cluster: Cluster
    options: Options
    pieces: tuple[AxisRef, ...]
    nodes: list
    index: dict
    edges: list[EdgeInfo]
    problem: SearchProblem
    needs_grad: dict
    private_sources: dict  # tensor -> (consumer node, operand indices) for sources read by one op
    annotations: dict  # tensor -> annotation (active part) on the planning mesh


def _annotations(graph, mesh: Mesh, level: int | None) -> dict[str, TensorSharding]:
    out = {}
    for name, t in graph.tensors.items():
        if t.sharding is None:
            continue
        ann = translate(t.sharding, mesh)
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


def build_model(graph, mesh: Mesh, cluster: Cluster, options: Options = Options()) -> Model:
    """Enumerate, constrain and cost every node and edge of ``graph`` on ``mesh``."""
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
    pieces = search_pieces(mesh, refs, _cut_sizes(graph))
    needs = requires_grad(graph) if options.training else {t: False for t in graph.tensors}

    # -- which sources get a node ---------------------------------------------------------------
    readers: dict[str, list[tuple[str, int]]] = {name: [] for name in graph.tensors}
    for op in graph.ops:
        for k, t in enumerate(op.inputs):
            readers[t].append((op.name, k))
    sources = [name for name, t in graph.tensors.items() if t.kind != "activation" and readers[name]]
    # A source gets a node when several reads may want different layouts, or when the
    # user fixed how it is stored (its readers may still redistribute it, at a cost).
    shared = [s for s in sources if len(readers[s]) > 1 or s in annotations]
    private = {s: readers[s] for s in sources if s not in shared}

    # -- op nodes ------------------------------------------------------------------------------
    nodes: list = []
    index: dict[str, int] = {}
    for op in graph.ops:
        node = _op_node(graph, op, mesh, pieces, annotations, user_strategies, options)
        index[op.name] = len(nodes)
        nodes.append(node)
    for s in shared:
        layouts = []
        seen = set()
        if s in annotations and all(d.is_closed for d in annotations[s].dims):
            fixed = annotations[s].layout_only()  # stored exactly as annotated
            seen.add(fixed)
            layouts.append(fixed)
        for op_name, k in readers[s]:
            for strat in nodes[index[op_name]].strategies:
                lay = strat.operands[k]
                if lay not in seen and (s not in annotations or satisfies(lay, annotations[s])):
                    seen.add(lay)
                    layouts.append(lay)
        if not layouts:
            raise PlanningError(f"no layout of tensor {s!r} satisfies its annotation {annotations[s]} and is "
                                "readable by its ops", where=_where(graph, graph.tensor(s).line))
        user = f"annotation {annotations[s].dims_text()} on tensor {s!r}" if s in annotations else None
        index[f"tensor:{s}"] = len(nodes)
        nodes.append(SourceNode(s, tuple(layouts), user))

    # -- gradient accumulation (training) ---------------------------------------------------------
    reads_by_tensor: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for op in graph.ops:
        grouped: dict[str, list[int]] = {}
        for k, t in enumerate(op.inputs):
            grouped.setdefault(t, []).append(k)
        for t, ks in grouped.items():
            reads_by_tensor.setdefault(t, []).append((op.name, tuple(ks)))

    def producer_node(t: str) -> int | None:
        producer = graph.producer(t)
        if producer is not None:
            return index[producer]
        return index.get(f"tensor:{t}")

    if options.training:
        for t, reads in reads_by_tensor.items():
            if needs.get(t, False) and len(reads) > 1 and producer_node(t) is not None:
                index[f"grad:{t}"] = len(nodes)
                nodes.append(GradNode(t, _grad_layouts(t, reads, nodes, index, producer_node(t))))

    # -- costs ----------------------------------------------------------------------------------
    problem_nodes = []
    for n in nodes:
        if isinstance(n, OpNode):
            problem_nodes.append(_op_costs(graph, n, cluster, options, needs, private, annotations))
        elif isinstance(n, SourceNode):
            problem_nodes.append(_source_costs(graph, n, options))
        else:
            problem_nodes.append(Node(f"grad:{n.name}", np.zeros(len(n.layouts)),
                                      labels=tuple(l.dims_text() for l in n.layouts)))
    edges: list[EdgeInfo] = []
    problem_edges: list[Edge] = []
    for t, reads in reads_by_tensor.items():
        u = producer_node(t)
        if u is None:
            continue
        back = options.training and needs.get(t, False)
        acc = index.get(f"grad:{t}")
        for op_name, ks in reads:
            v = index[op_name]
            infos = [EdgeInfo(t, u, v, ks, back and acc is None)]
            if acc is not None:
                infos.append(EdgeInfo(t, v, acc, ks, True, "grad_in"))
            for info in infos:
                edges.append(info)
                problem_edges.append(_edge(graph, info, nodes, cluster))
        if acc is not None:
            info = EdgeInfo(t, acc, u, (), True, "grad_out")
            edges.append(info)
            problem_edges.append(_edge(graph, info, nodes, cluster))
    problem = SearchProblem(tuple(problem_nodes), tuple(problem_edges), _same_groups(graph, nodes, index, shared),
                            options.memory_budget)
    return Model(graph, mesh, cluster, options, pieces, nodes, index, edges, problem, needs, private, annotations)


# -- nodes ------------------------------------------------------------------------------------------

def _op_node(graph, op, mesh, pieces, annotations, user_strategies, options) -> OpNode:
    shapes = [graph.tensor(t).shape for t in op.inputs]
    out = graph.tensor(op.output)
    rule = rule_for(op, shapes, out.shape)
    candidates = list(enumerate_strategies(rule, mesh, pieces))
    user = []
    if op.name in user_strategies:
        fa = user_strategies[op.name]
        match = [s for s in candidates if s.factor_axes == fa]
        candidates = match or [make_strategy(rule, fa, mesh)]
        user.append(f"strategy {candidates[0].text()} given in the model")
    if options.allowed_axes is not None:
        allowed = options.allowed_axes | _prefix_axes(options, op.name)
        candidates = [s for s in candidates if all(a.name in allowed for axes in s.factor_axes for a in axes)]
    if op.name in options.prefixes:
        prefix = options.prefixes[op.name]
        candidates = [s for s in candidates if all(tuple(s.factor_axes[f][: len(p)]) == tuple(p)
                                                   for f, p in enumerate(prefix))]
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


def _prefix_axes(options, op_name) -> set[str]:
    return {a.name for axes in options.prefixes.get(op_name, ()) for a in axes}


def _local_bytes(sharding: TensorSharding, shape, dtype) -> int:
    n = 1
    for d in sharding.local_shape(shape):
        n *= d
    return n * dtype_itemsize(dtype)


def _op_costs(graph, node: OpNode, cluster, options, needs, private, annotations) -> Node:
    op = node.spec
    out = graph.tensor(op.output)
    flops = graph.op_flops(op.name)
    grads = sum(1 for t in op.inputs if needs.get(t, False)) if options.training else 0
    cost = np.zeros(len(node.strategies))
    memory = np.zeros(len(node.strategies))
    is_output = op.output in graph.outputs
    keep_pending = options.training and out.rank == 0  # a training loss: its value is only reported
    own_params = [(t, k) for t, reads in private.items() for name, k in reads
                  if name == op.name and graph.tensor(t).kind == "param"]
    for i, s in enumerate(node.strategies):
        c = compute_time_s(flops * (1 + grads) / s.work_divisor, cluster)
        if is_output and not keep_pending:
            final = output_layout(s.result, annotations.get(op.output))
            c += reshard_for_planning(out.shape, out.dtype, s.result, final, cluster).time_s
        mem = _local_bytes(s.result, out.shape, out.dtype)
        for t, k in own_params:
            spec = graph.tensor(t)
            copies = OPTIMIZER_COPIES if options.training else 1
            mem += copies * _local_bytes(s.operands[k], spec.shape, spec.dtype)
            if options.training and needs.get(t, False):
                c += reshard_for_planning(spec.shape, spec.dtype, operand_gradient(node.rule, s, k), s.operands[k],
                             cluster).time_s
        cost[i] = c
        memory[i] = mem
    return Node(op.name, cost, memory, labels=tuple(s.text() for s in node.strategies))


def output_layout(result: TensorSharding, annotation: TensorSharding | None) -> TensorSharding:
    """The layout a graph output ends in: its annotation's (when closed), else the result's, reduced."""
    if annotation is not None and all(d.is_closed for d in annotation.dims):
        return annotation.layout_only()
    return result.with_unreduced(()) if result.unreduced else result


def _source_costs(graph, node: SourceNode, options) -> Node:
    spec = graph.tensor(node.name)
    copies = OPTIMIZER_COPIES if options.training and spec.kind == "param" else 1
    memory = np.array([copies * _local_bytes(l, spec.shape, spec.dtype) for l in node.layouts], dtype=float)
    return Node(f"tensor:{node.name}", np.zeros(len(node.layouts)), memory,
                labels=tuple(l.dims_text() for l in node.layouts))


# -- edges ------------------------------------------------------------------------------------------

def _classes(items) -> tuple[np.ndarray, list]:
    seen: dict = {}
    idx = np.empty(len(items), dtype=np.int64)
    for i, it in enumerate(items):
        idx[i] = seen.setdefault(it, len(seen))
    return idx, list(seen)


def _reader_side(consumer: OpNode, ks, backward: bool) -> list:
    """Per strategy of a reader: the distinct layouts its reads need, and their gradients'."""
    out = []
    for s in consumer.strategies:
        layouts = tuple(dict.fromkeys(s.operands[k] for k in ks))
        grads = tuple(dict.fromkeys(operand_gradient(consumer.rule, s, k) for k in ks)) if backward else ()
        out.append((layouts, grads))
    return out


def _producer_side(node) -> list:
    """Per candidate of a producer: its result layout and the layout its result's gradient must reach."""
    if isinstance(node, SourceNode):
        return [(lay, lay) for lay in node.layouts]
    return [(s.result, result_gradient(s)) for s in node.strategies]


def _grad_layouts(tensor, reads, nodes, index, producer) -> tuple[TensorSharding, ...]:
    seen = {}
    for op_name, ks in reads:
        node = nodes[index[op_name]]
        for _, grads in _reader_side(node, ks, True):
            for g in grads:
                seen.setdefault(g, None)
    for _, res_grad in _producer_side(nodes[producer]):
        seen.setdefault(res_grad, None)
    return tuple(seen)


def _edge(graph, info: EdgeInfo, nodes, cluster) -> Edge:
    spec = graph.tensor(info.tensor)
    u_node, v_node = nodes[info.producer], nodes[info.consumer]
    if info.kind == "data":
        u_items, v_items = _producer_side(u_node), _reader_side(v_node, info.operands, info.backward)
    elif info.kind == "grad_in":
        u_items = [grads for _, grads in _reader_side(u_node, info.operands, True)]
        v_items = list(v_node.layouts)
    else:  # grad_out
        u_items = list(u_node.layouts)
        v_items = [res_grad for _, res_grad in _producer_side(v_node)]
    u_class, u_uniq = _classes(u_items)
    v_class, v_uniq = _classes(v_items)
    table = _table(info.kind, spec.shape, spec.dtype, tuple(u_uniq), tuple(v_uniq), info.backward, cluster)
    label = f"{info.tensor}: {u_node.name} -> {v_node.name}"
    return Edge(info.producer, info.consumer, u_class, v_class, table, label)


_TABLES: dict = {}


def _table(kind, shape, dtype, u_items, v_items, backward, cluster) -> np.ndarray:
    """Seconds for every (producer class, consumer class) of an edge.

    ``data``: the forward redistribution of the result to each distinct layout the
    reader needs, plus (``backward``) each distinct gradient layout back to the
    producer's. ``grad_in``: a reader's gradients to the accumulation layout.
    ``grad_out``: the accumulated gradient to the producer's layout.
    """
    key = (kind, tuple(shape), dtype, u_items, v_items, backward, cluster)
    table = _TABLES.get(key)
    if table is None:
        cost = lambda a, b: reshard_for_planning(shape, dtype, a, b, cluster).time_s  # noqa: E731
        table = np.zeros((len(u_items), len(v_items)))
        for a, left in enumerate(u_items):
            for b, right in enumerate(v_items):
                if kind == "data":
                    (res, res_grad), (layouts, grads) = left, right
                    t = sum(cost(res, opd) for opd in layouts)
                    if backward:
                        t += sum(cost(g, res_grad) for g in grads)
                elif kind == "grad_in":
                    t = sum(cost(g, right) for g in left)
                else:
                    t = cost(left, right)
                table[a, b] = t
        if len(_TABLES) > 4096:
            _TABLES.clear()
        _TABLES[key] = table
    return table


def _same_groups(graph, nodes, index, shared) -> tuple:
    """shard_as groups as equal-layout constraints between the nodes that lay the tensors out."""
    out = []
    for group in graph.shard_as:
        sides = [_layout_classes(graph, t, nodes, index, shared) for t in group]
        for (a, ak), (b, bk) in zip(sides, sides[1:]):
            keys = {k: i for i, k in enumerate(dict.fromkeys(ak + bk))}
            out.append((a, np.array([keys[k] for k in ak]), b, np.array([keys[k] for k in bk])))
    return tuple(out)


def _layout_classes(graph, tensor, nodes, index, shared):
    """(node, per-candidate layout key) of the node that decides ``tensor``'s layout."""
    producer = graph.producer(tensor)
    if producer is not None:
        n = index[producer]
        return n, [_dims_key(s.result) for s in nodes[n].strategies]
    if tensor in shared:
        n = index[f"tensor:{tensor}"]
        return n, [_dims_key(l) for l in nodes[n].layouts]
    op_name, k = graph.consumers(tensor)[0]
    n = index[op_name]
    return n, [_dims_key(s.operands[k]) for s in nodes[n].strategies]


def _dims_key(sharding: TensorSharding) -> tuple:
    """A layout's axes per dimension (what shard_as compares; pending sums are resolved first)."""
    return tuple(d.axes for d in sharding.dims)


# -- shrinking hints for the ILP ------------------------------------------------------------------

_FOLLOWERS = frozenset({"relu", "gelu", "tanh", "exp", "sigmoid", "neg", "cast"})


def with_shrink_hints(m: Model) -> SearchProblem:
    """The model's problem with the two hints of :mod:`planner.propagation.problem` filled in.

    * an elementwise unary op reading one op's result follows it: it takes the
      layout that result has once its pending sums are reduced;
    * nodes of repeated layers (``layer<i>.rest``) with identical candidates and
      costs get the signature ``rest`` and index ``i``.

    Both restrict the problem; the planner checks the answer against BFS on the
    unrestricted problem and solves that one exactly when the hints cost something.
    """
    import re
    from dataclasses import replace

    nodes = list(m.problem.nodes)
    for i, node in enumerate(m.nodes):
        if not isinstance(node, OpNode) or node.spec.op not in _FOLLOWERS:
            continue
        producer = m.graph.producer(node.spec.inputs[0])
        if producer is None:
            continue
        parent = m.nodes[m.index[producer]]
        by_layout = {}
        for c, s in enumerate(node.strategies):
            by_layout.setdefault(s.operands[0], c)
        mapping = [by_layout.get(s.result.with_unreduced(()) if s.result.unreduced else s.result)
                   for s in parent.strategies]
        if all(c is not None for c in mapping):
            nodes[i] = replace(nodes[i], follows=m.index[producer], follow_map=np.array(mapping))
    pattern = re.compile(r"^(tensor:|grad:)?layer(\d+)\.(.*)$")
    for i, node in enumerate(m.problem.nodes):
        match = pattern.match(node.name)
        if match:
            digest = (node.labels, node.cost.round(15).tobytes())
            signature = f"{match.group(1) or ''}{match.group(3)}#{hash(digest)}"
            nodes[i] = replace(nodes[i], layer=(signature, int(match.group(2))))
    return replace(m.problem, nodes=tuple(nodes))
