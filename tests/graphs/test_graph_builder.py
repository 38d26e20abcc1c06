import pytest

from graphs import GraphBuilder
from planner.errors import ModelError


def test_default_op_and_output_names():
    b = GraphBuilder("d")
    b.tensor("x", [2])
    out = b.op("neg", ["x"])
    assert out == "neg_0.out"
    g = b.build()
    assert g.producer("neg_0.out") == "neg_0"


def test_sharding_text_binds_to_default_mesh():
    b = GraphBuilder("s", {"x": 2, "y": 4})
    b.param("w", [8, 8], sharding='[{"x"}, {"y", ?}]')
    b.op("neg", ["w"])
    g = b.build()
    assert str(g.tensor("w").sharding) == 'sharding<@mesh, [{"x"}, {"y", ?}]>'


def test_sharding_without_mesh_is_an_error():
    with pytest.raises(ModelError, match="has a sharding but the model has no mesh"):
        GraphBuilder("n").tensor("x", [2], sharding='[{"x"}]')


def test_errors_carry_the_given_line_and_source():
    b = GraphBuilder("l", {"x": 2}, source="m.yaml")
    with pytest.raises(ModelError) as e:
        b.tensor("x", [2], dtype="f64", line=12)
    assert str(e.value).startswith("m.yaml:12: tensor 'x': unknown dtype")


def test_annotate_shardings_reaches_activations_via_out_sharding():
    b = GraphBuilder("a", {"x": 2})
    b.tensor("in", [4, 4])
    b.op("relu", ["in"], output="act", name="r")
    b.annotate_shardings({"a*": '[{"x"}, {}]'})
    g = b.build()
    assert g.op("r").out_sharding.dims_text() == '[{"x"}, {}]'
    assert g.tensor("act").sharding == g.op("r").out_sharding


def test_annotate_shardings_refuses_to_override_an_explicit_sharding():
    b = GraphBuilder("a", {"x": 2})
    b.tensor("in", [4, 4], sharding='[{}, {"x"}]')
    with pytest.raises(ModelError, match="already has sharding"):
        b.annotate_shardings({"in": '[{"x"}, {}]'})


def test_annotate_strategies_by_pattern_and_conflicts():
    b = GraphBuilder("st", {"d": 8})
    b.tensor("x", [4, 4])
    b.op("relu", ["x"], name="l0.relu")
    b.op("relu", ["x"], name="l1.relu")
    b.annotate_strategies({"l*.relu": [[2, 4]]})
    g = b.build()
    assert g.op("l0.relu").strategy == g.op("l1.relu").strategy == ((2, 4),)
    with pytest.raises(ModelError, match="pattern 'nothing\\*' matches no op"):
        b.annotate_strategies({"nothing*": [[1, 1]]})
    with pytest.raises(ModelError, match="already has a strategy"):
        b.annotate_strategies({"l0.*": [[1, 1]]})


def test_shard_like_groups_are_validated_like_shard_as_with_their_lines():
    b = GraphBuilder("g", {"x": 2}, source="m.py")
    b.tensor("a", [4, 2])
    b.op("relu", ["a"], output="h", name="r")
    b.op("sharding_constraint", ["h"], output="hc", name="c", out_sharding='[{"x"}, {}]')
    b.shard_like("a", "h", "hc", line=3)
    assert b.build().shard_like == (("a", "h", "hc"),)
    b.shard_like("h", "hx", line=7)
    with pytest.raises(ModelError) as e:
        b.build()
    assert str(e.value) == "m.py:7: shard_like names tensor 'hx', which is not defined; did you mean h?"


def test_a_constraint_given_its_sharding_by_a_pattern_is_complete():
    b = GraphBuilder("p", {"x": 2})
    b.tensor("a", [4, 2])
    b.op("sharding_constraint", ["a"], output="ac", name="c")
    b.annotate_shardings({"ac": '[{}, {"x"}]'})
    assert b.build().tensor("ac").sharding.dims_text() == '[{}, {"x"}]'
