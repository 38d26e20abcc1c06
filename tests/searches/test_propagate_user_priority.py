"""User priorities: annotations of priority p0 propagate through the whole program before p1's
are restored (seed 003: "batch parallelism first, then ZeRO"); golden input -> output."""

from graphs.graph_builder import GraphBuilder
from planner.searches.propagate import propagate
from tests.searches.propagate_models import dot, shardings


def test_p0_propagates_through_the_program_before_p1_is_restored():
    # A's F0="a" is p1, B's F1="a" is p0: in round p0 only B's "a" exists and reaches C on dimension
    # 1; when A's p1 annotation is restored, C already uses "a", so it keeps F1.
    graph = dot('[{"a", ?}p1, {?}]', None, b='[{?}, {"a", ?}p0]')
    assert shardings(graph, "user-priority")["C"] == '[{?}, {"a", ?}]'
    # Without user priorities (op-priority: every annotation at once) the larger-source rule decides
    # instead; A and B are the same size, so operand 0 (A, F0) wins.
    assert shardings(graph, "op-priority")["C"] == '[{"a", ?}, {?}]'


def test_a_lower_priority_dimension_is_held_closed_and_its_axes_replicated_until_its_round():
    # x = relu(h) with h annotated p1 on dim 1 and x annotated p0 on dim 0 with the same axis.
    # Shardy (user_priority_propagation.cc, getInitializedSharding) starts h as [{?}, {}] with "a"
    # explicitly replicated until round p1: x's "a" cannot flow back into h in round p0. In round
    # p1 h's own annotation is restored as written.
    g = GraphBuilder("restore", {"a": 2})
    g.tensor("h", [8, 8], sharding='[{?}, {"a", ?}p1]')
    g.op("relu", ["h"], output="x", name="relu", out_sharding='[{"a", ?}, {?}]')
    graph = g.build()
    p = propagate(graph, graph.mesh, "user-priority")
    assert [ph.label.split(" level")[0] for ph in p.phases] == ["p0"] * 5 + ["p1"] * 5
    assert p.phases[4].shardings["h"].dims_text() == '[{?}, {}]'  # after round p0: held back
    assert p.sharding("h").dims_text() == '[{?}, {"a", ?}]'  # its own p1 annotation, restored
    assert p.sharding("x").dims_text() == '[{"a", ?}, {?}]'
    assert p.explain("h")[1].endswith("user annotation (p1: user annotations)")


def test_without_priorities_user_priority_is_op_priority():
    graph = dot('[{"a", ?}, {?}]', '[{?}, {"a", ?}]')
    assert shardings(graph, "user-priority") == shardings(graph, "op-priority")
