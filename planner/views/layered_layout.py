"""A deterministic layered drawing of a directed acyclic graph (top to bottom), written for the plan page.

The classic layered (Sugiyama-style) method, in four small steps:

1. **levels**: a node's level is its topological depth (the longest path from a
   source); a source (a parameter, an input) is then pulled down to just above its
   first reader, so that weights sit beside the op that reads them, not all in row 0;
2. **dummies**: an edge spanning several levels passes through one small invisible
   node per level in between, so that it is routed around the nodes, not through them;
3. **order** within each level: barycentre sweeps (down, up, down), each node
   sorted by the mean position of its neighbours in the previous level, ties by
   its current position (so the given node order decides the rest);
4. **coordinates**: each level's x positions are the closest (least squares) to
   the mean x of the node's neighbours, subject to the nodes not overlapping,
   computed exactly by isotonic regression (pool adjacent violators);
5. **lanes**: a long edge then goes down beside its endpoints, not where its dummies
   were ordered (often the far side of the drawing): on each level it crosses, at
   the free place nearest the straight line between its ends, clear of the level's
   nodes and of the long edges routed before it (shorter edges first); where its
   place on the level above is free too and at most :data:`LANE_SLACK` farther, it
   keeps that place and runs straight.

Nothing depends on hashing or set order: the same nodes and edges in the same
order give the same coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

DUMMY_WIDTH = 10.0
LANE_CLEARANCE = 10.0  # px between a long edge and a node's side
LANE_GAP = 8.0  # px between two long edges on one level
LANE_SLACK = 48.0  # px a lane may stay off its nearest free place to go on straight


@dataclass(frozen=True)
class Layout:
    """Node centres, edge routes (points from the source's bottom to the target's top), the canvas size."""

    positions: Mapping[str, tuple[float, float]]
    routes: Mapping[tuple[str, str], tuple[tuple[float, float], ...]]
    levels: Mapping[str, int]
    width: float
    height: float


def spread(desired: Sequence[float], widths: Sequence[float], gap: float,
           weights: Sequence[float] | None = None) -> list[float]:
    """Centres closest to ``desired`` (least squares, each error times its weight, default 1) keeping
    their order and ``gap`` between neighbours.

    >>> spread([0, 0, 0], [10, 10, 10], 2)
    [-12.0, 0.0, 12.0]
    >>> spread([0, 100], [10, 10], 2)
    [0.0, 100.0]
    """
    n = len(desired)
    if n == 0:
        return []
    offset = [0.0] * n
    for i in range(1, n):
        offset[i] = offset[i - 1] + (widths[i - 1] + widths[i]) / 2 + gap
    target = [d - o for d, o in zip(desired, offset)]
    weights = [1.0] * n if weights is None else [float(w) for w in weights]
    # pool adjacent violators: the weighted non-decreasing fit of `target`
    blocks: list[list[float]] = []  # [weighted sum, total weight, count]
    for t, w in zip(target, weights):
        blocks.append([t * w, w, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, w_, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += w_
            blocks[-1][2] += c
    fit: list[float] = []
    for s, w_, c in blocks:
        fit += [s / w_] * c
    return [f + o for f, o in zip(fit, offset)]


def layered_layout(nodes: Sequence[str], edges: Sequence[tuple[str, str]], widths: Mapping[str, float],
                   heights: Mapping[str, float], row_gap: float = 44.0, node_gap: float = 24.0,
                   margin: float = 16.0) -> Layout:
    """Lay out the DAG ``nodes``/``edges`` (see the module docstring); ``widths``/``heights`` in px."""
    index = {n: i for i, n in enumerate(nodes)}
    edges = list(dict.fromkeys(e for e in edges if e[0] != e[1]))
    preds: dict[str, list[str]] = {n: [] for n in nodes}
    succs: dict[str, list[str]] = {n: [] for n in nodes}
    for u, v in edges:
        succs[u].append(v)
        preds[v].append(u)
    level = _levels(nodes, preds, succs, index)

    # dummies along long edges
    width = dict(widths)
    up: dict[str, list[str]] = {n: [] for n in nodes}
    down: dict[str, list[str]] = {n: [] for n in nodes}
    chains: dict[tuple[str, str], list[str]] = {}
    for u, v in edges:
        chain = [u]
        for lv in range(level[u] + 1, level[v]):
            d = f"\x00{index[u]}\x00{index[v]}\x00{lv}"
            level[d], width[d] = lv, DUMMY_WIDTH
            up[d], down[d] = [], []
            chain.append(d)
        chain.append(v)
        for a, b in zip(chain, chain[1:]):
            down[a].append(b)
            up[b].append(a)
        chains[(u, v)] = chain
    depth = max(level.values(), default=-1) + 1
    rows: list[list[str]] = [[] for _ in range(depth)]
    for n in nodes:
        rows[level[n]].append(n)
    for (u, v), chain in chains.items():  # dummies after the real nodes of their level, in edge order
        for d in chain[1:-1]:
            rows[level[d]].append(d)

    # order: barycentre sweeps
    pos = {n: float(i) for row in rows for i, n in enumerate(row)}
    sweeps = [(range(1, depth), up), (range(depth - 2, -1, -1), down), (range(1, depth), up)]
    for order, nbrs in sweeps:
        for lv in order:
            row = rows[lv]
            key = {n: (sum(pos[m] for m in nbrs[n]) / len(nbrs[n]) if nbrs[n] else pos[n], pos[n]) for n in row}
            row.sort(key=key.__getitem__)
            for i, n in enumerate(row):
                pos[n] = float(i)

    # coordinates of the nodes (the dummies, which only served the order, take their lanes after):
    # packed, then pulled towards the neighbours' mean, without overlaps; a node below takes its
    # place from its operands that are computed (not sources) when it has some, so that a chain of
    # ops stays straight and the weights sit beside it
    rows = [[n for n in row if n in index] for row in rows]
    up = {n: [m for m in up[n] if m in index] for n in nodes}
    down = {n: [m for m in down[n] if m in index] for n in nodes}
    pull = {n: [m for m in up[n] if preds[m]] or up[n] for n in up}
    x: dict[str, float] = {}
    for row in rows:
        for n, c in zip(row, spread([0.0] * len(row), [width[n] for n in row], node_gap)):
            x[n] = c
    for order, nbrs in [(range(depth - 2, -1, -1), down), (range(1, depth), pull),
                        (range(depth - 2, -1, -1), down), (range(1, depth), pull)]:
        for lv in order:
            row = rows[lv]
            want = [sum(x[m] for m in nbrs[n]) / len(nbrs[n]) if nbrs[n] else x[n] for n in row]
            for n, c in zip(row, spread(want, [width[n] for n in row], node_gap)):
                x[n] = c
    for row in rows:  # last, the sources beside the op they feed, where the ops now are (which hardly move)
        source = [not preds[n] and bool(down[n]) for n in row]
        want = [sum(x[m] for m in down[n]) / len(down[n]) if s else x[n] for n, s in zip(row, source)]
        fixed = [1.0 if s else 1000.0 for s in source]
        for n, c in zip(row, spread(want, [width[n] for n in row], node_gap, fixed)):
            x[n] = c
    _lanes(chains, rows, x, width, level)
    lane_x = [x[d] for chain in chains.values() for d in chain[1:-1]]
    left = min([x[n] - width[n] / 2 for n in nodes] + [v - DUMMY_WIDTH / 2 for v in lane_x], default=0.0)
    right = max([x[n] + width[n] / 2 for n in nodes] + [v + DUMMY_WIDTH / 2 for v in lane_x], default=0.0)
    row_h = [max((heights.get(n, 0.0) for n in row), default=0.0) for row in rows]
    y_row, y = [], margin
    for h in row_h:
        y_row.append(y + h / 2)
        y += h + row_gap
    positions = {n: (round(x[n] - left + margin, 1), round(y_row[level[n]], 1)) for n in nodes}
    routes = {}
    for (u, v), chain in chains.items():
        pts = [(positions[u][0], positions[u][1] + heights[u] / 2)]
        pts += [(round(x[d] - left + margin, 1), round(y_row[level[d]], 1)) for d in chain[1:-1]]
        pts.append((positions[v][0], positions[v][1] - heights[v] / 2))
        routes[(u, v)] = tuple(pts)
    return Layout(positions, routes, {n: level[n] for n in nodes}, round(right - left + 2 * margin, 1),
                  round(y - row_gap + margin, 1) if rows else 2 * margin)


def _lanes(chains, rows, x, width, level) -> None:
    """Place the dummies of every long edge in its lane (step 5 of the module docstring), in ``x``; ``rows`` hold
    the nodes of each level, without dummies."""
    blocked: dict[int, list[tuple[float, float]]] = {}
    for lv, row in enumerate(rows):
        blocked[lv] = [(x[n] - width[n] / 2 - LANE_CLEARANCE, x[n] + width[n] / 2 + LANE_CLEARANCE) for n in row]
    order = {n: i for i, n in enumerate(n for row in rows for n in row)}
    long = [(len(c), order[c[0]], order[c[-1]], c) for c in chains.values() if len(c) > 2]
    for _, _, _, chain in sorted(long, key=lambda t: t[:3]):
        u, v = chain[0], chain[-1]
        steps = len(chain) - 1
        prev = None
        for k, d in enumerate(chain[1:-1], start=1):
            lv = level[d]
            want = x[u] + (x[v] - x[u]) * k / steps
            x[d] = _free_place(want, blocked[lv])
            if prev is not None and abs(prev - want) <= abs(x[d] - want) + LANE_SLACK and \
                    _free_place(prev, blocked[lv]) == prev:
                x[d] = prev
            prev = x[d]
            blocked[lv].append((x[d] - DUMMY_WIDTH / 2 - LANE_GAP, x[d] + DUMMY_WIDTH / 2 + LANE_GAP))


def _free_place(want: float, blocked: list[tuple[float, float]]) -> float:
    """The place nearest ``want`` at which a lane (:data:`DUMMY_WIDTH` wide) overlaps no blocked interval;
    of two as near, the left one.

    >>> _free_place(0.0, [(-10.0, 30.0)]), _free_place(0.0, [(-30.0, 10.0)]), _free_place(5.0, [(20.0, 30.0)])
    (-15.0, 15.0, 5.0)
    """
    half = DUMMY_WIDTH / 2
    candidates = [want] + [c for lo, hi in blocked for c in (lo - half, hi + half)]
    free = [c for c in candidates if all(c + half <= lo or c - half >= hi for lo, hi in blocked)]
    return min(free, key=lambda c: (abs(c - want), c))


def _levels(nodes, preds, succs, index) -> dict[str, int]:
    """Topological depth, sources pulled down to just above their first reader."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_edges_from((u, v) for v in nodes for u in preds[v])
    level: dict[str, int] = {}
    for n in nx.lexicographical_topological_sort(g, key=index.__getitem__):
        level[n] = max((level[p] + 1 for p in preds[n]), default=0)
    for n in nodes:
        if not preds[n] and succs[n]:
            level[n] = max(min(level[s] for s in succs[n]) - 1, 0)
    return level
