"""Optimal strategy selection as an integer linear program, solved with PuLP.

:func:`solve_ilp` takes a :class:`~planner.model.problem.SearchProblem` and
returns one candidate per node with a :class:`SolverReport`. The model is built in
one function, :func:`_build_model`, in the order data → problem → variables keyed
by (node, candidate) → objective → named constraints; :func:`_solve` runs the
solver and checks its status before any value is read. Only this module imports PuLP.

Formulation (over the *solved* nodes, after shrinking; ``x`` binary, ``z, w >= 0``,
``0 <= y <= 1``)::

    minimise   sum_{o,k} cost[o,k] x[o,k] + sum_{e,a,b} C_e[a,b] z[e,a,b]
                                          + sum_{f,a,L} C_f[a,L] w[f,a,L]
    one_hot{o}: sum_k x[o,k] == 1                                   every solved node o
    edge{e}_u{a}: sum_b z[e,a,b] == sum_{k: u_class[k]==a} x[u,k]   every class a of u
    edge{e}_v{b}: sum_a z[e,a,b] == sum_{k: v_class[k]==b} x[v,k]   every class b of v
    fixed{i}:   sum of x[o,k] over the k that give node i its fixed candidate == 1
    same{j}_class{c}: [a's class is c] - [b's class is c] == 0      every class c
    follow{f}_{j}: [f takes j] - [f's parent takes one mapped to j] == 0   (only unshrunk)
    memory:     sum_{o,k} memory[o,k] x[o,k] <= budget
    fanout{f}_r{j}_L{L}: y[f,L] - sum_{k: L in needs_j(k)} x[r_j,k] >= 0   every reader j, layout L
    fanout{f}_L{L}:      sum_a w[f,a,L] - y[f,L] == 0                     every layout L
    fanout{f}_a{a}_L{L}: w[f,a,L] - sum_{k: u_class[k]==a} x[u,k] <= 0    every row a, layout L

For one-hot ``x`` the transportation rows leave exactly one ``z[e,a,b]`` at 1 (the
classes of the two choices), so the edge term is exact, with ``U + V`` rows and
``U * V`` columns per edge instead of one per pair of candidates.

A fanout (:class:`~planner.model.problem.Fanout`: producer ``u``, readers
``r_j``, ``needs_j(k)`` the layouts reader ``j`` needs at candidate ``k``) pays
``C_f[a, L]`` once per layout ``L`` any reader needs, ``a`` the producer's row.
For one-hot ``x``: ``y[f,L]`` is at least 1 exactly when some reader needs ``L``
and, as costs are ``>= 0``, the minimum takes ``y[f,L] = [some reader needs L]``;
the ``w`` rows put all of ``y[f,L]`` on the producer's row ``a`` (every other
row's bound is 0), so the term is ``sum_L C_f[a,L] [L needed]``: exact. A fanout
whose rows all cost the same (one row left) puts ``C_f[0,L]`` on ``y`` and has no
``w``.

Shrinking (``shrink=True``) happens on the data before the model is built:

* **followers are folded**: a node that ``follows`` another (or a chain of them)
  gets no variables; its candidate is read from its root's through the composed
  ``follow_map``, its unary cost and memory move to the root's candidates, and its
  edges become edges of the root with re-indexed classes (an edge between a node
  and its own follower becomes a unary cost);
* **repeated layers share variables**: root nodes with the same ``layer[0]``
  signature (and the same number of candidates) use the variables of the one with
  the lowest layer index, so each repeated layer is solved once; signatures are
  expected to be unique within a layer. This restricts the problem; if the tied
  model is infeasible (say, layers fixed differently) it is solved again untied;
* edges are normalised: classes no candidate reaches are dropped, classes with
  equal cost rows merged, edges between the same two solved nodes with the same
  class partitions summed, and an edge whose cost splits into ``f(a) + g(b)``
  becomes unary costs. All of these are exact;
* fanouts are remapped through owners like edges; readers with the same owner
  become one reader needing the union of their layouts (a reader owned by the
  producer's owner is a reader like any other, its rows over the producer's
  ``x``). Layout columns no reader can need, or that cost 0 from every row the
  producer can take, are dropped, and so are readers left needing nothing. A
  fanout all of whose participants have one owner is a unary cost of that owner;
  with two owners it is an edge (producer classes ``(row, own readers' layouts)``
  against the other owner's classes ``(its readers' layouts)``, cost summed over
  the union) and is normalised with the edges; with three or more it keeps its
  ``y``/``w`` variables, and fanouts over the same owners with the same class
  structure (tied layers) are summed into one. All exact.

:attr:`SolverReport.variables` and ``nodes_solved`` describe the model actually solved.

Numerics: costs (seconds, often around 1e-6) are multiplied by ``COST_SCALE =
1e6`` (microseconds) in the model; memory is divided by the budget, so its row
reads ``<= 1``. The returned ``objective`` is recomputed with
:meth:`SearchProblem.objective`, never read from the solver, and the choice is
checked with :meth:`SearchProblem.feasible`.

Solvers: ``"elimination"`` (no MIP: :mod:`planner.searches.elimination`'s dynamic
program over the same data, :func:`_factors`, exact with no tolerance), ``"highs"``
(HiGHS through ``highspy``, an optional dependency PuLP imports when present) or
``"cbc"`` (a ``cbc`` on the PATH, else the binary bundled with PuLP 3). The MIP
solvers run single-threaded with relative and absolute gap 0, so a solved model is
optimal up to the solver's tolerances and the same problem gives the same choice.
``"auto"`` uses elimination and hands a model to HiGHS (else CBC) where elimination
would build a table over :data:`~planner.searches.elimination.MAX_CELLS` cells or
its optimum breaks the memory budget (an optimum that fits is the optimum under the
budget): on every config and on GPT at 12-48 layers elimination takes a fraction of
HiGHS's time. Between the MIP solvers: on transformer-shaped problems HiGHS solves
the full models several times faster and the two tie on shrunk ones; on some small
dense problems CBC wins, and ``solver="cbc"`` is there for them.
``python benchmarks/ilp_solvers.py`` measures both. PuLP is imported on first use,
so a model elimination solves never loads it.

Gap: HiGHS reports its relative MIP gap ``(primal - dual) / |primal|``. CBC
(through PuLP's command-line interface) gives no gap directly; we read the lower
bound from its log and compute the same ratio; ``0.0`` when CBC proves
optimality, ``None`` when the log has no bound.

PuLP: ``setup.cfg`` pins ``pulp>=3.0,<4``; PuLP 4 creates variables through the
problem (``prob.add_variable``) where PuLP 3 used ``LpVariable``. :func:`_new_variable`
uses ``add_variable`` when the installed PuLP has it (3.3.2 does, and warns about
``LpVariable``), else ``LpVariable``; the tests check the installed version and
that no deprecation warning is raised. Only 3.3.2 has been tested.

>>> import numpy as np
>>> from planner.model.problem import Edge, Node, SearchProblem
>>> p = SearchProblem(
...     nodes=(Node("a", np.array([0.0, 1e-6])), Node("b", np.array([0.0, 0.0]))),
...     edges=(Edge.from_matrix(0, 1, np.array([[5e-6, 0.0], [0.0, 5e-6]])),),
... )
>>> result = solve_ilp(p)
>>> result.choice, result.objective, result.report.optimal
((0, 1), 0.0, True)
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from costmodels.units import format_bytes, format_seconds
from planner.caches import ByIdentity
from planner.errors import PlanningError
from planner.model.decision import Decision, SolverReport
from planner.model.ignored import ignored_annotations
from planner.model.nodes import Model
from planner.model.request import Request
from planner.progress import SILENT, Progress, task
from planner.searches import bfs, elimination, phased
from planner.searches.shrink import with_shrink_hints
from planner.model.problem import Edge, Fanout, SearchProblem
from planner.redistribution.state import distinct  # np.unique without its import of numpy.ma

COST_SCALE = 1e6
"""Model cost units per second (the model works in microseconds)."""

SOLVERS = ("auto", "elimination", "highs", "cbc")
ELIMINATION = "elimination"
"""The report name of the exact solver of :mod:`planner.searches.elimination`."""
SUPPORTED_PULP = (3, 4)
"""PuLP major versions supported: ``SUPPORTED_PULP[0] <= major < SUPPORTED_PULP[1]``."""

_SEPARABLE_RTOL = 1e-12


from planner.errors import SolverFailed  # noqa: E402  (defined there; re-exported here)


@dataclass(frozen=True, slots=True)
class IlpResult:
    """One candidate per node of the original problem, its objective (s) and the solver's report."""

    choice: tuple[int, ...]
    objective: float
    report: SolverReport


