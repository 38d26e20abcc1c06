"""The exact minimum of a sum of cost tables by variable elimination (min-sum dynamic programming).

A problem is ``sizes`` (how many candidates each variable has) and *factors*: a
:class:`Factor` is a ``scope`` (sorted, distinct variables) and a ``table`` with one
axis per variable, one row per candidate (or per class of candidates), whose entries
are costs or ``inf`` (a forbidden combination). :func:`minimise` returns the assignment, one candidate per variable,
whose factors' entries sum to the least value: the optimum, exactly, with no
relaxation and no tolerance, by dynamic programming over the tree decomposition an
elimination order induces.

**Order.** Greedy: next, the variable whose elimination builds the smallest table,
ties to the lowest variable. A table has one axis per variable of the eliminated
variable's factors, as long as the number of classes of that variable those factors
tell apart (:class:`Factor`'s ``classes``: a strategy's cost to its neighbour
depends on the layout it gives, not on the strategy). When even the smallest next
table would exceed ``max_cells`` the problem is refused (:class:`TooLarge`) and the
caller solves it some other way.

**Eliminating** ``v``: every factor whose scope holds ``v`` is added (numpy
broadcasting) into one table over the union of their scopes; its minimum over
``v`` is a new factor over the rest, and its argmin over ``v`` (the lowest candidate
on ties) is kept. **Back-substitution** in reverse order reads each variable's
candidate from its argmin table given the candidates of the variables after it.
The assignment is a function of the factors alone: the same problem gives the same
answer.

>>> import numpy as np
>>> f = (Factor((0,), np.array([0.0, 1.0])), Factor((0, 1), np.array([[5.0, 0.0], [0.0, 5.0]])))
>>> minimise((2, 2), f)
((0, 1), 0.0)
>>> minimise((2, 2), f + (Factor((1,), np.array([0.0, np.inf])),))   # variable 1 may not take candidate 1
((1, 0), 1.0)
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from planner.errors import EliminationInfeasible as Infeasible, EliminationTooLarge as TooLarge

__all__ = ["Factor", "Infeasible", "TooLarge", "minimise"]

MAX_CELLS = 20_000_000
"""The largest table :func:`minimise` builds by default (cells; 160 MB of float64). A GPT block's training step on
a 2 x 4 mesh needs 17.1 million, with its norms' and softmax's statistic factors shardable
(``benchmarks/xla_compile.py``'s model)."""


@dataclass(frozen=True, slots=True)
class Factor:
    """A cost table over ``scope`` (sorted, distinct variables), indexed by *classes* of their candidates.

    ``classes[a][k]`` is the row of axis ``a`` that candidate ``k`` of variable ``scope[a]`` reads;
    None means every candidate is its own class. A table over layouts rather than strategies is
    small, and so are the tables elimination builds from it: a variable enters them through the
    classes its factors tell apart, not its candidates.
    """

    scope: tuple[int, ...]
    table: np.ndarray
    classes: tuple[np.ndarray, ...] | None = None

    def __post_init__(self) -> None:
        scope = tuple(int(v) for v in self.scope)
        if list(scope) != sorted(set(scope)):
            raise ValueError(f"a factor's scope must be sorted and distinct, got {scope}")
        table = np.asarray(self.table, dtype=float)
        if table.ndim != len(scope):
            raise ValueError(f"a factor over {len(scope)} variables needs a {len(scope)}-dimensional table, "
                             f"got shape {table.shape}")
        classes = self.classes
        if classes is not None:
            classes = tuple(np.asarray(c, dtype=np.intp) for c in classes)
            if len(classes) != len(scope) or any(c.ndim != 1 or (c.size and not 0 <= c.min() <= c.max() < n)
                                                 for c, n in zip(classes, table.shape)):
                raise ValueError(f"a factor over {scope} needs one class per candidate of each variable, "
                                 f"each a row of its table")
        object.__setattr__(self, "scope", scope)
        object.__setattr__(self, "table", table)
        object.__setattr__(self, "classes", classes)

    def candidates(self, axis: int, size: int) -> np.ndarray:
        """The class of each of the ``size`` candidates of ``scope[axis]``."""
        return np.arange(size) if self.classes is None else self.classes[axis]


def _refine(maps: list[list[int]], size: int) -> tuple[np.ndarray, np.ndarray]:
    """The common refinement of class maps of one variable's ``size`` candidates: the first candidate
    of each refined class and each candidate's refined class, classes numbered in order of their first
    candidate (so the lowest class holds the lowest candidate)."""
    if not maps:
        return np.zeros(1, dtype=np.intp), np.zeros(size, dtype=np.intp)
    number: dict[tuple[int, ...], int] = {}
    inverse = [number.setdefault(key, len(number)) for key in zip(*maps)]
    first = [0] * len(number)
    for k in reversed(range(size)):
        first[inverse[k]] = k
    return np.array(first, dtype=np.intp), np.array(inverse, dtype=np.intp)


def _least(parts: list[np.ndarray], shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Over the first axis of the table ``sum(parts)`` (each part broadcast to ``shape``): the index of the least
    entry (the first among equal ones, as ``argmin``) and that entry, per cell of the other axes. The table is
    summed one slice of the first axis at a time and compared whole slice against whole slice: the first axis is
    short (a variable's classes) and the others long, where ``argmin`` pays per cell and the table in full would
    be as many times larger as the first axis is long."""
    rest = shape[1:]
    least = np.empty(rest)
    best = np.zeros(rest, dtype=np.intp)
    row = np.empty(rest)
    for k in range(shape[0]):
        into = least if k == 0 else row
        into[...] = parts[0][k if parts[0].shape[0] > 1 else 0]
        for part in parts[1:]:
            np.add(into, part[k if part.shape[0] > 1 else 0], out=into)
        if k:
            lower = row < least
            np.copyto(least, row, where=lower)
            best[lower] = k
    return best, least


def minimise(sizes: Sequence[int], factors: Sequence[Factor],
             max_cells: int | None = None) -> tuple[tuple[int, ...], float]:
    """The assignment (one candidate per variable) of least total cost, and that cost.

    Raises :class:`TooLarge` when the next elimination needs a table of more than ``max_cells`` cells
    (every other choice then needs one at least as large; default :data:`MAX_CELLS`), and :class:`Infeasible` when every
    assignment takes an ``inf`` entry.
    """
    sizes = tuple(int(s) for s in sizes)
    max_cells = MAX_CELLS if max_cells is None else max_cells
    live: dict[int, Factor] = {}
    maps: dict[int, list[list[int]]] = {}  # per factor, per axis: each candidate's class, as a list
    holding: list[set[int]] = [set() for _ in sizes]  # factor ids per variable
    for i, f in enumerate(factors):
        for a, v in enumerate(f.scope):
            if len(f.candidates(a, f.table.shape[a])) != sizes[v]:
                raise ValueError(f"factor {i} over {f.scope} does not match the {sizes[v]} candidates of "
                                 f"variable {v}")
            holding[v].add(i)
        live[i] = f
        maps[i] = [f.candidates(a, sizes[v]).tolist() for a, v in enumerate(f.scope)]
    refinements: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def plan(v: int) -> tuple[tuple[int, ...], dict[int, tuple[np.ndarray, np.ndarray]], int]:
        """What eliminating ``v`` builds: its scope, each variable's refinement, and the table's cells."""
        uses: dict[int, list[tuple[int, int]]] = {v: []}
        for i in sorted(holding[v]):
            for a, w in enumerate(live[i].scope):
                uses.setdefault(w, []).append((i, a))
        scope = tuple(sorted(uses))
        refined = {}
        for w in scope:
            key = (w, tuple(uses[w]))
            if key not in refinements:
                refinements[key] = _refine([maps[i][a] for i, a in uses[w]], sizes[w])
            refined[w] = refinements[key]
        return scope, refined, math.prod(len(refined[w][0]) for w in scope)

    heap = []
    for v in range(len(sizes)):
        heap.append((plan(v)[2], v))
    heapq.heapify(heap)
    cells_now = {v: c for c, v in heap}
    done = [False] * len(sizes)
    next_id = len(factors)
    steps: list[tuple[int, tuple[int, ...], tuple[np.ndarray, ...], np.ndarray]] = []
    while heap:
        c, v = heapq.heappop(heap)
        if done[v] or c != cells_now[v]:
            continue  # a stale entry: v was eliminated or its table changed since
        scope, refined, cells = plan(v)
        if cells > max_cells:
            raise TooLarge(cells, max_cells)
        done[v] = True
        rest = tuple(w for w in scope if w != v)
        order = (v,) + rest  # v first: its candidates are compared slice by slice (:func:`_least`)
        shape = tuple(len(refined[w][0]) for w in order)
        parts = []
        for i in sorted(holding[v]):
            f = live.pop(i)
            del maps[i]
            part = f.table
            expand = [1] * len(order)
            for a, w in enumerate(f.scope):
                part = part.take(f.candidates(a, sizes[w])[refined[w][0]], axis=a)
                expand[order.index(w)] = shape[order.index(w)]
            parts.append(np.moveaxis(part, f.scope.index(v), 0).reshape(expand))
            for w in f.scope:
                if w != v:
                    holding[w].discard(i)
        holding[v].clear()
        best, least = _least(parts or [np.zeros((1,) * len(order))], shape)
        steps.append((v, rest, tuple(refined[w][1] for w in rest), refined[v][0][best]))
        live[next_id] = Factor(rest, least, tuple(refined[w][1] for w in rest))
        maps[next_id] = [refined[w][1].tolist() for w in rest]
        for w in rest:
            holding[w].add(next_id)
        next_id += 1
        for w in rest:
            cells_now[w] = plan(w)[2]
            heapq.heappush(heap, (cells_now[w], w))
    total = float(sum(float(f.table) for f in live.values()))  # every factor left is a scalar
    if not math.isfinite(total):
        raise Infeasible("every assignment takes a forbidden combination")
    choice = [0] * len(sizes)
    for v, rest, classes, best in reversed(steps):
        choice[v] = int(best[tuple(c[choice[w]] for w, c in zip(rest, classes))])
    return tuple(choice), total
