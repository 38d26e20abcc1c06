"""Fanouts: readers of one tensor share a redistribution (one copy per distinct layout).

Covers the cost of a fanout, the link view (neighbours, link costs) BFS and provenance
use, BFS (never counting a shared copy twice), brute force and the ILP (exact against
brute force, full and shrunk).
"""

from dataclasses import replace

import numpy as np
import pytest

from planner.errors import PlanningError
from planner.searches import ilp
from planner.searches.bfs import bfs
from tests.searches.brute_force import brute_force
from planner.searches.ilp import solve_ilp
from planner.model.problem import Edge, Fanout, Node, SearchProblem

from .test_ilp import FAMILIES, assert_optimal, check_against_brute_force, optimum, random_problem


def _nodes(*sizes, cost=None):
    return tuple(Node(f"n{i}", np.zeros(n) if cost is None else np.asarray(cost[i], float))
                 for i, n in enumerate(sizes))


# Producer 0 with 2 candidates (rows 0 and 1), readers 1 and 2 with 3 candidates each.
# Reader candidates: 0 needs nothing, 1 needs layout 0, 2 needs layouts 0 and 1.
COST = np.array([[3.0, 5.0], [7.0, 11.0]])
NEEDS = ((), (0,), (0, 1))
FAN = Fanout(0, np.array([0, 1]), (1, 2), (NEEDS, NEEDS), COST, "t")


def _fan_problem(**kw):
    return SearchProblem(_nodes(2, 3, 3), fanouts=(FAN,), **kw)


# -- the cost of a fanout ------------------------------------------------------------------

def test_two_readers_of_one_layout_pay_one_redistribution():
    p = _fan_problem()
    # both readers need layout 0 from row 0: one copy, 3.0 (an edge per reader would pay 6.0)
    assert FAN.needed([0, 1, 1]) == frozenset({0})
    assert p.objective([0, 1, 1]) == 3.0
    # from row 1 the same single copy costs 7.0
    assert p.objective([1, 1, 1]) == 7.0


def test_readers_needing_different_layouts_pay_each_layout_once():
    p = _fan_problem()
    # reader 1 needs {0}, reader 2 needs {0, 1}: union {0, 1} = 3 + 5 from row 0
    assert p.objective([0, 1, 2]) == 8.0
    assert p.objective([0, 2, 2]) == 8.0
    # nobody needs anything: free
    assert p.objective([1, 0, 0]) == 0.0


def test_fanout_adds_to_unary_and_edge_costs():
    nodes = _nodes(2, 3, 3, cost=[[1.0, 0.0], [0.0, 0.0, 0.5], [0.0, 0.0, 0.0]])
    edge = Edge.from_matrix(0, 1, np.full((2, 3), 0.25))
    p = SearchProblem(nodes, (edge,), fanouts=(FAN,))
    # unary 1.0 + 0.5, edge 0.25, fanout layouts {0, 1} from row 0: 8.0
    assert p.objective([0, 2, 1]) == 1.0 + 0.5 + 0.25 + 8.0


def test_positional_construction_is_unchanged_and_fanouts_is_keyword_only():
    nodes = _nodes(2, 2)
    p = SearchProblem(nodes, (), (), 10.0, {0: 1})
    assert (p.memory_budget, p.fixed, p.fanouts) == (10.0, {0: 1}, ())
    with pytest.raises(TypeError):
        SearchProblem(nodes, (), (), None, {}, (FAN,))


@pytest.mark.parametrize("kwargs,match", [
    (dict(readers=(0, 2)), "differ from the producer"),
    (dict(readers=(1, 1)), "distinct"),
    (dict(needs=(NEEDS,)), "one needs entry per reader"),
    (dict(needs=(((), (1, 0), ()), NEEDS)), "sorted, distinct"),
    (dict(needs=(((), (2,), ()), NEEDS)), "sorted, distinct"),
    (dict(class_cost=-COST), ">= 0"),
])
def test_malformed_fanouts_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        replace(FAN, **kwargs)


