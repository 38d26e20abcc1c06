"""The strategy-selection problem every search algorithm solves: plain data, no graph.

A :class:`SearchProblem` has one :class:`Node` per decision (an op's strategy, or the
layout of a source tensor read by several ops), each with ``n`` candidates and a
unary cost per candidate, and one :class:`Edge` per data dependency with a cost per
pair of candidates. Costs are in seconds (compute, communication, redistribution);
memory is in bytes per device. BFS (:mod:`planner.searches.bfs`), the ILP
(:mod:`planner.searches.ilp`) and brute force all take this one interface and
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

**Fanouts** (readers share a redistribution). An edge charges every (tensor,
reader) pair its own redistribution; a :class:`Fanout` charges one copy per
distinct layout the readers of one tensor need. With producer ``u``, readers
``r_1 .. r_m`` and ``needs[j][c]`` the layouts reader ``r_j`` needs when it takes
candidate ``c``::

    fanout cost(choice) = sum_{L in N} class_cost[u_class[choice[u]], L]
    where N = union_j needs[j][choice[r_j]]

so two readers needing the same layout ``L`` pay ``class_cost[., L]`` once.
:meth:`SearchProblem.objective` adds every fanout's cost to the unary and edge costs.

**Links** give search algorithms one view of edges and fanouts: link ids ``0 ..
len(edges) - 1`` are the edges, ``len(edges) .. len(edges) + len(fanouts) - 1``
the fanouts. :meth:`SearchProblem.neighbours` lists ``(neighbour, link)`` pairs of
a node (a fanout's producer is a neighbour of each reader and each reader of the
producer; readers are not neighbours of each other through it), and
:meth:`SearchProblem.link_costs` gives a link's cost for each candidate of one
node with the other participants held: for a reader, only the layouts no other
counted reader already needs, so a shared copy is never counted twice.

>>> f = Fanout(0, np.array([0, 1]), (1, 2), (((), (0,)), ((0,), (1,))),
...            np.array([[3.0, 4.0], [0.0, 1.0]]))
>>> q = SearchProblem(tuple(Node(n, np.zeros(2)) for n in "urs"), fanouts=(f,))
>>> f.needed([0, 1, 0]), q.objective([0, 1, 0])   # both readers need layout 0: paid once
(frozenset({0}), 3.0)
>>> q.objective([0, 1, 1])                          # layouts 0 and 1
7.0
>>> q.neighbours(0), q.neighbours(1)
(((1, 0), (2, 0)), ((0, 0),))
>>> q.link_costs(0, 2, [0, 1, 0])                   # reader s: layout 0 is already paid
array([0., 4.])
>>> q.link_costs(0, 2, [0, 1, 0], decided=[True, False, False])
array([3., 4.])
>>> q.link_costs(0, 0, [0, 1, 1])                   # producer: layouts 0 and 1, per candidate
array([7., 1.])
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from planner.caches import ByIdentity
from planner.redistribution.state import distinct  # np.unique without its import of numpy.ma

_Adjacency = tuple[tuple[tuple[int, int], ...], ...]


class LazyTable:
    """A ``(rows, columns)`` cost table whose cells are computed the first time they are read.

    ``cell(row, column) -> float`` gives one cell (seconds, finite, ``>= 0``). Indexing
    reads like a numpy array's (``t[i, cols]``, ``t[:, mask]``, ``t[np.ix_(a, b)]``) and
    computes only the rows and columns the index names (their cross product);
    ``np.asarray(t)`` computes every cell. Breadth-first propagation reads one row per
    link and decided neighbour, so most cells of a large table are never computed;
    the ILP reads them all (:meth:`SearchProblem.dense`).

    >>> calls = []
    >>> t = LazyTable((3, 4), lambda a, b: calls.append((a, b)) or float(10 * a + b))
    >>> t[1, [0, 3]].tolist(), len(calls)
    ([10.0, 13.0], 2)
    >>> float(t[1, 3]), len(calls)             # computed once
    (13.0, 2)
    >>> np.asarray(t)[2].tolist(), len(calls)
    ([20.0, 21.0, 22.0, 23.0], 12)
    """

    __slots__ = ("shape", "_cell", "_values", "_known", "_left")
    ndim = 2

    def __init__(self, shape: tuple[int, int], cell):
        self.shape = (int(shape[0]), int(shape[1]))
        self._cell = cell
        self._values: np.ndarray | None = None  # allocated when a cell is first read: a table nobody reads costs none
        self._known: np.ndarray | None = None
        self._left = self.shape[0] * self.shape[1]  # cells not computed yet (identical layers share a table)

    def _fill(self, rows: np.ndarray, cols: np.ndarray) -> None:
        """Compute the cells of ``rows`` x ``cols`` not known yet, row by row, each row's in ``cols`` order."""
        if not self._left:
            return
        if self._values is None:
            self._values = np.zeros(self.shape)
            self._known = np.zeros(self.shape, dtype=bool)
        known, cell = self._known, self._cell
        todo_rows, todo_cols = np.nonzero(~known[np.ix_(rows, cols)])  # row-major: the order cells are computed in
        at_rows, at_cols = rows[todo_rows], cols[todo_cols]
        out = []
        for a, b in zip(at_rows.tolist(), at_cols.tolist()):
            t = float(cell(a, b))
            if not (t >= 0.0 and math.isfinite(t)):
                raise ValueError(f"cost table cell ({a}, {b}) must be finite and >= 0, got {t}")
            out.append(t)
        self._values[at_rows, at_cols] = out
        known[at_rows, at_cols] = True
        self._left -= len(out)

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key, slice(None))
        if len(key) != 2:
            raise IndexError(f"a cost table has 2 dimensions; got the index {key!r}")
        if not self._left and self._values is not None:  # every cell known (a table identical layers share)
            return self._values[key]
        rows = distinct(np.arange(self.shape[0])[key[0]])
        cols = distinct(np.arange(self.shape[1])[key[1]])
        self._fill(rows, cols)
        return self._values[key]

    def __array__(self, dtype=None, copy=None):
        self._fill(np.arange(self.shape[0]), np.arange(self.shape[1]))
        out = self._values.copy()
        return out if dtype is None else out.astype(dtype)

    def computed(self) -> int:
        """How many cells have been computed so far."""
        return 0 if self._known is None else int(self._known.sum())


