"""The direct plan (issue 11): the engine's first incumbent, built without search."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.caches import clear_caches
from planner.ir import parse_mesh, parse_sharding
from planner.redistribution import engine, reshard
from planner.redistribution.direct import distance
from planner.redistribution.moves import gather_then_slice
from planner.redistribution.search import Budget
from planner.redistribution.state import Pieces, State
from tests.redistribution.suite import MESH, SHAPES, pairs
from planner.simulation.reshard import verify


def test_distance_counts_pieces_beyond_the_common_prefix():
    # dimension 0: (0, 1) against (0,): one piece of the state beyond the shared (0,);
    # dimension 1: (2,) against (2, 1): one of the goal's; one pending sum only the state has
    state = State(((0, 1), (2,)), frozenset({3}))
    goal = State(((0,), (2, 1)))
    assert distance(state, goal) == 1 + 1 + 1
    # nothing shared when the major pieces differ: every piece of both counts
    assert distance(State(((0, 1),)), State(((1, 0),))) == 4


_states = st.builds(
    lambda dims, pending: State(tuple(tuple(d) for d in dims), frozenset(pending)),
    st.lists(st.lists(st.integers(0, 4), max_size=3, unique=True), min_size=2, max_size=2),
    st.frozensets(st.integers(5, 6)),
)


@settings(max_examples=200, deadline=None)
@given(_states, _states)
def test_distance_is_zero_only_between_equal_states(a, b):
    assert (distance(a, b) == 0) == (a == b)
    assert distance(a, b) == distance(b, a)


@pytest.fixture
def no_search(monkeypatch):
    """The engine with a budget of nothing: every search gives up at once, so a plan is the
    engine's first incumbent (the direct plan, or gathering everything when that is cheaper)."""
    clear_caches()
    monkeypatch.setattr(engine, "search_budget", lambda pc: Budget(0, 0))
    yield
    clear_caches()  # plans made without search must not outlive the test


def test_direct_plan_moves_a_dimension_with_one_all_to_all(no_search):
    # the engine's doctest pair: x moves from dimension 0 to 1; one AllToAll over x sends half of
    # the 32x32 local block (2,048 B), where gathering dimension 0 would receive 4,096 B
    m = parse_mesh('@m = <["x"=2, "y"=4]>')
    plan = reshard((64, 32), "f32", parse_sharding('[{"x"}, {}]', m), parse_sharding('[{}, {"x"}]', m))
    assert [str(s) for s in plan.steps] == ['AllToAll {"x"} dims [0, 1]: 2,048 B']
    assert not plan.exact


def test_direct_plan_reduce_scatters_a_pending_sum_onto_its_destination(no_search):
    # a pending sum over x that the destination shards dimension 0 over: one ReduceScatter
    # (receives (2-1)/2 of the 32x32 f32 local block: 4,096 B) instead of AllReduce (8,192 B) + Slice
    m = parse_mesh('@m = <["x"=2, "y"=4]>')
    plan = reshard((64, 32), "f32", parse_sharding('[{}, {}], unreduced={"x"}', m), parse_sharding('[{"x"}, {}]', m))
    assert [(s.kind, s.bytes_per_device) for s in plan.steps] == [("ReduceScatter", 4096)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_plans_without_search_verify_and_never_cost_more_than_gathering(shape, no_search):
    """Every pair of the 2-D suite: the first incumbent runs on the simulator with the bytes it
    predicts, costs at most what gathering everything costs, and on the divisible shape less
    in all (gathering is the plan the engine fell back on before)."""
    cluster = engine._default_cluster()
    total = gathered = 0
    for s, d in pairs():
        plan = reshard(shape, "f32", s, d)
        check = verify(plan, seed=5)
        assert check.verified and check.measured_bytes_per_device == plan.bytes_per_device, (s, d)
        pc = Pieces.refine(MESH, shape, [s, d])
        start, goal = pc.state_of(s), pc.state_of(d)
        worst = 0 if start == goal else sum(
            engine._move_cost(pc, m, cluster).bytes_per_device for m in gather_then_slice(pc, start, goal, 4))
        assert plan.bytes_per_device <= worst, (s.dims_text(), d.dims_text())
        total += plan.bytes_per_device
        gathered += worst
    if shape == SHAPES[0]:
        assert total < gathered