def test_fanout_sized_unlike_its_nodes_is_rejected():
    with pytest.raises(ValueError, match="one entry per candidate"):
        SearchProblem(_nodes(2, 3, 2), fanouts=(FAN,))
    with pytest.raises(ValueError, match="outside the problem"):
        SearchProblem(_nodes(2, 3), fanouts=(FAN,))


# -- links: neighbours and link costs -------------------------------------------------------

def test_neighbours_join_the_producer_to_each_reader_but_not_readers_to_each_other():
    edge = Edge.from_matrix(1, 2, np.zeros((3, 3)))
    p = SearchProblem(_nodes(2, 3, 3), (edge,), fanouts=(FAN,))
    # link 0 is the edge, link 1 (= len(edges)) the fanout
    assert p.neighbours(0) == ((1, 1), (2, 1))
    assert p.neighbours(1) == ((0, 1), (2, 0))  # reader 2 only through the edge
    assert p.neighbours(2) == ((0, 1), (1, 0))


def test_neighbours_are_recomputed_for_a_replaced_problem():
    p = SearchProblem(_nodes(2, 3, 3))
    assert p.neighbours(0) == ()
    assert replace(p, fanouts=(FAN,)).neighbours(0) == ((1, 0), (2, 0))
    assert p.neighbours(0) == ()


def test_link_costs_of_a_reader_skip_layouts_other_readers_need():
    p = _fan_problem()
    # producer row 0 (costs 3, 5); reader 1 holds candidate 1, so layout 0 is already paid.
    # Reader 2: candidate 0 needs nothing (0), 1 needs {0} (paid: 0), 2 needs {0, 1} (only 1 is new: 5)
    np.testing.assert_array_equal(p.link_costs(0, 2, [0, 1, 0]), [0.0, 0.0, 5.0])
    # reader 1 at candidate 0 needs nothing: reader 2 pays its whole needs, 0 / 3 / 3 + 5
    np.testing.assert_array_equal(p.link_costs(0, 2, [0, 0, 0]), [0.0, 3.0, 8.0])
    # an undecided reader 1 shares nothing
    np.testing.assert_array_equal(p.link_costs(0, 2, [0, 1, 0], [True, False, False]), [0.0, 3.0, 8.0])


def test_link_costs_of_a_reader_are_zero_while_the_producer_is_undecided():
    p = _fan_problem()
    np.testing.assert_array_equal(p.link_costs(0, 1, [0, 0, 2], [False, False, True]), np.zeros(3))


def test_link_costs_of_the_producer_sum_the_union_of_decided_readers():
    p = _fan_problem()
    # readers at 1 ({0}) and 2 ({0, 1}): union {0, 1}, per producer row: 3 + 5, 7 + 11
    np.testing.assert_array_equal(p.link_costs(0, 0, [0, 1, 2]), [8.0, 18.0])
    # only reader 1 decided: {0}: 3, 7
    np.testing.assert_array_equal(p.link_costs(0, 0, [0, 1, 2], [False, True, False]), [3.0, 7.0])
    np.testing.assert_array_equal(p.link_costs(0, 0, [0, 1, 2], [False, False, False]), [0.0, 0.0])


def test_link_costs_of_an_edge_are_its_row_or_column():
    table = np.arange(6.0).reshape(2, 3)
    p = SearchProblem(_nodes(2, 3), (Edge.from_matrix(0, 1, table),))
    np.testing.assert_array_equal(p.link_costs(0, 1, [1, 0]), table[1])
    np.testing.assert_array_equal(p.link_costs(0, 0, [0, 2]), table[:, 2])
    np.testing.assert_array_equal(p.link_costs(0, 0, [0, 2], [True, False]), np.zeros(2))
    with pytest.raises(ValueError, match="not an end"):
        SearchProblem(_nodes(2, 3, 1), (Edge.from_matrix(0, 1, table),)).link_costs(0, 2, [0, 0, 0])


