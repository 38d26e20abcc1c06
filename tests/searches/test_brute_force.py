"""Brute force: the reference optimum honours fixed, same, follows and memory, and breaks ties lexicographically."""

import itertools

import numpy as np
import pytest

from costmodels.units import format_bytes
from planner.errors import PlanningError
from tests.searches.brute_force import brute_force
from planner.model.problem import Edge, Node, SearchProblem

MiB = 2**20


def _chain(costs, edge_costs, **kw):
    nodes = tuple(Node(f"n{i}", np.asarray(c, dtype=float), kw.pop(f"memory{i}", None)) for i, c in enumerate(costs))
    edges = tuple(Edge.from_matrix(i, i + 1, np.asarray(c, dtype=float)) for i, c in enumerate(edge_costs))
    return SearchProblem(nodes, edges, **kw)


def _naive(problem):
    """Every choice of every node, the feasible one of least (objective, choice)."""
    ranges = [range(node.n) for node in problem.nodes]
    scored = [(problem.objective(c), c) for c in itertools.product(*ranges) if problem.feasible(c)]
    return min(scored) if scored else None


def test_picks_the_cheapest_pair_over_the_edge():
    p = _chain([[0.0, 1.0], [0.0, 0.0]], [[[5.0, 0.0], [0.0, 5.0]]])
    assert brute_force(p) == ((0, 1), 0.0)


def test_equal_objectives_resolve_to_the_lexicographically_smallest_choice():
    p = _chain([[1.0, 1.0, 1.0], [2.0, 2.0]], [np.zeros((3, 2))])
    assert brute_force(p) == ((0, 0), 3.0)


def test_fixed_node_takes_its_candidate():
    p = _chain([[0.0, 1.0], [0.0, 0.0]], [[[0.0, 0.0], [0.0, 0.0]]], fixed={0: 1})
    assert brute_force(p) == ((1, 0), 1.0)


def test_same_group_forces_equal_classes():
    nodes = (Node("a", np.array([0.0, 5.0])), Node("b", np.array([5.0, 0.0])))
    same = ((0, np.array([0, 1]), 1, np.array([0, 1])),)
    assert brute_force(SearchProblem(nodes, same=same)) == ((0, 0), 5.0)


def test_follower_takes_the_mapped_candidate_of_its_parent():
    nodes = (Node("a", np.array([1.0, 0.0])),
             Node("b", np.array([0.0, 0.0, 9.0]), follows=0, follow_map=np.array([0, 2])),
             Node("c", np.array([0.0, 0.0]), follows=1, follow_map=np.array([1, 0, 0])))
    # a=1 would be cheaper alone, but drags b to candidate 2 (cost 9)
    assert brute_force(SearchProblem(nodes)) == ((0, 0, 1), 1.0)


def test_memory_budget_excludes_the_cheapest_choice():
    p = _chain([[0.0, 1.0]], [], memory0=np.array([2 * MiB, 1 * MiB]), memory_budget=1.5 * MiB)
    assert brute_force(p) == ((1,), 1.0)


def test_no_feasible_choice_raises_planning_error_naming_the_budget():
    p = _chain([[0.0, 1.0]], [], memory0=np.array([2 * MiB, 3 * MiB]), memory_budget=1 * MiB)
    with pytest.raises(PlanningError, match=f"memory budget of {format_bytes(MiB)} per device"):
        brute_force(p)


def test_space_larger_than_the_limit_raises():
    p = _chain([np.zeros(10)] * 4, [np.zeros((10, 10))] * 3)
    with pytest.raises(PlanningError, match="10000 choices of 4 free nodes, more than the limit of 999"):
        brute_force(p, limit=999)


def test_followers_and_fixed_nodes_do_not_count_towards_the_limit():
    nodes = (Node("a", np.zeros(10)), Node("b", np.zeros(10), follows=0, follow_map=np.arange(10)),
             Node("c", np.zeros(10)))
    assert brute_force(SearchProblem(nodes, fixed={2: 3}), limit=10) == ((0, 0, 3), 0.0)


def test_follow_cycle_raises():
    nodes = (Node("a", np.zeros(2), follows=1, follow_map=np.arange(2)),
             Node("b", np.zeros(2), follows=0, follow_map=np.arange(2)))
    with pytest.raises(PlanningError, match="cycle: a -> b -> a"):
        brute_force(SearchProblem(nodes))


def test_fixed_candidate_out_of_range_raises():
    with pytest.raises(PlanningError, match="fixed to candidate 5, but has 2 candidates"):
        brute_force(SearchProblem((Node("a", np.zeros(2)),), fixed={0: 5}))


def test_empty_problem_has_the_empty_choice():
    assert brute_force(SearchProblem(())) == ((), 0.0)


@pytest.mark.parametrize("seed", range(40))
def test_agrees_with_enumerating_every_node(seed):
    rng = np.random.default_rng(seed)
    sizes = [int(rng.integers(1, 4)) for _ in range(int(rng.integers(2, 6)))]
    nodes = []
    for i, n in enumerate(sizes):
        parent = int(rng.integers(0, i)) if i and rng.random() < 0.3 else None
        nodes.append(Node(f"n{i}", rng.integers(0, 5, n) * 1.0, rng.integers(1, 8, n) * MiB, follows=parent,
                          follow_map=None if parent is None else rng.integers(0, n, sizes[parent])))
    edges = tuple(Edge.from_matrix(i - 1, i, rng.integers(0, 5, (sizes[i - 1], n)) * 1.0)
                  for i, n in enumerate(sizes) if i)
    same = ((0, rng.integers(0, 2, sizes[0]), len(sizes) - 1, rng.integers(0, 2, sizes[-1])),) \
        if rng.random() < 0.5 else ()
    fixed = {1: int(rng.integers(0, sizes[1]))} if rng.random() < 0.3 else {}
    budget = (int(rng.integers(len(sizes), 8 * len(sizes))) + 0.5) * MiB if rng.random() < 0.5 else None
    p = SearchProblem(tuple(nodes), edges, same, budget, fixed)
    expected = _naive(p)
    if expected is None:
        with pytest.raises(PlanningError):
            brute_force(p)
    else:
        assert brute_force(p) == (expected[1], expected[0])
