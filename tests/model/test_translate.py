"""translate(sharding, mesh, shape=None): annotations on another mesh over the same devices.

Expected values come from the device index map (``shard_indices`` /
``device_index_ranges`` of the source, compared with the per-device coordinates of
the target mesh's axes), never from the function under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from planner.errors import PlanningError
from planner.ir import parse_mesh, parse_sharding, same_layout
from planner.ir.layout import device_index_ranges, devices_to_positions, shard_indices
from planner.model.annotations import satisfies, translate

# Seed 000, "Várias malhas lógicas" (verbatim):
#   Os usuários podem especificar várias malhas com eixos nomeados diferentes (por exemplo, via jax.sharding.NamedSharding), que têm a mesma ordem de dispositivos. Neste exemplo, <@mesh_0, "b"> é idêntico a <@mesh_1, "z">..
#
#   @mesh_0 = {<["a"=4, "b"=2]>, device_ids=[0, 1, 2, 3, 4, 5, 6, 7]}
#   @mesh_1 = {<["x"=2, "y"=2, "z"=2]>, device_ids=[0, 1, 2, 3, 4, 5, 6, 7]}
MESH_0 = '@mesh_0 = {<["a"=4, "b"=2]>, device_ids=[0, 1, 2, 3, 4, 5, 6, 7]}'
MESH_1 = '@mesh_1 = {<["x"=2, "y"=2, "z"=2]>, device_ids=[0, 1, 2, 3, 4, 5, 6, 7]}'
# the same axes listing the devices in another order (SPEC §9's second mesh)
REORDERED = '@mesh_1 = {<["x"=2, "y"=2, "z"=2]>, device_ids=[0, 2, 4, 6, 1, 3, 5, 7]}'


def coordinate(mesh, axis):
    pos = devices_to_positions(mesh)
    return (pos // mesh.axis_stride(axis)) % mesh.axis_size(axis)


def test_seed000_example_same_device_order():
    mesh_0, mesh_1 = parse_mesh(MESH_0), parse_mesh(MESH_1)
    b = parse_sharding('sharding<@mesh_0, [{"b"}]>', [mesh_0, mesh_1])
    z = parse_sharding('sharding<@mesh_1, [{"z"}]>', [mesh_0, mesh_1])
    # device d holds shard d % 2 under "b"; "z" is the axis of mesh_1 whose coordinate is d % 2
    assert shard_indices(b)[:, 0].tolist() == coordinate(mesh_1, "z").tolist()
    assert translate(b, mesh_1) == z
    assert translate(z, mesh_0) == b
    assert translate(b, mesh_1, (8,)) == z


def test_different_device_order_is_translated():
    mesh_0, mesh_1 = parse_mesh(MESH_0), parse_mesh(REORDERED)
    s = parse_sharding('[{"a", ?}p1, {"b"}], replicated={}, unreduced={}', mesh_0)
    # device d sits at position 4*(d % 2) + d // 2 of @mesh_1: "x" is d % 2 (= "b") and
    # "y", "z" count d // 2 (= "a")
    assert coordinate(mesh_1, "x").tolist() == shard_indices(parse_sharding('[{"b"}]', mesh_0))[:, 0].tolist()
    a_index = shard_indices(parse_sharding('[{"a"}]', mesh_0))[:, 0]
    assert (coordinate(mesh_1, "y") * 2 + coordinate(mesh_1, "z")).tolist() == a_index.tolist()
    got = translate(s, mesh_1)
    assert str(got) == 'sharding<@mesh_1, [{"y", "z", ?}p1, {"x"}]>'
    assert np.array_equal(device_index_ranges(got, (8, 6)), device_index_ranges(s, (8, 6)))


def test_round_trip():
    mesh_0, mesh_1 = parse_mesh(MESH_0), parse_mesh(REORDERED)
    for text in ('[{"b", ?}p2, {}], replicated={"a"}', '[{"a":(1)2}, {"b"}], unreduced={"a":(2)2}', '[{?}, {"a", "b"}]'):
        s = parse_sharding(text, mesh_0)
        there = translate(s, mesh_1)
        assert there.mesh == mesh_1 and same_layout(s, there, (8, 8))
        assert translate(there, mesh_0) == s


def test_no_equivalent_raises_with_advice():
    m = parse_mesh('@mesh_0 = <["a"=2, "b"=2]>')
    other = parse_mesh('@mesh_1 = {<["d"=4]>, device_ids=[1, 0, 2, 3]}')
    s = parse_sharding('[{"a", "b"}]', m)
    with pytest.raises(PlanningError) as err:
        translate(s, other)
    text = str(err.value)
    assert 'sharding<@mesh_0, [{"a", "b"}]>' in text
    assert '@mesh_0 = <["a"=2, "b"=2]>' in text and '@mesh_1 = {<["d"=4]>, device_ids=[1, 0, 2, 3]}' in text
    assert "for every shape" in text
    assert "Annotate it on @mesh_1" in text and "CollectivePermute" in text


def test_shape_allows_padding_only_equivalents():
    m = parse_mesh('@m = <["a"=4]>')
    t = parse_mesh('@t = {<["x"=2, "y"=2]>, device_ids=[0, 1, 3, 2]}')
    s = parse_sharding('[{"a"}]', m)
    # 2 elements over 4 shards: devices 2 and 3 hold only padding, so swapping them is free
    assert device_index_ranges(s, (2,))[:, 0].tolist() == [[0, 1], [1, 2], [2, 2], [2, 2]]
    assert str(translate(s, t, (2,))) == 'sharding<@t, [{"x", "y"}]>'
    with pytest.raises(PlanningError, match="for shape 4"):
        translate(s, t, (4,))
    with pytest.raises(PlanningError, match="for every shape"):
        translate(s, t)


def test_unreduced_groups_that_differ_are_refused():
    m = parse_mesh('@m = <["a"=2, "b"=2]>')
    t = parse_mesh('@t = {<["x"=2, "y"=2]>, device_ids=[0, 1, 3, 2]}')
    with pytest.raises(PlanningError, match="pending-sum groups"):
        translate(parse_sharding('[{}], unreduced={"a"}', m), t)


def test_meshes_of_different_sizes_are_refused():
    m = parse_mesh('@m = <["a"=4]>')
    with pytest.raises(PlanningError, match="4 devices"):
        translate(parse_sharding('[{"a"}]', m), parse_mesh('@t = <["x"=8]>'))


def test_same_order_behaviour_is_unchanged():
    # renaming digit by digit: "x" (position // 2 on x=4, y=2) is "a" then "b":(1)2 on a=2, b=4
    m = parse_mesh('@m = <["x"=4, "y"=2]>')
    t = parse_mesh('@t = <["a"=2, "b"=4]>')
    x_index = shard_indices(parse_sharding('[{"x"}]', m))[:, 0]
    b_major = (devices_to_positions(t) // 2) % 2
    assert (coordinate(t, "a") * 2 + b_major).tolist() == x_index.tolist()
    assert str(translate(parse_sharding('[{"x", ?}p1], replicated={"y"}', m), t)) == \
        'sharding<@t, [{"a", "b":(1)2, ?}p1], replicated={"b":(2)2}>'
    # ... including its refusal of axes that do not line up
    with pytest.raises(PlanningError, match="no counterpart"):
        translate(parse_sharding('[{"x"}]', parse_mesh('@m = <["x"=3, "y"=2]>')), parse_mesh('@t = <["a"=2, "b"=3]>'))


def test_satisfies_accepts_an_annotation_on_a_reordered_mesh():
    mesh_0, mesh_1 = parse_mesh(MESH_0), parse_mesh(REORDERED)
    ann = parse_sharding('[{"y", "z", ?}, {}]', mesh_1)  # the same as [{"a", ?}, {}] on @mesh_0
    assert satisfies(parse_sharding('[{"a"}, {}]', mesh_0), ann)
    assert satisfies(parse_sharding('[{"a", "b"}, {}]', mesh_0), ann)
    assert not satisfies(parse_sharding('[{"b"}, {}]', mesh_0), ann)
