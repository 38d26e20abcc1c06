"""The aggressive pass: conflicts between factors are resolved, not dropped (Shardy's
AggressiveFactorPropagation); golden input -> output with the reason each holds."""

from graphs.graph_builder import GraphBuilder
from tests.searches.propagate_models import dot, shardings


def test_shardys_header_example_gives_b_the_result_factor():
    # C = dot(A, B), A F0="a", C F1="a": B carries F1 (not F0) and uses nothing, so it takes F1="a";
    # C cannot take F0="a" (it already uses "a"), A does not carry F1.
    out = shardings(dot('[{"a", ?}, {?}]', '[{?}, {"a", ?}]'), "aggressive")
    assert out == {"A": '[{"a", ?}, {?}]', "B": '[{?}, {"a", ?}]', "C": '[{?}, {"a", ?}]'}


def test_equal_sizes_resolve_a_conflict_by_operand_index():
    # z = x + y, x holding "a" on dimension 0 and y (same shape) on dimension 1: both factors want "a"
    # for z; the tensors are the same size, so the lower operand index goes first.
    g = GraphBuilder("order", {"a": 2})
    g.tensor("x", [8, 8], sharding='[{"a", ?}, {?}]')
    g.tensor("y", [8, 8], sharding='[{?}, {"a", ?}]')
    g.op("add", ["x", "y"], output="z", name="add")
    assert shardings(g.build(), "aggressive")["z"] == '[{"a", ?}, {?}]'
    # Swap the operands: now the "a" on dimension 1 comes from operand 0 and wins.
    g = GraphBuilder("order", {"a": 2})
    g.tensor("x", [8, 8], sharding='[{"a", ?}, {?}]')
    g.tensor("y", [8, 8], sharding='[{?}, {"a", ?}]')
    g.op("add", ["y", "x"], output="z", name="add")
    assert shardings(g.build(), "aggressive")["z"] == '[{?}, {"a", ?}]'


def test_larger_tensor_goes_before_operand_order():
    # C = dot(A, B) with A 8x16 F0 (i)="a" and a larger B 16x64 F1 (j)="a": the result takes F1 from
    # B, the larger source, although A is operand 0.
    g = GraphBuilder("size", {"a": 2})
    g.tensor("A", [8, 16], sharding='[{"a", ?}, {?}]')
    g.param("B", [16, 64], sharding='[{?}, {"a", ?}]')
    g.op("matmul", ["A", "B"], output="C", name="dot")
    assert shardings(g.build(), "aggressive")["C"] == '[{?}, {"a", ?}]'


def test_an_elementwise_operand_counts_at_its_broadcast_size():
    # z = x * y, x f32[16, 1] holding "a" on its rows and y f32[32] (broadcast over the rows) on the columns: JAX
    # lowers the implicit broadcast to broadcast_in_dim, so Shardy's multiply sees two f32[16, 32] operands, the same
    # size: the lower operand index goes first, although y itself is the larger (JAX 0.10.2: a[:, None] * b[None, :]
    # gives the product a's rows, tests/frontends/test_shardy_suite.py's outer_conflict)
    g = GraphBuilder("broadcast", {"a": 2})
    g.tensor("x", [16, 1], sharding='[{"a", ?}, {?}]')
    g.tensor("y", [32], sharding='[{"a", ?}]')
    g.op("mul", ["x", "y"], output="z", name="mul")
    assert shardings(g.build(), "aggressive")["z"] == '[{"a", ?}, {?}]'
