"""Searches over whole axes run once per class of alike problems (the engine's canonical order): a problem whose
dimensions are another problem's in another order, with sizes every split divides, is answered by the same search,
its steps renamed back; each answer still executes and is as fast as the exhaustive search's in its own order."""

import itertools

import pytest

from planner.errors import ShardingError
from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding
from planner.redistribution import reshard_for_planning
from planner.redistribution.engine import (_canonical, _canonical_search, _default_cluster, _search_here,
                                           planning_seconds)
from planner.simulation.reshard import verify
from tests.redistribution.suite import MESHES_3D

MESH = Mesh.from_sizes("mesh", {"dp": 2, "tp": 4})


def _three(mesh: Mesh) -> list[TensorSharding]:
    """Every layout of a rank-3 tensor with each axis on one dimension or none (axes sharing a dimension in
    mesh order), and with the first axis pending instead."""
    names = mesh.axis_names
    out = []
    for places in itertools.product((None, 0, 1, 2), repeat=len(names)):
        dims = [[n for n, p in zip(names, places) if p == d] for d in range(3)]
        out.append(TensorSharding.build(mesh, dims))
        if places[0] is None:
            out.append(TensorSharding.build(mesh, dims, unreduced=[names[0]]))
    return out


def _executes(plan) -> bool:
    v = verify(plan, seed=5)
    return v.verified and v.measured_bytes_per_device == plan.bytes_per_device


def test_a_permuted_problem_is_answered_by_the_same_search():
    # (8, 16, 32) with its dimensions reversed, both shardings reversed alike: one problem up to names
    cluster = _default_cluster()
    src = TensorSharding.build(MESH, [["dp"], [], ["tp"]])
    dst = TensorSharding.build(MESH, [[], ["tp"], ["dp"]])
    _canonical_search.cache_clear()
    first = reshard_for_planning((8, 16, 32), "f32", src, dst, cluster)
    misses = _canonical_search.cache_info().misses
    again = reshard_for_planning((32, 16, 8), "f32", src.permuted((2, 1, 0)), dst.permuted((2, 1, 0)), cluster)
    assert _canonical_search.cache_info().misses == misses  # no new search
    assert again.time_s == first.time_s and again.bytes_per_device == first.bytes_per_device
    assert [s.kind for s in again.steps] == [s.kind for s in first.steps]
    assert [s.dims for s in again.steps] == [tuple(2 - d for d in s.dims) for s in first.steps]
    assert again.steps[-1].after == dst.permuted((2, 1, 0))
    assert _executes(first) and _executes(again)


@pytest.mark.parametrize("mesh", (MESH,) + MESHES_3D, ids=lambda m: m.short())
def test_every_renamed_plan_executes_and_is_as_fast_as_the_exhaustive_search_in_its_own_order(mesh):
    # the reference: the exhaustive search run on the problem as given, without the canonical order
    cluster = _default_cluster()
    layouts = _three(mesh)
    checked = 0
    for shape in ((16, 8, 24), (6, 16, 8)):  # all even; then a first dimension no split of 8 devices divides
        problems = list(itertools.product(layouts, [d for d in layouts if not d.unreduced]))
        for src, dst in problems[::len(problems) // 30]:  # 30 pairs spread over the suite
            try:
                src.check_rank(shape), src.local_shape(shape)
            except ShardingError:
                continue
            plan = reshard_for_planning(shape, "f32", src, dst, cluster)
            steps, _ = _search_here(shape, 4, src, dst, cluster, True, False, True, None, True)
            assert plan.time_s == pytest.approx(sum(s.time_s for s in steps), rel=1e-12), (shape, src, dst)
            assert _executes(plan), (shape, src, dst)
            checked += 1
    assert checked >= 40


@pytest.mark.parametrize("mesh", (MESH,) + MESHES_3D, ids=lambda m: m.short())
def test_the_seconds_of_a_planning_move_are_its_plans_to_the_last_bit(mesh):
    # the cost tables read planning_seconds, the report and the lowering read the plan: one number, so every pair
    # of layouts of two shapes (even, and with a dimension no split divides), pending sources included, both ways
    cluster = _default_cluster()
    layouts = _three(mesh)
    checked = 0
    for shape in ((16, 8, 24), (6, 16, 8)):
        for src, dst in itertools.product(layouts[::3], [d for d in layouts if not d.unreduced][::2]):
            try:
                src.local_shape(shape), dst.local_shape(shape)
            except ShardingError:
                continue
            assert planning_seconds(shape, "f32", src, dst, cluster) == \
                reshard_for_planning(shape, "f32", src, dst, cluster).time_s, (shape, src, dst)
            checked += 1
    assert checked >= 100


def test_the_canonical_order_puts_dimensions_every_split_divides_first_and_keeps_the_tensors_size():
    # on 8 devices: 16 and 24 are divided by every split, 6 is not; the divided ones are ordered by how the
    # source and then the destination split them, and become (16 * 24 / 8, 8): the same 384 elements
    src = TensorSharding.build(MESH, [[], ["tp"], ["dp"]])
    dst = TensorSharding.build(MESH, [[], [], []])
    order, shape = _canonical((6, 16, 24), src, dst)
    assert order == (2, 1, 0)  # "dp" sorts before "tp": 24 (split by dp), then 16 (by tp), then 6
    assert shape == (16 * 24 // 8, 8, 6)


def test_permuted_refuses_what_is_not_an_order_of_the_dimensions():
    s = TensorSharding.build(MESH, [["dp"], ["tp"]])
    assert s.permuted((1, 0)) == TensorSharding.build(MESH, [["tp"], ["dp"]])
    assert hash(s.permuted((1, 0))) == hash(TensorSharding.build(MESH, [["tp"], ["dp"]]))
    with pytest.raises(ShardingError, match="not an order of the 2 dimensions"):
        s.permuted((0, 0))
