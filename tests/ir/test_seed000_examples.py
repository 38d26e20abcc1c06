"""Every example of seed 000 (the sharding representation), verbatim."""

import numpy as np
import pytest

from planner.errors import ParseError, ShardingError
from planner.ir import AxisRef, device_index_ranges, parse_mesh, parse_sharding, same_layout
from planner.ir.layout import holders_count


def test_basic_structure_four_devices_reshaped_to_2x2():
    mesh = parse_mesh('@mesh_xy = <["x"=2, "y"=2]>')
    assert mesh.shape == (2, 2) and mesh.devices == (0, 1, 2, 3)
    # [[a, b], [c, d]] split by rows over "x": devices 0,1 hold row 0; 2,3 hold row 1.
    s = parse_sharding('sharding<@mesh_xy, [{"x"}, {}]>', mesh)
    ranges = device_index_ranges(s, (2, 2))
    assert ranges[:, 0].tolist() == [[0, 1], [0, 1], [1, 2], [1, 2]]
    both = parse_sharding('sharding<@mesh_xy, [{"x"}, {"y"}]>', mesh)
    assert device_index_ranges(both, (2, 2)).tolist() == [
        [[0, 1], [0, 1]], [[0, 1], [1, 2]], [[1, 2], [0, 1]], [[1, 2], [1, 2]],
    ]


def test_dim_sharded_by_z_then_y_has_local_shape_2x1():
    mesh = parse_mesh('@mesh_xy = <["x"=2, "y"=4, "z"=2]>')
    s = parse_sharding('sharding<@mesh_xy, [{"x"}, {"z", "y"}]>', mesh)
    assert s.local_shape((4, 8)) == (2, 1)
    assert str(s) == 'sharding<@mesh_xy, [{"x"}, {"z", "y"}]>'


def test_open_and_closed_dimensions():
    mesh = parse_mesh('@mesh_xy = <["x"=2, "y"=4, "z"=2]>')
    s = parse_sharding('sharding<@mesh_xy, [{"x"}, {"z", ?}]>', mesh)
    assert s.dims[0].is_closed and s.dims[1].is_open
    assert s.dims[1].axes == (AxisRef("z"),)
    assert str(s) == 'sharding<@mesh_xy, [{"x"}, {"z", ?}]>'


def test_explicitly_replicated_axes_are_stored_in_mesh_order():
    mesh = parse_mesh('@mesh_xy = <["c"=2, "a"=2, "b"=2]>')
    s = parse_sharding('sharding<@mesh_xy, [{}], replicated={"a", "c"}>', mesh)
    assert str(s) == 'sharding<@mesh_xy, [{}], replicated={"c", "a"}>'


def test_replicated_y_leaves_open_dim_unsharded_with_local_shape_2x8():
    mesh = parse_mesh('@mesh_xyz = <["x"=2, "y"=4, "z"=2]>')
    s = parse_sharding('sharding<@mesh_xyz, [{"x"}, {?}], replicated={"y"}>', mesh)
    assert s.local_shape((4, 8)) == (2, 8)
    assert s.replicated == (AxisRef("y"),)


def test_reshape_motivation_sub_axes_of_x():
    mesh = parse_mesh('@mesh_x = <["x"=4]>')
    arg0 = parse_sharding('<@mesh_x, [{"x"}]>'.replace("<@", "sharding<@"), mesh)
    result = parse_sharding('sharding<@mesh_x, [{"x":(1)2}, {"x":(2)2}]>', mesh)
    assert arg0.local_shape((8,)) == (2,)
    assert result.local_shape((2, 4)) == (1, 2)
    # The reshape keeps data in place: device i holds elements [2i, 2i+2) of the
    # flat tensor both before and after.
    before = device_index_ranges(arg0, (8,))
    after = device_index_ranges(result, (2, 4))
    for dev in range(4):
        (r0, r1), (c0, c1) = after[dev]
        flat = {r * 4 + c for r in range(r0, r1) for c in range(c0, c1)}
        assert flat == set(range(*before[dev][0]))


def test_only_middle_sub_axis_of_y_used_gives_local_shape_2x4():
    mesh = parse_mesh('@mesh_xyz = <["x"=2, "y"=8, "z"=2]>')
    s = parse_sharding('sharding<@mesh_xyz, [{"x"}, {"y":(2)2}]>', mesh)
    assert s.local_shape((4, 8)) == (2, 4)


def test_mesh_xy_and_mesh_full_shardings_are_equivalent():
    mesh_full = parse_mesh('@mesh_full = <"devices"=8>')
    mesh_xy = parse_mesh('@mesh_xy = <"x"=4, "y"=2>')
    a = parse_sharding('sharding<@mesh_xy, [{"x"},{ "y"}]>', mesh_xy)
    b = parse_sharding('sharding<@mesh_full, [{"devices":(1)4}, {"devices":(4)2}]>', mesh_full)
    assert same_layout(a, b, (4, 4))
    assert not same_layout(a, parse_sharding('sharding<@mesh_full, [{"devices":(2)4}, {"devices":(1)2}]>', mesh_full), (4, 4))


def test_explicitly_replicated_sub_axis():
    mesh = parse_mesh('@mesh_xyz = <["x"=2, "y"=8, "z"=2]>')
    s = parse_sharding('sharding<@mesh_xyz, [{"x"}, {"y":(2)2}], replicated={"y":(1)2}>', mesh)
    assert s.replicated == (AxisRef("y", 1, 2),)
    assert str(s) == 'sharding<@mesh_xyz, [{"x"}, {"y":(2)2}], replicated={"y":(1)2}>'


