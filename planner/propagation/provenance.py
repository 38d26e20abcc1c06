"""Why each sharding is what it is (SPEC §6.6): reasons and the chain back to the user.

Every node of a solved problem gets a reason and, unless the user configured it,
a *parent*: the neighbour (and the edge to it) that decided it. Breadth-first
propagation records its parent as it goes. For the ILP, whose answer is global,
the parent is the neighbour whose edge would cost the most extra if the node took
its best alternative (the edge that holds the choice in place).
:func:`explain` follows parents from a tensor back to a user annotation.
"""

from __future__ import annotations

import numpy as np

from costmodels import format_quantity
from planner.propagation.build import GradNode, Model, OpNode, SourceNode


def _label(m: Model, i: int, c: int) -> str:
    n = m.nodes[i]
    if isinstance(n, SourceNode):
        return f"tensor {n.name!r} laid out as {n.layouts[c].dims_text()}"
    if isinstance(n, GradNode):
        return f"the gradient of {n.name!r} summed as {n.layouts[c].dims_text()}"
    return f"op {n.name!r} {n.strategies[c].text()}"


def _holding_edge(m: Model, choice, i: int) -> tuple[int, int] | None:
    """The neighbour and edge whose cost most resists changing node ``i``'s choice."""
    p = m.problem
    best, best_regret = None, 0.0
    for e, edge in enumerate(p.edges):
        if i not in (edge.u, edge.v):
            continue
        if edge.v == i:
            other, row = edge.u, edge.class_cost[edge.u_class[choice[edge.u]], edge.v_class]
        else:
            other, row = edge.v, edge.class_cost[edge.u_class, edge.v_class[choice[edge.v]]]
        alt = np.delete(row, choice[i])
        regret = float(alt.min() - row[choice[i]]) if alt.size else 0.0
        if best is None or regret > best_regret:
            best, best_regret = (other, e), regret
    return best


def _annotated_neighbour(m: Model, i: int) -> tuple[int, int] | None:
    """An annotated tensor this node reads (the first by edge order), as (node, edge)."""
    for e, edge in enumerate(m.problem.edges):
        if edge.v == i and isinstance(m.nodes[edge.u], SourceNode) and m.nodes[edge.u].user:
            return edge.u, e
    return None


def decision_reasons(m: Model, choice, parents) -> dict:
    """``{"ops": {name: reason}, "tensors": {name: reason}, "parent": {node: (node, edge)}}``."""
    graph = m.graph
    node_reason: dict[int, str] = {}
    parent: dict[int, tuple[int, int] | None] = {}
    for i, n in enumerate(m.nodes):
        if n.user:
            node_reason[i] = f"user: {n.user}"
            parent[i] = None
            continue
        if parents is not None:
            via = parents[i]
            anchor = _annotated_neighbour(m, i) if via is None else None
            if anchor is not None:
                u, e = anchor
                via = anchor
                node_reason[i] = (f"breadth-first start: cheapest given {_label(m, u, choice[u])} "
                                  f"across tensor {m.edges[e].tensor!r}")
            elif via is None:
                node_reason[i] = "breadth-first start of a part no annotation reaches: its cheapest own cost"
            else:
                u, e = via
                cost = m.problem.edges[e].pair_cost(*((choice[u], choice[i]) if m.problem.edges[e].u == u
                                                       else (choice[i], choice[u])))
                node_reason[i] = (f"breadth-first from {_label(m, u, choice[u])} across tensor "
                                  f"{m.edges[e].tensor!r}: cheapest edge plus own cost "
                                  f"({format_quantity(cost, 's')} to redistribute)")
            parent[i] = via
        else:
            via = _holding_edge(m, choice, i)
            parent[i] = via
            if via is None:
                node_reason[i] = "ILP optimum: its cheapest own cost (no neighbours)"
            else:
                u, e = via
                node_reason[i] = (f"ILP optimum; held by its edge with {_label(m, u, choice[u])} across tensor "
                                  f"{m.edges[e].tensor!r}")
    ops = {n.name: node_reason[i] for i, n in enumerate(m.nodes) if isinstance(n, OpNode)}
    tensors = {}
    for name, spec in graph.tensors.items():
        producer = graph.producer(name)
        if producer is not None:
            i = m.index[producer]
            tensors[name] = f"result of {_label(m, i, choice[i])}"
        elif f"tensor:{name}" in m.index:
            i = m.index[f"tensor:{name}"]
            tensors[name] = node_reason[i] if m.nodes[i].user else f"read by several ops; {node_reason[i]}"
        elif name in m.private_sources:
            op_name, k = m.private_sources[name][0]
            i = m.index[op_name]
            what = "annotated" if spec.sharding is not None else "laid out"
            tensors[name] = f"{what} as {_label(m, i, choice[i])} reads it (operand {k})"
    return {"ops": ops, "tensors": tensors, "parent": parent, "node_reason": node_reason}


def explain(plan, tensor: str) -> list[str]:
    """Lines from ``tensor`` back to the user annotation that decided it."""
    m, choice, parents = plan._internal
    graph = m.graph
    if tensor not in plan.tensors:
        from planner.errors import PlanningError, did_you_mean
        raise PlanningError(f"the plan has no tensor {tensor!r}{did_you_mean(tensor, plan.tensors, n=3)}")
    info = decision_reasons(m, choice, parents)
    lines = [f"{tensor}: {plan.tensors[tensor]['sharding']}", f"  {info['tensors'][tensor]}"]
    producer = graph.producer(tensor)
    if producer is not None:
        i = m.index[producer]
    elif f"tensor:{tensor}" in m.index:
        i = m.index[f"tensor:{tensor}"]
    elif tensor in m.private_sources:
        i = m.index[m.private_sources[tensor][0][0]]
    else:
        return lines
    seen = set()
    while i is not None and i not in seen:
        seen.add(i)
        lines.append(f"  <- {_label(m, i, choice[i])}: {info['node_reason'][i]}")
        via = info["parent"].get(i)
        i = via[0] if via else None
    if i is not None:
        lines.append("  (the chain loops back here: these ops hold each other in place)")
    return lines