def dense(table) -> np.ndarray:
    """``table`` as a numpy array (every cell of a :class:`LazyTable` computed)."""
    return np.asarray(table, dtype=float)


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
    """Cost (s) of every pair of candidates of nodes ``u`` and ``v``, also in class form.

    ``forward``: when ``class_cost`` also prices the way back (training: the transposes of the forward
    redistributions), the forward part alone over the same classes, for reports; None when
    ``class_cost`` is all forward. The searches read ``class_cost`` only.
    """

    u: int
    v: int
    u_class: np.ndarray
    v_class: np.ndarray
    class_cost: np.ndarray
    label: str = ""
    forward: np.ndarray | LazyTable | None = None

    @classmethod
    def from_matrix(cls, u: int, v: int, cost: np.ndarray, label: str = "") -> "Edge":
        """An edge whose every candidate is its own class."""
        cost = np.asarray(cost, dtype=float)
        return cls(u, v, np.arange(cost.shape[0]), np.arange(cost.shape[1]), cost, label)

    @property
    def cost(self) -> np.ndarray:
        return self.class_cost[np.ix_(self.u_class, self.v_class)]

    @property
    def forward_cost(self) -> np.ndarray:
        """The forward part of :attr:`cost` per pair of candidates."""
        return (self.class_cost if self.forward is None else self.forward)[np.ix_(self.u_class, self.v_class)]

    def pair_cost(self, i: int, j: int) -> float:
        return float(self.class_cost[self.u_class[i], self.v_class[j]])


