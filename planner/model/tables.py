"""The cost tables: what every candidate of a node costs and every flow moves, in seconds.

Per op and strategy its compute time (:func:`op_compute_time_s`), the delivery of a
graph output (:func:`~planner.model.nodes.final_layout`) and, with training, its
transpose and the gradient reduction of parameters only this op reads; per flow the
redistributions of :mod:`planner.model.moves`. Edge tables are built over *classes*
(distinct layouts on each side), each distinct redistribution planned once by the
engine and cached; identical layers cost nothing extra.
"""

from __future__ import annotations

import math

import numpy as np

from costmodels import Cluster, op_time_s, parameter_bytes
from graphs.dtypes import dtype_itemsize, is_float
from planner.caches import BoundedCache, ByIdentity
from planner.enumeration import Strategy
from planner.ir.sharding import TensorSharding
from planner.model.op_collectives import op_collectives_time_s
from planner.model.moves import (move_time_s, op_moves, own_params, producer_side, reader_side, reshard_seconds,
                                 split_cotangents)
from planner.model.nodes import Flow, Model, OpNode, SourceNode
from planner.model.options import OPTIMIZER
from planner.model.problem import Edge, Fanout, LazyTable, Node

__all__ = ["TABLES", "backward_collectives", "collective_time_s", "data_edge", "fanout_edge", "local_op_time_s", "node_costs",
           "op_compute_time_s", "op_flops", "operand_gradients", "same_groups", "stored_bytes"]


def op_compute_time_s(graph, op, strategy: Strategy, cluster: Cluster, training: bool, needs_grad) -> float:
    """The roofline (:func:`costmodels.op_time_s`) of ``op``'s local instance under ``strategy``: its FLOPs
    divided among the devices that split its work, its bytes accessed on the local shapes of its operands
    and result; with training, one forward's worth (FLOPs, bytes and kernel overhead) more per operand whose
    gradient is needed."""
    return local_op_time_s(graph, op, strategy, cluster) * (1 + operand_gradients(op, training, needs_grad))


def local_op_time_s(graph, op, strategy: Strategy, cluster: Cluster) -> float:
    """Seconds of one forward of ``op``'s local instance under ``strategy`` on one device."""
    ins = [graph.tensor(t) for t in op.inputs]
    out = graph.tensor(op.output)
    local_bytes = graph.op_bytes_accessed(
        op.name, [sharding.local_shape(t.shape) for sharding, t in zip(strategy.operands, ins)],
        strategy.result.local_shape(out.shape))
    dtype = ins[0].dtype if ins else out.dtype  # a matmul's inputs set its rate (the result may be wider)
    return op_time_s(graph.op_flops(op.name) / strategy.work_divisor, local_bytes, dtype,
                     graph.op_def(op.name).matmul_units, cluster)


def operand_gradients(op, training: bool, needs_grad) -> int:
    """How many of ``op``'s operand gradients a training step computes (0 without training)."""
    return sum(1 for t in op.inputs if needs_grad.get(t, False)) if training else 0


def collective_time_s(m: Model, op, s: Strategy) -> float:
    """Seconds ``op``'s own collectives (:mod:`planner.model.op_collectives`) communicate under ``s``: the
    forward's, plus the backward's for the operand gradients a training step computes."""
    return op_collectives_time_s(m.graph, op, s, m.cluster, backward_collectives(m, op),
                                 m.nodes[m.op_index[op.name]].rule)


def backward_collectives(m: Model, op) -> tuple[int, ...]:
    """The operands whose gradients ``op``'s backward computes (with training), for which it runs its own
    collectives (:func:`~planner.model.op_collectives.op_collectives`); empty without training."""
    return tuple(k for k, t in enumerate(op.inputs) if m.needs_grad.get(t)) if m.options.training else ()


def op_flops(graph, op, training: bool, needs_grad) -> float:
    """FLOPs of ``op`` on one device: its forward, plus one forward's worth per needed operand gradient."""
    return graph.op_flops(op.name) * (1 + operand_gradients(op, training, needs_grad))


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


def node_costs(m: Model, i: int, op_memo: dict | None = None) -> Node:
    """Node ``i``'s candidates: their seconds (compute, own moves and collectives) and memory.

    ``op_memo`` (optional, shared by the nodes of one model, whose cluster is one) keeps what
    :func:`_op_terms` prices per op signature: the ops of identical layers are priced once."""
    node = m.nodes[i]
    graph = m.graph
    if isinstance(node, SourceNode):
        spec = graph.tensor(node.tensor)
        memory = np.array([stored_bytes(l, spec, m.options.training) for l in node.layouts], dtype=float)
        return Node(f"tensor:{node.tensor}", np.zeros(len(node.layouts)), memory,
                    labels=tuple(l.dims_text() for l in node.layouts))
    op = node.op
    own = own_params(graph, node, m.private_sources)
    cost = np.zeros(len(node.strategies))
    memory = np.zeros(len(node.strategies))
    grads = operand_gradients(op, m.options.training, m.needs_grad)  # once per op, not per strategy
    terms, labels = _op_terms(m, op, node.strategies, op_memo)
    for c, s in enumerate(node.strategies):
        local_s, collective_s, mem = terms[c]
        t = local_s * (1 + grads)
        t += sum(move_time_s(m, mv) for mv in op_moves(graph, node, s, m, own))
        t += collective_s
        cost[c] = t
        for p, k in own:
            mem += stored_bytes(s.operands[k], graph.tensor(p), m.options.training)
        memory[c] = mem
    return Node(op.name, cost, memory, labels=labels)