@pytest.mark.parametrize("seed", range(20))
def test_link_costs_are_the_fanout_cost_a_node_adds(seed):
    # For the producer, link_costs[c] is the fanout's cost with u at c. For a reader,
    # link_costs[c] is the cost with the reader at c minus the cost with the reader needing nothing.
    rng = np.random.default_rng(seed)
    sizes = [int(rng.integers(1, 4)) for _ in range(4)]
    layouts = int(rng.integers(1, 4))
    needs = tuple(tuple(tuple(sorted(rng.choice(layouts, int(rng.integers(0, layouts + 1)), replace=False).tolist()))
                        for _ in range(n)) for n in sizes[1:])
    fan = Fanout(0, rng.integers(0, 2, sizes[0]), (1, 2, 3), needs, rng.random((2, layouts)))
    p = SearchProblem(tuple(Node(f"n{i}", np.zeros(n)) for i, n in enumerate(sizes)), fanouts=(fan,))
    choice = [int(rng.integers(0, n)) for n in sizes]
    for i in range(4):
        costs = p.link_costs(0, i, choice)
        for c in range(sizes[i]):
            at_c = list(choice)
            at_c[i] = c
            if i == 0:
                expected = fan.cost(at_c)
            else:
                silent = replace(fan, needs=tuple(((),) * sizes[i] if r == i else per
                                                  for r, per in zip(fan.readers, fan.needs)))
                expected = fan.cost(at_c) - silent.cost(at_c)
            assert costs[c] == pytest.approx(expected, rel=1e-12, abs=1e-15)


# -- BFS ------------------------------------------------------------------------------------

def test_bfs_does_not_double_count_a_shared_copy():
    # Producer u (1 candidate), readers r and s. r is a seed pinned to candidate 0, needing layout 0.
    # s: candidate 0 needs layout 0 too (already paid: 0 more), candidate 1 needs nothing but costs 2.
    # Counting layout 0 again (cost 3) would make candidate 1 (2) look cheaper.
    fan = Fanout(0, np.array([0]), (1, 2), (((0,),), ((0,), ())), np.array([[3.0]]))
    nodes = (Node("u", np.zeros(1)), Node("r", np.zeros(1)), Node("s", np.array([0.0, 2.0])))
    p = SearchProblem(nodes, fanouts=(fan,))
    result = bfs(p, seeds=[0, 1])
    assert result.choice == (0, 0, 0)
    assert result.objective == 3.0
    assert result.parent[2] == (0, 0)


def test_bfs_producer_pays_the_readers_common_layout_once():
    # Both readers (seeds) need layout 0. Producer candidate 0 pays 4 once; candidate 1 pays 0 but costs 6
    # on its own. Once: 4 < 6 picks candidate 0; per reader it would be 8 > 6 and pick candidate 1.
    fan = Fanout(0, np.array([0, 1]), (1, 2), (((0,),), ((0,),)), np.array([[4.0], [0.0]]))
    nodes = (Node("u", np.array([0.0, 6.0])), Node("r", np.zeros(1)), Node("s", np.zeros(1)))
    result = bfs(SearchProblem(nodes, fanouts=(fan,)), seeds=[1, 2])
    assert result.choice == (0, 0, 0)
    assert result.parent[0] == (1, 0)  # reached from the first reader, through the fanout link
    assert result.objective == 4.0


def test_bfs_walks_fanouts_and_hands_prefer_the_fanout_link_id():
    # Node 3 hangs off node 0 by an edge (link 0); readers 1 and 2 only through the fanout (link 1).
    fan = Fanout(0, np.array([0, 0]), (1, 2), (((), ()), ((), ())), np.zeros((1, 1)))
    p = SearchProblem(_nodes(2, 2, 2, 2), (Edge.from_matrix(0, 3, np.zeros((2, 2))),), fanouts=(fan,))
    calls = []

    def prefer(v, u, link, cu):
        calls.append((v, u, link, cu))
        return np.array([0.0, 1.0])  # all tie: take candidate 1

    result = bfs(p, seeds=[0], seed_choice={0: 0}, prefer=prefer)
    assert result.order == (0, 1, 2, 3)
    assert result.parent == (None, (0, 1), (0, 1), (0, 0))
    assert calls == [(1, 0, 1, 0), (2, 0, 1, 0), (3, 0, 0, 0)]
    assert result.choice == (0, 1, 1, 1)


def test_bfs_without_fanouts_walks_edges_exactly_as_before():
    problem = random_problem(5, "dag")
    result = bfs(problem, seeds=[0])
    assert all(via is None or via[1] < len(problem.edges) for via in result.parent)
    assert result.objective == problem.objective(result.choice)


