"""Property tests of the representation: text round-trip and the device index map."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from planner.ir import device_index_ranges, parse_mesh, parse_sharding
from planner.ir.layout import holders_count

from .shardings_strategy import meshes, shapes_for, shardings


@given(shardings())
def test_parse_print_round_trip(s):
    mesh = s.mesh
    assert parse_mesh(str(mesh)) == mesh
    again = parse_sharding(str(s), mesh)
    assert again == s
    assert str(again) == str(s)
    assert parse_sharding(s.dims_text(), mesh) == s


@given(st.data())
def test_every_element_is_held_by_devices_over_shards_devices(data):
    s = data.draw(shardings())
    shape = data.draw(shapes_for(s.rank))
    expected = s.mesh.size // s.num_shards()
    assert np.all(holders_count(s, shape) == expected)


@given(st.data())
def test_local_shape_agrees_with_index_map(data):
    s = data.draw(shardings())
    shape = data.draw(shapes_for(s.rank))
    local = np.array(s.local_shape(shape), dtype=np.int64)
    ranges = device_index_ranges(s, shape)
    lengths = ranges[..., 1] - ranges[..., 0]
    assert np.all(lengths <= local)
    if s.rank:
        # the first shard of every dimension is full: it holds exactly the local shape
        assert any(np.array_equal(row, local) for row in lengths)
        # and no device's range starts beyond the end
        assert np.all(ranges[..., 0] <= np.array(shape))


@given(meshes())
def test_each_device_id_appears_once(mesh):
    s = parse_sharding("[]", mesh)
    assert device_index_ranges(s, ()).shape == (mesh.size, 0, 2)