def _op_terms(m: Model, op, strategies, memo: dict | None) -> tuple[tuple[tuple[float, float, int], ...],
                                                                    tuple[str, ...]]:
    """Per strategy: :func:`local_op_time_s`, :func:`collective_time_s` and the bytes of the local result;
    and each strategy's text (the candidates' labels in reports). Looked up in ``memo`` by what determines
    them (the op's kind and attributes, its operands' and result's shapes and dtypes, whether its backward
    collectives run, the strategies; the cluster is the memo's)."""
    graph = m.graph
    out = graph.tensor(op.output)

    def compute():
        itemsize = dtype_itemsize(out.dtype)
        terms = tuple((local_op_time_s(graph, op, s, m.cluster), collective_time_s(m, op, s),
                       math.prod(s.result.local_shape(out.shape)) * itemsize) for s in strategies)
        return terms, tuple(s.text() for s in strategies)

    if memo is None:
        return compute()
    ins = tuple((graph.tensor(t).shape, graph.tensor(t).dtype) for t in op.inputs)
    key = (op.op, op.attrs, ins, out.shape, out.dtype, backward_collectives(m, op), strategies)
    try:
        found = memo.get(key)
    except TypeError:  # an attribute value that cannot be hashed: priced afresh
        return compute()
    if found is None:
        found = memo[key] = compute()
    return found


# -- cost tables ---------------------------------------------------------------------------------

def _classes(items) -> tuple[np.ndarray, list]:
    seen: dict = {}
    idx = np.empty(len(items), dtype=np.int64)
    for i, it in enumerate(items):
        idx[i] = seen.setdefault(it, len(seen))
    return idx, list(seen)


TABLES = BoundedCache("cost tables", maxsize=4096)
"""Edge and fanout cost tables by value (shape, dtype, layouts, cluster): identical layers share them."""


def _label(m: Model, link: Flow) -> str:
    readers = ", ".join(m.nodes[v].name for v in link.readers)
    return f"{link.tensor}: {m.nodes[link.producer].name} -> {readers}"


# A node's side of its links is worked out once per alike node when ``sides`` (a :class:`ByIdentity` of one model's
# build) is given: identical layers' ops share the enumeration's candidate tuple and their rule, and their op kind
# and pending over manual axes decide the rest.

def _shared(sides: ByIdentity | None, node: OpNode, compute, *extra):
    return compute() if sides is None else sides.get(node.strategies, compute, id(node.rule), node.op.op,
                                                     node.manual_pending, *extra)


def _producer_classes(m: Model, node, sides: ByIdentity | None):
    """:func:`_classes` of the producer's :func:`producer_side`."""
    if not isinstance(node, OpNode):
        return _classes(producer_side(m, node))
    return _shared(sides, node, lambda: _classes(producer_side(m, node)), "producer")


def _reader_entries(node: OpNode, ks, backward: bool, xla: bool, sides: ByIdentity | None) -> list:
    """:func:`reader_side` of one reader."""
    return _shared(sides, node, lambda: reader_side(node, ks, backward, xla), "reader", ks, backward, xla)


def data_edge(m: Model, link: Flow, sides: ByIdentity | None = None) -> Edge:
    """The edge of a tensor one reader reads; ``sides``: what one model's links share (see above)."""
    spec = m.graph.tensor(link.tensor)
    u_class, u_uniq = _producer_classes(m, m.nodes[link.producer], sides)
    reader, ks, xla = m.nodes[link.readers[0]], link.operands[0], m.options.reshard_policy == "xla"
    v_class, v_uniq = _shared(sides, reader, lambda: _classes(_reader_entries(reader, ks, link.backward, xla, sides)),
                              "reader classes", ks, link.backward, xla)
    args = (spec.shape, spec.dtype, tuple(u_uniq), tuple(v_uniq), m.cluster, m.options.insert_pbroadcast,
            m.reshard_pieces, m.options.reshard_policy)
    forward = _table("forward", *args) if link.backward else None  # for reports: the search reads the sum
    return Edge(link.producer, link.readers[0], u_class, v_class, _table("data", *args), _label(m, link), forward)