# -- brute force and the ILP ------------------------------------------------------------------

def test_brute_force_counts_a_shared_copy_once():
    # Reader r must need layout 0 (its only candidate). Reader s: candidate 0 needs layout 0 (shared, free),
    # candidate 1 needs nothing but costs 1 on its own: the optimum shares (total 3).
    fan = Fanout(0, np.array([0]), (1, 2), (((0,),), ((0,), ())), np.array([[3.0]]))
    nodes = (Node("u", np.zeros(1)), Node("r", np.zeros(1)), Node("s", np.array([0.0, 1.0])))
    assert brute_force(SearchProblem(nodes, fanouts=(fan,))) == ((0, 0, 0), 3.0)


def with_fanouts(problem: SearchProblem, seed: int) -> SearchProblem:
    """``problem`` with 1-3 random fanouts (1-4 readers, 1-4 layouts, some zero costs); in layered
    problems also one fanout per layer with the same structure, from the layer's first node (which
    some layers' last node follows, so a reader may share its producer's owner)."""
    rng = np.random.default_rng(seed + 10_000)
    nodes, n = problem.nodes, len(problem.nodes)
    fanouts = []

    def random_fanout(u, readers, layouts, rows, rng):
        needs = tuple(tuple(tuple(sorted(rng.choice(layouts, int(rng.integers(0, min(2, layouts) + 1)),
                                                    replace=False).tolist()))
                            for _ in range(nodes[r].n)) for r in readers)
        cost = rng.integers(0, 10, (rows, layouts)) * 1e-6 if rng.random() < 0.5 else rng.random((rows, layouts)) * 1e-3
        cost[rng.random(cost.shape) < 0.2] = 0.0
        return Fanout(u, rng.integers(0, rows, nodes[u].n), tuple(readers), needs, cost)

    for _ in range(int(rng.integers(1, 4))):
        u = int(rng.integers(0, n))
        others = [i for i in range(n) if i != u]
        readers = [int(r) for r in rng.choice(others, int(rng.integers(1, min(4, len(others)) + 1)), replace=False)]
        fanouts.append(random_fanout(u, readers, int(rng.integers(1, 5)), int(rng.integers(1, nodes[u].n + 1)), rng))
    layers = sorted({node.layer[1] for node in nodes if node.layer is not None})
    if len(layers) > 1:
        width = n // len(layers)
        structure = int(rng.integers(0, 2**31))
        for layer in layers:
            base = layer * width
            template = np.random.default_rng(structure)  # same structure (and costs) in every layer
            fanouts.append(random_fanout(base, list(range(base + 1, base + width)), 3, 2, template))
    return replace(problem, fanouts=tuple(fanouts))


@pytest.mark.parametrize("shrink", [False, True], ids=["full", "shrunk"])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("seed", range(30))
def test_ilp_matches_brute_force_with_fanouts(seed, family, shrink):
    # The reference is brute force on what solve_ilp solves: with shrink, layers tied (as same
    # groups) when that is feasible, else untied (test_ilp.optimum); followers are exact either way.
    check_against_brute_force(with_fanouts(random_problem(seed, family), seed), shrink)


@pytest.mark.parametrize("shrink", [False, True], ids=["full", "shrunk"])
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("seed", range(30))
def test_elimination_matches_brute_force_with_fanouts(seed, family, shrink):
    problem = with_fanouts(replace(random_problem(seed, family), memory_budget=None), seed)
    check_against_brute_force(problem, shrink, "elimination")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("seed", range(5))
def test_cbc_agrees_with_brute_force_with_fanouts(seed, family):
    problem = with_fanouts(random_problem(seed, family), seed)
    expected = optimum(problem, shrink=True)
    if expected is not None:
        assert_optimal(solve_ilp(problem, solver="cbc"), problem, expected)


