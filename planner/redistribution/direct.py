"""A plan without search: the engine's first incumbent.

Most redistributions are a few collectives that each put pieces where the destination wants
them: an AllToAll moves a piece from one dimension to the minor end of another, a Slice shards
a dimension further for free, an AllGather undoes what no other move can fix, a ReduceScatter
or an AllReduce completes a pending sum (as PyTorch DTensor redistributes one mesh dimension
at a time). :func:`direct_chain` builds such a plan greedily, one valid move of the search's
own graph at a time (so its moves and costs are the search's): of the moves that bring the
state closer to the goal (:func:`distance`), the one with the least cost per step of
progress, free slices first. It costs a few expansions and gives the A* a plan to beat: every
state dearer than it is pruned, and when the budget runs out the engine returns it rather than
gathering everything.
"""

from __future__ import annotations

from planner.redistribution.search import Budget, Graph
from planner.redistribution.state import State


def distance(state: State, goal: State) -> int:
    """Pieces out of place: per dimension, those of the state and of the goal beyond their
    longest common prefix (major pieces first), plus the pending sums only one of them has.
    0 exactly when the two states are equal."""
    out = len(state.unreduced ^ goal.unreduced)
    for have, want in zip(state.dims, goal.dims):
        common = 0
        for a, b in zip(have, want):
            if a != b:
                break
            common += 1
        out += len(have) + len(want) - 2 * common
    return out


def direct_chain(graph: Graph, start: State, goal: State, budget: Budget) -> list | None:
    """The greedy plan from ``start`` to ``goal`` as ``[(before, move, cost, after)]``, or None
    when no move makes progress from some state. Each step expands one state of ``graph``
    (at most ``distance(start, goal)`` steps: not charged to ``budget``, whose searches reuse
    the expansions; charged, they left the searches too little on large meshes: 4x4x4x4's 100
    random pairs of ``benchmarks/reshard.py`` cost 1.9x more in all) and may check the permute
    straight to the goal (one check of ``budget``).

    Of the moves that lower :func:`distance`, the cheapest per unit of progress in the
    objective's first component (bytes, or time), then the cheapest, then the first listed (the
    permute straight to the goal last)."""
    sid, gid = graph.sid(start), graph.sid(goal)
    chain = []
    left = distance(start, goal)
    while left:
        state = graph.states[sid]
        base, _, towards, straight = graph.expand(sid, gid)
        best = None
        edges = base + towards
        for order, (after, key, move, cost) in enumerate(edges):
            gain = left - distance(graph.states[after], goal)
            if gain > 0:
                rank = (key[0] / gain, key, order)
                if best is None or rank < best[0]:
                    best = (rank, after, move, cost)
        if straight and budget.check():
            priced = graph.permute(sid, gid)
            if priced is not None:
                key, move, cost = priced
                rank = (key[0] / left, key, len(edges))  # after the collectives on a tie
                if best is None or rank < best[0]:
                    best = (rank, gid, move, cost)
        if best is None:
            return None
        _, after, move, cost = best
        chain.append((state, move, cost, graph.states[after]))
        sid = after
        left = distance(graph.states[sid], goal)
    return chain
