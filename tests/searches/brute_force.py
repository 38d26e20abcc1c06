"""Exhaustive search over a :class:`~planner.model.problem.SearchProblem`: the reference optimum.

:func:`brute_force` tries every choice of the *free* nodes with
:func:`itertools.product`: a fixed node has one candidate, and a node that
``follows`` another takes ``follow_map[parent's choice]``, so neither multiplies
the space. Every full choice is checked with :meth:`SearchProblem.feasible`
(fixed, ``same`` groups, follows, memory budget) and scored with
:meth:`SearchProblem.objective`. Among choices of exactly equal objective the
lexicographically smallest one wins, so the answer is deterministic.

It is meant for tests and tiny problems: it refuses spaces larger than ``limit``.
Layer hints (``Node.layer``) are ignored: this is the optimum of the unshrunk problem.

>>> import numpy as np
>>> from planner.model.problem import Edge, Node, SearchProblem
>>> p = SearchProblem(
...     nodes=(Node("a", np.array([0.0, 1.0])), Node("b", np.array([0.0, 0.0]))),
...     edges=(Edge.from_matrix(0, 1, np.array([[5.0, 0.0], [0.0, 5.0]])),),
... )
>>> brute_force(p)
((0, 1), 0.0)
"""

from __future__ import annotations

import itertools
import math

from costmodels.units import format_bytes
from planner.errors import PlanningError
from planner.model.problem import SearchProblem


def brute_force(problem: SearchProblem, limit: int = 2_000_000) -> tuple[tuple[int, ...], float]:
    """The optimal feasible choice of ``problem`` and its objective (s), by enumeration.

    Raises :class:`~planner.errors.PlanningError` if more than ``limit`` choices
    would have to be tried, or if no choice is feasible.
    """
    order = _follow_order(problem)
    free = [i for i in order if problem.nodes[i].follows is None]
    ranges = [_candidates(problem, i) for i in free]
    size = math.prod(len(r) for r in ranges)
    if size > limit:
        raise PlanningError(
            f"brute force would try {size} choices of {len(free)} free nodes, more than the limit of {limit}")
    best: tuple[float, tuple[int, ...]] | None = None
    choice = [0] * len(problem.nodes)
    for values in itertools.product(*ranges):
        for i, value in zip(free, values):
            choice[i] = value
        for i in order:
            node = problem.nodes[i]
            if node.follows is not None:
                choice[i] = int(node.follow_map[choice[node.follows]])
        if not problem.feasible(choice):
            continue
        key = (problem.objective(choice), tuple(choice))
        if best is None or key < best:
            best = key
    if best is None:
        raise PlanningError(_no_choice_message(problem))
    return best[1], best[0]


def _candidates(problem: SearchProblem, i: int) -> range:
    """The candidates node ``i`` may take: its fixed one, or all of them."""
    n = problem.nodes[i].n
    if i not in problem.fixed:
        return range(n)
    k = problem.fixed[i]
    if not 0 <= k < n:
        raise PlanningError(f"node {problem.nodes[i].name!r} is fixed to candidate {k}, but has {n} candidates")
    return range(k, k + 1)


def _follow_order(problem: SearchProblem) -> list[int]:
    """All node indices, every parent before the nodes that follow it."""
    order: list[int] = []
    placed: set[int] = set()
    for start in range(len(problem.nodes)):
        chain: list[int] = []
        i: int | None = start
        while i is not None and i not in placed:
            if i in chain:
                names = " -> ".join(problem.nodes[j].name for j in chain[chain.index(i):] + [i])
                raise PlanningError(f"nodes follow each other in a cycle: {names}")
            chain.append(i)
            i = problem.nodes[i].follows
        for j in reversed(chain):
            order.append(j)
            placed.add(j)
    return order


def _no_choice_message(problem: SearchProblem) -> str:
    constraints = ["fixed candidates"] if problem.fixed else []
    if problem.same:
        constraints.append("equal-layout (same) groups")
    if problem.memory_budget is not None:
        constraints.append(f"the memory budget of {format_bytes(problem.memory_budget)} per device")
    return f"no choice satisfies {' and '.join(constraints) or 'the constraints'}"
