"""Operation priorities: the aggressive pass in levels, pass-through ops first (seed 003's
"element-wise operations first, then matrix multiplications"); golden input -> output."""

from graphs.graph_builder import GraphBuilder
from planner.searches.propagate import propagate
from tests.searches.propagate_models import shardings


def _matmul_then_add():
    # m = x @ w with w sharding j on "a"; y = m + b with b sharding i on "a" (same shape as m, one use).
    g = GraphBuilder("prio", {"a": 2})
    g.tensor("x", [8, 8])
    g.param("w", [8, 8], sharding='[{?}, {"a", ?}]')
    m = g.op("matmul", ["x", "w"], output="m", name="mm")
    g.tensor("b", [8, 8], sharding='[{"a", ?}, {?}]')
    g.op("add", [m, "b"], output="y", name="add")
    return g.build()


def test_program_order_lets_the_matmul_shard_first_without_op_priorities():
    # One aggressive pass in program order: the matmul gives m F1="a" before the add is visited.
    assert shardings(_matmul_then_add(), "aggressive")["m"] == '[{?}, {"a", ?}]'


def test_elementwise_ops_propagate_before_matmuls():
    # Level 1 runs the add (pass-through, single-use operands) first: m takes b's "a" on dimension 0,
    # and the matmul (level 3 on) can then no longer give m "a" on dimension 1.
    out = shardings(_matmul_then_add(), "op-priority")
    assert out["m"] == out["y"] == '[{"a", ?}, {?}]'


def test_each_level_is_a_phase_with_its_own_snapshot():
    p = propagate(_matmul_then_add(), _matmul_then_add().mesh, "op-priority")
    labels = [ph.label for ph in p.phases]
    assert labels == ["op-priority level 1: pass-through ops with single-use operands",
                      "op-priority level 2: pass-through ops",
                      "op-priority level 3: pass-through factors of every op",
                      "op-priority level 4: every factor, broadcasts backward only",
                      "op-priority level 5: everything"]
    # m is decided by level 1 and does not change afterwards
    assert all(ph.shardings["m"].dims_text() == '[{"a", ?}, {?}]' for ph in p.phases)
    assert p.explain("m") == ('dimension 0: "a" from op add (op-priority level 1: pass-through ops with '
                              'single-use operands)', "dimension 1: unsharded")


def test_a_broadcast_operand_only_receives_until_the_last_level():
    # y = h + bias with bias [8] broadcast along h's rows: bias's "a" reaches h only at level 5
    # ("everything"); h gets "a" on dimension 1 then, not before.
    g = GraphBuilder("bcast", {"a": 2})
    g.tensor("h", [8, 8])
    g.param("bias", [8], sharding='[{"a", ?}]')
    g.op("add", ["h", "bias"], output="y", name="add")
    graph = g.build()
    p = propagate(graph, graph.mesh, "op-priority")
    by_level = [ph.shardings["y"].dims_text() for ph in p.phases]
    assert by_level == ["[{?}, {?}]"] * 4 + ['[{?}, {"a", ?}]']


def test_pass_through_factors_go_before_contracting_ones():
    # m = x @ w; x shards its contracting dimension k on "a" and w its column j on "b". At level 3 only
    # pass-through factors move: m gets j="b" but w does not yet get k="a"; level 4 moves k too.
    g = GraphBuilder("levels", {"a": 2, "b": 2})
    g.tensor("x", [8, 8], sharding='[{?}, {"a", ?}]')
    g.param("w", [8, 8], sharding='[{?}, {"b", ?}]')
    g.op("matmul", ["x", "w"], output="m", name="mm")
    graph = g.build()
    p = propagate(graph, graph.mesh, "op-priority")
    w = [ph.shardings["w"].dims_text() for ph in p.phases]
    m = [ph.shardings["m"].dims_text() for ph in p.phases]
    assert m[2] == '[{?}, {"b", ?}]' and w[2] == '[{?}, {"b", ?}]'
    assert w[3] == '[{"a", ?}, {"b", ?}]'
