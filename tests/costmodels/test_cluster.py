"""Link selection (which link a collective over some mesh axes uses) and cluster validation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodels.cluster import Cluster, Link, _group_spans_nodes, group_spans_nodes, slowest_link
from planner.errors import ClusterError, MeshError, ShardingError
from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh

NVLINK = Link(450e9, 3e-6)
INFINIBAND = Link(50e9, 10e-6)


def two_level(devices_per_node: int = 8, **kwargs) -> Cluster:
    return Cluster("test", 989e12, 80 * 10**9, devices_per_node, NVLINK, INFINIBAND, **kwargs)


def interleaved_device_ids() -> list[int]:
    """A (dp=2, tp=8) mesh whose dp pairs share a node and whose tp rows span both nodes."""
    return [(j // 4) * 8 + i * 4 + j % 4 for i in range(2) for j in range(8)]


def test_outer_axis_of_two_nodes_uses_infiniband():
    mesh = Mesh.from_sizes("mesh", {"dp": 2, "tp": 8})
    assert two_level().link_for(mesh, [AxisRef("dp")]) == INFINIBAND


def test_inner_axis_of_two_nodes_uses_nvlink():
    mesh = Mesh.from_sizes("mesh", {"dp": 2, "tp": 8})
    assert two_level().link_for(mesh, [AxisRef("tp")]) == NVLINK


def test_collective_over_both_axes_uses_the_slowest_link():
    mesh = Mesh.from_sizes("mesh", {"dp": 2, "tp": 8})
    assert two_level().link_for(mesh, [AxisRef("dp"), AxisRef("tp")]) == INFINIBAND
    assert two_level().link_for(mesh, [AxisRef("tp"), AxisRef("dp")]) == INFINIBAND


def test_permuted_device_ids_move_the_node_boundary_to_the_inner_axis():
    ids = interleaved_device_ids()
    assert sorted(ids) == list(range(16))
    mesh = Mesh.from_sizes("mesh", {"dp": 2, "tp": 8}, device_ids=ids)
    assert two_level().link_for(mesh, [AxisRef("dp")]) == NVLINK
    assert two_level().link_for(mesh, [AxisRef("tp")]) == INFINIBAND


def test_major_sub_axis_of_sixteen_devices_crosses_nodes():
    mesh = Mesh.from_sizes("mesh", {"d": 16})
    assert two_level().link_for(mesh, [AxisRef("d", 1, 2)]) == INFINIBAND


def test_minor_sub_axis_of_sixteen_devices_stays_in_a_node():
    mesh = Mesh.from_sizes("mesh", {"d": 16})
    assert two_level().link_for(mesh, [AxisRef("d", 2, 8)]) == NVLINK
    assert two_level().link_for(mesh, [AxisRef("d", 4, 4)]) == NVLINK


def test_whole_axis_of_sixteen_devices_crosses_nodes():
    mesh = Mesh.from_sizes("mesh", {"d": 16})
    assert two_level().link_for(mesh, [AxisRef("d")]) == INFINIBAND


def test_outer_axis_of_four_nodes_uses_infiniband():
    mesh = Mesh.from_sizes("mesh", {"dp": 4, "tp": 8})
    assert two_level().link_for(mesh, [AxisRef("dp")]) == INFINIBAND
    assert two_level().link_for(mesh, [AxisRef("tp")]) == NVLINK


def test_mesh_inside_one_node_never_uses_infiniband():
    mesh = Mesh.from_sizes("mesh", {"x": 2, "y": 4})
    for axes in ([AxisRef("x")], [AxisRef("y")], [AxisRef("x"), AxisRef("y")]):
        assert two_level().link_for(mesh, axes) == NVLINK


def test_axis_override_wins_over_the_computed_link():
    fast = Link(900e9, 1e-6)
    mesh = Mesh.from_sizes("mesh", {"dp": 2, "tp": 8})
    assert two_level(axis_links={"dp": fast}).link_for(mesh, [AxisRef("dp")]) == fast


def test_slow_override_on_an_inner_axis_is_used_for_it_and_for_collectives_including_it():
    slow = Link(10e9, 20e-6)
    mesh = Mesh.from_sizes("mesh", {"dp": 2, "tp": 8})
    cluster = two_level(axis_links={"tp": slow})
    assert cluster.link_for(mesh, [AxisRef("tp")]) == slow
    assert cluster.link_for(mesh, [AxisRef("dp"), AxisRef("tp")]) == slow
    assert cluster.link_for(mesh, [AxisRef("dp")]) == INFINIBAND


def test_fast_override_does_not_hide_a_slower_computed_axis():
    fast = Link(900e9, 1e-6)
    mesh = Mesh.from_sizes("mesh", {"dp": 2, "tp": 8})
    cluster = two_level(axis_links={"tp": fast})
    assert cluster.link_for(mesh, [AxisRef("dp"), AxisRef("tp")]) == INFINIBAND


def test_sub_axis_takes_the_override_of_its_axis():
    slow = Link(10e9, 20e-6)
    mesh = Mesh.from_sizes("mesh", {"d": 16})
    assert two_level(axis_links={"d": slow}).link_for(mesh, [AxisRef("d", 2, 8)]) == slow


def test_no_axes_means_the_intra_node_link():
    mesh = Mesh.from_sizes("mesh", {"dp": 2, "tp": 8})
    assert two_level().link_for(mesh, []) == NVLINK


def test_combine_policy_is_replaceable():
    def fastest(links):
        return max(links, key=lambda link: link.bandwidth_bytes_per_s)

    mesh = Mesh.from_sizes("mesh", {"dp": 2, "tp": 8})
    cluster = two_level(axis_links={"tp": NVLINK})
    assert cluster.link_for(mesh, [AxisRef("dp"), AxisRef("tp")], combine=fastest) == NVLINK


def test_slowest_link_breaks_bandwidth_ties_by_latency():
    assert slowest_link([Link(50e9, 2e-6), Link(50e9, 9e-6), Link(60e9, 90e-6)]) == Link(50e9, 9e-6)


def test_group_spans_nodes_is_cached_per_mesh_and_axes():
    mesh = Mesh.from_sizes("cached_mesh", {"p": 4, "q": 8})
    group_spans_nodes(mesh, [AxisRef("p"), AxisRef("q")], 8)
    before = _group_spans_nodes.cache_info().hits
    # same axes in another order, and an equal mesh built again, hit the cache
    group_spans_nodes(Mesh.from_sizes("cached_mesh", {"p": 4, "q": 8}), [AxisRef("q"), AxisRef("p")], 8)
    assert _group_spans_nodes.cache_info().hits == before + 1


def test_overlapping_axes_are_rejected():
    mesh = Mesh.from_sizes("mesh", {"d": 16})
    with pytest.raises(ShardingError, match="overlap"):
        two_level().link_for(mesh, [AxisRef("d"), AxisRef("d", 1, 2)])


def test_unknown_axis_is_a_mesh_error():
    mesh = Mesh.from_sizes("mesh", {"d": 16})
    with pytest.raises(MeshError, match='"tp" is not in mesh'):
        two_level().link_for(mesh, [AxisRef("tp")])


def _brute_force_spans(mesh: Mesh, chosen: list[str], devices_per_node: int) -> bool:
    """Group devices by their coordinates along the other axes, look at the nodes of each group."""
    groups: dict[tuple, set[int]] = {}
    for position, device in enumerate(mesh.devices):
        key = tuple(
            (position // mesh.axis_stride(axis.name)) % axis.size for axis in mesh.axes if axis.name not in chosen
        )
        groups.setdefault(key, set()).add(device // devices_per_node)
    return any(len(nodes) > 1 for nodes in groups.values())


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.sampled_from([1, 2, 3, 4]), min_size=1, max_size=3),
    devices_per_node=st.sampled_from([1, 2, 3, 4, 8]),
    data=st.data(),
)
def test_vectorised_group_check_matches_brute_force(shape, devices_per_node, data):
    names = ["a", "b", "c"][: len(shape)]
    size = 1
    for s in shape:
        size *= s
    ids = data.draw(st.permutations(range(size)))
    mesh = Mesh.from_sizes("m", dict(zip(names, shape)), device_ids=ids)
    chosen = data.draw(st.lists(st.sampled_from(names), unique=True))
    axes = [AxisRef(n) for n in chosen]
    assert group_spans_nodes(mesh, axes, devices_per_node) == _brute_force_spans(mesh, chosen, devices_per_node)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("device_peak_flops", 0.0, "device_peak_flops is 0.0; it must be a finite number > 0"),
        ("device_peak_flops", float("inf"), "device_peak_flops is inf"),
        ("device_memory_bytes", 8.5e9, "device_memory_bytes is 8500000000.0; it must be an integer"),
        ("device_memory_bytes", -1, "device_memory_bytes is -1"),
        ("devices_per_node", 0, "devices_per_node is 0"),
        ("devices_per_node", True, "devices_per_node is True"),
        ("devices_per_node", 10**30, "more than shardplan's limit of 16,384"),  # node ids are int64
        ("name", "", "non-empty name"),
    ],
)
def test_cluster_rejects_bad_values(field, value, message):
    values = dict(name="c", device_peak_flops=1e12, device_memory_bytes=2**30, devices_per_node=8)
    values[field] = value
    with pytest.raises(ClusterError, match=message.replace("(", r"\(")):
        Cluster(**values, intra_node=NVLINK, inter_node=INFINIBAND)


def test_link_rejects_zero_bandwidth_and_negative_latency():
    with pytest.raises(ClusterError, match="bandwidth_bytes_per_s is 0"):
        Link(0, 1e-6)
    with pytest.raises(ClusterError, match="latency_s is -1e-06"):
        Link(1e9, -1e-6)
    assert Link(1e9, 0.0).latency_s == 0.0


def test_axis_links_are_canonical_whatever_their_order_or_form():
    a, b = Link(1e9, 1e-6), Link(2e9, 1e-6)
    from_pairs = two_level(axis_links=(("y", b), ("x", a)))
    from_dict = two_level(axis_links={"x": a, "y": b})
    assert from_pairs == from_dict
    assert hash(from_pairs) == hash(from_dict)
    assert from_pairs.axis_links == (("x", a), ("y", b))


def test_two_overrides_of_one_axis_are_rejected():
    with pytest.raises(ClusterError, match="axis 'x' has two link overrides"):
        two_level(axis_links=(("x", NVLINK), ("x", INFINIBAND)))


def test_cluster_str_is_compact_and_lists_overrides():
    text = str(two_level(axis_links={"pp": Link(25e9, 20e-6)}))
    assert text == (
        "test: 989TFLOP/s, 80GB per device, 8 devices per node; intra-node 450GB/s, 3us; "
        'inter-node 50GB/s, 10us; axis "pp" 25GB/s, 20us'
    )


@pytest.mark.parametrize(
    "pre, size, expected",
    [(1, 2, INFINIBAND), (1, 4, INFINIBAND), (2, 2, NVLINK), (2, 8, NVLINK), (4, 4, NVLINK), (8, 2, NVLINK)],
)
def test_sub_axis_crosses_nodes_only_when_its_stride_reaches_the_next_node(pre, size, expected):
    # on d=16 with 8 devices per node, "d":(m)k has stride 16/(m*k): a stride of 8 or more leaves the node
    mesh = Mesh.from_sizes("mesh", {"d": 16})
    assert two_level().link_for(mesh, [AxisRef("d", pre, size)]) == expected
