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


def test_a_size_1_dimension_split_past_its_size_is_replicated_by_an_all_reduce_of_its_holder():
    # f32[64, 1, 32] with its size-1 dimension over y (4 devices: the first holds it, the others padding), rows
    # over x: the holder keeps its block and the others zero theirs (a local Slice), then an AllReduce over y of
    # the 32 x 32 block, 2 * 3/4 * 4096 B, half of gathering the three blocks of padding (3 * 4096 B)
    p = plan('[{"x"}, {"y"}, {}]', '[{"x"}, {}, {}]', shape=(64, 1, 32))
    assert kinds(p) == [("Slice", ['"y"'], [1]), ("AllReduce", ['"y"'], [])]
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


def test_a_search_within_some_axes_does_not_borrow_the_others():
    """Summing a pending sum over x=4 (1024x1024 f32, 4 MiB) with y=2 free: the whole-mesh search
    slices over y, all-reduces the half (2 * 3/4 * 2 MiB = 3 MiB) and gathers it back over y
    (1/2 * 4 MiB = 2 MiB): 5 MiB received instead of the AllReduce's 2 * 3/4 * 4 MiB = 6 MiB.
    Within x alone (an axis phase before y exists) that trick is out: the AllReduce."""
    from planner.ir.axis import AxisRef

    mesh = parse_mesh('@m = <["x"=4, "y"=2]>')
    src = parse_sharding('[{}, {}], unreduced={"x"}', mesh)
    dst = parse_sharding('[{}, {}]', mesh)
    whole = reshard((1024, 1024), "f32", src, dst)
    inside = reshard((1024, 1024), "f32", src, dst, within=(AxisRef("x"),))
    mib = 1 << 20
    assert [s.kind for s in whole.steps] == ["Slice", "AllReduce", "AllGather"]
    assert whole.bytes_per_device == 5 * mib
    assert [(s.kind, tuple(map(str, s.axes))) for s in inside.steps] == [("AllReduce", ('"x"',))]
    assert inside.bytes_per_device == 6 * mib
    for plan in (whole, inside):
        v = verify(plan, seed=1)
        assert v.verified and v.measured_bytes_per_device == plan.bytes_per_device


def test_unknown_ties_is_an_error():
    mesh = parse_mesh('@m = <["x"=2]>')
    s = parse_sharding('[{"x"}]', mesh)
    with pytest.raises(ReshardError, match="ties"):
        reshard((4,), "f32", s, s, ties="first")


def test_a_search_within_some_axes_plans_on_representatives_and_lifts_its_permutes():
    """Within x and y of a 2x2x2 mesh the search keeps one row per (x, y) (the devices at z=0);
    its permute's pairs are those of every z plane, and the plan runs on all 8 devices."""
    from planner.ir.axis import AxisRef
    from planner.redistribution.state import Pieces

    mesh = parse_mesh('@m = <["x"=2, "y"=2, "z"=2]>')
    src, dst = parse_sharding('[{"x"}, {"y"}]', mesh), parse_sharding('[{"y"}, {"x"}]', mesh)
    within = (AxisRef("x"), AxisRef("y"))
    assert Pieces.refine(mesh, (8, 8), [src, dst], False, within).n == 4
    plan = reshard((8, 8), "f32", src, dst, within=within)
    assert [s.kind for s in plan.steps] == ["CollectivePermute"]
    pairs = plan.steps[0].pairs
    # (x, y, z) -> (y, x, z): devices whose x != y swap with their mirror on the same z plane
    expected = sorted((4 * x + 2 * y + z, 4 * y + 2 * x + z) for x in (0, 1) for y in (0, 1) for z in (0, 1) if x != y)
    assert list(pairs) == expected
    v = verify(plan, seed=2)
    assert v.verified and v.measured_bytes_per_device == plan.bytes_per_device


def test_a_pending_maximum_is_completed_by_one_all_reduce_with_max():
    from planner.ir import parse_mesh, parse_sharding
    from planner.errors import ReshardError

    m = parse_mesh('@m = <["x"=2, "y"=4]>')
    src = parse_sharding('[{"x"}, {}], unreduced=max{"y"}', m)
    plan = reshard((8, 16), "f32", src, parse_sharding('[{"x"}, {"y"}]', m))
    # one AllReduce over "y" (its step's source says max), then a free slice of dimension 1:
    # local 4x16 = 64 elements, p = 4: 2 (p-1) chunks of 16 elements x 4 B = 384 B
    assert [s.kind for s in plan.steps] == ["AllReduce", "Slice"] and plan.steps[0].before.reduction == "max"
    assert plan.bytes_per_device == 2 * 3 * 16 * 4
    with pytest.raises(ReshardError, match="only an AllReduce over all of them completes"):
        reshard((8, 16), "f32", src, parse_sharding('[{"x"}, {}], unreduced={"y"}', m))
