"""Breadth-first strategy propagation (seed 002): the search ``bfs``.

Start from the user-configured nodes (decided first, each at its cheapest own
cost among the candidates its annotations leave), then walk links (edges and
fanouts, :meth:`SearchProblem.neighbours`) breadth-first in both directions.
*Context* nodes (e.g. a tensor stored exactly as annotated)
are decided up front but propagation does not start from them: their readers are
decided when the walk reaches them, with everything decided so far in view. Each undecided neighbour takes the candidate that minimises
its own cost plus the cost of its links to every already-decided neighbour
(:meth:`SearchProblem.link_costs` over the decided participants: a fanout's
layout some decided reader already needs costs a later reader nothing, so a
shared copy is counted once); decided nodes are never revisited (propagation
stops at configured ops). A node's ``parent`` is the ``(neighbour, link id)`` it
was reached through.

Deterministic tie-breaking: seeds in node order, neighbours in node order (then
link id); among equal costs the candidate the caller's ``prefer`` scores highest (the planner
prefers keeping the layouts of the node propagation came from), then the one
with the lowest index (enumeration puts simpler strategies first). A part of the graph no seed reaches starts from its first
node, at its cheapest own cost. With a memory budget, a candidate is skipped
when taking it would leave no room for the cheapest choice of every node not yet
decided.

>>> import numpy as np
>>> from planner.model.problem import Edge, Node, SearchProblem
>>> p = SearchProblem((Node("a", np.array([0.0, 0.0])), Node("b", np.array([0.0, 0.0]))),
...                   (Edge.from_matrix(0, 1, np.array([[0.0, 3.0], [3.0, 0.0]])),))
>>> bfs(p, seeds=[0], seed_choice={0: 1}).choice
(1, 1)

A fanout: reader 2 joins reader 1's layout 0, paid once (3.0), rather than take
layout 1 (2.0 more):

>>> from planner.model.problem import Fanout
>>> f = Fanout(0, np.array([0]), (1, 2), (((0,),), ((0,), (1,))), np.array([[3.0, 2.0]]))
>>> q = SearchProblem(tuple(Node(n, np.zeros(k)) for n, k in (("u", 1), ("r", 1), ("s", 2))), fanouts=(f,))
>>> r = bfs(q, seeds=[0])
>>> r.choice, r.parent, r.objective
((0, 0, 0), (None, (0, 0), (0, 0)), 3.0)

**On a planning model** (:func:`propagate_bfs`, :func:`search`), the planner's policy:

* **seeds**: ops the user configured (a ``strategy``, an ``out_sharding``, an
  annotated result) and annotated source tensors that may still take several
  layouts, in node order;
* **context**: source tensors stored exactly as annotated are decided up front
  but not walked from (their readers are decided when the walk reaches them);
* **no annotation at all**: each reader of a graph input starts the walk at its
  cheapest candidate that splits the input's dimension 0 over the first mesh
  axis (when the dimension is that large) — a seed, not a constraint;
* **tie-break**: among candidates of equal cost, the one keeping the most
  dimensions of the layouts of the node propagation came from, then the lowest
  index (enumeration puts simpler strategies first).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

import numpy as np

from planner.errors import PlanningError, quote
from planner.model.annotations import default_annotations, has_user_annotations, satisfies
from planner.model.decision import Decision
from planner.model.ignored import ignored_annotations
from planner.model.nodes import Model, OpNode
from planner.model.problem import SearchProblem
from planner.model.request import Request
from planner.progress import SILENT, task
from planner.searches import phased


@dataclass(frozen=True)
class BfsResult:
    """One candidate per node, and for each node the (neighbour, link id) it was decided from."""

    choice: tuple[int, ...]
    parent: tuple[tuple[int, int] | None, ...]
    order: tuple[int, ...]
    objective: float


def _edge_costs(problem: SearchProblem, e: int, node: int, other_choice: int) -> np.ndarray:
    """Cost of edge ``e`` for each candidate of ``node`` given the other end's choice."""
    edge = problem.edges[e]
    if edge.v == node:
        return edge.class_cost[edge.u_class[other_choice], edge.v_class]
    return edge.class_cost[edge.u_class, edge.v_class[other_choice]]


