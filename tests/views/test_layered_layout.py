"""The layered drawing of the plan page's graph (planner/views/layered_layout.py)."""

import itertools

from hypothesis import given
from hypothesis import strategies as st

from planner.views.layered_layout import DUMMY_WIDTH, LANE_CLEARANCE, LANE_SLACK, layered_layout, spread


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


def residual_block():
    """A residual edge a -> t around a wide row (three branches q, k, v) and a narrow one (s)."""
    nodes = ["a", "q", "k", "v", "s", "t"]
    edges = [("a", "q"), ("a", "k"), ("a", "v"), ("q", "s"), ("k", "s"), ("v", "s"), ("s", "t"), ("a", "t")]
    widths = {"a": 40.0, "q": 80.0, "k": 80.0, "v": 80.0, "s": 40.0, "t": 40.0}
    return nodes, edges, widths, {n: 20.0 for n in nodes}


def test_a_long_edge_runs_beside_its_endpoints_at_the_nearest_free_place():
    nodes, edges, widths, heights = residual_block()
    lay = layered_layout(nodes, edges, widths, heights)
    (xa, _), (xt, _) = lay.positions["a"], lay.positions["t"]
    route = lay.routes[("a", "t")]
    assert len(route) == 4  # from a's bottom, through levels 1 (q, k, v) and 2 (s), to t's top
    for k, (x, y) in enumerate(route[1:-1], start=1):
        row = [n for n in nodes if lay.positions[n][1] == y]
        blocked = [(lay.positions[n][0] - widths[n] / 2 - LANE_CLEARANCE - DUMMY_WIDTH / 2,
                    lay.positions[n][0] + widths[n] / 2 + LANE_CLEARANCE + DUMMY_WIDTH / 2) for n in row]
        assert all(x <= lo + 1e-6 or x >= hi - 1e-6 for lo, hi in blocked)  # clear of every node of its level
        # and no free place is nearer the straight line from a to t than the lane's slack (a scan every half pixel)
        want = xa + (xt - xa) * k / 3
        for step in range(1, int(2 * abs(x - want))):
            for probe in (want - step / 2, want + step / 2):
                if abs(probe - want) < abs(x - want) - LANE_SLACK - 0.5:
                    assert any(lo < probe < hi for lo, hi in blocked), (k, probe)
    # beside s, the narrow row: the lane touches s's clearance, not the far side of the drawing
    (x2, _), (xs, _) = route[2], lay.positions["s"]
    assert abs(abs(x2 - xs) - (widths["s"] / 2 + LANE_CLEARANCE + DUMMY_WIDTH / 2)) < 1e-6
