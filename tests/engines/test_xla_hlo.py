"""Reading a compiled XLA program's collectives: kinds, replica groups in every printed form, bytes per device.

Every expected byte count is derived in a comment from the convention of costmodels/collectives.py
(what one device receives under ring algorithms; p = group size, n = elements of the result)."""

import pytest

from planner.engines.xla_hlo import collectives, replica_groups
from planner.errors import InternalError

ROWS = ((0, 1, 2, 3), (4, 5, 6, 7))          # arange(8).reshape(2, 4)
COLUMNS = ((0, 4), (1, 5), (2, 6), (3, 7))   # arange(8).reshape(2, 4).T


def one(text, num_devices=8):
    (c,) = collectives(text, num_devices)
    return c


def test_all_gather_in_iota_groups_receives_the_other_shards():
    c = one("%ag = f32[8,16]{1,0} all-gather(%x), channel_id=1, replica_groups=[2,4]<=[8], dimensions={1}, "
            "use_global_device_ids=true")
    # result 8x16 = 128 elements over p = 4: a shard is 32 elements = 128 B; a device receives 3 shards
    assert (c.kind, c.replica_groups, c.bytes_per_device) == ("all-gather", ROWS, 3 * 128)


def test_all_reduce_in_transposed_iota_groups_is_a_ring_of_padded_chunks():
    c = one("%ar = f32[32,64]{1,0} all-reduce(%y), replica_groups=[4,2]<=[2,4]T(1,0), to_apply=%add")
    # p = 2: chunks of 2048 / 2 = 1024 elements = 4096 B; reduce-scatter then all-gather: 2 (p-1) chunks
    assert (c.replica_groups, c.bytes_per_device) == (COLUMNS, 2 * 1 * 4096)


def test_reduce_scatter_in_explicit_groups_receives_p_minus_1_result_shards():
    c = one("%rs = f32[32,16]{1,0} reduce-scatter(%h), replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={1}")
    # the result is the shard: 512 elements = 2048 B; p = 4: 3 of them
    assert (c.kind, c.replica_groups, c.bytes_per_device) == ("reduce-scatter", ROWS, 3 * 2048)


def test_all_to_all_in_mesh_axis_groups_keeps_one_chunk_of_its_buffer():
    c = one("%a2a = bf16[8,12]{1,0} all-to-all(%z), replica_groups=mesh['x'=2,'y'=4] {'y'}, dimensions={1}")
    # 96 bf16 elements in 4 chunks of 24 elements = 48 B; a device receives the other 3 chunks
    assert (c.kind, c.replica_groups, c.bytes_per_device) == ("all-to-all", ROWS, 3 * 48)


def test_tuple_all_to_all_has_one_array_per_chunk():
    c = one("%a2a = (f32[2,3]{1,0}, f32[2,3]{1,0}) all-to-all(%a, %b), replica_groups={{0,1},{2,3}}", 4)
    # p = 2 chunks of 6 elements = 24 B; a device receives the other one
    assert c.bytes_per_device == 24


def test_mesh_groups_with_a_device_order_and_sub_axes():
    # mesh 4x1x2 whose devices in mesh order are arange(8).reshape(2, 4).T.flatten() = 0,4,1,5,2,6,3,7:
    # along 'a' (c fixed) positions 0,2,4,6 hold devices 0,1,2,3
    assert replica_groups("mesh['a'=4,'b'=1,'c'=2], device_ids=([2,4]T(1,0)) {'a'}", 8) == ROWS
    # "d":(2)4 of d = 8 is the minor quarter: groups of 4 consecutive devices
    assert replica_groups("mesh['d'=8] {'d':(2)4}", 8) == ROWS
    assert replica_groups("mesh['d'=8] {'d':(1)2}", 8) == COLUMNS


