"""The basic pass (Shardy's BasicFactorPropagation): per factor, the longest compatible major axes,
truncated where they would conflict; golden input -> output, each with the reason it holds."""

import pytest

from graphs.graph_builder import GraphBuilder
from planner.ir.axis import AxisRef
from planner.searches.propagate import compatible_axes, propagate
from tests.searches.propagate_models import dot, shardings

SEVEN = {n: 2 for n in "abcdefg"}


def _names(axes):
    return [a.name for a in axes]


def test_compatible_axes_of_shardys_documented_example():
    # Shardy's propagation doc: T0: F0=[a], F2=[f]; T1: F0=[a,b], F1=[c,d], F2=[g]; T2: F1=[c,e].
    # F0: [a] is a prefix of [a,b] -> [a,b]; F1: [c,d] and [c,e] agree on c only -> [c];
    # F2: [f] and [g] conflict at once -> nothing.
    a, b, c, d, e, f, g = (AxisRef(n) for n in "abcdefg")
    assert _names(compatible_axes([(a,), (a, b)])) == ["a", "b"]
    assert _names(compatible_axes([(c, d), (c, e)])) == ["c"]
    assert compatible_axes([(f,), (g,)]) == ()


def test_shardys_documented_example_on_tensors():
    # The same factors as an einsum ik,ijk->j (i=F0, j=F1, k=F2): T0 grows F0 to [a, b]; F1's
    # compatible [c] is a prefix of what T1 and T2 hold, so neither changes; F2 conflicts.
    g = GraphBuilder("doc", SEVEN)
    g.tensor("T0", [8, 8], sharding='[{"a", ?}, {"f", ?}]')
    g.param("T1", [8, 8, 8], sharding='[{"a", "b", ?}, {"c", "d", ?}, {"g", ?}]')
    g.op("einsum", ["T0", "T1"], output="T2", name="e", equation="ik,ijk->j", out_sharding='[{"c", "e", ?}]')
    out = shardings(g.build(), "basic")
    assert out == {"T0": '[{"a", "b", ?}, {"f", ?}]', "T1": '[{"a", "b", ?}, {"c", "d", ?}, {"g", ?}]',
                   "T2": '[{"c", "e", ?}]'}


def test_sub_axis_prefix_grows_to_the_longer_sub_axis():
    # "a":(1)2 is the major half of "a":(1)4: compatible, so both tensors and the result take "a":(1)4.
    g = GraphBuilder("sub", {"a": 8})
    g.tensor("x", [16], sharding='[{"a":(1)2, ?}]')
    g.tensor("y", [16], sharding='[{"a":(1)4, ?}]')
    g.op("add", ["x", "y"], output="z", name="add")
    assert shardings(g.build(), "basic") == {"x": '[{"a":(1)4, ?}]', "y": '[{"a":(1)4, ?}]', "z": '[{"a":(1)4, ?}]'}


def test_a_closed_dimension_or_a_replicated_axis_keeps_the_axis_from_every_tensor_of_the_op():
    # Shardy's basic pass cuts a factor's axes before the first one any tensor of the op cannot hold
    # (basic_factor_propagation.cc, compatiblePrefix over every operand and result; lit:
    # basic_propagation.mlir, multi_axes_some_axes_incompatible). y's dimension 0 is closed, so h does not
    # get x's "a" either; r replicates "a" explicitly, so neither does z.
    g = GraphBuilder("closed", {"a": 2})
    g.tensor("x", [8, 8], sharding='[{"a", ?}, {?}]')
    g.tensor("y", [8, 8], sharding='[{}, {?}]')
    h = g.op("add", ["x", "y"], output="h", name="add")
    g.tensor("r", [8, 8], sharding='[{?}, {?}], replicated={"a"}')
    g.op("mul", [h, "r"], output="z", name="mul")
    out = shardings(g.build(), "basic")
    assert out["y"] == "[{}, {?}]"
    assert out["h"] == out["z"] == "[{?}, {?}]"
    assert out["r"] == '[{?}, {?}], replicated={"a"}'
    # the aggressive pass grows each tensor on its own (aggressive_factor_propagation.cc): h and z take "a"
    aggressive = shardings(g.build(), "aggressive")
    assert aggressive["h"] == aggressive["z"] == '[{"a", ?}, {?}]' and aggressive["y"] == "[{}, {?}]"