def fanout_edge(m: Model, link: Flow, sides: ByIdentity | None = None) -> Fanout:
    """Columns: each distinct layout a reader needs (forward), each distinct ``(layout, pending)``
    cotangent coming back (backward) and, under the ``xla`` policy, each reader's completion of its pending
    cotangent; a reader candidate needs a set of columns. ``sides``: as :func:`data_edge`'s."""
    spec = m.graph.tensor(link.tensor)
    u_class, u_uniq = _producer_classes(m, m.nodes[link.producer], sides)
    column: dict[tuple, int] = {}
    needs = []
    xla = m.options.reshard_policy == "xla"
    for j, (v, ks) in enumerate(zip(link.readers, link.operands)):
        per_candidate = []
        for layouts, grads in _reader_entries(m.nodes[v], ks, link.backward, xla, sides):
            own, shared = split_cotangents(grads, xla)
            cols = {column.setdefault(("forward", lay), len(column)) for lay in layouts}
            cols |= {column.setdefault(("backward", *grad), len(column)) for grad in shared}
            # a completion is this reader's own (by its place among the readers: alike layers share tables)
            cols |= {column.setdefault(("complete", *grad, j), len(column)) for grad in own}
            per_candidate.append(tuple(sorted(cols)))
        needs.append(tuple(per_candidate))
    table = _table("fanout", spec.shape, spec.dtype, tuple(u_uniq), tuple(column), m.cluster,
                   m.options.insert_pbroadcast, m.reshard_pieces, m.options.reshard_policy)
    return Fanout(link.producer, u_class, link.readers, tuple(needs), table, _label(m, link))


def _table(kind, shape, dtype, u_items, v_items, cluster, insert_pbroadcast=True, within=None,
           policy="cheapest") -> LazyTable:
    """Seconds for every (producer class, reader class) of a link; the moves of :func:`link_moves`.

    A :class:`~planner.model.problem.LazyTable`: a cell's redistributions are planned
    when a search first reads it (breadth-first propagation reads a row per decided
    neighbour; the ILP reads every cell).

    ``data``: a reader class is ``(layouts, cotangents)``: the forward redistribution
    of the result to each distinct ``(layout, regroup)``, plus the transpose back of each distinct
    ``(layout, pending, groups, regroup)`` cotangent (under the ``xla`` policy, each pending one completed where it
    lies first, :func:`~planner.model.moves.split_cotangents`); ``forward``: the same classes, the forward
    redistributions alone. ``fanout``: a column is one forward
    redistribution ``("forward", (layout, regroup))``, one transpose
    ``("backward", layout, pending, groups, regroup)`` or one
    reader's completion ``("complete", layout, pending, groups, reader's place)``.
    ``within``: the mesh pieces the redistributions may use (:attr:`Model.reshard_pieces`); ``policy``:
    :attr:`Options.reshard_policy`.
    """
    key = (kind, tuple(shape), dtype, u_items, v_items, cluster, insert_pbroadcast, within, policy)

    priced: dict[tuple, float] = {}  # a producer class's redistributions, which the cells of its row share

    def cost(a, lay, backward=False, pending=(), cotangent=(), regroup=()):
        key = (a, lay, backward, pending, cotangent, regroup)
        t = priced.get(key)
        if t is None:
            src = u_items[a]
            t = priced[key] = reshard_seconds(shape, dtype, src[0], lay, backward, pending, cluster,
                                              insert_pbroadcast, within, policy, src[1], cotangent, regroup)
        return t

    def complete(lay, pending, cotangent) -> float:
        return reshard_seconds(shape, dtype, lay, lay, True, pending, cluster, insert_pbroadcast, within, policy,
                               (), cotangent)

    columns: dict[int, tuple] = {}  # data: a reader class's shared cotangents and its completions' seconds

    def column(b: int) -> tuple:
        """What a data column is, alike for every producer row: split once, its completions priced once."""
        if b not in columns:
            own, shared = split_cotangents(v_items[b][1], policy == "xla")
            columns[b] = (shared, sum(complete(*grad) for grad in own))
        return columns[b]

    def cell(a: int, b: int) -> float:
        item = v_items[b]
        if kind == "data":
            shared, completing = column(b)
            return (sum(cost(a, lay, regroup=regroup) for lay, regroup in item[0]) + completing
                    + sum(cost(a, lay, True, p, g, rg) for lay, p, g, rg in shared))
        if kind == "forward":
            return sum(cost(a, lay, regroup=regroup) for lay, regroup in item[0])
        if item[0] == "forward":
            return cost(a, item[1][0], regroup=item[1][1])
        if item[0] == "complete":
            return complete(item[1], item[2], item[3])
        return cost(a, item[1], True, item[2], item[3], item[4])

    return TABLES.get_or_compute(key, lambda: LazyTable((len(u_items), len(v_items)), cell))


# -- shard_as groups ------------------------------------------------------------------------------

def same_groups(m: Model) -> tuple:
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