def bfs(
    problem: SearchProblem,
    seeds: Sequence[int],
    seed_choice: Mapping[int, int] | None = None,
    prefer: Callable[[int, int, int, int], np.ndarray] | None = None,
    context: Mapping[int, int] | None = None,
) -> BfsResult:
    """Propagate from ``seeds`` (see the module docstring); ``seed_choice`` pins some seeds.

    ``context`` maps nodes to their only candidate; they are decided first and not
    walked from. Without seeds the walk starts at the first node that reads a context
    node (else the first node). ``prefer(v, u, link, cu)`` scores the candidates of ``v``
    reached from ``u`` (at ``cu``) through ``link``, a link id: ``>= len(problem.edges)``
    for a fanout.
    """
    n = len(problem.nodes)
    adj = [problem.neighbours(v) for v in range(n)]
    edge_links = len(problem.edges)  # link ids from here on are fanouts
    choice: list[int | None] = [None] * n
    decided = [False] * n
    parent: list[tuple[int, int] | None] = [None] * n
    order: list[int] = []
    pinned = dict(problem.fixed)
    pinned.update(seed_choice or {})
    min_memory = np.array([float(nd.memory.min()) if nd.memory is not None else 0.0 for nd in problem.nodes])
    used_memory = 0.0
    remaining_min = float(min_memory.sum())
    # per fanout: the layouts its decided readers need, kept up to date as readers are decided
    fanout_need = [np.zeros(f.class_cost.shape[1], dtype=bool) for f in problem.fanouts]
    same_of: list[list[tuple]] = [[] for _ in range(n)]  # the equal-layout groups each node is in, in order
    for group in problem.same:
        same_of[group[0]].append(group)
        if group[2] != group[0]:
            same_of[group[2]].append(group)

    def decide(v: int, via: tuple[int, int] | None) -> None:
        nonlocal used_memory, remaining_min
        node = problem.nodes[v]
        total = node.cost.astype(float).copy()
        fanouts = None
        for w, e in adj[v]:
            if choice[w] is not None:
                if e < edge_links:
                    total = total + _edge_costs(problem, e, v, choice[w])
                elif fanouts is None:
                    fanouts = {e}
                else:
                    fanouts.add(e)  # a producer sees one fanout once, however many readers are decided
        if fanouts is not None:
            for f in sorted(fanouts):
                total = total + problem.link_costs(f, v, choice, decided, needed=fanout_need[f - edge_links])
        allowed = np.ones(node.n, dtype=bool)
        if v in pinned:
            allowed[:] = False
            allowed[pinned[v]] = True
        for a, ac, b, bc in same_of[v]:
            if a == v and choice[b] is not None:
                allowed &= ac == bc[choice[b]]
            if b == v and choice[a] is not None:
                allowed &= bc == ac[choice[a]]
        if problem.memory_budget is not None and node.memory is not None:
            room = problem.memory_budget - used_memory - (remaining_min - min_memory[v])
            allowed &= node.memory <= room * (1 + 1e-9)
        if not allowed.any():
            error = PlanningError(
                f"breadth-first propagation found no candidate for {node.name} that satisfies its "
                "constraints (shard_as, pinned strategies, memory budget) given its decided neighbours; "
                "try --search ilp"
            )
            error.node = v  # decide() names it as the model does, with its file and line
            raise error
        total = np.where(allowed, total, np.inf)
        best = total.min()
        # the candidates within a relative 1e-9 of the best: np.isclose's test, written out (its call costs more
        # than the rest of a decision); an infinite best ties only with itself, as there
        ties = np.flatnonzero((np.abs(total - best) <= 1e-9 * abs(best) if np.isfinite(best) else total == best)
                              & allowed)
        c = int(ties[0])
        if len(ties) > 1 and prefer is not None and via is not None:
            u, e = via
            scores = prefer(v, u, e, choice[u])[ties]
            c = int(ties[int(np.argmax(scores))])  # first among the best scores
        choice[v] = c
        decided[v] = True
        for _, e in adj[v]:
            if e >= edge_links:
                fanout = problem.fanouts[e - edge_links]
                if fanout.u != v:
                    fanout_need[e - edge_links] |= fanout.need_mask(fanout._position[v])[c]
        parent[v] = via
        order.append(v)
        if node.memory is not None:
            used_memory += float(node.memory[c])
        remaining_min -= min_memory[v]

    queue: deque[int] = deque()
    for v, c in sorted((context or {}).items()):
        pinned[v] = c
        decide(v, None)
    starts = sorted(set(seeds) - set(context or {}))
    if not starts and context:
        readers = sorted(w for v in context for w, _ in adj[v] if choice[w] is None)
        starts = readers[:1]
    for s in starts:
        decide(s, None)
        queue.append(s)
    first_free = 0  # nodes below it are decided (a node, once decided, stays so)
    while True:
        while queue:
            u = queue.popleft()
            for v, e in adj[u]:
                if choice[v] is None:
                    decide(v, (u, e))
                    queue.append(v)
        while first_free < n and choice[first_free] is not None:
            first_free += 1
        if first_free == n:
            break
        decide(first_free, None)
        queue.append(first_free)
    final = tuple(int(c) for c in choice)
    return BfsResult(final, tuple(parent), tuple(order), problem.objective(final))


# -- on a planning model: seeds, context and tie-break ----------------------------------------------