def test_empty_groups_are_every_device():
    c = one("%ar = f32[4]{0} all-reduce(%v), replica_groups={}, to_apply=%add", 4)
    # p = 4: chunks of 1 element = 4 B; 2 (p-1) chunks
    assert (c.replica_groups, c.bytes_per_device) == (((0, 1, 2, 3),), 2 * 3 * 4)


def test_combined_all_reduce_adds_its_arrays():
    c = one("%ar = (f32[], f32[64,64]{1,0}) all-reduce(%l, %g), replica_groups=[4,2]<=[2,4]T(1,0), to_apply=%add")
    # p = 2: the scalar is one padded chunk of 1 element: 2 * 4 B; 4096 elements: chunks of 2048 = 8192 B, twice
    assert c.bytes_per_device == 2 * 4 + 2 * 8192


def test_collective_permute_moves_its_buffer_unless_every_pair_stays_home():
    moved = one("%cp = f32[4,4]{1,0} collective-permute(%t), source_target_pairs={{0,1},{1,0}}", 2)
    home = one("%cp = f32[4,4]{1,0} collective-permute(%t), source_target_pairs={{0,0},{1,1}}", 2)
    assert (moved.replica_groups, moved.bytes_per_device, home.bytes_per_device) == (((0, 1), (1, 0)), 64, 0)


def test_async_start_counts_its_result_and_done_is_not_counted_again():
    text = ("%ags = (f32[8,4]{1,0}, f32[8,16]{1,0}) all-gather-start(%x), replica_groups={{0,1,2,3}}, dimensions={1}\n"
            "%agd = f32[8,16]{1,0} all-gather-done(%ags)")
    c = one(text, 4)
    # the tuple is (operand, result): the result 8x16 as in the first test
    assert (c.kind, c.arrays, c.bytes_per_device) == ("all-gather", ("f32[8,16]",), 3 * 128)


def test_an_all_reduce_read_through_a_dynamic_slice_is_marked():
    text = """HloModule m, num_partitions=8

%fused (p0: f32[32,64], p1: s32[]) -> f32[32,16] {
  %p0 = f32[32,64]{1,0} parameter(0)
  ROOT %ds = f32[32,16]{1,0} dynamic-slice(%p0, %c, %p1), dynamic_slice_sizes={32,16}
}

ENTRY %main (x: f32[32,64]) -> f32[32,16] {
  %all-reduce = f32[32,64]{1,0} all-reduce(%x), replica_groups=[2,4]<=[8], to_apply=%add
  %all-reduce.1 = f32[32,64]{1,0} all-reduce(%x), replica_groups=[2,4]<=[8], to_apply=%add
  %r = f32[32,64]{1,0} add(%all-reduce.1, %all-reduce.1)
  ROOT %f = f32[32,16]{1,0} fusion(%all-reduce, %pid), kind=kLoop, calls=%fused
}
"""
    sliced, whole = collectives(text)
    assert (sliced.name, sliced.sliced_after, whole.name, whole.sliced_after) == \
        ("all-reduce", True, "all-reduce.1", False)


def test_a_combined_all_reduce_read_through_a_tuple_element_and_a_slice_is_marked():
    text = """ENTRY %main (x: f32[8], y: f32[8]) -> f32[2] {
  %ar = (f32[8]{0}, f32[8]{0}) all-reduce(%x, %y), replica_groups=[2,4]<=[8], to_apply=%add
  %gte = f32[8]{0} get-tuple-element(%ar), index=1
  ROOT %ds = f32[2]{0} dynamic-slice(%gte, %off), dynamic_slice_sizes={2}
}
"""
    (c,) = collectives(text, 8)
    # two arrays of 8 elements, p = 4: chunks of 2 elements = 8 B, 2 (p-1) chunks each
    assert (c.sliced_after, c.bytes_per_device) == (True, 2 * (2 * 3 * 8))


def test_unreadable_replica_groups_are_an_internal_error_quoting_them():
    with pytest.raises(InternalError, match="cannot read XLA replica groups"):
        replica_groups("<<8>>", 8)
