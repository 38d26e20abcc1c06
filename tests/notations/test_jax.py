import pytest
from hypothesis import given

from planner.errors import NotExpressibleError, ParseError
from planner.ir import parse_mesh, parse_sharding
from planner.notations.jax import from_jax_type, from_partition_spec, to_jax_type, to_partition_spec

from ..ir.shardings_strategy import shapes_for, shardings

MESH = parse_mesh('@mesh = <["X"=2, "Y"=4]>')


def test_seed001_type_strings():
    assert to_jax_type(parse_sharding('[{"X"}, {}]', MESH), (4, 2), "int32") == "int32[4@X,2]"
    assert to_jax_type(parse_sharding('[{}, {"Y"}]', MESH), (1, 8), "i32") == "i32[1,8@Y]"
    assert to_jax_type(parse_sharding('[{"X"}, {"Y"}]', MESH), (4, 8), "f32") == "f32[4@X,8@Y]"


def test_partition_spec_of_several_axes_is_a_tuple():
    s = parse_sharding('[{"X", "Y"}, {}]', MESH)
    assert to_partition_spec(s) == "P(('X', 'Y'), None)"
    assert from_partition_spec("P(('X', 'Y'), None)", MESH, 2) == s


def test_partition_spec_pads_missing_trailing_entries():
    assert str(from_partition_spec("P('X')", MESH, rank=3)) == 'sharding<@mesh, [{"X"}, {}, {}]>'
    assert str(from_partition_spec("PartitionSpec()", MESH, rank=1)) == "sharding<@mesh, [{}]>"


def test_open_empty_dimension_is_unconstrained():
    s = parse_sharding('[{?}, {"X"}]', MESH)
    assert to_partition_spec(s) == "P(P.UNCONSTRAINED, 'X')"
    assert from_partition_spec(to_partition_spec(s), MESH, 2) == s


def test_sub_axes_are_not_expressible_as_partition_spec():
    mesh = parse_mesh('@m = <["d"=8]>')
    s = parse_sharding('[{"d":(1)2}, {"d":(2)4}]', mesh)
    with pytest.raises(NotExpressibleError, match="sub-axis"):
        to_partition_spec(s)
    assert to_jax_type(s, (64, 64)) == "f32[64@d:(1)2,64@d:(2)4]"


def test_unreduced_is_not_a_partition_spec_but_is_a_type():
    s = parse_sharding('[{"X"}, {}], unreduced={"Y"}', MESH)
    with pytest.raises(NotExpressibleError, match="pending reductions"):
        to_partition_spec(s)
    assert to_jax_type(s, (4, 4)) == "f32[4@X,4]{unreduced:Y}"


def test_bad_partition_spec_text_is_a_parse_error():
    with pytest.raises(ParseError):
        from_partition_spec("P(X)", MESH, 1)
    with pytest.raises(ParseError, match="3 entries for a rank-2"):
        from_partition_spec("P('X', None, None)", MESH, 2)


@given(shardings(allow_unreduced=True).flatmap(lambda s: shapes_for(s.rank).map(lambda sh: (s, sh))))
def test_jax_type_round_trips_the_layout(pair):
    s, shape = pair
    back, back_shape, dtype = from_jax_type(to_jax_type(s, shape, "bf16"), s.mesh)
    assert back_shape == shape and dtype == "bf16"
    assert back == s.layout_only()