def _star(readers=3, rows=2, layouts=2, cost=None):
    """A producer with ``rows`` candidates (one row each) and readers of 2 candidates:
    candidate 0 needs layout 0, candidate 1 needs layout 1."""
    cost = np.arange(1.0, rows * layouts + 1).reshape(rows, layouts) if cost is None else cost
    needs = tuple(((0,), (1,)) for _ in range(readers))
    fan = Fanout(0, np.arange(rows), tuple(range(1, readers + 1)), needs, cost)
    nodes = (Node("u", np.zeros(rows)),) + tuple(Node(f"r{j}", np.array([0.0, 0.5])) for j in range(readers))
    return SearchProblem(nodes, fanouts=(fan,))


def test_ilp_shares_the_copy_where_edges_would_pay_per_reader():
    # 3 readers, each either layout 0 (free on its own) or layout 1 (0.5 on its own). From row 0
    # layout 0 costs 1, layout 1 costs 2. Shared: all on layout 0 = 1 (per reader it would be 3).
    result = solve_ilp(_star())
    assert result.choice == (0, 0, 0, 0)
    assert result.objective == 1.0 == brute_force(_star())[1]


def test_ilp_fanout_with_three_owners_gets_y_and_w_variables():
    data = ilp._reduce(_star(readers=2), fold=False, tie=False)
    assert len(data.fanouts) == 1 and data.edges == ()
    model = ilp._build_model(data)
    # x: 2 + 2 + 2; y: 2 layouts; w: 2 rows x 2 layouts
    assert model.problem.numVariables() == 6 + 2 + 4


def test_ilp_fanout_with_one_row_has_no_w_variables():
    problem = _star(readers=2, rows=2, cost=np.array([[1.0, 2.0], [1.0, 2.0]]))
    model = ilp._build_model(ilp._reduce(problem, fold=False, tie=False))
    assert model.problem.numVariables() == 6 + 2
    assert_optimal(solve_ilp(problem), problem, brute_force(problem)[1])


def test_ilp_fanout_between_two_owners_is_an_edge():
    cost = np.array([[1.0, 2.0], [4.0, 3.0]])  # not f(row) + g(layout), so it stays an edge
    problem = _star(readers=1, cost=cost)
    data = ilp._reduce(problem, fold=False, tie=False)
    assert data.fanouts == () and len(data.edges) == 1
    # cost from row a to reader class b: C[a, b] (reader candidate b needs layout b)
    np.testing.assert_array_equal(data.edges[0].cost, ilp.COST_SCALE * cost)
    assert_optimal(solve_ilp(problem), problem, brute_force(problem)[1])


def test_ilp_separable_two_owner_fanout_becomes_unary_costs():
    # C[a, b] = [1, 3][a] + [0, 1][b]: no edge variables, only the 2 + 2 x's
    problem = _star(readers=1)
    data = ilp._reduce(problem, fold=False, tie=False)
    assert (data.fanouts, data.edges) == ((), ())
    assert solve_ilp(problem, solver="highs").report.variables == 4


def test_ilp_fanout_within_one_owner_is_a_unary_cost():
    # Both readers follow the producer: reader j takes the producer's candidate, so with u at c
    # both need layout c: one copy, C[c, c] = 1 or 4; plus the readers' own 0.5 each at c = 1.
    fan = Fanout(0, np.array([0, 1]), (1, 2), (((0,), (1,)),) * 2, np.array([[1.0, 2.0], [3.0, 4.0]]))
    nodes = (Node("u", np.zeros(2)),) + tuple(
        Node(f"r{j}", np.array([0.0, 0.5]), follows=0, follow_map=np.array([0, 1])) for j in range(2))
    problem = SearchProblem(nodes, fanouts=(fan,))
    data = ilp._reduce(problem, fold=True, tie=False)
    assert (data.fanouts, data.edges) == ((), ())
    np.testing.assert_array_equal(data.cost[0], ilp.COST_SCALE * np.array([1.0, 4.0 + 1.0]))
    assert solve_ilp(problem, solver="highs").report.variables == 2