def solve_ilp(problem: SearchProblem, *, time_limit: float | None = None, solver: str = "auto",
              shrink: bool = True, progress: Progress | None = None) -> IlpResult:
    """Solve ``problem`` to optimality (or until ``time_limit`` seconds) with an ILP.

    With ``shrink`` (the default) followers are folded (exact) and repeated layers
    tied: ``report.optimal`` then means optimal among the choices that repeat one
    decision per layer signature; ``shrink=False`` solves the problem as given.
    ``time_limit`` (seconds) bounds the whole call: reading every cost table, building the
    model and the solver runs (a tied model found infeasible is solved again untied, with what
    is left).

    Raises :class:`~planner.errors.PlanningError` when no choice is feasible,
    :class:`SolverFailed` when the solver stops without a solution, and
    ``PlanningError`` for an unknown or unavailable ``solver``.

    ``progress`` hears a task per step: reading the cost tables, then the solver that runs, by name
    (``elimination``, ``HiGHS``, ``CBC``), with HiGHS's best bound and gap as it reports them.
    """
    progress = progress or SILENT
    backend = _backend(solver)
    deadline = None if time_limit is None else time.monotonic() + time_limit
    if not problem.nodes:
        return IlpResult((), 0.0, SolverReport(backend.name, "empty problem", True, 0.0, 0.0, 0, 0, 0))
    with task(progress, "ILP: reading the cost tables"):
        problem = problem.dense()  # the ILP reads every cell of every cost table
    _check_memory_lower_bound(problem)
    label = "ILP solve" if shrink else "ILP solve, whole problem"
    try:
        return _solve(problem, _reduce(problem, fold=shrink, tie=shrink), backend, time_limit, deadline,
                      progress, label)
    except _Infeasible as first:
        if not (shrink and first.tied):
            raise PlanningError(_infeasible_message(problem)) from None
    try:
        return _solve(problem, _reduce(problem, fold=True, tie=False), backend, time_limit, deadline,
                      progress, f"{label}, layers untied")
    except _Infeasible:
        raise PlanningError(_infeasible_message(problem)) from None


# -- data: the problem the model is built from ----------------------------------------------

@dataclass(frozen=True, slots=True)
class _ClassEdge:
    """An edge between two solved nodes: classes of their candidates and a cost (model units) per class pair."""

    u: int
    v: int
    u_class: np.ndarray
    v_class: np.ndarray
    cost: np.ndarray


@dataclass(frozen=True, slots=True)
class _ClassFanout:
    """A fanout over three or more solved nodes: the producer's row per candidate, each
    reader owner's needed layouts per candidate, and a cost (model units) per (row, layout).
    """

    u: int
    u_class: np.ndarray
    readers: tuple[tuple[int, np.ndarray], ...]  # (owner, bool matrix: its candidates x layouts)
    cost: np.ndarray


@dataclass(frozen=True, slots=True)
class _Row:
    """A named linear equality over ``x``: ``sum coef * x[o, k] == rhs``."""

    name: str
    terms: dict[tuple[int, int], float]
    rhs: float


@dataclass(frozen=True, slots=True)
class _Data:
    """Everything the model needs, after shrinking; costs in model units, memory in budgets.

    ``owner[i]`` is the solved node deciding original node ``i`` and ``pick[i][k]``
    is node ``i``'s candidate when its owner takes candidate ``k``.
    """

    owner: tuple[int, ...]
    pick: tuple[np.ndarray, ...]
    cost: tuple[np.ndarray, ...]
    edges: tuple[_ClassEdge, ...]
    rows: tuple[_Row, ...]
    memory: tuple[np.ndarray, ...] | None
    memory_rhs: float
    tied: bool
    fanouts: tuple[_ClassFanout, ...] = ()


class _Infeasible(Exception):
    """Internal: the model (or its data) admits no choice; ``tied`` if layers were tied."""

    def __init__(self, tied: bool):
        super().__init__()
        self.tied = tied


