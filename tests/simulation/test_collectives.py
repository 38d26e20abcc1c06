"""Each collective, run for real, moves exactly the ring formula's bytes."""

import numpy as np

from planner.ir import parse_mesh, parse_sharding
from planner.redistribution import reshard
from planner.simulation.collectives import Network, groups
from planner.simulation.reshard import execute, verify
from planner.simulation.distributed import DistributedArray

MESH = parse_mesh('@m = <["x"=2, "y"=4]>')


def test_groups_follow_the_mesh_axes():
    s = parse_sharding('[{}]', MESH)
    assert [g.tolist() for g in groups(s, [parse_sharding('[{"y"}]', MESH).dims[0].axes[0]])] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [g.tolist() for g in groups(s, [parse_sharding('[{"x"}]', MESH).dims[0].axes[0]])] == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_network_counts_only_transfers_between_devices():
    net = Network(2)
    net.begin_step()
    net.send(0, 0, np.zeros(4, dtype=np.float32))
    net.send(0, 1, np.zeros(4, dtype=np.float32))
    assert net.total.tolist() == [0, 16] and net.bytes_per_device == 16


def test_ring_all_reduce_receives_two_p_minus_one_chunks():
    ring = parse_mesh('@r = <["y"=4]>')
    plan = reshard((64, 32), "f32", parse_sharding('[{}, {}], unreduced={"y"}', ring), parse_sharding('[{}, {}]', ring))
    assert [s.kind for s in plan.steps] == ["AllReduce"]
    x = np.random.default_rng(0).integers(-9, 9, size=(64, 32)).astype(np.float32)
    out, net = execute(plan, DistributedArray.from_global(x, plan.source, rng=np.random.default_rng(1)))
    assert np.array_equal(out.to_global(), x)
    assert net.total.tolist() == [2 * 3 * (64 * 32 // 4) * 4] * 4


def test_replicas_share_a_reduction_to_reach_the_bound():
    """Slicing by the replicated axis first, reducing half, and gathering it back beats the ring."""
    plan = reshard((64, 32), "f32", parse_sharding('[{}, {}], unreduced={"y"}', MESH), parse_sharding('[{}, {}]', MESH))
    assert [s.kind for s in plan.steps] == ["Slice", "AllReduce", "AllGather"]
    assert plan.bytes_per_device == plan.lower_bound_bytes_per_device == 10240
    assert verify(plan).measured_bytes_per_device == 10240


def test_verify_reports_a_wrong_plan():
    good = reshard((8, 8), "f32", parse_sharding('[{"x"}, {}]', MESH), parse_sharding('[{}, {}]', MESH))
    wrong = type(good)(good.shape, good.dtype, good.source, parse_sharding('[{}, {"x"}]', MESH), good.steps)
    assert verify(good).verified
    assert not verify(wrong).verified