def test_ilp_reader_sharing_the_producers_owner_counts_its_layouts_once():
    # Reader 1 follows the producer (needs layout c when u takes c); readers 2 and 3 are free.
    # Their shared layouts with reader 1 must not be paid twice: compare with brute force.
    fan = Fanout(0, np.array([0, 1]), (1, 2, 3), (((0,), (1,)),) * 3, np.array([[1.0, 6.0], [5.0, 2.0]]))
    nodes = (Node("u", np.array([0.0, 0.1])),
             Node("r1", np.zeros(2), follows=0, follow_map=np.array([0, 1])),
             Node("r2", np.array([0.0, 0.3])), Node("r3", np.array([0.2, 0.0])))
    problem = SearchProblem(nodes, fanouts=(fan,))
    data = ilp._reduce(problem, fold=True, tie=False)
    assert len(data.fanouts) == 1 and [o for o, _ in data.fanouts[0].readers] == [0, 1, 2]
    for shrink in (False, True):
        assert_optimal(solve_ilp(problem, shrink=shrink), problem, brute_force(problem)[1])


def test_ilp_readers_sharing_an_owner_need_the_union_of_their_layouts():
    # Readers b and c follow node a: at a's candidate 0, b needs layout 0 and c layout 1; at 1 both
    # need layout 1. Reader d is free, so the fanout spans three owners (u, a, d). Merged into one
    # reader of a, candidate 0 needs {0, 1} and candidate 1 needs {1}.
    cost = np.array([[1.0, 2.0], [2.5, 0.5]])
    fan = Fanout(0, np.array([0, 1]), (2, 3, 4), (((0,), (1,)), ((0,), (1,)), ((0,), (1,))), cost)
    nodes = (Node("u", np.array([0.0, 0.2])), Node("a", np.array([0.0, 0.4])),
             Node("b", np.zeros(2), follows=1, follow_map=np.array([0, 1])),
             Node("c", np.zeros(2), follows=1, follow_map=np.array([1, 1])),
             Node("d", np.array([0.3, 0.0])))
    problem = SearchProblem(nodes, fanouts=(fan,))
    data = ilp._reduce(problem, fold=True, tie=False)
    (merged,) = data.fanouts
    readers = {o: need.tolist() for o, need in merged.readers}
    assert readers[data.owner[1]] == [[True, True], [False, True]]
    for shrink in (False, True):
        assert_optimal(solve_ilp(problem, shrink=shrink), problem, brute_force(problem)[1])


def test_ilp_drops_layouts_no_reader_needs_or_that_cost_nothing():
    # 4 layouts: 0 needed and costly; 1 needed but free from every row; 2 never needed; 3 needed, costly.
    cost = np.array([[1.0, 0.0, 9.0, 2.0], [3.0, 0.0, 9.0, 1.0]])
    needs = tuple(((0,), (1, 3), ()) for _ in range(2))
    fan = Fanout(0, np.array([0, 1]), (1, 2), needs, cost)
    problem = SearchProblem(_nodes(2, 3, 3), fanouts=(fan,))
    data = ilp._reduce(problem, fold=False, tie=False)
    assert data.fanouts[0].cost.shape == (2, 2)  # layouts 0 and 3 are left
    assert_optimal(solve_ilp(problem), problem, brute_force(problem)[1])


def test_tied_layers_share_fanout_variables():
    def layers(count):
        nodes, fanouts = [], []
        for layer in range(count):
            base = len(nodes)
            nodes += [Node(f"l{layer}.n{k}", np.array([0.0, 1e-6, 2e-6]), layer=(f"n{k}", layer)) for k in range(3)]
            fanouts.append(Fanout(base, np.array([0, 1, 1]), (base + 1, base + 2),
                                  (((0,), (1,), (0, 1)), ((1,), (0,), ())), np.array([[1e-6, 3e-6], [2e-6, 1e-6]])))
        return SearchProblem(tuple(nodes), fanouts=tuple(fanouts))
    one, six = solve_ilp(layers(1), solver="highs"), solve_ilp(layers(6), solver="highs")
    assert (six.report.variables, six.report.constraints) == (one.report.variables, one.report.constraints)
    assert six.choice == one.choice * 6
    # the layers are independent, so the tied optimum is 6 times one layer's (brute force)
    assert_optimal(one, layers(1), brute_force(layers(1))[1])
    assert six.objective == pytest.approx(6 * one.objective, rel=1e-12)
    assert_optimal(solve_ilp(layers(3)), layers(3), optimum(layers(3), shrink=True))