def test_an_axis_two_factors_want_is_dropped_by_both():
    # Shardy's header example under basic: A shards F0 (i) on "a", C shards F1 (j) on "a": the two
    # factors conflict on "a", so basic propagation gives B nothing (aggressive resolves it).
    out = shardings(dot('[{"a", ?}, {?}]', '[{?}, {"a", ?}]'), "basic")
    assert out["B"] == "[{?}, {?}]"


def test_axes_only_grow_minor_wards():
    # x holds "b", y holds "a" on the same factor: no common prefix, so neither is rewritten and
    # the result gets nothing (a tensor's existing axes are never replaced or reordered).
    g = GraphBuilder("minor", {"a": 2, "b": 2})
    g.tensor("x", [8], sharding='[{"b", ?}]')
    g.tensor("y", [8], sharding='[{"a", ?}]')
    g.op("add", ["x", "y"], output="z", name="add")
    assert shardings(g.build(), "basic") == {"x": '[{"b", ?}]', "y": '[{"a", ?}]', "z": "[{?}]"}


def test_reshape_splits_axes_over_its_factors_with_sub_axes():
    # reshape 8 -> 2x4 with [{"a"}] on a=4: the major factor (2) takes "a":(1)2, the minor one "a":(2)2.
    g = GraphBuilder("reshape", {"a": 4})
    g.tensor("x", [8], sharding='[{"a", ?}]')
    g.op("reshape", ["x"], output="y", name="r", shape=[2, 4])
    assert shardings(g.build(), "basic")["y"] == '[{"a":(1)2, ?}, {"a":(2)2, ?}]'


def test_non_divisible_non_minor_factor_stops_propagation():
    # reshape 12 -> 3x4 with [{"a"}] (a=2): the major factor has size 3, which "a" (2) does not
    # divide, and a factor sharing a dimension must be split evenly: the result stays unsharded.
    g = GraphBuilder("nondiv", {"a": 2})
    g.tensor("x", [12], sharding='[{"a", ?}]')
    g.op("reshape", ["x"], output="y", name="r", shape=[3, 4])
    assert shardings(g.build(), "basic")["y"] == "[{?}, {?}]"


def test_non_divisible_minor_factor_propagates_with_padding():
    # reshape 2x3 -> 6 backwards: y [{"a"}] with a=2 splits 6 = 2x3 over the factors: the major
    # factor (2) takes "a" whole, so x gets [{"a"}, {}]; a lone factor of size 5 takes "a" padded (3+2).
    g = GraphBuilder("minordiv", {"a": 2})
    g.tensor("x", [2, 3])
    g.op("reshape", ["x"], output="y", name="r", shape=[6], out_sharding='[{"a", ?}]')
    g.tensor("u", [5], sharding='[{"a", ?}]')
    g.op("neg", ["u"], output="v", name="n")
    out = shardings(g.build(), "basic")
    assert out["x"] == '[{"a", ?}, {?}]'
    assert out["v"] == '[{"a", ?}]'


def test_sub_axes_that_do_not_nest_are_refused_with_advice():
    # "a":(1)2 and "a":(1)3 of a=6 cut the axis at 2 and at 3, which no chain of sub-axes holds.
    g = GraphBuilder("bad", {"a": 6})
    g.tensor("x", [12], sharding='[{"a":(1)2, ?}]')
    g.tensor("y", [12], sharding='[{"a":(1)3, ?}]')
    g.op("add", ["x", "y"], output="z", name="add")
    graph = g.build()
    with pytest.raises(Exception, match="do not nest.*use --search bfs or ilp"):
        propagate(graph, graph.mesh, "basic")


def test_an_unreduced_axis_of_a_tensor_is_never_added_to_it():
    # p is a pending sum over "a": "a" cannot also split it, so p stays as it is; in the basic pass that
    # keeps "a" from the whole op (compatiblePrefixNoConflictsWithinFactor checks unreduced axes), in the
    # aggressive one only from p.
    g = GraphBuilder("pending", {"a": 2})
    g.tensor("x", [8, 8], sharding='[{"a", ?}, {?}]')
    g.tensor("p", [8, 8], sharding='[{?}, {?}], unreduced={"a"}')
    g.op("mul", ["x", "p"], output="z", name="mul")
    out = shardings(g.build(), "basic")
    assert out["p"] == '[{?}, {?}], unreduced={"a"}'
    assert out["z"] == "[{?}, {?}]"
    aggressive = shardings(g.build(), "aggressive")
    assert aggressive["p"] == '[{?}, {?}], unreduced={"a"}' and aggressive["z"] == '[{"a", ?}, {?}]'
