"""Golden plans of the redistribution engine: the collective SPEC §5 names for each case."""

import pytest

from planner.ir import parse_mesh, parse_sharding
from planner.redistribution import ReshardError, reshard
from planner.simulation.reshard import verify

MESH = parse_mesh('@m = <["x"=2, "y"=4]>')


def plan(src, dst, shape=(64, 32), mesh=MESH, dst_mesh=None):
    p = reshard(shape, "f32", parse_sharding(src, mesh), parse_sharding(dst, dst_mesh or mesh))
    v = verify(p)
    assert v.verified and v.measured_bytes_per_device == p.bytes_per_device
    return p


def kinds(p):
    return [(s.kind, [str(a) for a in s.axes], list(s.dims)) for s in p.steps]


def test_same_sharding_needs_no_steps():
    assert plan('[{"x"}, {"y"}]', '[{"x"}, {"y"}]').steps == ()


def test_axis_leaving_a_dimension_is_an_all_gather():
    p = plan('[{"x"}, {"y"}]', '[{}, {"y"}]')
    assert kinds(p) == [("AllGather", ['"x"'], [0])]
    assert p.bytes_per_device == 1 * 32 * 8 * 4 == p.lower_bound_bytes_per_device


def test_added_axis_is_a_local_slice():
    p = plan('[{}, {}]', '[{"x"}, {"y"}]')
    assert [s.kind for s in p.steps] and all(s.kind == "Slice" for s in p.steps)
    assert p.bytes_per_device == 0


def test_axis_moving_between_dimensions_is_an_all_to_all():
    p = plan('[{"y"}, {}]', '[{}, {"y"}]')
    assert kinds(p) == [("AllToAll", ['"y"'], [0, 1])]
    assert p.bytes_per_device == 3 * (16 * 8) * 4 == p.lower_bound_bytes_per_device


def test_pending_sum_to_a_sharded_consumer_is_a_reduce_scatter():
    p = plan('[{"x"}, {}], unreduced={"y"}', '[{"x"}, {"y"}]')
    assert kinds(p) == [("ReduceScatter", ['"y"'], [1])]


def test_pending_sum_to_a_replicated_consumer_is_an_all_reduce():
    p = plan('[{"x"}, {}], unreduced={"y"}', '[{"x"}, {}]')
    assert kinds(p) == [("AllReduce", ['"y"'], [])]
    assert p.bytes_per_device == 2 * 3 * (32 * 32 // 4) * 4


def test_shard_moving_to_another_mesh_axis_is_one_permute():
    """DTensor gathers and re-slices here; one CollectivePermute reaches the bound."""
    p = plan('[{"x"}, {}]', '[{"y":(1)2}, {}]')
    assert [s.kind for s in p.steps] == ["CollectivePermute"]
    assert p.ratio == 1.0


def test_axis_order_change_within_a_dimension_is_a_permute():
    p = plan('[{"x", "y"}, {}]', '[{"y", "x"}, {}]')
    assert [s.kind for s in p.steps] == ["CollectivePermute"]
    assert p.bytes_per_device == 8 * 32 * 4


def test_sub_axes_of_a_one_dimensional_mesh():
    d8 = parse_mesh('@d = <["d"=8]>')
    p = plan('[{"d":(1)2}, {"d":(2)4}], unreduced={}', '[{"d"}, {}]', mesh=d8)
    assert [s.kind for s in p.steps] == ["AllToAll"]
    assert p.ratio == 1.0


def test_mesh_change_with_the_same_device_order_moves_nothing():
    full = parse_mesh('@full = <["devices"=8]>')
    p = reshard((4, 4), "f32", parse_sharding('[{"x"}, {"y"}]', parse_mesh('@xy = <["x"=4, "y"=2]>')),
                parse_sharding('[{"devices":(1)4}, {"devices":(4)2}]', full))
    assert p.steps == () and p.lower_bound_bytes_per_device == 0


def test_mesh_change_with_another_device_order_permutes():
    a = parse_mesh('@a = <["x"=8]>')
    b = parse_mesh('@b = {<["x"=8]>, device_ids=[1, 0, 3, 2, 5, 4, 7, 6]}')
    p = plan('[{"x"}]', 'sharding<@b, [{"x"}]>', shape=(16,), mesh=a, dst_mesh=[b, a])
    assert [s.kind for s in p.steps] == ["CollectivePermute"]
    assert p.bytes_per_device == 2 * 4 == p.lower_bound_bytes_per_device


def test_different_device_counts_are_refused():
    with pytest.raises(ReshardError, match="same devices"):
        reshard((4,), "f32", parse_sharding('[{"x"}]', parse_mesh('@a = <["x"=2]>')),
                parse_sharding('[{"x"}]', parse_mesh('@b = <["x"=4]>')))


def test_non_divisible_shapes_verify():
    p = plan('[{"x", "y"}, {}]', '[{}, {"y"}]', shape=(7, 5))
    assert p.bytes_per_device >= p.lower_bound_bytes_per_device
