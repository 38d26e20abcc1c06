"""The strategy-selection problem every search algorithm solves: plain data, no graph.

A :class:`SearchProblem` has one :class:`Node` per decision (an op's strategy, or the
layout of a source tensor read by several ops), each with ``n`` candidates and a
unary cost per candidate, and one :class:`Edge` per data dependency with a cost per
pair of candidates. Costs are in seconds (compute, communication, redistribution);
memory is in bytes per device. BFS (:mod:`planner.propagation.bfs`), the ILP
(:mod:`planner.propagation.ilp`) and brute force all take this one interface and
return one candidate index per node; :meth:`SearchProblem.objective` scores any
choice the same way for all of them.

Edge costs are also given in *class* form: candidates of each endpoint that give
the same tensor layout share a class, and ``cost[i, j] ==
class_cost[u_class[i], v_class[j]]``. The ILP linearises edges over classes,
which is both exact for one-hot choices and much smaller than pairs.

Two shrinking hints come with the problem:

* ``Node.follows``: the node's choice is a function of another node's choice
  (``follow_map[parent_choice]``), e.g. an elementwise op that keeps its
  operand's layout. Solvers may fold such nodes into their parent.
* ``Node.layer``: ``(signature, index)`` of a repeated layer; nodes with equal
  signatures in different layers may share one decision ("solved once and reused").

>>> import numpy as np
>>> p = SearchProblem(
...     nodes=(Node("a", np.array([0.0, 1.0])), Node("b", np.array([0.0, 0.0]))),
...     edges=(Edge.from_matrix(0, 1, np.array([[5.0, 0.0], [0.0, 5.0]])),),
... )
>>> p.objective([0, 1]), p.objective([0, 0])
(0.0, 5.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np


@dataclass(frozen=True, eq=False)
class Node:
    """One decision: ``len(cost)`` candidates with their unary cost (s) and memory (bytes)."""

    name: str
    cost: np.ndarray
    memory: np.ndarray | None = None
    follows: int | None = None
    follow_map: np.ndarray | None = None
    layer: tuple[str, int] | None = None
    labels: tuple[str, ...] = ()  # human-readable candidate names, for reports

    @property
    def n(self) -> int:
        return int(len(self.cost))


@dataclass(frozen=True, eq=False)
class Edge:
    """Cost (s) of every pair of candidates of nodes ``u`` and ``v``, also in class form."""

    u: int
    v: int
    u_class: np.ndarray
    v_class: np.ndarray
    class_cost: np.ndarray
    label: str = ""

    @classmethod
    def from_matrix(cls, u: int, v: int, cost: np.ndarray, label: str = "") -> "Edge":
        """An edge whose every candidate is its own class."""
        cost = np.asarray(cost, dtype=float)
        return cls(u, v, np.arange(cost.shape[0]), np.arange(cost.shape[1]), cost, label)

    @property
    def cost(self) -> np.ndarray:
        return self.class_cost[np.ix_(self.u_class, self.v_class)]

    def pair_cost(self, i: int, j: int) -> float:
        return float(self.class_cost[self.u_class[i], self.v_class[j]])


@dataclass(frozen=True, eq=False)
class SearchProblem:
    """Nodes, edges, equal-layout groups and an optional memory budget (bytes per device).

    ``same`` lists ``(a, a_class, b, b_class)``: the class of node ``a``'s choice
    (``a_class[choice_a]``) must equal the class of node ``b``'s (shard-as groups).
    ``fixed`` maps a node to the only candidate it may take.
    """

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...] = ()
    same: tuple[tuple[int, np.ndarray, int, np.ndarray], ...] = ()
    memory_budget: float | None = None
    fixed: dict = field(default_factory=dict)

    def objective(self, choice: Sequence[int]) -> float:
        total = sum(float(n.cost[c]) for n, c in zip(self.nodes, choice))
        total += sum(e.pair_cost(choice[e.u], choice[e.v]) for e in self.edges)
        return total

    def memory(self, choice: Sequence[int]) -> float:
        return sum(float(n.memory[c]) for n, c in zip(self.nodes, choice) if n.memory is not None)

    def feasible(self, choice: Sequence[int]) -> bool:
        """Whether ``choice`` honours ``fixed``, ``same``, ``follows`` and the memory budget."""
        if any(choice[k] != v for k, v in self.fixed.items()):
            return False
        for a, ac, b, bc in self.same:
            if ac[choice[a]] != bc[choice[b]]:
                return False
        for i, n in enumerate(self.nodes):
            if n.follows is not None and n.follow_map[choice[n.follows]] != choice[i]:
                return False
        if self.memory_budget is not None and self.memory(choice) > self.memory_budget * (1 + 1e-9):
            return False
        return True

    @property
    def variables(self) -> int:
        """Candidates in all (a measure of problem size)."""
        return sum(n.n for n in self.nodes)