def propagate_bfs(m: Model) -> BfsResult:
    """Breadth-first propagation over ``m`` with the seeds, context and tie-break above."""
    seeds = [i for i, n in enumerate(m.nodes) if n.user and (isinstance(n, OpNode) or len(n.layouts) > 1)]
    seed_choice: dict[int, int] = {}
    context = {i: 0 for i, n in enumerate(m.nodes) if not isinstance(n, OpNode) and n.user and len(n.layouts) == 1}
    if not has_user_annotations(m.graph):
        seeds, seed_choice = _default_seeds(m)
    return bfs(m.problem, seeds, seed_choice, prefer=_prefer(m), context=context)


def _default_seeds(m: Model) -> tuple[list[int], dict[int, int]]:
    """Readers of graph inputs, at their cheapest candidate that batch-shards the input."""
    seeds, choice = [], {}
    for tensor, ann in default_annotations(m.graph, m.mesh).items():
        for op_name, k in m.graph.consumers(tensor):
            i = m.op_index[op_name]
            node = m.nodes[i]
            ok = [c for c, s in enumerate(node.strategies) if satisfies(s.operands[k], ann)]
            if ok and i not in choice:
                costs = m.problem.nodes[i].cost
                choice[i] = min(ok, key=lambda c: (costs[c], c))
                seeds.append(i)
    return seeds, choice


def _layouts_on_link(m: Model, i: int, c: int, ks: tuple[int, ...] | None) -> list:
    """The layouts node ``i`` under candidate ``c`` gives the tensor it reads by operands ``ks``
    (None: its result)."""
    node = m.nodes[i]
    if not isinstance(node, OpNode):
        return [node.layouts[c]]
    s = node.strategies[c]
    if ks is not None:
        return [s.operands[k] for k in ks]
    return [s.result]


def _all_layouts(m: Model, i: int, c: int) -> list:
    node = m.nodes[i]
    if not isinstance(node, OpNode):
        return [node.layouts[c]]
    s = node.strategies[c]
    return [*s.operands, s.result]


def _prefer(m: Model):
    """Scores per candidate of ``v``: dimensions its layout on the link keeps of any layout of ``u`` (at ``cu``)."""
    operands: dict[int, dict[int, tuple[int, ...]]] = {}  # link -> reader -> its operands, built once per link

    def prefer(v: int, u: int, link: int, cu: int) -> np.ndarray:
        node = m.nodes[v]
        count = node.candidates()
        scores = np.zeros(count)
        if m.flows[link].kind not in ("data", "fanout"):
            return scores
        theirs = _all_layouts(m, u, cu)
        per = operands.get(link)
        if per is None:
            info = m.flows[link]
            per = operands[link] = {}
            for r, ks in zip(info.readers, info.operands):
                per.setdefault(r, ks)
        ks = per.get(v)
        for c in range(count):
            best = 0
            for mine in _layouts_on_link(m, v, c, ks):
                for lay in theirs:
                    if lay.rank == mine.rank:
                        best = max(best, sum(a.axes == b.axes for a, b in zip(lay.dims, mine.dims)))
            scores[c] = best
        return scores

    return prefer


def decide(m: Model, deadline: float | None = None, notes: list | None = None, request: Request | None = None) -> Decision:
    """``m`` decided by breadth-first propagation (a phase of :func:`search`; the deadline is not needed: BFS
    is linear in the model)."""
    try:
        with task(request.progress if request is not None else SILENT, "breadth-first propagation"):
            result = propagate_bfs(m)
    except PlanningError as e:
        raise _located(e, m) from None
    return Decision(m, result.choice, result.parent, None, "bfs")


def _located(error: PlanningError, m: Model) -> PlanningError:
    """``error`` about node ``error.node`` of ``m``, naming it as the model does (op 'x', tensor 'b'), with
    the file and line that define it."""
    v = getattr(error, "node", None)
    if v is None:
        return error
    node, graph = m.nodes[v], m.graph
    if isinstance(node, OpNode):
        what, line = f"op {quote(node.name)}", graph.op(node.name).line
    else:
        what, line = f"tensor {quote(node.tensor)}", graph.tensor(node.tensor).line
    located = PlanningError(error.message.replace(f"for {m.problem.nodes[v].name} ", f"for {what} ", 1))
    return located.located(f"{graph.source}:{line}") if graph.source and line is not None else located


def decide_fixed(m: Model) -> Decision:
    """A model whose every op has one candidate (explicit mode, propagation): BFS only decides the source layouts."""
    result = propagate_bfs(m)
    return Decision(m, result.choice, result.parent, None, "explicit")


def search(request: Request) -> Decision:
    """The search ``bfs``: seed 002's breadth-first propagation, phase by phase (:mod:`planner.searches.phased`)."""
    notes = ignored_annotations(request.graph, "bfs")
    decision = phased.run(phased.prepared(request), "bfs", decide)
    return replace(decision, notes=(*notes, *decision.notes))
