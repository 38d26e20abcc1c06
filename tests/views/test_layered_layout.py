"""The layered drawing of the plan page's graph (planner/views/layered_layout.py)."""

import itertools

from hypothesis import given
from hypothesis import strategies as st

from planner.views.layered_layout import layered_layout, spread


@given(st.lists(st.tuples(st.floats(-500, 500), st.floats(1, 80)), min_size=1, max_size=8), st.floats(0, 30))
def test_spread_keeps_order_and_gaps_and_is_least_squares(items, gap):
    desired = [d for d, _ in items]
    widths = [w for _, w in items]
    x = spread(desired, widths, gap)
    for i in range(len(x) - 1):
        assert x[i + 1] - x[i] >= (widths[i] + widths[i + 1]) / 2 + gap - 1e-6
    # optimal: moving the whole solution, or any suffix of it to the right / prefix to the left
    # (the only feasible directions that keep the gaps) cannot lower the squared error
    cost = lambda xs: sum((a - b) ** 2 for a, b in zip(xs, desired))  # noqa: E731
    for k in range(len(x)):
        for eps in (1e-3, -1e-3):
            moved = [v + (eps if (i >= k if eps > 0 else i <= k) else 0) for i, v in enumerate(x)]
            assert cost(moved) >= cost(x) - 1e-6


def test_spread_keeps_desired_places_that_do_not_overlap():
    assert spread([0.0, 50.0, 100.0], [10, 10, 10], 5) == [0.0, 50.0, 100.0]


def diamond():
    nodes = ["a", "w", "b", "c", "d"]
    edges = [("a", "b"), ("w", "c"), ("a", "c"), ("b", "d"), ("c", "d"), ("a", "d")]
    return nodes, edges, {n: 40.0 for n in nodes}, {n: 20.0 for n in nodes}


def test_levels_are_topological_depth_with_sources_beside_their_reader():
    lay = layered_layout(*diamond())
    # a (0) -> b, c (1) -> d (2); w is a source read only by c: pulled down to level 0, just above c
    assert dict(lay.levels) == {"a": 0, "w": 0, "b": 1, "c": 1, "d": 2}
    for u, v in diamond()[1]:
        assert lay.positions[u][1] < lay.positions[v][1]


def test_nodes_of_a_level_do_not_overlap():
    nodes, edges, widths, heights = diamond()
    lay = layered_layout(nodes, edges, widths, heights, node_gap=24)
    for u, v in itertools.combinations(nodes, 2):
        if lay.levels[u] == lay.levels[v]:
            assert abs(lay.positions[u][0] - lay.positions[v][0]) >= 40 + 24 - 1e-6


def test_a_long_edge_is_routed_through_each_level_between():
    lay = layered_layout(*diamond())
    # a (level 0) -> d (level 2) passes through one point on level 1, beside b and c
    route = lay.routes[("a", "d")]
    assert len(route) == 3 and route[1][1] == lay.positions["b"][1]
    assert all(abs(route[1][0] - lay.positions[n][0]) >= (40 + 10) / 2 for n in ("b", "c"))


def test_the_layout_is_deterministic():
    assert layered_layout(*diamond()) == layered_layout(*diamond())


def test_spread_moves_the_light_node_out_of_the_heavy_ones_way():
    # both want 0; the error of the first counts 1000 times: the second moves (1000 / 1001 of the way)
    x = spread([0.0, 0.0], [10, 10], 2, weights=[1000, 1])
    assert x[1] - x[0] == 12.0 and abs(x[0]) < 0.012
