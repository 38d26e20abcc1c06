import pytest
from hypothesis import given

from planner.errors import NotExpressibleError, ShardingError
from planner.ir import Mesh, device_index_ranges, parse_mesh, parse_sharding
from planner.notations.mindspore import axes_for_splits, from_strategy, from_tensor_layout, to_tensor_layout

from ..ir.shardings_strategy import shardings


def test_seed002_matmul_strategy_on_8_devices_uses_sub_axes():
    """((2, 1), (1, 4)) on d=8: devices 0-3 hold X0, 4-7 hold X1; devices 0 and 4 hold W0 ..."""
    d8 = Mesh.from_sizes("mesh", {"d": 8})
    rows, contract, cols = axes_for_splits(d8, [2, 1, 4])  # factors i, j, k of ij,jk->ik
    x = from_strategy((2, 1), d8)
    assert [str(a) for a in rows] == ['"d":(1)2'] and contract == ()
    assert [str(a) for a in cols] == ['"d":(2)4']
    x_sharding = parse_sharding('[{"d":(1)2}, {}]', d8)
    w_sharding = parse_sharding('[{}, {"d":(2)4}]', d8)
    assert x == x_sharding
    x_rows = device_index_ranges(x_sharding, (64, 64))[:, 0].tolist()
    assert x_rows == [[0, 32]] * 4 + [[32, 64]] * 4
    w_cols = device_index_ranges(w_sharding, (64, 64))[:, 1].tolist()
    assert [w_cols[0], w_cols[4]] == [[0, 16], [0, 16]]
    assert [w_cols[1], w_cols[5]] == [[16, 32], [16, 32]]
    assert w_cols[3] == w_cols[7] == [48, 64]


def test_strategy_on_2d_mesh_uses_whole_axes():
    mesh = Mesh.from_sizes("mesh", {"x": 2, "y": 4})
    assert str(from_strategy((2, 4), mesh)) == 'sharding<@mesh, [{"x"}, {"y"}]>'
    assert str(from_strategy((8, 1), mesh)) == 'sharding<@mesh, [{"x", "y"}, {}]>'


def test_strategy_with_fewer_splits_than_devices_repeats_on_the_minor_axis():
    mesh = Mesh.from_sizes("mesh", {"x": 2, "y": 4})
    assert str(from_strategy((2, 1), mesh)) == 'sharding<@mesh, [{"x"}, {}]>'
    assert str(from_strategy((1, 4), mesh)) == 'sharding<@mesh, [{}, {"x", "y":(1)2}]>'


def test_strategy_that_does_not_divide_devices_is_refused():
    with pytest.raises(ShardingError, match="does not divide the 8 devices"):
        from_strategy((3, 1), Mesh.from_sizes("mesh", {"d": 8}))


def test_tensor_layout_of_seed000_example():
    mesh = parse_mesh('@mesh_xy = <["x"=2, "y"=4, "z"=2]>')
    s = parse_sharding('[{"x"}, {"z", "y"}]', mesh)
    assert to_tensor_layout(s) == ([2, 4, 2], [2, [0, 1]])
    assert from_tensor_layout([2, 4, 2], [2, [0, 1]], mesh) == s


def test_tensor_layout_minus_one_is_unsplit():
    mesh = parse_mesh('@m = <["x"=2, "y"=4]>')
    s = parse_sharding('[{}, {"y"}]', mesh)
    assert to_tensor_layout(s) == ([2, 4], [-1, 0])


def test_layout_without_mesh_names_axes_from_the_right():
    s = from_tensor_layout([2, 4], [1, 0])
    assert str(s) == 'sharding<@mesh, [{"m1"}, {"m0"}]>'


def test_reordered_devices_are_not_expressible():
    mesh = parse_mesh('@m = {<["x"=2]>, device_ids=[1, 0]}')
    with pytest.raises(NotExpressibleError, match="reorders devices"):
        to_tensor_layout(parse_sharding('[{"x"}]', mesh))


@given(shardings(allow_unreduced=False))
def test_tensor_layout_round_trips(s):
    if s.mesh.device_ids is not None and list(s.mesh.device_ids) != list(range(s.mesh.size)):
        return
    dm, tm = to_tensor_layout(s)
    assert from_tensor_layout(dm, tm, s.mesh) == s.layout_only()
