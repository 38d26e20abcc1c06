"""Cost tables are lazy: breadth-first propagation computes only the cells it reads, the ILP all of
them, and both decide exactly as they would on the computed tables."""

import numpy as np
import pytest

from graphs.builders import gpt
from planner.api import plan
from planner.searches.bfs import bfs
from planner.model.problem import Edge, Fanout, LazyTable, Node, SearchProblem


def _lazy_problem(rng, calls):
    """A chain a - b - c of edges plus a fanout from a to b and c, every table lazy and counting."""
    sizes = (4, 5, 6)
    nodes = tuple(Node(n, rng.random(k)) for n, k in zip("abc", sizes))
    tables = [rng.random((4, 5)), rng.random((5, 6)), rng.random((4, 3))]

    def lazy(t):
        return LazyTable(t.shape, lambda i, j: calls.append(1) or float(t[i, j]))

    edges = (Edge(0, 1, np.arange(4), np.arange(5), lazy(tables[0])),
             Edge(1, 2, np.arange(5), np.arange(6), lazy(tables[1])))
    needs = (tuple((c % 3,) for c in range(5)), tuple(tuple(sorted({c % 3, 0})) for c in range(6)))
    fanout = Fanout(0, np.arange(4), (1, 2), needs, lazy(tables[2]))
    return SearchProblem(nodes, edges, fanouts=(fanout,)), tables


def test_breadth_first_reads_fewer_cells_and_decides_as_on_the_computed_tables():
    rng = np.random.default_rng(0)
    calls: list = []
    lazy, tables = _lazy_problem(rng, calls)
    got = bfs(lazy, seeds=[0])
    read = len(calls)
    computed = lazy.dense()
    want = bfs(computed, seeds=[0])
    assert got.choice == want.choice and got.objective == pytest.approx(want.objective, abs=0)
    # the whole problem has 4*5 + 5*6 + 4*3 = 62 cells; bfs reads a row per decided neighbour
    assert read < sum(t.size for t in tables)
    assert len(calls) == sum(t.size for t in tables)  # dense() computed every remaining cell once


def test_a_cell_is_computed_once_and_bad_cells_are_refused():
    calls: list = []
    t = LazyTable((2, 3), lambda i, j: calls.append((i, j)) or float(i + j))
    assert t[1, :].tolist() == [1.0, 2.0, 3.0] and t[:, 2].tolist() == [2.0, 3.0]
    assert sorted(calls) == [(0, 2), (1, 0), (1, 1), (1, 2)]
    bad = LazyTable((1, 1), lambda i, j: float("nan"))
    with pytest.raises(ValueError, match="finite"):
        bad[0, 0]


def test_cells_are_computed_row_by_row_in_the_order_read_and_a_full_table_computes_nothing():
    calls: list = []
    t = LazyTable((3, 4), lambda i, j: calls.append((i, j)) or float(10 * i + j))
    assert t[[2, 0], [3, 1]].tolist() == [23.0, 1.0]  # numpy's pairwise indexing: cells (2, 3) and (0, 1)
    # the cells of rows {0, 2} x columns {1, 3}, rows ascending and each row's columns ascending
    assert calls == [(0, 1), (0, 3), (2, 1), (2, 3)]
    calls.clear()
    want = 10 * np.arange(3)[:, None] + np.arange(4)[None, :]  # the cell function's values
    assert np.asarray(t).tolist() == want.tolist()
    assert calls == [(i, j) for i in range(3) for j in range(4) if (i, j) not in {(0, 1), (0, 3), (2, 1), (2, 3)}]
    calls.clear()
    assert np.asarray(t).tolist() == want.tolist() and t[1, :].tolist() == want[1].tolist()
    assert calls == [] and t.computed() == 12


def test_gpt_plan_reads_a_fraction_of_its_cost_tables():
    """On the 2-layer gpt the bfs plan reads fewer cells than its tables hold (the point of laziness),
    and the ILP's plan on the same model is no worse than bfs's (it reads every cell)."""
    g = gpt(layers=2, hidden=64, heads=4, seq=16, batch=8, vocab=97, mesh={"dp": 2, "tp": 4})
    p = plan(g, search="bfs")
    problem = p.decision.model.problem
    tables = [e.class_cost for e in problem.edges] + [f.class_cost for f in problem.fanouts]
    lazy = [t for t in tables if isinstance(t, LazyTable)]
    assert lazy, "the planner's cost tables are lazy"
    assert sum(t.computed() for t in lazy) < sum(t.shape[0] * t.shape[1] for t in lazy)
    q = plan(g, search="ilp")
    objective = lambda r: r.decision.model.problem.objective(r.decision.choice)  # noqa: E731
    assert objective(q) <= objective(p) * (1 + 1e-9)