def test_replicated_sub_axes_sorted_by_pre_size():
    mesh = parse_mesh('@mesh_xyz = <["x"=2, "y"=8, "z"=2]>')
    s = parse_sharding('sharding<@mesh_xyz, [{}, {}], replicated={"y":(4)2, "x", "y":(1)2}>', mesh)
    assert str(s).endswith('replicated={"x", "y":(1)2, "y":(4)2}>')


def test_overlapping_sub_axes_are_refused():
    mesh = parse_mesh('@m = <["x"=8]>')
    with pytest.raises(ShardingError, match=r'"x":\(1\)4 .* and "x":\(2\)4 .* overlap'):
        parse_sharding('[{"x":(1)4}, {"x":(2)4}]', mesh)


def test_adjacent_sub_axes_must_be_merged():
    mesh = parse_mesh('@m = <["x"=16]>')
    with pytest.raises(ShardingError, match=r'write "x":\(1\)8 instead'):
        parse_sharding('[{"x":(1)2, "x":(2)4}]', mesh)
    with pytest.raises(ShardingError, match=r'write "x":\(1\)8 instead'):
        parse_sharding('[{}], replicated={"x":(1)2, "x":(2)4}', mesh)


def test_multiple_meshes_over_the_same_devices():
    mesh_0 = parse_mesh('@mesh_0 = {<["a"=4, "b"=2]>, device_ids=[0, 1, 2, 3, 4, 5, 6, 7]}')
    mesh_1 = parse_mesh('@mesh_1 = {<["x"=2, "y"=2, "z"=2]>, device_ids=[0, 1, 2, 3, 4, 5, 6, 7]}')
    b = parse_sharding('sharding<@mesh_0, [{"b"}]>', [mesh_0, mesh_1])
    z = parse_sharding('sharding<@mesh_1, [{"z"}]>', [mesh_0, mesh_1])
    assert same_layout(b, z, (8,))
    assert str(mesh_0) == '@mesh_0 = {<["a"=4, "b"=2]>, device_ids=[0, 1, 2, 3, 4, 5, 6, 7]}'


def test_priorities_with_gaps_and_implicit_p0():
    mesh = parse_mesh('@mesh_xy = <["w"=6, "x"=2, "y"=4, "z"=2]>')
    s = parse_sharding('sharding<@mesh_xy, [{"x"}p1, {"y"}, {"z",?}p2], replicated={}>', mesh)
    assert [d.priority for d in s.dims] == [1, 0, 2]
    assert str(s) == 'sharding<@mesh_xy, [{"x"}p1, {"y"}, {"z", ?}p2]>'


def test_closed_empty_dimension_takes_no_priority():
    mesh = parse_mesh('@m = <["x"=2]>')
    with pytest.raises(ParseError, match="closed empty dimension"):
        parse_sharding('[{}p1]', mesh)


def test_non_divisible_dimensions_are_padded():
    mesh = parse_mesh('@mesh_xy = <["x"=8, "y"=2, "z"=3]>')
    s = parse_sharding('sharding<@mesh_xy, [{"x"}, {"y"}, {"z"}]>', mesh)
    assert s.local_shape((7, 3, 8)) == (1, 2, 3)
    ranges = device_index_ranges(s, (7, 3, 8))
    # the device at x=7 holds only padding along dimension 0
    assert {tuple(r[0]) for r in ranges} == {(i, i + 1) for i in range(7)} | {(7, 7)}
    assert np.all(holders_count(s, (7, 3, 8)) == 1)


def test_rank_must_match():
    mesh = parse_mesh('@m = <["x"=2]>')
    s = parse_sharding('[{"x"}]', mesh)
    with pytest.raises(ShardingError, match="tensor 'w1' has rank 2"):
        s.check_rank((4, 4), tensor="w1")


def test_unknown_axis_names_dimension_and_axis():
    mesh = parse_mesh('@m = <["x"=2]>')
    with pytest.raises(ShardingError, match='dimension 1: axis "q" is not in mesh @m'):
        parse_sharding('[{}, {"q"}]', mesh)


def test_axis_appears_once_across_dims_and_replicated():
    mesh = parse_mesh('@m = <["x"=2, "y"=2]>')
    with pytest.raises(ShardingError, match='axis "x" is used twice: by dimension 0 and by replicated'):
        parse_sharding('[{"x"}, {}], replicated={"x"}', mesh)


def test_sub_axis_must_divide_its_axis():
    mesh = parse_mesh('@m = <["x"=6]>')
    with pytest.raises(ShardingError, match=r'"x":\(4\)2 does not fit axis "x" of size 6'):
        parse_sharding('[{"x":(4)2}]', mesh)


def test_sub_axes_of_incompatible_factorisations_are_refused():
    mesh = parse_mesh('@m = <["x"=6]>')
    with pytest.raises(ShardingError, match="cannot both be pieces"):
        parse_sharding('[{"x":(1)2}, {"x":(3)2}]', mesh)


def test_full_sub_axis_is_printed_as_the_axis():
    mesh = parse_mesh('@m = <["x"=4]>')
    assert str(parse_sharding('[{"x":(1)4}]', mesh)) == 'sharding<@m, [{"x"}]>'


def test_unreduced_axes_round_trip():
    mesh = parse_mesh('@m = <["x"=2, "y"=4]>')
    s = parse_sharding('sharding<@m, [{"x"}, {}], unreduced={"y"}>', mesh)
    assert s.unreduced == (AxisRef("y"),)
    assert parse_sharding(str(s), mesh) == s