def _reduce(problem: SearchProblem, *, fold: bool, tie: bool) -> _Data:
    """The model's data: owners, unary costs, normalised edges, equality rows, memory."""
    owner, pick, tied = _owners(problem, fold=fold, tie=tie)
    sizes = [0] * (max(owner) + 1)
    for i, o in enumerate(owner):
        sizes[o] = len(pick[i])
    unary = [(owner[i], COST_SCALE * np.asarray(node.cost, dtype=float)[pick[i]])
             for i, node in enumerate(problem.nodes)]
    fanout_edges, fanouts, fanout_unary = _normalised_fanouts(problem.fanouts, owner, pick)
    edges, edge_unary = _normalised_edges(problem.edges, owner, pick, fanout_edges)
    cost = _per_solved_node(unary + edge_unary + fanout_unary, sizes)
    rows = _fixed_rows(problem, owner, pick) + _same_rows(problem, owner, pick)
    if not fold:
        rows += _follow_rows(problem)
    memory, memory_rhs = _memory(problem, owner, pick, sizes)
    for row in rows:
        if not row.terms and row.rhs != 0:
            raise _Infeasible(tied)
    rows = tuple(row for row in rows if row.terms)
    return _Data(tuple(owner), tuple(pick), tuple(cost), edges, rows, memory, memory_rhs, tied, fanouts)


def _owners(problem: SearchProblem, *, fold: bool, tie: bool) -> tuple[list[int], list[np.ndarray], bool]:
    """Which solved node decides each node, and how (see :class:`_Data`); whether layers were tied."""
    nodes = problem.nodes
    roots = [i for i, node in enumerate(nodes) if not (fold and node.follows is not None)]
    head = _layer_heads(problem, roots) if tie else {r: r for r in roots}
    solved: dict[int, int] = {}
    owner: list[int | None] = [None] * len(nodes)
    pick: list[np.ndarray | None] = [None] * len(nodes)
    for r in roots:
        owner[r] = solved.setdefault(head[r], len(solved))
        pick[r] = np.arange(nodes[r].n)
    for start in range(len(nodes)):
        chain, on_chain = [], set()
        i = start
        while owner[i] is None:
            if i in on_chain:
                names = " -> ".join(nodes[j].name for j in chain[chain.index(i):] + [i])
                raise PlanningError(f"nodes follow each other in a cycle: {names}")
            chain.append(i)
            on_chain.add(i)
            i = nodes[i].follows
        for j in reversed(chain):
            parent = nodes[j].follows
            owner[j] = owner[parent]
            pick[j] = np.asarray(nodes[j].follow_map)[pick[parent]]
    return owner, pick, len(solved) < len(roots)


def _layer_heads(problem: SearchProblem, roots: list[int]) -> dict[int, int]:
    """For each root, the root whose variables it uses: the lowest layer of its signature."""
    groups: dict[tuple[str, int], list[int]] = {}
    for r in roots:
        layer = problem.nodes[r].layer
        if layer is not None:
            groups.setdefault((layer[0], problem.nodes[r].n), []).append(r)
    head = {r: r for r in roots}
    for members in groups.values():
        first = min(members, key=lambda r: (problem.nodes[r].layer[1], r))
        head.update((r, first) for r in members)
    return head


def _per_solved_node(terms: list[tuple[int, np.ndarray]], sizes: list[int]) -> tuple[np.ndarray, ...]:
    """Sum of ``(solved node, value per candidate)`` terms, one array per solved node."""
    total = [np.zeros(n) for n in sizes]
    for o, values in terms:
        total[o] = total[o] + values
    return tuple(total)


