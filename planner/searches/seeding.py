"""Where breadth-first propagation starts and how it breaks ties on a planning model (seed 002).

:func:`propagate_bfs` runs :func:`planner.searches.bfs.bfs` on a built
:class:`~planner.model.build.Model` with the planner's policy:

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

import numpy as np

from planner.model.annotations import satisfies
from planner.searches.bfs import BfsResult, bfs
from planner.model.build import Model, OpNode, default_annotations, has_user_annotations


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
        if m.links[link].kind not in ("data", "fanout"):
            return scores
        theirs = _all_layouts(m, u, cu)
        per = operands.get(link)
        if per is None:
            info = m.links[link]
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
