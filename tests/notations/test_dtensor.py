import pytest

from planner.errors import NotExpressibleError, ParseError
from planner.ir import parse_mesh, parse_sharding
from planner.notations.dtensor import from_placements, to_placements

MESH = parse_mesh('@m = <["x"=2, "y"=4]>')


def test_shard_replicate_partial():
    s = parse_sharding('[{"x"}, {}], unreduced={"y"}', MESH)
    assert to_placements(s) == "[Shard(0), Partial()]"
    assert from_placements("[Shard(0), Partial()]", MESH, 2) == s


def test_short_placement_names_are_read():
    assert str(from_placements("[R, S(1)]", MESH, 2)) == 'sharding<@m, [{}, {"y"}]>'


def test_two_axes_on_one_dim_in_mesh_order():
    s = parse_sharding('[{"x", "y"}]', MESH)
    assert to_placements(s, (16,)) == "[Shard(0), Shard(0)]"
    assert from_placements("[Shard(0), Shard(0)]", MESH, 1) == s


def test_axes_against_mesh_order_need_strided_shard():
    with pytest.raises(NotExpressibleError, match="_StridedShard"):
        to_placements(parse_sharding('[{"y", "x"}]', MESH))


def test_uneven_nested_split_is_not_expressible():
    with pytest.raises(NotExpressibleError, match="torch.chunk"):
        to_placements(parse_sharding('[{"x", "y"}]', MESH), (6,))


def test_sub_axes_are_not_expressible():
    d = parse_mesh('@d = <["d"=8]>')
    with pytest.raises(NotExpressibleError, match="sub-axis"):
        to_placements(parse_sharding('[{"d":(1)2}]', d))


def test_wrong_number_of_placements():
    with pytest.raises(ParseError, match="has 1 entries but mesh @m has 2 axes"):
        from_placements("[Replicate()]", MESH, 1)
