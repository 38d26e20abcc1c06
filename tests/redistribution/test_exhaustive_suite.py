"""Issue 4's exhaustive suite: every pair on a (2, 4) mesh, divisible and not, verified on the simulator."""

import pytest

from planner.redistribution import reshard
from tests.redistribution.suite import SHAPES, pairs
from planner.simulation.reshard import verify

PAIRS = list(pairs())


def _gather_then_slice_bytes(src, shape, itemsize):
    """What the obvious plan moves: reduce everything, gather every axis, slice locally."""
    full = src.mesh.size
    local = 1
    for d in src.local_shape(shape):
        local *= d
    total = 0
    if src.unreduced:
        p = 1
        for a in src.unreduced:
            p *= a.size_in(src.mesh)
        total += 2 * (p - 1) * (-(-local // p)) * itemsize
    sharded = src.num_shards()
    if sharded > 1:
        total += (sharded - 1) * local * itemsize
    del full
    return total


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_pair_verifies_and_measured_bytes_equal_predicted(shape):
    failures = []
    for src, dst in PAIRS:
        plan = reshard(shape, "f32", src, dst)
        v = verify(plan, seed=7)
        if not v.verified or v.measured_bytes_per_device != plan.bytes_per_device:
            failures.append((src.dims_text(), dst.dims_text(), v.message, v.measured_bytes_per_device, plan.bytes_per_device))
    assert not failures, failures[:5]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_no_plan_moves_more_than_gather_everything_then_slice(shape):
    worse = []
    for src, dst in PAIRS:
        plan = reshard(shape, "f32", src, dst)
        obvious = _gather_then_slice_bytes(src, shape, 4)
        if plan.bytes_per_device > obvious:
            worse.append((src.dims_text(), dst.dims_text(), plan.bytes_per_device, obvious))
    assert not worse, worse[:5]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_plans_never_beat_the_lower_bound(shape):
    below = [
        (s.dims_text(), d.dims_text())
        for s, d in PAIRS
        if reshard(shape, "f32", s, d).bytes_per_device < reshard(shape, "f32", s, d).lower_bound_bytes_per_device
    ]
    assert not below, below[:5]


def test_divisible_suite_is_within_five_percent_of_the_bound():
    plans = [reshard((64, 32), "f32", s, d) for s, d in PAIRS]
    total = sum(p.bytes_per_device for p in plans)
    bound = sum(p.lower_bound_bytes_per_device for p in plans)
    assert total <= 1.05 * bound, total / bound


def test_whole_suite_is_within_five_percent_of_the_bound():
    plans = [reshard(shape, "f32", s, d) for shape in SHAPES for s, d in PAIRS]
    total = sum(p.bytes_per_device for p in plans)
    bound = sum(p.lower_bound_bytes_per_device for p in plans)
    assert total <= 1.05 * bound, total / bound


def test_every_single_collective_plan_of_the_divisible_shape_is_at_the_bound():
    """Aim of issue 4: where one collective does the job, it does it with the least bytes possible."""
    single = 0
    for src, dst in PAIRS:
        plan = reshard((64, 32), "f32", src, dst)
        if len([s for s in plan.steps if s.kind != "Slice"]) == 1:
            single += 1
            assert plan.bytes_per_device == plan.lower_bound_bytes_per_device, (src.dims_text(), dst.dims_text())
    assert single >= 90  # 92 of the 198 pairs need exactly one collective


def test_planning_mode_verifies_too():
    for src, dst in PAIRS[::7]:
        for shape in SHAPES:
            plan = reshard(shape, "f32", src, dst, objective="time", pieces="axes")
            v = verify(plan, seed=2)
            assert v.verified and v.measured_bytes_per_device == plan.bytes_per_device