@dataclass(frozen=True, eq=False)
class Fanout:
    """A tensor's forward redistributions from producer node ``u`` to its readers, paid once per distinct layout.

    ``needs[j][c]`` is the tuple of layout ids (columns of ``class_cost``; sorted, distinct,
    possibly empty) that reader ``readers[j]`` needs when it takes its candidate ``c``.
    The cost of a choice is ``sum(class_cost[u_class[choice[u]], L] for L in union of needs)``.
    """

    u: int
    u_class: np.ndarray                # per candidate of u: its row of class_cost
    readers: tuple[int, ...]           # distinct node indices, none equal to u
    needs: tuple[tuple[tuple[int, ...], ...], ...]
    class_cost: np.ndarray             # shape (rows, layouts), seconds, all >= 0
    label: str = ""
    # per reader: bool matrix (its candidates x layouts), True where the candidate needs the layout
    _masks: tuple[np.ndarray, ...] = field(default=(), init=False, repr=False, compare=False)
    # the masks stacked (row ``_offsets[j] + c`` is reader j's candidate c) and each reader's j:
    # :meth:`SearchProblem.link_costs` reads every reader's row in one indexing, not one by one
    _stack: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    _offsets: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)
    _position: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # a LazyTable checks each cell as it computes it
        cost = self.class_cost if isinstance(self.class_cost, LazyTable) else np.asarray(self.class_cost, dtype=float)
        if cost.ndim != 2:
            raise ValueError(f"fanout {self.label!r}: class_cost must be a (rows, layouts) table")
        if not isinstance(cost, LazyTable) and ((cost < 0).any() or not np.isfinite(cost).all()):
            raise ValueError(f"fanout {self.label!r}: class_cost must be finite and >= 0")
        readers = tuple(int(r) for r in self.readers)
        if len(set(readers)) != len(readers) or int(self.u) in readers:
            raise ValueError(f"fanout {self.label!r}: readers must be distinct and differ from the producer")
        if len(self.needs) != len(readers):
            raise ValueError(f"fanout {self.label!r}: one needs entry per reader expected")
        needs = tuple(tuple(tuple(int(L) for L in layouts) for layouts in per) for per in self.needs)
        masks = []
        for per in needs:
            mask = np.zeros((len(per), cost.shape[1]), dtype=bool)
            for c, layouts in enumerate(per):
                if list(layouts) != sorted(set(layouts)) or any(not 0 <= L < cost.shape[1] for L in layouts):
                    raise ValueError(f"fanout {self.label!r}: needs must be sorted, distinct layout columns, "
                                     f"got {layouts}")
                mask[c, list(layouts)] = True
            masks.append(mask)
        object.__setattr__(self, "u", int(self.u))
        object.__setattr__(self, "u_class", np.asarray(self.u_class, dtype=int))
        object.__setattr__(self, "readers", readers)
        object.__setattr__(self, "needs", needs)
        object.__setattr__(self, "class_cost", cost)
        object.__setattr__(self, "_masks", tuple(masks))
        offsets = np.cumsum([0] + [len(mask) for mask in masks[:-1]]) if masks else ()
        object.__setattr__(self, "_stack", np.concatenate(masks) if masks else np.zeros((0, cost.shape[1]), bool))
        object.__setattr__(self, "_offsets", tuple(int(o) for o in offsets))
        object.__setattr__(self, "_position", {r: j for j, r in enumerate(readers)})

    def with_dense_table(self, array: np.ndarray) -> "Fanout":
        """This fanout with ``array``, its :class:`LazyTable` computed, in its place: the same readers, needs and
        masks (checked when it was made; each cell was checked as it was computed)."""
        out = copy.copy(self)
        object.__setattr__(out, "class_cost", array)
        return out

    def need_mask(self, j: int) -> np.ndarray:
        """Bool matrix (candidates of ``readers[j]``, layouts): True where that candidate needs the layout."""
        return self._masks[j]

    def needed(self, choice: Sequence[int]) -> frozenset[int]:
        """The layouts some reader needs under ``choice`` (one copy each)."""
        return frozenset(L for r, per in zip(self.readers, self.needs) for L in per[choice[r]])

    def cost(self, choice: Sequence[int]) -> float:
        """Seconds of redistribution under ``choice``: each needed layout once, from the producer's row."""
        needed = self.needed(choice)
        if not needed:
            return 0.0
        return float(self.class_cost[self.u_class[choice[self.u]], sorted(needed)].sum())


