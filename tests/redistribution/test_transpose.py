"""Transposed redistributions follow seed 004's table (psum <-> pbroadcast, all_gather <-> psum_scatter,
all_gather_invariant <-> pscatter, all_to_all <-> all_to_all), and execute exactly as priced."""

import numpy as np
import pytest

from planner.ir import parse_mesh, parse_sharding
from planner.ir.axis import AxisRef
from planner.redistribution.engine import reshard_for_planning
from planner.redistribution.transpose import cotangent_layout, transpose_plan
from planner.simulation.distributed import DistributedArray
from planner.simulation.reshard import execute

MESH = parse_mesh('@m = <["dp"=2, "tp"=4]>')
SHAPE = (8, 16)


def S(text):
    return parse_sharding(text, MESH)


def kinds(plan):
    return [s.kind for s in plan.steps]


def transposed(src, dst, pending=(), **kw):
    forward = reshard_for_planning(SHAPE, "f32", S(src), S(dst), None)
    return forward, transpose_plan(forward, tuple(AxisRef(a) for a in pending), None, **kw)


def test_psum_transposes_to_pbroadcast_which_moves_nothing():
    # forward AllReduce of a pending sum (psum); the cotangent of its invariant result is already whole
    forward, back = transposed('[{}, {}], unreduced={"tp"}', "[{}, {}]")
    assert kinds(forward) == ["AllReduce"] and kinds(back) == [] and back.bytes_per_device == 0


def test_pbroadcast_then_psum_transposes_to_psum_then_pbroadcast():
    # seed example 2: the reader varied over tp, so its cotangent is pending over tp: one psum back
    forward, back = transposed('[{}, {}], unreduced={"tp"}', "[{}, {}]", pending=("tp",))
    assert kinds(back) == ["AllReduce"] and back.bytes_per_device == forward.bytes_per_device


def test_all_gather_invariant_transposes_to_pscatter():
    forward, back = transposed('[{"tp"}, {}]', "[{}, {}]")
    assert kinds(forward) == ["AllGather"] and kinds(back) == ["Slice"] and back.bytes_per_device == 0


def test_all_gather_fused_with_pbroadcast_transposes_to_psum_scatter():
    forward, back = transposed('[{"tp"}, {}]', "[{}, {}]", pending=("tp",))
    assert kinds(back) == ["ReduceScatter"]
    assert back.bytes_per_device == forward.bytes_per_device  # ring AllGather and ReduceScatter move the same


def test_pscatter_transposes_to_all_gather_invariant():
    forward, back = transposed("[{}, {}]", '[{"tp"}, {}]')
    assert kinds(forward) == ["Slice"] and kinds(back) == ["AllGather"]


def test_psum_scatter_transposes_to_all_gather():
    forward, back = transposed('[{}, {}], unreduced={"tp"}', '[{"tp"}, {}]')
    assert kinds(forward) == ["ReduceScatter"] and kinds(back) == ["AllGather"]


def test_all_to_all_transposes_to_all_to_all_with_dimensions_swapped():
    forward, back = transposed('[{"tp"}, {}]', '[{}, {"tp"}]')
    assert kinds(forward) == kinds(back) == ["AllToAll"]
    assert back.steps[0].dims == tuple(reversed(forward.steps[0].dims))


def test_pending_axes_are_summed_on_the_smaller_buffer():
    # a forward Slice grows back into an AllGather: the psum of the reader's dp-pending
    # cotangent happens first, on the sliced (4x smaller) buffer
    _, back = transposed("[{}, {}]", '[{"tp"}, {}]', pending=("dp",))
    assert kinds(back) == ["AllReduce", "AllGather"]
    assert back.steps[0].before.local_shape(SHAPE) == (2, 16)


def test_the_transpose_runs_from_the_readers_cotangent_to_the_producers():
    forward, back = transposed('[{}, {}], unreduced={"tp"}', '[{"tp"}, {}]', pending=("dp",))
    assert back.source == S('[{"tp"}, {}], unreduced={"dp"}')
    assert back.destination == cotangent_layout(forward.source) == S("[{}, {}]")


def test_without_variance_types_the_backward_is_wasteful():
    # seed 004's "current" scheme: nothing is known to be device-invariant, so the whole
    # cotangent of a psum is summed again (psum(ybar / n)) instead of a free pbroadcast
    _, back = transposed('[{}, {}], unreduced={"tp"}', "[{}, {}]")
    _, wasteful = transposed('[{}, {}], unreduced={"tp"}', "[{}, {}]", insert_pbroadcast=False)
    assert back.bytes_per_device == 0 < wasteful.bytes_per_device


@pytest.mark.parametrize("src,dst,pending", [
    ('[{}, {}], unreduced={"tp"}', "[{}, {}]", ()),
    ('[{"tp"}, {}]', "[{}, {}]", ("tp",)),
    ('[{"tp"}, {}]', "[{}, {}]", ("dp",)),
    ("[{}, {}]", '[{"tp"}, {"dp"}]', ()),
    ('[{"tp"}, {}]', '[{}, {"tp"}]', ("dp",)),
    ('[{"dp", "tp"}, {}]', '[{"tp"}, {"dp"}]', ()),
])
@pytest.mark.parametrize("insert_pbroadcast", [True, False])
def test_a_transpose_is_the_adjoint_of_its_forward_and_moves_what_it_predicts(src, dst, pending, insert_pbroadcast):
    # <back(ybar), x> == <ybar, forward(x)> with the global values: the defining property of a transpose
    # (pending cotangents are summed to their global value by to_global)
    forward, back = transposed(src, dst, pending, insert_pbroadcast=insert_pbroadcast)
    rng = np.random.default_rng(0)
    x, ybar = rng.standard_normal(SHAPE), rng.standard_normal(SHAPE)
    fx, _ = execute(forward, DistributedArray.from_global(x, forward.source))
    by, net = execute(back, DistributedArray.from_global(ybar, back.source))
    assert np.vdot(by.to_global(), x) == pytest.approx(np.vdot(ybar, fx.to_global()), rel=1e-12)
    assert net.bytes_per_device == back.bytes_per_device
