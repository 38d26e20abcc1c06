"""shard_as (hard) and shard_like (soft) groups, sharding constraints, and propagation barriers
(seed 003); golden input -> output with the reason each holds."""

import pytest

from graphs.graph_builder import GraphBuilder
from planner.errors import ModelError
from planner.searches.propagate import propagate
from tests.searches.propagate_models import shardings


def _two_chains(kind: str):
    # u = relu(x) with x sharded on "a"; v = relu(y) with y sharded on "b" on the other dimension.
    g = GraphBuilder("groups", {"a": 2, "b": 2})
    g.tensor("x", [8, 8], sharding='[{"a", ?}, {?}]')
    g.tensor("y", [8, 8], sharding='[{?}, {"b", ?}]')
    g.tensor("z", [8, 8])
    g.op("relu", ["x"], output="u", name="r1")
    g.op("relu", ["y"], output="v", name="r2")
    g.op("neg", ["z"], output="w", name="n")
    getattr(g, kind)("u", "w")
    getattr(g, kind)("v", "w")
    return g.build()


def test_shard_like_members_take_what_does_not_conflict():
    # w is grouped (softly) with u ("a" on dim 0) and with v ("b" on dim 1): it takes both, and
    # back through the groups u and v take each other's axis too, which conflicts with nothing.
    out = shardings(_two_chains("shard_like"), "aggressive")
    assert out["w"] == out["z"] == '[{"a", ?}, {"b", ?}]'
    assert out["u"] == out["v"] == '[{"a", ?}, {"b", ?}]'


def test_shard_as_members_end_identical():
    out = shardings(_two_chains("shard_as"), "aggressive")
    assert out["u"] == out["v"] == out["w"]


def test_shard_as_with_conflicting_closed_annotations_is_refused():
    # p and q are pinned (closed) to different axes of one dimension: they cannot be made alike.
    g = GraphBuilder("clash", {"a": 2, "b": 2})
    g.tensor("p", [8], sharding='[{"a"}]')
    g.tensor("q", [8], sharding='[{"b"}]')
    g.shard_as("p", "q")
    # refused when the model is built, for every search, naming both annotations
    with pytest.raises(ModelError, match=r"shard_as group \[p, q\] cannot hold: tensor 'p' is annotated \[\{\"a\"\}\] "
                       r"and tensor 'q' \[\{\"b\"\}\], which disagree on dimension 0"):
        g.build()


def test_shard_like_keeps_a_members_own_conflicting_sharding():
    # The same clash as a soft group: both keep their own sharding.
    g = GraphBuilder("soft", {"a": 2, "b": 2})
    g.tensor("p", [8], sharding='[{"a", ?}]')
    g.tensor("q", [8], sharding='[{"b", ?}]')
    g.shard_like("p", "q")
    graph = g.build()
    assert shardings(graph, "aggressive") == {"p": '[{"a", ?}]', "q": '[{"b", ?}]'}


def _constrained(pin='[{}, {"a"}]', other=None):
    # h = relu(x); c = sharding_constraint(h) to ``pin`` (y = neg(c)); z = exp(h); optionally a second
    # constraint d on h to ``other``.
    g = GraphBuilder("constraint", {"a": 2})
    g.tensor("x", [8, 8])
    h = g.op("relu", ["x"], output="h", name="relu")
    c = g.op("sharding_constraint", [h], output="c", name="pin", out_sharding=pin)
    g.op("neg", [c], output="y", name="neg")
    g.op("exp", [h], output="z", name="exp")
    if other is not None:
        g.op("sharding_constraint", [h], output="d", name="pin2", out_sharding=other)
    return g.build()


def test_a_fully_closed_sharding_constraint_is_copied_onto_its_input():
    # Shardy's import pass (apply_sharding_constraints.cc, shouldApply): h has no sharding of its own
    # and the constraint is fully closed, so h takes it as written (closed), and z = exp(h) follows h.
    out = shardings(_constrained(), "op-priority")
    assert out["c"] == out["h"] == '[{}, {"a"}]'
    assert out["y"] == out["z"] == '[{?}, {"a", ?}]'


def test_an_open_sharding_constraint_reaches_its_input_by_propagation_only():
    # Not fully closed: not copied (shouldApply); it propagates back through the pass-through
    # constraint op to h, open, and from h to the other use z.
    out = shardings(_constrained('[{?}, {"a"}]'), "op-priority")
    assert out["c"] == '[{?}, {"a"}]'
    assert out["h"] == out["z"] == out["y"] == '[{?}, {"a", ?}]'


def test_a_closed_constraint_is_not_copied_when_another_constraint_on_its_input_differs():
    # isUsedByConstraintWithDifferentSharding: h is constrained twice, differently; neither is copied.
    out = shardings(_constrained('[{}, {"a"}]', '[{"a"}, {}]'), "op-priority")
    assert out["c"] == '[{}, {"a"}]' and out["d"] == '[{"a"}, {}]'
    assert out["h"] != '[{}, {"a"}]' and out["h"] != '[{"a"}, {}]'  # open: what propagation gave it


@pytest.mark.parametrize("direction, h, y", [
    ("none", "[{?}, {?}]", "[{?}, {?}]"),
    ("forward", '[{"a", ?}, {?}]', '[{"a", ?}, {?}]'),
    ("backward", "[{?}, {?}]", "[{?}, {?}]"),
    ("both", '[{"a", ?}, {?}]', '[{"a", ?}, {?}]'),
])
def test_a_barrier_lets_shardings_through_in_its_allowed_direction_only(direction, h, y):
    # x (sharded) -> barrier -> h -> relu -> y: only the forward direction carries x's "a" past the
    # barrier, so h and y get it under forward and both only.
    g = GraphBuilder("barrier", {"a": 2})
    g.tensor("x", [8, 8], sharding='[{"a", ?}, {?}]')
    g.op("propagation_barrier", ["x"], output="h", name="bar", allowed_direction=direction)
    g.op("relu", ["h"], output="y", name="relu")
    out = shardings(g.build(), "op-priority")
    assert (out["h"], out["y"]) == (h, y)


@pytest.mark.parametrize("direction, x", [
    ("none", "[{?}, {?}]"), ("forward", "[{?}, {?}]"), ("backward", '[{?}, {"a", ?}]'), ("both", '[{?}, {"a", ?}]'),
])
def test_a_barrier_stops_backward_propagation_unless_allowed(direction, x):
    # y's annotation flows back through relu to h, and past the barrier to x only backward.
    g = GraphBuilder("barrier", {"a": 2})
    g.tensor("x", [8, 8])
    g.op("propagation_barrier", ["x"], output="h", name="bar", allowed_direction=direction)
    g.op("relu", ["h"], output="y", name="relu", out_sharding='[{?}, {"a", ?}]')
    out = shardings(g.build(), "op-priority")
    assert out["h"] == '[{?}, {"a", ?}]'
    assert out["x"] == x