@dataclass(frozen=True, eq=False)
class SearchProblem:
    """Nodes, edges, equal-layout groups and an optional memory budget (bytes per device).

    ``same`` lists ``(a, a_class, b, b_class)``: the class of node ``a``'s choice
    (``a_class[choice_a]``) must equal the class of node ``b``'s (shard-as groups).
    ``fixed`` maps a node to the only candidate it may take. ``fanouts`` (keyword
    only) are the shared redistributions (see the module docstring); edges and
    fanouts together are the problem's *links*.
    """

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...] = ()
    same: tuple[tuple[int, np.ndarray, int, np.ndarray], ...] = ()
    memory_budget: float | None = None
    fixed: dict = field(default_factory=dict)
    fanouts: tuple[Fanout, ...] = field(default=(), kw_only=True)
    _adjacency: _Adjacency | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.nodes)
        for f in self.fanouts:
            if not 0 <= f.u < n or any(not 0 <= r < n for r in f.readers):
                raise ValueError(f"fanout {f.label!r} refers to a node outside the problem")
            if len(f.u_class) != self.nodes[f.u].n or any(
                    len(per) != self.nodes[r].n for r, per in zip(f.readers, f.needs)):
                raise ValueError(f"fanout {f.label!r}: u_class and needs must have one entry per candidate")

    def dense(self) -> "SearchProblem":
        """This problem with every :class:`LazyTable` computed into an array (what an ILP reads)."""
        arrays = ByIdentity()  # one array per table, however many links share it (identical layers)

        def computed(table: LazyTable) -> np.ndarray:
            return arrays.get(table, lambda: dense(table))

        edges = tuple(e if not isinstance(e.class_cost, LazyTable) else replace(e, class_cost=computed(e.class_cost))
                      for e in self.edges)
        fanouts = tuple(f if not isinstance(f.class_cost, LazyTable) else f.with_dense_table(computed(f.class_cost))
                        for f in self.fanouts)
        return replace(self, edges=edges, fanouts=fanouts)

    def objective(self, choice: Sequence[int]) -> float:
        total = sum(float(n.cost[c]) for n, c in zip(self.nodes, choice))
        total += sum(e.pair_cost(choice[e.u], choice[e.v]) for e in self.edges)
        total += sum(f.cost(choice) for f in self.fanouts)
        return total

    def neighbours(self, i: int) -> tuple[tuple[int, int], ...]:
        """Sorted ``(neighbour node, link id)`` pairs of node ``i``, over edges and fanouts alike.

        Computed once per problem for all nodes. A fanout's producer and each reader
        are neighbours through it; two readers of one fanout are not.
        """
        adjacency = self._adjacency
        if adjacency is None:
            lists: list[list[tuple[int, int]]] = [[] for _ in self.nodes]
            for e, edge in enumerate(self.edges):
                lists[edge.u].append((edge.v, e))
                lists[edge.v].append((edge.u, e))
            for f, fanout in enumerate(self.fanouts, start=len(self.edges)):
                for r in fanout.readers:
                    lists[fanout.u].append((r, f))
                    lists[r].append((fanout.u, f))
            adjacency = tuple(tuple(sorted(pairs)) for pairs in lists)
            object.__setattr__(self, "_adjacency", adjacency)
        return adjacency[i]

    def link_costs(self, link: int, i: int, choice: Sequence[int],
                   decided: Sequence[bool] | None = None, needed: np.ndarray | None = None) -> np.ndarray:
        """Cost (s) of ``link`` for each candidate of node ``i``, its other participants held at ``choice``.

        With ``decided``, only participants ``p`` with ``decided[p]`` count (an
        undecided one needs nothing). For a fanout reader, layouts another counted
        reader already needs cost nothing more (the copy is shared).

        ``needed`` (fanouts only): a caller that keeps track of it gives the bool per
        layout "some counted reader other than ``i`` needs it" (see :meth:`fanout_counts`),
        which spares a pass over all the fanout's readers per call.
        """
        counted = (lambda p: True) if decided is None else (lambda p: bool(decided[p]))
        if link < len(self.edges):
            edge = self.edges[link]
            if edge.v == i:
                if not counted(edge.u):
                    return np.zeros(self.nodes[i].n)
                return edge.class_cost[edge.u_class[choice[edge.u]], edge.v_class]
            if edge.u != i:
                raise ValueError(f"node {i} is not an end of edge {link}")
            if not counted(edge.v):
                return np.zeros(self.nodes[i].n)
            return edge.class_cost[edge.u_class, edge.v_class[choice[edge.v]]]
        fanout = self.fanouts[link - len(self.edges)]
        if i == fanout.u:
            need = _needed_layouts(fanout, choice, counted, None) if needed is None else needed
            return fanout.class_cost[:, need].sum(axis=1)[fanout.u_class]
        j = fanout._position.get(i)
        if j is None:
            raise ValueError(f"node {i} takes no part in fanout link {link}")
        if not counted(fanout.u):
            return np.zeros(self.nodes[i].n)
        others = _needed_layouts(fanout, choice, counted, i) if needed is None else needed
        row = np.where(others, 0.0, fanout.class_cost[fanout.u_class[choice[fanout.u]]])
        return fanout._masks[j] @ row

    def fanout_counts(self, link: int, choice: Sequence[int]) -> np.ndarray:
        """Per layout of fanout ``link``: how many of its readers need it under ``choice`` (all counted)."""
        fanout = self.fanouts[link - len(self.edges)]
        return _needed_layouts(fanout, choice, lambda p: True, None, count=True)

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


def _needed_layouts(fanout: Fanout, choice: Sequence[int], counted, skip: int | None,
                    count: bool = False) -> np.ndarray:
    """Bool per layout: needed by some counted reader of ``fanout`` (other than ``skip``) under ``choice``
    (with ``count``: by how many)."""
    rows = fanout._stack[np.array([o + choice[r] for r, o in zip(fanout.readers, fanout._offsets)
                                   if r != skip and counted(r)], dtype=np.intp)]
    return rows.sum(axis=0, dtype=np.int64) if count else rows.any(axis=0)