def _normalised_edges(edges: tuple[Edge, ...], owner: list[int], pick: list[np.ndarray],
                      extra: list[_ClassEdge] = ()) -> tuple[tuple[_ClassEdge, ...], list[tuple[int, np.ndarray]]]:
    """Edges between distinct solved nodes, merged and compacted, and the unary costs the others became.

    ``extra`` are edges already over solved nodes in model units (fanouts between two owners).
    """
    merged: dict[tuple, _ClassEdge] = {}
    unary = []
    scaled = ByIdentity()  # each cost table in model units once (identical layers' edges share one)

    def in_units(table) -> np.ndarray:
        return scaled.get(table, lambda: COST_SCALE * np.asarray(table, dtype=float))

    seen: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}  # identical layers renumber the same classes

    def first_seen(classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = classes.astype(np.int64, copy=False).tobytes()
        if key not in seen:
            seen[key] = _first_seen_classes(classes)
        return seen[key]

    remapped = (_ClassEdge(owner[edge.u], owner[edge.v], np.asarray(edge.u_class)[pick[edge.u]],
                           np.asarray(edge.v_class)[pick[edge.v]], in_units(edge.class_cost)) for edge in edges)
    for edge in itertools.chain(remapped, extra):
        u, v, u_class, v_class, table = edge.u, edge.v, edge.u_class, edge.v_class, edge.cost
        if u == v:
            unary.append((u, table[u_class, v_class]))
            continue
        if u > v:
            u, v, u_class, v_class, table = v, u, v_class, u_class, table.T
        u_class, rows = first_seen(u_class)
        v_class, cols = first_seen(v_class)
        table = table[np.ix_(rows, cols)]
        key = (u, v, u_class.tobytes(), v_class.tobytes())
        if key in merged:
            table = table + merged[key].cost
        merged[key] = _ClassEdge(u, v, u_class, v_class, table)
    kept = []
    for edge in merged.values():
        edge = _merge_equal_classes(edge)
        parts = _separable_parts(edge)
        if parts is None:
            kept.append(edge)
        else:
            unary += parts
    return tuple(kept), unary


def _normalised_fanouts(fanouts: tuple[Fanout, ...], owner: list[int], pick: list[np.ndarray]
                        ) -> tuple[list[_ClassEdge], tuple[_ClassFanout, ...], list[tuple[int, np.ndarray]]]:
    """Fanouts over solved nodes: as edges (two owners), as hyperedges (three or more), as unary costs (one).

    See the module docstring (shrinking) for the cases; everything here is exact.
    """
    edges: list[_ClassEdge] = []
    merged: dict[tuple, _ClassFanout] = {}
    unary: list[tuple[int, np.ndarray]] = []
    for fanout in fanouts:
        u = owner[fanout.u]
        rows = np.asarray(fanout.u_class)[pick[fanout.u]]  # per candidate of u's owner
        need: dict[int, np.ndarray] = {}  # reader owner -> its candidates x layouts
        for j, r in enumerate(fanout.readers):
            mask = fanout.need_mask(j)[pick[r]]
            need[owner[r]] = need[owner[r]] | mask if owner[r] in need else mask
        if not need:
            continue
        table = COST_SCALE * fanout.class_cost
        keep = np.logical_or.reduce([m.any(axis=0) for m in need.values()]) & (table[distinct(rows)] > 0).any(axis=0)
        need = {o: m[:, keep] for o, m in sorted(need.items()) if m[:, keep].any()}
        table = table[:, keep]
        if not need:
            continue
        others = [o for o in need if o != u]
        own = need.get(u, np.zeros((len(rows), table.shape[1]), dtype=bool))
        if not others:
            unary.append((u, (table[rows] * own).sum(axis=1)))
        elif len(others) == 1:
            edges.append(_fanout_edge(u, rows, own, others[0], need[others[0]], table))
        else:
            row_ids, u_class = np.unique(rows, return_inverse=True)
            readers = tuple((o, need[o]) for o in need)
            key = (u, u_class.tobytes(), tuple((o, m.shape, m.tobytes()) for o, m in readers))
            cost = table[row_ids]
            if key in merged:
                cost = cost + merged[key].cost
            merged[key] = _ClassFanout(u, u_class.ravel(), readers, cost)
    compact = []
    for fanout in merged.values():
        cost, row_of = np.unique(fanout.cost, axis=0, return_inverse=True)
        compact.append(_ClassFanout(fanout.u, row_of.ravel()[fanout.u_class], fanout.readers, cost))
    return edges, tuple(compact), unary


def _fanout_edge(u: int, rows: np.ndarray, own: np.ndarray, v: int, theirs: np.ndarray,
                 table: np.ndarray) -> _ClassEdge:
    """A fanout between two solved nodes as an edge: classes (row, own layouts) against (their layouts)."""
    u_keys, u_class = np.unique(np.column_stack([rows, own]), axis=0, return_inverse=True)
    v_keys, v_class = np.unique(theirs, axis=0, return_inverse=True)
    cost = np.array([[table[key[0], key[1:].astype(bool) | layouts].sum() for layouts in v_keys] for key in u_keys])
    return _ClassEdge(u, v, u_class.ravel(), v_class.ravel(), cost)


def _first_seen_classes(classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Classes renumbered 0, 1, ... in order of first appearance, and the old class of each new one."""
    old, first, inverse = np.unique(classes, return_index=True, return_inverse=True)
    order = np.argsort(first)
    renumber = np.empty(len(order), dtype=int)
    renumber[order] = np.arange(len(order))
    return renumber[inverse.ravel()], old[order]


def _merge_equal_classes(edge: _ClassEdge) -> _ClassEdge:
    """The same edge with classes of equal cost rows (columns) merged into one."""
    rows, row_of = np.unique(edge.cost, axis=0, return_inverse=True)
    cols, col_of = np.unique(rows, axis=1, return_inverse=True)
    return _ClassEdge(edge.u, edge.v, row_of.ravel()[edge.u_class], col_of.ravel()[edge.v_class], cols)


def _separable_parts(edge: _ClassEdge) -> list[tuple[int, np.ndarray]] | None:
    """If ``C[a, b] == f(a) + g(b)``, the unary costs ``f`` and ``g`` that replace the edge; else None."""
    table = edge.cost
    f = table[:, 0]
    g = table[0, :] - table[0, 0]
    if np.max(np.abs(table - f[:, None] - g[None, :])) > _SEPARABLE_RTOL * float(np.max(np.abs(table))):
        return None
    return [(edge.u, f[edge.u_class]), (edge.v, g[edge.v_class])]


def _indicator(owner: int, pick: np.ndarray, allowed: np.ndarray, sign: float = 1.0) -> dict:
    """Terms of ``sign * [the node's candidate is in allowed]`` over its owner's ``x``."""
    return {(owner, int(k)): sign for k in np.flatnonzero(allowed[pick])}


def _add_terms(*parts: dict) -> dict:
    total: dict = {}
    for part in parts:
        for key, coef in part.items():
            total[key] = total.get(key, 0.0) + coef
    return {key: coef for key, coef in total.items() if coef != 0}


def _fixed_rows(problem: SearchProblem, owner: list[int], pick: list[np.ndarray]) -> tuple[_Row, ...]:
    rows = []
    for i, k in sorted(problem.fixed.items()):
        n = problem.nodes[i].n
        if not 0 <= k < n:
            raise PlanningError(f"node {problem.nodes[i].name!r} is fixed to candidate {k}, but has {n} candidates")
        rows.append(_Row(f"fixed{i}", _indicator(owner[i], pick[i], np.arange(n) == k), 1.0))
    return tuple(rows)


def _same_rows(problem: SearchProblem, owner: list[int], pick: list[np.ndarray]) -> tuple[_Row, ...]:
    rows = []
    for j, (a, a_class, b, b_class) in enumerate(problem.same):
        a_class, b_class = np.asarray(a_class), np.asarray(b_class)
        for c in sorted(set(a_class.tolist()) | set(b_class.tolist())):
            terms = _add_terms(_indicator(owner[a], pick[a], a_class == c),
                               _indicator(owner[b], pick[b], b_class == c, -1.0))
            rows.append(_Row(f"same{j}_class{c}", terms, 0.0))
    return tuple(rows)


def _follow_rows(problem: SearchProblem) -> tuple[_Row, ...]:
    """Unshrunk followers: ``x[f, j] == sum of x[parent, k] with follow_map[k] == j``."""
    rows = []
    for f, node in enumerate(problem.nodes):
        if node.follows is None:
            continue
        parent = problem.nodes[node.follows]
        follow_map = np.asarray(node.follow_map)
        for j in range(node.n):
            terms = _add_terms({(f, j): 1.0}, _indicator(node.follows, np.arange(parent.n), follow_map == j, -1.0))
            rows.append(_Row(f"follow{f}_{j}", terms, 0.0))
    return tuple(rows)


def _memory(problem: SearchProblem, owner: list[int], pick: list[np.ndarray],
            sizes: list[int]) -> tuple[tuple[np.ndarray, ...] | None, float]:
    """Memory per solved candidate in units of the budget, and the budget in those units."""
    budget = problem.memory_budget
    if budget is None or all(node.memory is None for node in problem.nodes):
        return None, 0.0
    unit = float(budget) if budget > 0 else 1.0
    terms = [(owner[i], np.asarray(node.memory, dtype=float)[pick[i]] / unit)
             for i, node in enumerate(problem.nodes) if node.memory is not None]
    return _per_solved_node(terms, sizes), float(budget) / unit


# -- model: problem, variables, objective, constraints -------------------------------------

@dataclass(frozen=True, slots=True)
class _Model:
    problem: pulp.LpProblem
    x: dict[tuple[int, int], pulp.LpVariable]


def _build_model(data: _Data) -> _Model:
    """The PuLP model of ``data`` (see the module docstring for the formulation)."""
    _pulp()
    model = pulp.LpProblem("shardplan_strategies", pulp.LpMinimize)
    x = {(o, k): _new_variable(model, f"x_{o}_{k}", 0, 1, pulp.LpBinary)
         for o, cost in enumerate(data.cost) for k in range(len(cost))}
    z = {(e, a, b): _new_variable(model, f"z_{e}_{a}_{b}", 0, None, pulp.LpContinuous)
         for e, edge in enumerate(data.edges) for a in range(edge.cost.shape[0]) for b in range(edge.cost.shape[1])}
    y = {(f, L): _new_variable(model, f"y_{f}_{L}", 0, 1, pulp.LpContinuous)
         for f, fanout in enumerate(data.fanouts) for L in range(fanout.cost.shape[1])}
    w = {(f, a, L): _new_variable(model, f"w_{f}_{a}_{L}", 0, None, pulp.LpContinuous)
         for f, fanout in enumerate(data.fanouts) if fanout.cost.shape[0] > 1
         for a in range(fanout.cost.shape[0]) for L in range(fanout.cost.shape[1])}
    model.setObjective(pulp.LpAffineExpression(
        [(x[o, k], float(c)) for o, cost in enumerate(data.cost) for k, c in enumerate(cost)]
        + [(z[key], float(data.edges[key[0]].cost[key[1], key[2]])) for key in z]
        + [(w[key], float(data.fanouts[key[0]].cost[key[1], key[2]])) for key in w]
        + [(y[f, L], float(fanout.cost[0, L])) for f, fanout in enumerate(data.fanouts)
           if fanout.cost.shape[0] == 1 for L in range(fanout.cost.shape[1])]))
    for o, cost in enumerate(data.cost):
        model += pulp.lpSum(x[o, k] for k in range(len(cost))) == 1, f"one_hot{o}"
    for e, edge in enumerate(data.edges):
        for a in range(edge.cost.shape[0]):
            model += (pulp.lpSum(z[e, a, b] for b in range(edge.cost.shape[1]))
                      == pulp.lpSum(x[edge.u, k] for k in np.flatnonzero(edge.u_class == a)), f"edge{e}_u{a}")
        for b in range(edge.cost.shape[1]):
            model += (pulp.lpSum(z[e, a, b] for a in range(edge.cost.shape[0]))
                      == pulp.lpSum(x[edge.v, k] for k in np.flatnonzero(edge.v_class == b)), f"edge{e}_v{b}")
    for f, fanout in enumerate(data.fanouts):
        rows, layouts = fanout.cost.shape
        for j, (o, need) in enumerate(fanout.readers):
            for L in range(layouts):
                takers = np.flatnonzero(need[:, L])
                if takers.size:
                    model += (pulp.LpAffineExpression([(y[f, L], 1.0)] + [(x[o, int(k)], -1.0) for k in takers])
                              >= 0, f"fanout{f}_r{j}_L{L}")
        if rows == 1:
            continue
        for L in range(layouts):
            model += pulp.lpSum(w[f, a, L] for a in range(rows)) - y[f, L] == 0, f"fanout{f}_L{L}"
            for a in range(rows):
                model += (w[f, a, L] - pulp.lpSum(x[fanout.u, int(k)] for k in np.flatnonzero(fanout.u_class == a))
                          <= 0, f"fanout{f}_a{a}_L{L}")
    for row in data.rows:
        model += pulp.LpAffineExpression([(x[key], coef) for key, coef in row.terms.items()]) == row.rhs, row.name
    memory = [(x[o, k], float(m)) for o, row in enumerate(data.memory or ()) for k, m in enumerate(row) if m]
    if memory:
        model += pulp.LpAffineExpression(memory) <= data.memory_rhs, "memory"
    return _Model(model, x)


def _new_variable(model: pulp.LpProblem, name: str, low: float | None, up: float | None,
                  category: str) -> pulp.LpVariable:
    """A variable of ``model``: through the problem where PuLP supports it (3.3+, 4.x)."""
    if hasattr(model, "add_variable"):
        return model.add_variable(name, low, up, category)
    return pulp.LpVariable(name, low, up, category)


# -- solve: run the solver, check the status, read the values -------------------------------

@dataclass(frozen=True, slots=True)
class _Outcome:
    """The solver's verdict, before any value is read."""

    status: str
    solution: bool  # a feasible solution is available
    optimal: bool
    infeasible: bool
    gap: float | None
    time_s: float
    bound: float | None = None  # the solver's best (dual) bound on the objective, in model units


def _bound_text(bound: float | None, gap: float | None) -> str:
    """``best bound 1.23 ms, gap 0.50%`` as the MIP solver reports them (its bound is in model units)."""
    parts = []
    if bound is not None and math.isfinite(bound):
        parts.append(f"best bound {format_seconds(max(bound, 0.0) / COST_SCALE)}")
    parts.append(f"gap {100 * gap:.2f}%" if gap is not None and math.isfinite(gap) else "no plan yet")
    return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class _Backend:
    """A MIP solver (``run``), or variable elimination (``eliminate``), which hands the models it cannot solve
    to the MIP solver of ``auto`` when ``hand_over``."""

    name: str
    run: Callable[[pulp.LpProblem, float | None, Progress], _Outcome] | None
    eliminate: bool = False
    hand_over: bool = False


def _solve(problem: SearchProblem, data: _Data, backend: _Backend, time_limit: float | None,
           deadline: float | None, progress: Progress = SILENT, label: str = "ILP solve") -> IlpResult:
    """Solve ``data`` by variable elimination where it can, else build its model and run the MIP solver
    until ``deadline`` at most; ``progress`` hears a task named for the solver that runs."""
    if backend.eliminate:
        with task(progress, f"{label} ({ELIMINATION})"):
            solved = _eliminate(problem, data, fallback=backend.hand_over)
        if solved is not None:
            return solved
        backend = _mip_backend("auto")
    with task(progress, f"{label} ({backend.name})"):
        progress.detail("building the model")
        model = _build_model(data)
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            report = SolverReport(backend.name, "not run", False, None, 0.0, model.problem.numVariables(),
                                  model.problem.numConstraints(), len(data.cost), data.tied)
            raise SolverFailed(f"{backend.name} stopped without a solution: the time limit ({time_limit:.3g} s) ran "
                               "out while its cost tables and model were built, before it started", report=report)
        progress.detail("solving")
        outcome = backend.run(model.problem, left, progress)
        progress.detail(_bound_text(outcome.bound, outcome.gap))
    report = SolverReport(backend.name, outcome.status, outcome.optimal, outcome.gap, outcome.time_s,
                          model.problem.numVariables(), model.problem.numConstraints(), len(data.cost), data.tied)
    if outcome.infeasible:
        raise _Infeasible(data.tied)
    if not outcome.solution:
        limit = f" (time limit {time_limit:.3g} s)" if time_limit is not None else ""
        raise SolverFailed(f"{backend.name} stopped without a solution: {outcome.status}{limit}", report=report)
    choice = _read_choice(data, model)
    if not problem.feasible(choice):
        raise SolverFailed(f"{backend.name} returned a choice that violates the constraints "
                           "(numerical tolerance); try the other solver", report=report)
    return IlpResult(choice, problem.objective(choice), report)


def _eliminate(problem: SearchProblem, data: _Data, fallback: bool) -> IlpResult | None:
    """The optimum of ``data`` by variable elimination (:mod:`planner.searches.elimination`); None, for the
    MIP solver to take over (``fallback``), when its tables would be too large or the memory budget binds.

    The memory row is left out of the factors: an optimum that fits the budget is the optimum with it.
    """
    start = time.perf_counter()
    sizes, factors = _factors(data)
    candidates = sum(len(cost) for cost in data.cost)

    def report(status: str, optimal: bool) -> SolverReport:
        return SolverReport(ELIMINATION, status, optimal, 0.0 if optimal else None, time.perf_counter() - start,
                            candidates, len(factors), len(data.cost), data.tied)

    try:
        values, _ = elimination.minimise(sizes, factors)
    except elimination.Infeasible:
        raise _Infeasible(data.tied) from None
    except elimination.TooLarge as e:
        if fallback:
            return None
        raise SolverFailed(f"{ELIMINATION} cannot solve this model: {e}; use --solver highs",
                           report=report("too large", False)) from None
    picked = values[:len(data.cost)]
    if data.memory is not None:
        used = sum(float(row[k]) for row, k in zip(data.memory, picked))
        if used > data.memory_rhs * (1 + 1e-9):
            if fallback:
                return None
            raise SolverFailed(f"{ELIMINATION} cannot honour the memory budget (the unconstrained optimum "
                               "exceeds it); use --solver highs", report=report("memory budget binds", False))
    choice = tuple(int(data.pick[i][picked[o]]) for i, o in enumerate(data.owner))
    if not problem.feasible(choice):
        raise SolverFailed(f"{ELIMINATION} returned a choice that violates the constraints",
                           report=report("infeasible choice", False))
    return IlpResult(choice, problem.objective(choice), report("Optimal", True))


def _factors(data: _Data) -> tuple[list[int], list[elimination.Factor]]:
    """``data`` as cost tables over its solved nodes (model units; ``inf`` where a row is broken).

    A fanout is one table over its producer and readers (:func:`_fanout_factor`); where that table
    would be too large, one two-candidate variable ``y`` per layout (0: not copied, 1: copied): a
    factor ``(u, y)`` charges the producer's row when ``y`` is 1 and a factor ``(r_j, y)`` forbids ``y``
    0 when the reader's candidate needs the layout. As costs are ``>= 0`` the minimum copies exactly the
    layouts some reader needs: the ILP's ``y``, exactly.
    """
    sizes = [len(cost) for cost in data.cost]
    factors = [elimination.Factor((o,), cost) for o, cost in enumerate(data.cost)]
    for edge in data.edges:
        factors.append(elimination.Factor((edge.u, edge.v), edge.cost, (edge.u_class, edge.v_class)))
    two = np.arange(2)
    for fanout in data.fanouts:
        whole = _fanout_factor(fanout)
        if whole is not None:
            factors.append(whole)
            continue
        for L in range(fanout.cost.shape[1]):
            y = len(sizes)
            sizes.append(2)
            charge = fanout.cost[:, L]
            factors.append(elimination.Factor((fanout.u, y), np.column_stack([np.zeros_like(charge), charge]),
                                              (fanout.u_class, two)))
            for o, need in fanout.readers:
                forbid = np.array([[0.0, 0.0], [np.inf, 0.0]])  # rows: the layout not needed, needed
                factors.append(elimination.Factor((o, y), forbid, (need[:, L].astype(np.intp), two)))
    by_scope: dict[tuple[int, ...], list[_Row]] = {}
    for row in data.rows:
        by_scope.setdefault(tuple(sorted({o for o, _ in row.terms})), []).append(row)
    for scope, rows in by_scope.items():
        ok = np.ones([sizes[o] for o in scope], dtype=bool)
        for row in rows:
            value = np.zeros((1,) * len(scope))
            for axis, o in enumerate(scope):
                coef = np.zeros(sizes[o])
                for (owner, k), c in row.terms.items():
                    if owner == o:
                        coef[k] += c
                value = value + coef.reshape([-1 if a == axis else 1 for a in range(len(scope))])
            ok &= np.abs(value - row.rhs) <= 1e-9
        factors.append(elimination.Factor(scope, np.where(ok, 0.0, np.inf)))
    return sizes, factors


def _fanout_factor(fanout: _ClassFanout) -> elimination.Factor | None:
    """A fanout as one table over its producer and reader owners, each indexed by the classes that tell
    apart what it brings (the producer: its row and, if it reads too, its needed layouts; a reader: its
    needed layouts): the cost of every layout some participant needs, from the producer's row. None when
    the table (times the layouts) would pass :data:`~planner.searches.elimination.MAX_CELLS`."""
    need = dict(fanout.readers)
    owners = tuple(sorted({fanout.u} | set(need)))
    layouts = fanout.cost.shape[1]
    classes, rows, masks = [], [], []
    for o in owners:
        count = len(fanout.u_class) if o == fanout.u else need[o].shape[0]
        row = fanout.u_class if o == fanout.u else np.zeros(count, dtype=int)
        keys = np.column_stack([row, need.get(o, np.zeros((count, layouts), dtype=bool))]).astype(int)
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        classes.append(inverse.ravel())
        rows.append(unique[:, 0])
        masks.append(unique[:, 1:].astype(bool))
    shape = tuple(len(m) for m in masks)
    if math.prod(shape) * max(layouts, 1) > elimination.MAX_CELLS:
        return None
    axes = len(owners)
    u = owners.index(fanout.u)
    if not layouts:
        return elimination.Factor(owners, np.zeros(shape), tuple(classes))
    # the layouts a cell needs, as bits: the union of its owners' masks; then each distinct (producer class,
    # union) is priced once, summed as one row as a cell would be (cells far outnumber them, and they are at most
    # as many as the cells, so this stays within the limit above)
    if layouts + int(shape[u]).bit_length() <= 63:  # each cell's (producer class, union) as one integer
        bit = np.left_shift(np.uint64(1), np.arange(layouts, dtype=np.uint64))
        union = np.zeros(shape, dtype=np.uint64)
        for a, mask in enumerate(masks):
            union |= (mask.astype(np.uint64) @ bit).reshape([-1 if i == a else 1 for i in range(axes)])
        producer = np.arange(shape[u], dtype=np.uint64).reshape([-1 if i == u else 1 for i in range(axes)])
        distinct, which = np.unique((union | (producer << np.uint64(layouts))).ravel(), return_inverse=True)
        needed = ((distinct[:, None] >> np.arange(layouts, dtype=np.uint64)) & np.uint64(1)).astype(bool)
        charge = fanout.cost[rows[u][(distinct >> np.uint64(layouts)).astype(np.intp)]]
        return elimination.Factor(owners, (needed * charge).sum(axis=-1)[which.ravel()].reshape(shape),
                                  tuple(classes))
    words = np.zeros(shape + (-(-layouts // 8),), dtype=np.uint8)
    for a, mask in enumerate(masks):
        words |= np.packbits(mask, axis=1).reshape([-1 if i == a else 1 for i in range(axes)] + [words.shape[-1]])
    producer = np.broadcast_to(np.arange(shape[u], dtype=np.uint32).reshape([-1 if i == u else 1 for i in
                                                                               range(axes)]), shape)
    keys = np.hstack([producer.reshape(-1, 1).view(np.uint8), words.reshape(-1, words.shape[-1])])
    keys = np.ascontiguousarray(keys)
    distinct, which = np.unique(keys.view(np.dtype((np.void, keys.shape[1]))).ravel(), return_inverse=True)
    distinct = np.frombuffer(distinct.tobytes(), dtype=np.uint8).reshape(len(distinct), -1)
    needed = np.unpackbits(distinct[:, 4:], axis=1, count=layouts).astype(bool)
    charge = fanout.cost[rows[u][np.ascontiguousarray(distinct[:, :4]).view(np.uint32).ravel()]]
    return elimination.Factor(owners, (needed * charge).sum(axis=-1)[which.ravel()].reshape(shape), tuple(classes))


def _read_choice(data: _Data, model: _Model) -> tuple[int, ...]:
    """Each original node's candidate: its owner's largest ``x``, mapped through ``pick``."""
    picked = []
    for o, cost in enumerate(data.cost):
        values = [model.x[o, k].varValue or 0.0 for k in range(len(cost))]
        picked.append(int(np.argmax(values)))
    return tuple(int(data.pick[i][picked[o]]) for i, o in enumerate(data.owner))


def _run_highs(model: pulp.LpProblem, time_limit: float | None, progress: Progress = SILENT) -> _Outcome:
    _pulp()
    import highspy

    kinds = highspy.cb.HighsCallbackType
    listen = {} if progress is SILENT else {  # nobody listens: HiGHS runs without calling back into Python
        "callbackTuple": (_highs_listener(progress), None),
        "callbacksToActivate": [kinds.kCallbackMipImprovingSolution, kinds.kCallbackMipInterrupt]}
    solver = pulp.HiGHS(msg=False, timeLimit=time_limit, gapRel=0.0, gapAbs=0.0, threads=1, **listen)
    start = time.perf_counter()
    with _quiet_stdout():
        model.solve(solver)
    elapsed = time.perf_counter() - start
    highs = model.solverModel
    status = highs.modelStatusToString(highs.getModelStatus())
    info = highs.getInfo()
    gap, bound = info.mip_gap, info.mip_dual_bound
    outcome = _outcome(model, status, gap if math.isfinite(gap) else None, elapsed)
    return replace(outcome, bound=bound if math.isfinite(bound) else None)


def _highs_listener(progress: Progress, every_s: float = 0.1):
    """A HiGHS callback that tells ``progress`` the best bound and gap HiGHS reports while it branches: at
    once for each better plan it finds, else at most every ``every_s`` seconds."""
    import highspy

    improving = int(highspy.cb.HighsCallbackType.kCallbackMipImprovingSolution)
    last = [0.0]

    def listen(kind, message, out, into, user_data) -> None:
        now = time.monotonic()
        if int(kind) == improving or now - last[0] >= every_s:
            last[0] = now
            progress.detail(_bound_text(out.mip_dual_bound, out.mip_gap))

    return listen


def _run_cbc(model: pulp.LpProblem, time_limit: float | None, progress: Progress = SILENT) -> _Outcome:
    _pulp()
    with tempfile.TemporaryDirectory(prefix="shardplan-cbc-") as tmp:
        log_path = os.path.join(tmp, "cbc.log")
        solver = pulp.COIN_CMD(msg=False, timeLimit=time_limit, gapRel=0.0, gapAbs=0.0, threads=1,
                               path=_cbc_path(), logPath=log_path)
        start = time.perf_counter()
        model.solve(solver)
        elapsed = time.perf_counter() - start
        with open(log_path) as log:
            text = log.read()
    result = re.search(r"^Result - (.+)$", text, re.MULTILINE)
    status = result.group(1).strip() if result else pulp.LpSolution[model.sol_status]
    outcome = _outcome(model, status, _cbc_gap(model, text), elapsed)
    if outcome.infeasible and "infeasible" not in status.lower() and model.sol_status != pulp.LpSolutionInfeasible:
        # CBC stopped on its time limit before a first solution (its log says "No Solution Found", or it had no
        # time to say anything), which PuLP reads as an infeasible problem: only a proof of infeasibility is one
        outcome = replace(outcome, infeasible=False)
    return outcome


def _outcome(model: pulp.LpProblem, status: str, gap: float | None, elapsed: float) -> _Outcome:
    """Classify PuLP's solution status (the same for every solver PuLP drives)."""
    optimal = model.sol_status == pulp.LpSolutionOptimal
    solution = model.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    infeasible = model.status == pulp.LpStatusInfeasible or model.sol_status == pulp.LpSolutionInfeasible
    if optimal and gap is None:
        gap = 0.0
    return _Outcome(status, solution, optimal, infeasible, gap if solution else None, elapsed)


def _cbc_gap(model: pulp.LpProblem, log: str) -> float | None:
    """CBC's relative gap from the lower bound in its log; 0.0 once optimal, None if unknown."""
    if model.sol_status == pulp.LpSolutionOptimal:
        return 0.0
    bound = re.search(r"^Lower bound:\s*(\S+)", log, re.MULTILINE)
    value = pulp.value(model.objective) if model.sol_status == pulp.LpSolutionIntegerFeasible else None
    if bound is None or value is None:
        return None
    try:
        lower = float(bound.group(1))
    except ValueError:
        return None
    return max(0.0, value - lower) / max(abs(value), 1e-12)


def _cbc_path() -> str | None:
    """A ``cbc`` on the PATH, else the one bundled with PuLP 3 (None if neither exists)."""
    _pulp()
    found = shutil.which("cbc")
    if found:
        return found
    bundled = getattr(getattr(pulp, "PULP_CBC_CMD", None), "pulp_cbc_path", None)
    return bundled if bundled and os.access(bundled, os.X_OK) else None


def _highs_available() -> bool:
    _pulp()
    with _quiet_stdout():
        return bool(pulp.HiGHS(msg=False).available())


@contextlib.contextmanager
def _quiet_stdout():
    """Keep the solver's native stdout (HiGHS 1.16 prints a banner whatever ``msg`` says) out of the
    planner's output, where ``--format json`` must stay JSON: file descriptor 1 points at /dev/null."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no real stdout (captured, closed): nothing to protect
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _backend(solver: str) -> _Backend:
    """The solver to run: ``solver`` if available; for ``"auto"`` variable elimination, which hands the models
    it cannot solve to :func:`_mip_backend` (HiGHS, else CBC)."""
    if solver not in SOLVERS:
        raise PlanningError(f"unknown ILP solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    if solver in (ELIMINATION, "auto"):
        return _Backend(ELIMINATION, None, eliminate=True, hand_over=solver == "auto")
    return _mip_backend(solver)


def _mip_backend(solver: str) -> _Backend:
    """The MIP solver ``solver`` (``highs``, ``cbc``, or ``auto``: HiGHS, else CBC), if available."""
    highs = _Backend("HiGHS", _run_highs) if _highs_available() else None
    cbc = _Backend("CBC", _run_cbc) if _cbc_path() else None
    if solver == "highs" and highs is None:
        raise PlanningError("the HiGHS solver needs the optional highspy package: pip install highspy")
    if solver == "cbc" and cbc is None:
        raise PlanningError("no CBC binary found: put cbc on the PATH (PuLP 4: pip install pulp[cbc])")
    chosen = {"highs": highs, "cbc": cbc}.get(solver) or highs or cbc
    if chosen is None:
        raise PlanningError("no ILP solver available: pip install highspy (or install cbc)")
    return chosen


# -- messages ------------------------------------------------------------------------------

def _minimum_memory(problem: SearchProblem) -> float:
    """A lower bound on any choice's memory (bytes): each node's smallest candidate."""
    return sum(float(np.min(node.memory)) for node in problem.nodes if node.memory is not None and node.n)


def _check_memory_lower_bound(problem: SearchProblem) -> None:
    budget = problem.memory_budget
    if budget is not None and _minimum_memory(problem) > budget * (1 + 1e-9):
        raise PlanningError(_infeasible_message(problem))


def _infeasible_message(problem: SearchProblem) -> str:
    """Why no choice exists, naming the memory budget and the least memory any choice needs."""
    budget = problem.memory_budget
    parts = []
    if budget is not None:
        least = _minimum_memory(problem)
        if least > budget * (1 + 1e-9):
            return (f"no choice fits the memory budget of {format_bytes(budget)} per device: every choice "
                    f"needs at least {format_bytes(least)} (the sum of each node's smallest candidate)")
        parts.append(f"the memory budget of {format_bytes(budget)} per device (each node's smallest "
                     f"candidate alone needs {format_bytes(least)})")
    if problem.fixed:
        parts.insert(0, "the fixed candidates")
    if problem.same:
        parts.insert(0, "the shard_as groups (tensors laid out alike)")
    return f"no choice satisfies {' together with '.join(parts) or 'the constraints'}"


def _check_pulp_version(module) -> None:
    major = int(module.__version__.split(".")[0])
    if not SUPPORTED_PULP[0] <= major < SUPPORTED_PULP[1]:
        raise ImportError(f"planner.searches.ilp supports PuLP {SUPPORTED_PULP[0]}.x "
                          f"(setup.cfg pins pulp>=3.0,<4); found {module.__version__}")


pulp = None
"""The PuLP module once :func:`_pulp` imported it: a model that elimination solves never loads PuLP or its solvers."""


def _pulp():
    """PuLP, imported and its version checked on first use."""
    global pulp
    if pulp is None:
        import pulp as module

        _check_pulp_version(module)
        pulp = module
    return pulp


# -- the search ``ilp``: the model's optimum, shrunk first, breadth-first propagation's plan in hand -------------

def decide(m: Model, deadline: float | None, notes: list[str], request: Request) -> Decision:
    """``m`` decided by the ILP, run until ``deadline`` (``time.monotonic()``; None: no limit) at most,
    building its tables and model included; breadth-first propagation's plan, made first, is the plan
    in hand it returns when the ILP cannot finish in time or the solver fails."""
    progress = request.progress
    try:
        with task(progress, "breadth-first plan (the ILP's fallback)"):
            reference = bfs.decide(m)
        bound = m.problem.objective(reference.choice)
    except PlanningError:  # BFS's greedy walk can miss a plan the constraints allow: the ILP decides
        reference, bound = None, math.inf
    solver = request.solver
    try:
        # the shrunk problem first (folded followers, tied layers); if its optimum is worse than
        # breadth-first propagation's plan, the whole problem
        for shrink in (True, False):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                if reference is None:  # nothing in hand: the ILP answers, past the limit
                    left = None
                else:
                    notes.append("the time limit passed before the ILP could finish; this phase keeps "
                                 "breadth-first propagation's plan")
                    return reference
            problem = with_shrink_hints(m) if shrink else m.problem
            solved = solve_ilp(problem, time_limit=left, solver=solver, shrink=shrink, progress=progress)
            if solved.objective <= bound * (1 + 1e-9):
                break
        if reference is not None and not solved.report.optimal and solved.objective > bound:
            notes.append(f"the ILP solver stopped before its optimum ({solved.report.status}) at a plan worse than "
                         "breadth-first propagation's, which this phase keeps")
            return reference
        return Decision(m, solved.choice, None, solved.report, "ilp")
    except SolverFailed as e:
        if reference is None:
            raise
        notes.append(f"the ILP solver did not finish ({e.message}); falling back to breadth-first propagation")
    return reference


def search(request: Request) -> Decision:
    """The search ``ilp``: the optimum of every phase's model (:mod:`planner.searches.phased`), with a
    time limit over the whole run and breadth-first propagation's plan as the fallback."""
    notes = ignored_annotations(request.graph, "ilp")
    decision = phased.run(phased.prepared(request), "ilp", decide)
    return replace(decision, notes=(*notes, *decision.notes))
