"""Why each sharding is what it is: reasons and the chain back to the user.

Every node of a decided model gets a reason and, unless the user configured it,
a *parent*: the neighbour (and the link to it) that decided it. Breadth-first
propagation records its parent as it goes. For the ILP, whose answer is global,
the parent is the neighbour whose link would cost the most extra if the node took
its best alternative (the link that holds the choice in place).
:func:`explain` follows parents from a tensor back to a user annotation.
"""

from __future__ import annotations

import numpy as np

from costmodels.units import format_seconds
from planner.model.decision import Propagation
from planner.model.nodes import Model, OpNode, SourceNode


def _label(m: Model, i: int, c: int) -> str:
    n = m.nodes[i]
    if isinstance(n, SourceNode):
        return f"tensor {n.tensor!r} laid out as {n.layouts[c].dims_text()}"
    return f"op {n.name!r} {n.strategies[c].text()}"


def _link_costs(m: Model, link: int, i: int, choice, counts: dict) -> np.ndarray:
    """``m.problem.link_costs(link, i, choice)`` with every participant counted; for a fanout, what
    the other readers need is read off its reader counts (``counts``, kept per link by the caller)
    rather than gathered from all its readers on every call."""
    p = m.problem
    if link < len(p.edges):
        return p.link_costs(link, i, choice)
    have = counts.get(link)
    if have is None:
        have = counts[link] = p.fanout_counts(link, choice)
    fanout = p.fanouts[link - len(p.edges)]
    if i == fanout.u:
        return p.link_costs(link, i, choice, needed=have > 0)
    own = fanout.need_mask(fanout._position[i])[choice[i]]
    return p.link_costs(link, i, choice, needed=have - own > 0)


def _holding_link(m: Model, choice, i: int, counts: dict) -> tuple[int, int] | None:
    """The neighbour and link whose cost most resists changing node ``i``'s choice."""
    p = m.problem
    best, best_regret = None, 0.0
    regrets: dict[int, float] = {}  # per link: a fanout's producer meets it once per reader, same cost
    for other, link in p.neighbours(i):
        regret = regrets.get(link)
        if regret is None:
            row = _link_costs(m, link, i, choice, counts)
            alt = np.delete(row, choice[i])
            regret = regrets[link] = float(alt.min() - row[choice[i]]) if alt.size else 0.0
        if best is None or regret > best_regret:
            best, best_regret = (other, link), regret
    return best


def _annotated_neighbours(m: Model) -> dict[int, tuple[int, int]]:
    """Per node, an annotated source tensor it reads (the first by link order), as (node, link).

    Built once per model (one pass over the links), not once per node.
    """
    out: dict[int, tuple[int, int]] = {}
    for k, link in enumerate(m.flows):
        if link.kind in ("data", "fanout"):
            u = m.nodes[link.producer]
            if isinstance(u, SourceNode) and u.user:
                for r in link.readers:
                    out.setdefault(r, (link.producer, k))
    return out


def decision_reasons(m: Model, choice, parents) -> dict:
    """``{"ops": {name: reason}, "tensors": {name: reason}, "parent": {node: (node, link)}, "node_reason": ...}``."""
    graph = m.graph
    node_reason: dict[int, str] = {}
    parent: dict[int, tuple[int, int] | None] = {}
    counts: dict = {}  # fanout link -> how many readers need each layout under ``choice``
    annotated = _annotated_neighbours(m) if parents is not None else {}
    for i, n in enumerate(m.nodes):
        if n.user:
            node_reason[i] = f"user: {n.user}"
            parent[i] = None
            continue
        if parents is not None:
            via = parents[i]
            anchor = annotated.get(i) if via is None else None
            if anchor is not None:
                u, k = anchor
                via = anchor
                node_reason[i] = (f"breadth-first start: cheapest given {_label(m, u, choice[u])} "
                                  f"across tensor {m.flows[k].tensor!r}")
            elif via is None:
                node_reason[i] = "breadth-first start of a part no annotation reaches: its cheapest own cost"
            else:
                u, k = via
                cost = float(_link_costs(m, k, i, choice, counts)[choice[i]])
                node_reason[i] = (f"breadth-first from {_label(m, u, choice[u])} across tensor "
                                  f"{m.flows[k].tensor!r}: cheapest edge plus own cost "
                                  f"({format_seconds(cost)} to redistribute)")
            parent[i] = via
        else:
            via = _holding_link(m, choice, i, counts)
            parent[i] = via
            if via is None:
                node_reason[i] = "ILP optimum: its cheapest own cost (no neighbours)"
            else:
                u, k = via
                node_reason[i] = (f"ILP optimum; held by its edge with {_label(m, u, choice[u])} across tensor "
                                  f"{m.flows[k].tensor!r}")
    ops = {n.name: node_reason[i] for i, n in enumerate(m.nodes) if isinstance(n, OpNode)}
    tensors = {}
    for name, spec in graph.tensors.items():
        i = m.deciding_node(name)
        if i is None:
            continue
        if graph.producer(name) is not None:
            tensors[name] = f"result of {_label(m, i, choice[i])}"
        elif isinstance(m.nodes[i], SourceNode):
            tensors[name] = node_reason[i] if m.nodes[i].user else f"read by several ops; {node_reason[i]}"
        else:
            k = m.private_sources[name][1]
            what = "annotated" if spec.sharding is not None else "laid out"
            tensors[name] = f"{what} as {_label(m, i, choice[i])} reads it (operand {k})"
    return {"ops": ops, "tensors": tensors, "parent": parent, "node_reason": node_reason}


def explain(m: Model, choice, parents, tensor: str, sharding, info: dict | None = None) -> list[str]:
    """Lines from ``tensor`` (laid out as ``sharding``) back to the user annotation that decided it.

    ``info``: :func:`decision_reasons` of the same arguments, if the caller has it already.
    """
    if info is None:
        info = decision_reasons(m, choice, parents)
    lines = [f"{tensor}: {sharding}", f"  {info['tensors'][tensor]}"]
    i = m.deciding_node(tensor)
    seen = set()
    while i is not None and i not in seen:
        seen.add(i)
        lines.append(f"  <- {_label(m, i, choice[i])}: {info['node_reason'][i]}")
        via = info["parent"].get(i)
        i = via[0] if via else None
    if i is not None:
        lines.append("  (the chain loops back here: these ops hold each other in place)")
    return lines


def pinned_reason(op) -> str | None:
    """Why the user pinned ``op`` (None: the op's strategy follows from the propagated shardings)."""
    if op.strategy is not None:
        return f"strategy {tuple(map(tuple, op.strategy))} given in the model"
    if op.out_sharding is not None:
        return f"out_sharding {op.out_sharding.dims_text()} given in the model"
    return None


def propagation_reasons(m: Model, prop: Propagation) -> dict:
    """Why each op computes as it does and where each tensor's axes came from (``Plan.explain``'s lines)."""
    ops = {}
    for op in m.graph.ops:
        pinned = pinned_reason(op)
        ops[op.name] = (f"user: {pinned}" if pinned and op.strategy is not None else
                        f"rule-based propagation ({prop.how}): computes on its operands' and result's propagated "
                        "shardings (the result's for the factors it carries, else the largest operand's)")
    tensors = {name: "; ".join(prop.explain(name)) for name in m.graph.tensors}
    return {"ops": ops, "tensors": tensors}
