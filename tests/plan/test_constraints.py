"""Seed 003's constraints in both searches: each test fails if its constraint is ignored."""

import pytest

from planner.errors import PlanningError
from planner.api import plan

from .conftest import BANDWIDTH_BOUND

SEARCHES = ["bfs", "ilp"]


def chain(h1_sharding: str | None) -> str:
    """a (batch-sharded input) -> relu -> h1 -> tanh -> h2; ``h1_sharding`` pins relu's result."""
    pin = f", out_sharding: '{h1_sharding}'" if h1_sharding else ""
    return f"""
name: chain
mesh: {{x: 2}}
tensors:
  a: {{shape: [64, 64], kind: input, sharding: '[{{"x"}}, {{}}]'}}
ops:
  - {{name: f, op: relu, inputs: [a], output: h1{pin}}}
  - {{name: g, op: tanh, inputs: [h1], output: h2}}
outputs: [h2]
"""


def sharding(p, tensor):
    return str(p.tensors[tensor].sharding)


@pytest.mark.parametrize("search", SEARCHES)
def test_unconstrained_chain_keeps_the_batch_sharding(search):
    p = plan(chain(None), search=search)
    assert sharding(p, "h1") == 'sharding<@mesh, [{"x"}, {}]>'
    assert p.totals.comm_bytes_per_device == 0


@pytest.mark.parametrize("search", SEARCHES)
def test_closed_empty_dimensions_stay_replicated(search):
    p = plan(chain('[{}, {}]'), search=search)
    assert sharding(p, "h1") == "sharding<@mesh, [{}, {}]>"
    assert p.totals.comm_bytes_per_device > 0


@pytest.mark.parametrize("search", SEARCHES)
def test_open_dimensions_may_gain_axes(search):
    p = plan(chain('[{?}, {?}]'), search=search)
    assert sharding(p, "h1") == 'sharding<@mesh, [{"x"}, {}]>'


@pytest.mark.parametrize("search", SEARCHES)
def test_open_dimension_keeps_its_axes_as_the_major_ones(search):
    p = plan(chain('[{}, {"x", ?}]'), search=search)
    assert sharding(p, "h1") == 'sharding<@mesh, [{}, {"x"}]>'


@pytest.mark.parametrize("search", SEARCHES)
def test_explicitly_replicated_axis_is_never_used(search):
    p = plan(chain('[{?}, {?}], replicated={"x"}'), search=search)
    assert sharding(p, "h1") == "sharding<@mesh, [{}, {}]>"


def two_chains(shard_as: bool) -> str:
    group = "shard_as: [[ra, rb]]" if shard_as else ""
    return f"""
name: two
mesh: {{x: 2}}
tensors:
  a: {{shape: [64, 64], kind: input, sharding: '[{{"x"}}, {{}}]'}}
  b: {{shape: [64, 64], kind: input, sharding: '[{{}}, {{"x"}}]'}}
ops:
  - {{name: fa, op: relu, inputs: [a], output: ra}}
  - {{name: fb, op: relu, inputs: [b], output: rb}}
outputs: [ra, rb]
{group}
"""


@pytest.mark.parametrize("search", SEARCHES)
def test_shard_as_group_is_sharded_alike(search):
    free = plan(two_chains(False), search=search)
    assert sharding(free, "ra") != sharding(free, "rb")
    p = plan(two_chains(True), search=search)
    assert sharding(p, "ra") == sharding(p, "rb")
    assert p.totals.comm_bytes_per_device > 0


# On the default (latency-bound) cluster a replicated weight is fastest: no collective at all.
BIG_WEIGHT = """
name: big
mesh: {d: 4}
tensors:
  x: {shape: [8, 2048], kind: input}
  w: {shape: [2048, 2048], kind: param}
ops:
  - {name: mm, op: matmul, inputs: [x, w], output: h}
  - {name: act, op: relu, inputs: [h], output: y, out_sharding: '[{}, {}]'}
outputs: [y]
"""
# (the replicated result is pinned after the matmul: a closed annotation on the matmul's own
# result would forbid the pending sum that sharding w's rows leaves)


def test_memory_budget_forces_the_weight_to_be_sharded():
    free = plan(BIG_WEIGHT, search="ilp")
    weight = 2048 * 2048 * 4
    assert free.totals.memory_bytes_per_device >= weight  # replicated weight: no communication
    assert free.totals.comm_bytes_per_device == 0
    budget = weight // 2
    p = plan(BIG_WEIGHT, search="ilp", memory_budget=budget)
    assert p.totals.memory_bytes_per_device <= budget
    assert "d" in str(p.tensors["w"].sharding)


def test_memory_budget_too_small_says_so():
    with pytest.raises(PlanningError, match="budget"):
        plan(BIG_WEIGHT, search="ilp", memory_budget=1000)


def priorities(px: int, pw: int) -> str:
    return f"""
name: prio
mesh: {{dp: 4}}
cluster: {BANDWIDTH_BOUND}
tensors:
  x: {{shape: [64, 4096], kind: input, sharding: '[{{"dp"}}p{px}, {{}}]'}}
  w: {{shape: [4096, 4096], kind: param, sharding: '[{{}}, {{"dp"}}p{pw}]'}}
ops:
  - {{name: mm, op: matmul, inputs: [x, w], output: y}}
  - {{name: act, op: relu, inputs: [y], output: z}}
outputs: [z]
"""


@pytest.mark.parametrize("search", SEARCHES)
def test_without_priorities_the_cheaper_conflict_resolution_wins(search):
    """x wants dp on the batch, w wants dp on its columns; gathering small x is cheaper."""
    p = plan(priorities(0, 0), search=search)
    assert sharding(p, "y") == 'sharding<@mesh, [{}, {"dp"}]>'


@pytest.mark.parametrize("search", SEARCHES)
def test_higher_priority_batch_sharding_propagates_first(search):
    """With x at p0 and w at p1, x's batch sharding reaches y before w's is considered."""
    p = plan(priorities(0, 1), search=search)
    assert sharding(p, "y") == 'sharding<@mesh, [{"dp"}, {}]>'
    assert any(r.tensor == "w" for r in p.reshards)  # the weight is gathered instead


@pytest.mark.parametrize("search", SEARCHES)
def test_fixed_output_sharding_is_where_the_plan_ends(search):
    """h2 is a graph output pinned replicated: somewhere the batch sharding must be gathered."""
    text = chain(None).replace("  - {name: g, op: tanh, inputs: [h1], output: h2}",
                               "  - {name: g, op: tanh, inputs: [h1], output: h2, out_sharding: '[{}, {}]'}")
    free = plan(chain(None), search=search)
    p = plan(text, search=search)
    assert free.totals.comm_bytes_per_device == 0
    assert sharding(p, "h2") == "sharding<@mesh, [{}, {}]>"
    assert [s.kind for r in p.reshards for s in r.steps] == ["AllGather"]
