"""The engine's A* (issue 11): the exhaustive search's plans, far faster; budgeted on large meshes."""

import itertools

import numpy as np
import pytest

from planner.ir import parse_mesh, parse_sharding
from planner.ir.mesh import Mesh
from planner.redistribution import lower_bound, moves, reshard, reshard_for_planning, search
from planner.redistribution.engine import _default_cluster, _graph
from planner.redistribution.state import Pieces, State, box_volume, contains, missing_box, overlap_volume
from tests.redistribution.suite import MESH, MESHES_3D, SHAPES, pairs, shardings
from planner.simulation.reshard import verify

PAIRS_2D = list(pairs())


def _steps(plan):
    return [(s.kind, s.axes, s.dims, s.bytes_per_device, s.time_s, s.pairs, s.after) for s in plan.steps]


def _verified(plan):
    v = verify(plan, seed=3)
    return v.verified and v.measured_bytes_per_device == plan.bytes_per_device


@pytest.mark.parametrize("objective, pieces", [("bytes", "primes"), ("time", "axes")], ids=["cli", "planning"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_search_returns_the_exhaustive_plan_on_the_2d_suite(shape, objective, pieces):
    """Same steps, same devices paired, same costs: results on 2-axis meshes do not change."""
    differ = [
        (s.dims_text(), d.dims_text())
        for s, d in PAIRS_2D
        if _steps(reshard(shape, "f32", s, d, objective=objective, pieces=pieces))
        != _steps(reshard(shape, "f32", s, d, objective=objective, pieces=pieces, _exhaustive=True))
    ]
    assert not differ, differ[:5]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_planning_plans_are_as_fast_as_the_exhaustive_searchs(shape):
    """The planner takes any cheapest plan (ties="any", no second pass): on the 2-D suite each is
    as fast as the exhaustive search's (same objective: time, then bytes, then collectives; times
    summed in another order may differ in the last bits) and measures what it predicts."""
    cluster = _default_cluster()
    for s, d in PAIRS_2D:
        plan = reshard_for_planning(shape, "f32", s, d, cluster)
        full = reshard(shape, "f32", s, d, cluster, objective="time", pieces="axes", _exhaustive=True)
        where = (s.dims_text(), d.dims_text())
        assert plan.exact, where
        assert plan.time_s == pytest.approx(full.time_s, rel=1e-12), where
        assert plan.bytes_per_device == full.bytes_per_device, where
        assert len([x for x in plan.steps if x.kind != "Slice"]) == len([x for x in full.steps if x.kind != "Slice"])
        assert _verified(plan), where


@pytest.mark.parametrize("mesh", MESHES_3D, ids=lambda m: m.short())
def test_fast_path_never_worse_than_search_on_3d_suite(mesh):
    """A subset of the 3-D suite: every plan executes and measures what it predicts; a plan the
    engine calls exact is the exhaustive search's, and any other says so (``exact`` False:
    its search ran out of budget) and still moves at least as much as the exhaustive plan."""
    subset = list(pairs(mesh))[::97]
    exact = 0
    for shape in SHAPES:
        for src, dst in subset:
            for objective, pieces in (("bytes", "primes"), ("time", "axes")):
                plan = reshard(shape, "f32", src, dst, objective=objective, pieces=pieces)
                full = reshard(shape, "f32", src, dst, objective=objective, pieces=pieces, _exhaustive=True)
                where = (shape, objective, src.dims_text(), dst.dims_text())
                assert _verified(plan), where
                if plan.exact:
                    assert _steps(plan) == _steps(full), where
                    exact += 1
                else:
                    assert plan.bytes_per_device >= full.bytes_per_device, where
    assert exact >= 0.9 * len(subset) * len(SHAPES) * 2


def test_the_3d_suite_has_every_order_of_the_axes_sharing_a_dimension():
    """49 destinations: per axis replicated or on one of 2 dimensions, the axes of a dimension in any order."""
    def count(axes):  # each axis replicated or on dimension 0 or 1; k axes on a dimension in k! orders
        total = 0
        for places in itertools.product(("R", 0, 1), repeat=axes):
            total += np.prod([np.prod(range(1, places.count(d) + 1)) for d in (0, 1)])
        return total

    for mesh in MESHES_3D:
        assert len(shardings(mesh)) == count(3) == 49
        assert len({str(s) for s in shardings(mesh)}) == 49  # all distinct
    assert len(shardings(MESH)) == count(2) == 11  # the 2-D suite is unchanged


def test_swapping_the_axes_of_a_32x32_mesh_is_one_permute_at_the_bound():
    """Device (i, j) needs the block device (j, i) holds: one CollectivePermute of the whole block."""
    mesh = parse_mesh('@m = <["x"=32, "y"=32]>')
    src, dst = parse_sharding('[{"x"}, {"y"}]', mesh), parse_sharding('[{"y"}, {"x"}]', mesh)
    plan = reshard((64, 64), "f32", src, dst)
    block = (64 // 32) * (64 // 32) * 4
    assert [s.kind for s in plan.steps] == ["CollectivePermute"]
    assert plan.bytes_per_device == plan.lower_bound_bytes_per_device == block
    assert _verified(plan)


def test_a_three_axis_mesh_of_64_devices_plans_exactly():
    mesh = parse_mesh('@m = <["x"=4, "y"=4, "z"=4]>')
    src = parse_sharding('[{"x", "y"}, {"z"}, {}]', mesh)
    dst = parse_sharding('[{"z"}, {"y"}, {"x"}]', mesh)
    plan = reshard((64, 64, 16), "f32", src, dst)
    assert plan.exact and _verified(plan)
    # every device's block changes whole: no plan moves less than one block, and gathering
    # all 16 blocks of dimension 0 (then slicing) moves 15
    block = 64 * 64 * 16 // 64 * 4
    assert plan.lower_bound_bytes_per_device == block <= plan.bytes_per_device < 15 * block


@pytest.mark.parametrize("shape, src, dst", [
    ((64, 32), '[{"a", "b"}, {"c"}]', '[{"d"}, {"c", "a"}]'),
    ((7, 10, 6), '[{"a"}, {"b", "c"}, {}], unreduced={"d"}', '[{"b"}, {}, {"d", "a"}]'),
    ((32, 32, 8, 8), '[{"a"}, {}, {"b"}, {"d"}]', '[{}, {"a", "b"}, {"c"}, {"d"}]'),
], ids=["divisible", "pending-sum", "rank-4"])
def test_a_four_axis_pair_plans_and_verifies(shape, src, dst):
    mesh = parse_mesh('@m = <["a"=4, "b"=4, "c"=2, "d"=2]>')
    plan = reshard(shape, "f32", parse_sharding(src, mesh), parse_sharding(dst, mesh))
    assert _verified(plan)
    assert plan.bytes_per_device >= plan.lower_bound_bytes_per_device


def test_a_search_out_of_budget_keeps_a_verified_plan_no_better_than_the_exhaustive(monkeypatch):
    monkeypatch.setattr(search, "BUDGET", 16 * 16)  # 16 states on 16 devices, the least budget
    mesh = MESHES_3D[1]
    src = parse_sharding('[{}, {"z", "x", "y"}]', mesh)
    dst = parse_sharding('[{"x"}, {"y"}]', mesh)
    inexact = 0
    for shape in ((6, 10), (7, 5)):
        plan = reshard(shape, "f32", src, dst)
        full = reshard(shape, "f32", src, dst, _exhaustive=True)
        assert _verified(plan)
        assert plan.bytes_per_device >= full.bytes_per_device
        assert not plan.exact or _steps(plan) == _steps(full)  # exact means: the exhaustive search's plan
        inexact += not plan.exact
    assert inexact  # the budget did run out


@pytest.mark.parametrize("sizes, shape, src, dst", [
    ('"a"=4, "b"=2, "c"=2, "d"=2', (6, 10), '[{"b", "d", "c", "a"}, {}]', '[{"d", "b"}, {"c"}]'),
    ('"a"=8, "b"=8, "c"=8, "d"=8', (6, 64), '[{"a"}, {"c"}], unreduced={"d"}', '[{"c", "d"}, {}]'),
], ids=["32-devices", "4096-devices"])
def test_permute_checks_are_capped_by_the_budget(sizes, shape, src, dst, monkeypatch):
    """On 32 devices, a dimension of five pieces has 119 reorderings, queued as one family: the
    searches may check at most PERMUTE_CHECKS permutes per state they may expand (before the
    cap, this pair checked 15,548 permutes within a budget of 192 states). On 4,096 devices,
    fewer per state: 4 * 256 / 4,096 of the 8 states' worth (the floor for 12 pieces), 2 checks
    in all."""
    mesh = parse_mesh(f'@m = <[{sizes}]>')
    src, dst = parse_sharding(src, mesh), parse_sharding(dst, mesh)
    checked = []
    permute = search.Graph.permute

    def counting(graph, sid, tid):
        checked.append((sid, tid))
        return permute(graph, sid, tid)

    monkeypatch.setattr(search.Graph, "permute", counting)
    plan = reshard(shape, "f32", src, dst)
    budget = search.search_budget(Pieces.refine(mesh, shape, [src, dst]))
    rows = Pieces.refine(mesh, shape, [src, dst]).n
    assert budget.checks == search.PERMUTE_CHECKS * budget.left * min(1, search.CHECKS_ROWS / rows)
    assert 0 < len(checked) <= budget.checks
    assert plan.bytes_per_device >= plan.lower_bound_bytes_per_device
    assert _verified(plan)


@pytest.mark.parametrize("sizes, rows, counted", [
    ({"a": 2, "b": 2, "c": 2, "d": 2}, 16, 16), ({"a": 4, "b": 2, "c": 2, "d": 2}, 32, 40),
    ({"a": 4, "b": 4, "c": 2, "d": 2}, 64, 64),
], ids=["16-lists", "32-arrays", "64-arrays"])
def test_an_expansion_on_arrays_counts_at_least_array_rows(sizes, rows, counted):
    """The budget counts an expansion as its rows, but as ARRAY_ROWS (40) at least once the bound
    and the permute checks work on numpy arrays (beyond LOOP_DEVICES = 16 rows): 5,120 // 16 = 320
    states on 16 devices, 5,120 // 40 = 128 on 32 (not 160), 5,120 // 64 = 80 on 64."""
    mesh = Mesh.from_sizes("m", sizes)
    src, dst = parse_sharding('[{"a"}, {}]', mesh), parse_sharding('[{}, {"a"}]', mesh)
    pc = Pieces.refine(mesh, (64, 64), [src, dst])
    assert pc.n == rows
    assert search.search_budget(pc).left == search.BUDGET // counted


def test_state_bounds_are_capped_by_the_budget(monkeypatch):
    """Pending sums over two pieces of a 128-device mesh give each state many moves, and a search
    computes the bound of most of its children (3,216 bounds in 35 expansions before the cap):
    the first passes may compute at most BOUNDS per state they may expand; the plan still runs."""
    mesh = parse_mesh('@m = <["a"=8, "b"=4, "c"=2, "d"=2]>')
    shape = (32, 6, 7, 7)
    src = parse_sharding('[{}, {}, {"c"}, {}], unreduced={"a", "d"}', mesh)
    dst = parse_sharding('[{}, {}, {"b", "c", "d"}, {}]', mesh)
    spent = []
    bound = search.Budget.bound

    def counting(budget):
        spent.append(1)
        return bound(budget)

    monkeypatch.setattr(search.Budget, "bound", counting)
    plan = reshard(shape, "f32", src, dst)
    budget = search.search_budget(Pieces.refine(mesh, shape, [src, dst]))
    assert budget.bounds == search.BOUNDS * budget.left
    assert budget.bounds < len(spent) <= budget.bounds + 2  # refused once per pass that ran out
    assert _verified(plan)


def test_planning_cost_tables_use_the_search_too():
    cluster = _default_cluster()
    for src, dst in PAIRS_2D[::11]:
        plan = reshard_for_planning((64, 32), "f32", src, dst, cluster)
        assert plan.exact and _verified(plan)


# -- the heuristic and the fast paths agree with their slow definitions --------------------

def _states(mesh, shape, primes=True, unreduced=True, every=1):
    for a, b in list(itertools.product(shardings(mesh) + (shardings(mesh, True) if unreduced else []),
                                       shardings(mesh)))[::every]:
        pc = Pieces.refine(mesh, shape, [a, b], primes)
        yield pc, pc.state_of(a), pc.state_of(b)


@pytest.mark.parametrize("mesh, shape", [(MESH, (6, 10)), (MESHES_3D[1], (64, 32)), (MESHES_3D[1], (3, 5))],
                         ids=["2d-6x10", "3d-64x32", "3d-3x5"])
def test_the_bound_of_a_state_never_exceeds_the_plan_from_it(mesh, shape):
    """Admissible: the A*'s bytes bound is at most the exhaustive plan's bytes, and its time
    bound at most the exhaustive plan's time (planning mode); numpy and Python agree."""
    cluster = _default_cluster()
    for pc, start, goal in list(_states(mesh, shape, every=31)):
        src, dst = pc.sharding_of(start), pc.sharding_of(goal)
        elements, _ = lower_bound.state_bound(pc, start, goal)
        plan = reshard(shape, "f32", src, dst, cluster, _exhaustive=True)
        assert elements * 4 <= plan.bytes_per_device
        graph = _graph(pc, cluster, 4, True)
        h = graph.heuristic(graph.sid(goal))
        timed = reshard(shape, "f32", src, dst, cluster, objective="time", _exhaustive=True)
        assert graph.bound_key(graph.sid(start), graph.sid(goal), h)[0] <= timed.time_s * (1 + 1e-9)
        saved = lower_bound.LOOP_DEVICES
        try:
            lower_bound.LOOP_DEVICES = 0
            assert lower_bound.state_bound(pc, start, goal) == (elements, _)
        finally:
            lower_bound.LOOP_DEVICES = saved
        # the per-dimension terms (lists and arrays) agree with whole device boxes
        p = pc.size(tuple(start.unreduced - goal.unreduced))
        boxes = _needs_on_boxes(pc, start, goal, p)
        assert lower_bound._needs(pc, start, goal, p) == lower_bound._needs_arrays(pc, start, goal, p) == boxes


@pytest.mark.parametrize("mesh, shape", [(MESH, (6, 10)), (MESHES_3D[1], (64, 32)), (MESHES_3D[1], (3, 5))],
                         ids=["2d-6x10", "3d-64x32", "3d-3x5"])
def test_the_bytes_bound_never_exceeds_the_plan_in_the_order_costs_compare(mesh, shape):
    """With the bytes objective the bound is (bytes, one collective, the time of one collective that
    reaches every source): never above the exhaustive plan's (bytes, collectives, time) in that order,
    and, where the plan ties with it on bytes and collectives, never above its time."""
    cluster = _default_cluster()
    tied = 0
    for pc, start, goal in list(_states(mesh, shape, every=31)):
        plan = reshard(shape, "f32", pc.sharding_of(start), pc.sharding_of(goal), cluster, _exhaustive=True)
        graph = _graph(pc, cluster, 4, False)
        b, n, t = graph.bound_key(graph.sid(start), graph.sid(goal), graph.heuristic(graph.sid(goal)))
        collectives = sum(s.kind != "Slice" for s in plan.steps)
        assert (b, n) <= (plan.bytes_per_device, collectives)
        if (b, n) == (plan.bytes_per_device, collectives):
            tied += 1
            assert t <= plan.time_s * (1 + 1e-9)
    assert tied  # the time part is exercised


def _needs_on_boxes(pc, state, goal, p):
    """What lower_bound._needs computes on per-dimension terms, on whole device boxes instead:
    the most elements a device misses, the largest goal block, the blocks' total, the most sources."""
    gb, sb = pc.boxes(goal), pc.boxes(state)
    vol = box_volume(gb)
    over = overlap_volume(sb, gb)
    need = vol - over
    a, b = gb[..., 0], gb[..., 1]
    local = np.array([-(-d // pc.size(ps)) for d, ps in zip(pc.shape, state.dims)], dtype=np.int64)[None, :]
    blocks = np.prod(np.where(b > a, (b - 1) // local - a // local + 1, 0), axis=-1) * p - (over > 0)
    return int(need.max(initial=0)), int(vol.max(initial=0)), int(vol.sum()), int(blocks.max(initial=0))


def test_the_bound_of_the_start_never_exceeds_the_reported_lower_bound():
    for pc, start, goal in _states(MESH, (6, 10)):
        elements, _ = lower_bound.state_bound(pc, start, goal)
        reported = lower_bound.lower_bound_bytes(pc.sharding_of(start), pc.sharding_of(goal), (6, 10), 1)
        assert elements <= reported


@pytest.mark.parametrize("sizes, shape, every", [
    ({"x": 2, "y": 4}, (6, 10), 1), ({"x": 2, "y": 4, "z": 2}, (3, 9), 3), ({"x": 4, "y": 4, "z": 4}, (5, 13), 31),
], ids=["2d", "3d", "64-devices"])
@pytest.mark.parametrize("renumber", [False, True], ids=["codes", "renumbered"])
def test_the_covered_volume_numbered_per_dimension_is_the_union_of_the_device_boxes(sizes, shape, every, renumber,
                                                                                     monkeypatch):
    """The pending-sum bound's covered volume, from per-dimension span numbers, and the plan's
    (lower_bound_bytes'), from distinct whole boxes, both equal the union of every device's (state
    block & goal block) marked on a grid; also when the codes are renumbered after every dimension
    (as past int64 on many dimensions)."""
    if renumber:
        monkeypatch.setattr(lower_bound, "_CODES_BELOW", 2)
    for pc, state, goal in _states(Mesh.from_sizes("m", sizes), shape, every=every):
        boxes = lower_bound._intersections(pc.boxes(state), pc.boxes(goal))
        union = _union_on_the_grid(boxes, shape)
        assert lower_bound._covered(pc, state, goal) == union, (state, goal)
        assert lower_bound._union_volume(boxes, shape) == union, (state, goal)


def _union_on_the_grid(boxes, shape) -> int:
    """The volume of the union of ``boxes``, marking each on the grid of all their boundaries
    (whatever the boxes: no grid property assumed)."""
    edges = [np.unique(np.concatenate([boxes[:, k, 0], boxes[:, k, 1], [0, d]])) for k, d in enumerate(shape)]
    grid = np.zeros(tuple(max(len(e) - 1, 1) for e in edges), dtype=bool)
    for box in boxes:
        if np.any(box[:, 1] <= box[:, 0]):
            continue
        grid[tuple(slice(np.searchsorted(e, lo), np.searchsorted(e, hi)) for e, (lo, hi) in zip(edges, box))] = True
    weight = np.ones(grid.shape, dtype=np.int64)
    for k, e in enumerate(edges):
        size = np.diff(e) if len(e) > 1 else np.array([1])
        weight = weight * size.reshape([-1 if j == k else 1 for j in range(len(edges))])
    return int(weight[grid].sum())


@pytest.mark.parametrize("sizes, shape, every", [
    ({"x": 2, "y": 4}, (6, 10), 1), ({"x": 2, "y": 4, "z": 2}, (3, 9), 3), ({"x": 4, "y": 4, "z": 4}, (5, 13), 101),
], ids=["2d", "3d", "64-devices"])
def test_permutes_priced_per_dimension_match_the_device_boxes(sizes, shape, every, monkeypatch):
    """The loop over devices and the per-dimension arrays find the receivers, the holders and the
    volume whole device boxes give, and the same permute."""
    mesh = Mesh.from_sizes("m", sizes)
    for pc, state, goal in _states(mesh, shape, unreduced=False, every=every):
        for target in moves.permute_targets(state, goal):
            boxes = _permute_needs_on_boxes(pc, state, target)
            for found in (moves._permute_needs_loop(pc, state, target), moves._permute_needs_arrays(pc, state, target)):
                assert (found is None) == (boxes is None), (state, target)
                if found is not None:
                    assert found[0].tolist() == boxes[0].tolist() and found[2] == boxes[2], (state, target)
                    rows, cols = found[1]  # (receiver, holder) pairs, sorted: the dense matrix's nonzeros
                    assert rows.tolist() == np.nonzero(boxes[1])[0].tolist(), (state, target)
                    assert cols.tolist() == np.nonzero(boxes[1])[1].tolist(), (state, target)
            monkeypatch.setattr(moves, "_LOOP_DEVICES", 1 << 20)
            looped = moves.permute_move(pc, state, target, 4)
            monkeypatch.setattr(moves, "_LOOP_DEVICES", 0)
            arrays = moves.permute_move(pc, state, target, 4)
            monkeypatch.undo()
            assert looped == arrays, (state, target)


@pytest.mark.parametrize("within", [None, "x"], ids=["whole-mesh", "within-x"])
def test_a_permute_runs_on_the_mesh_axes_its_lifted_pairs_differ_along(within):
    """A permute's link comes from the axes its row pairs differ along (Move.spans): the same
    axes as its pairs of devices on the whole mesh, replicas included."""
    from planner.ir.axis import AxisRef
    from planner.redistribution.engine import permute_axes

    mesh = Mesh.from_sizes("m", {"x": 2, "y": 4, "z": 2})
    seen = 0
    for a, b in list(itertools.product(shardings(mesh), shardings(mesh)))[::7]:
        pc = Pieces.refine(mesh, (16, 8), [a, b], True, None if within is None else [AxisRef(within)])
        state, goal = pc.state_of(a), pc.state_of(b)
        for target in moves.permute_targets(state, goal):
            m = moves.permute_move(pc, state, target, 4)
            if m is not None:
                assert tuple(AxisRef(mesh.axes[i].name) for i in m.spans) == permute_axes(mesh, m.pairs)
                seen += 1
    assert seen


def test_a_permute_with_more_holder_pairs_than_the_cap_is_not_tried(monkeypatch):
    """Replicated over z, each block of the x/y swap has two holders: the 4 devices with x != y
    receive (the others hold their new block), from either z replica at the swapped (x, y): 8
    (receiver, holder) pairs; under a cap of 7 the permute is not tried and the plan uses other
    collectives."""
    mesh = parse_mesh('@m = <["x"=2, "y"=2, "z"=2]>')
    src, dst = parse_sharding('[{"x"}, {"y"}]', mesh), parse_sharding('[{"y"}, {"x"}]', mesh)
    pc = Pieces.refine(mesh, (8, 8), [src, dst], False)
    monkeypatch.setattr(moves, "_LOOP_DEVICES", 0)  # the arrays path, where the pairs are counted first
    receivers, (rows, cols), _ = moves._permute_needs(pc, pc.state_of(src), pc.state_of(dst))
    assert len(receivers) == 4 and len(rows) == 8
    monkeypatch.setattr(moves, "PERMUTE_HOLDERS", len(rows) - 1)
    assert moves.permute_move(pc, pc.state_of(src), pc.state_of(dst), 4) is None
    plan = reshard((8, 8), "f32", src, dst)
    assert "CollectivePermute" not in [s.kind for s in plan.steps] and _verified(plan)


def _permute_needs_on_boxes(pc, state, target):
    """What moves._permute_needs computes per dimension, on whole device boxes instead: the devices
    that miss a box of their new block, which devices hold each such box, and the largest box;
    None if some device misses more than one box or none misses anything."""
    old, new = pc.boxes(state), pc.boxes(target)
    ok, missing = missing_box(old, new)
    volume = box_volume(missing)
    if not ok.all() or not volume.any():
        return None
    receivers = np.flatnonzero(volume)
    want = missing[receivers]
    holders = np.all((old[None, :, :, 0] <= want[:, None, :, 0]) & (want[:, None, :, 1] <= old[None, :, :, 1]), axis=-1)
    holders[np.arange(len(receivers)), receivers] = False
    return receivers, holders, int(volume.max())


def test_containment_decided_per_dimension_matches_the_device_boxes():
    for sizes, shape in [({"x": 2, "y": 4}, (6, 10)), ({"x": 2, "y": 4, "z": 2}, (3, 5))]:
        for pc, a, b in _states(Mesh.from_sizes("m", sizes), shape, unreduced=False):
            others = moves._empty_elsewhere(pc, a)
            for k in range(len(a.dims)):  # dimension k split as in b, the others as in a
                after = State(tuple(b.dims[k] if j == k else d for j, d in enumerate(a.dims)))
                if len(after.used()) == sum(map(len, after.dims)):  # no piece twice
                    truth = bool(contains(pc.boxes(a), pc.boxes(after)).all())
                    assert moves._contained_along(pc, a, k, b.dims[k], others) == truth


def test_a_family_of_reorderings_prices_each_member_as_the_single_permute():
    mesh = parse_mesh('@m = <["a"=4, "b"=4, "c"=2, "d"=2]>')
    src, dst = parse_sharding('[{"c", "d"}, {"b"}]', mesh), parse_sharding('[{"c", "d", "b"}, {}]', mesh)
    pc = Pieces.refine(mesh, (6, 64), [src, dst], True)
    graph = _graph(pc, _default_cluster(), 4, False)
    goal = graph.sid(pc.state_of(dst))
    state = State((tuple(range(4)), ()))  # four pieces in dimension 0: 23 reorderings
    family = search.Family(graph, graph.sid(state), 0, goal)
    h = graph.heuristic(goal)
    assert 0 < family.size <= 23
    for j in range(family.size):
        target = graph.states[family.member(j, h)]
        r = family.rank[j]
        assert family.move_key(r)[0] == lower_bound.state_bound(pc, state, target)[0] * 4
        assert family.bound_key(r)[0] == lower_bound.state_bound(pc, target, graph.states[goal])[0] * 4
    keys = [family.entry(j, (0, 0, 0)) for j in range(family.size)]
    assert keys == sorted(keys)  # cheapest first
    assert np.all(np.diff([k[0] for k in keys]) >= 0)
