"""From propagated shardings to a plan: each op's strategy, explicit reshards where shardings
disagree, and the plan proven on the simulator like a bfs or ilp plan."""

import json

import pytest

from graphs.graph_builder import GraphBuilder
from planner.api import plan
from planner.errors import PlanningError
from planner.searches.propagate.plan import op_factor_axes
from planner.rules import rule_for
from planner.simulation.run import simulate


def _conflicting_dot():
    # C = A @ B, A 8x16 and B 16x64 both closed on the contracting dimension k, on different axes.
    g = GraphBuilder("conflict", {"a": 2, "b": 2})
    g.tensor("A", [8, 16], sharding='[{}, {"a"}]')
    g.param("B", [16, 64], sharding='[{"b"}, {}]')
    g.op("matmul", ["A", "B"], output="C", name="dot")
    return g.build()


def test_a_dot_whose_operands_conflict_keeps_the_larger_operands_sharding():
    graph = _conflicting_dot()
    rule = rule_for(graph.op("dot"), [(8, 16), (16, 64)], (8, 64))
    a, b = graph.tensor("A").sharding, graph.tensor("B").sharding
    c = graph.tensor("A").sharding.with_dims([[], []])
    fa = op_factor_axes(rule, [a, b], c, [8 * 16 * 4, 16 * 64 * 4], graph.mesh)
    k = rule.factor_names.index("k")  # the contracting factor
    assert [str(x) for x in fa[k]] == ['"b"']  # B (4 KiB) is larger than A (512 B)
    p = plan(graph, search="propagate")
    (r,) = [r for r in p.reshards if r.tensor == "A"]  # A is redistributed to B's k sharding
    assert r.destination.dims_text() == '[{}, {"b"}]'
    result = simulate(p, seed=0)
    assert result.ok and result.measured_comm_bytes_per_device == p.totals.comm_bytes_per_device


def test_a_contracting_dimension_sharded_on_both_sides_leaves_a_pending_sum():
    g = GraphBuilder("pending", {"a": 2})
    g.tensor("A", [8, 16], sharding='[{}, {"a"}]')
    g.param("B", [16, 8], sharding='[{"a"}, {}]')
    g.op("matmul", ["A", "B"], output="C", name="dot")
    p = plan(g.build(), search="propagate")
    assert p.op("dot").result_sharding.dims_text() == '[{}, {}], unreduced={"a"}'
    (r,) = p.reshards
    assert [s.kind for s in r.steps] == ["AllReduce"]  # C is delivered as propagated: replicated
    result = simulate(p, seed=0)
    assert result.ok and result.measured_comm_bytes_per_device == p.totals.comm_bytes_per_device


def test_json_shows_propagated_shardings_with_open_marks_and_the_phases():
    g = GraphBuilder("marks", {"a": 2})
    g.tensor("x", [8, 8], sharding='[{"a", ?}, {?}]')
    g.op("relu", ["x"], output="y", name="relu")
    p = plan(g.build(), search="propagate")
    d = json.loads(json.dumps(p.to_dict(phases=True)))
    assert d["search"] == "propagate"
    assert d["tensors"]["y"]["sharding"] == 'sharding<@mesh, [{"a", ?}, {?}]>'
    assert d["propagation"]["pass"] == "user-priority"
    assert [ph["label"] for ph in d["phases"]][0] == "p0 level 1: pass-through ops with single-use operands"
    assert d["phases"][0]["tensors"]["y"] == 'sharding<@mesh, [{"a", ?}, {?}]>'
    assert p.explain("y")[1] == '  dimension 0: "a" from op relu (p0 level 1: pass-through ops with single-use operands)'


def test_propagate_training_plan_runs_backward_exactly():
    g = GraphBuilder("train", {"a": 2, "b": 2})
    g.tensor("x", [8, 16], sharding='[{"a", ?}, {?}]')
    g.param("w", [16, 8], sharding='[{?}, {"b", ?}]')
    h = g.op("matmul", ["x", "w"], output="h", name="mm")
    g.op("mean", [g.op("mul", [h, h], output="sq", name="square")], output="loss", name="reduce")
    p = plan(g.build(), search="propagate", training=True)
    r = simulate(p, seed=3)
    assert r.ok and set(r.gradients) == {"w"}
    assert r.measured_comm_bytes_per_device == p.totals.comm_bytes_per_device


def test_a_propagated_plan_over_the_memory_budget_is_refused_naming_it():
    g = GraphBuilder("budget", {"a": 2})
    g.tensor("x", [64, 64])
    g.param("w", [64, 64])
    g.op("matmul", ["x", "w"], output="y", name="mm")
    graph = g.build()
    # unannotated: x batch-sharded on "a" (32x64 f32 = 8 KiB), w replicated (16 KiB), y 8 KiB
    need = plan(graph, search="propagate").totals.memory_bytes_per_device
    assert need > 0
    with pytest.raises(PlanningError, match="more than the memory budget"):
        plan(graph, search="propagate", memory_budget=need - 1)
    assert plan(graph, search="propagate", memory_budget=need).totals.memory_bytes_per_device == need


def test_the_same_model_gives_byte_identical_propagated_plans():
    graph = _conflicting_dot()
    first = json.dumps(plan(graph, search="propagate").to_dict(phases=True))
    assert json.dumps(plan(graph, search="propagate").to_dict(phases=True)) == first
