"""Moves of the redistribution engine: who sends to whom in a CollectivePermute."""

import numpy as np

from planner.ir import parse_mesh, parse_sharding
from planner.redistribution.moves import _nearest_matching, permute_move
from planner.redistribution.state import Pieces


def _nearest(pc, receivers, holders):
    """_nearest_matching on a dense (receivers, devices) matrix of who holds what."""
    return _nearest_matching(pc, receivers, np.nonzero(holders), holders.sum(axis=1))


def _pieces(mesh_text, shape=(8, 8)):
    mesh = parse_mesh(mesh_text)
    return Pieces.refine(mesh, shape, [], False)


def test_a_receiver_takes_the_holder_on_the_fewest_mesh_axes():
    # 2x2 mesh x, y: devices 0..3 at (x, y) = (0,0) (0,1) (1,0) (1,1). Receiver 0 may take from
    # 1 (differs on y) or 3 (on x and y); receiver 3 from 2 (on y) or 0 (on both). The lowest
    # index would give receiver 3 device 0; the nearest is 2.
    pc = _pieces('@m = <["x"=2, "y"=2]>')
    holders = np.zeros((2, 4), dtype=bool)
    holders[0, [1, 3]] = True
    holders[1, [0, 2]] = True
    assert _nearest(pc, np.array([0, 3]), holders) == {0: 1, 1: 2}


def test_a_matching_is_completed_along_an_augmenting_path():
    # receiver rows 0 and 1 both prefer sender 1 (one axis away); row 1 can only use 1, so the
    # first greedy choice must be undone: row 0 moves to its other holder, 3
    pc = _pieces('@m = <["x"=2, "y"=2]>')
    holders = np.zeros((2, 4), dtype=bool)
    holders[0, [1, 3]] = True
    holders[1, [1]] = True
    assert _nearest(pc, np.array([0, 3]), holders) == {0: 3, 1: 1}


def test_no_matching_when_two_receivers_share_their_only_sender():
    pc = _pieces('@m = <["x"=2, "y"=2]>')
    holders = np.zeros((2, 4), dtype=bool)
    holders[:, 2] = True
    assert _nearest(pc, np.array([0, 1]), holders) == {}


def test_swapping_blocks_on_a_replicated_axis_stays_off_that_axis():
    # the tensor is replicated over z: each block has two holders, one on the receiver's own z
    # plane; the permute pairs devices on the same plane, so it runs over x and y only
    mesh = parse_mesh('@m = <["x"=2, "y"=2, "z"=2]>')
    src, dst = parse_sharding('[{"x"}, {"y"}]', mesh), parse_sharding('[{"y"}, {"x"}]', mesh)
    pc = Pieces.refine(mesh, (8, 8), [src, dst], False)
    move = permute_move(pc, pc.state_of(src), pc.state_of(dst), 4)
    assert move is not None
    z = lambda d: (int(pc.positions[d]) // mesh.axis_stride("z")) % 2  # noqa: E731
    assert move.pairs and all(z(a) == z(b) for a, b in move.pairs)


def test_one_permute_moves_a_block_from_one_axis_to_another_for_the_planner_too():
    """[{"x"}, {}] -> [{"y"}, {}] on x=2, y=4: device (x, y) holds rows half x and needs quarter y, which
    lies in half y // 2: the devices with y // 2 != x lack it and each receives it from the device along
    x with the same y. One permute of a quarter block; gathering over x then slicing receives a half.
    The planner's setting plans the permute too: the value is invariant over x afterwards, since every
    device along x ends with the same block."""
    from planner.redistribution import reshard, reshard_for_planning

    mesh = parse_mesh('@m = <["x"=2, "y"=4]>')
    src, dst = parse_sharding('[{"x"}, {}]', mesh), parse_sharding('[{"y"}, {}]', mesh)
    pc = Pieces.refine(mesh, (8, 8), [src, dst], False)
    move = permute_move(pc, pc.state_of(src), pc.state_of(dst), 4)
    assert move is not None
    # device 4x + y: (0, 2), (0, 3) receive from (1, 2), (1, 3); (1, 0), (1, 1) from (0, 0), (0, 1)
    assert sorted(move.pairs) == [(0, 4), (1, 5), (6, 2), (7, 3)]
    quarter = 2 * 8 * 4  # a [2, 8] f32 block
    for plan in (reshard((8, 8), "f32", src, dst), reshard_for_planning((8, 8), "f32", src, dst, None)):
        assert [s.kind for s in plan.steps] == ["CollectivePermute"]
        assert plan.bytes_per_device == quarter


def test_containment_on_spans_matches_device_boxes_on_both_paths(monkeypatch):
    """A slice is valid when every device's new block lies in its old one (or is empty): decided per
    dimension on cached spans, by a loop over devices or on arrays; both agree with whole boxes."""
    import itertools

    import planner
    from planner.redistribution import moves
    from planner.redistribution.state import State, contains

    mesh = parse_mesh('@m = <["a"=4, "b"=2, "c"=2]>')
    seen = set()
    for shape in ((8, 6), (7, 16)):
        for limit in (0, 10_000):
            monkeypatch.setattr(moves, "_LOOP_SPANS", limit)
            planner.clear_caches()  # fresh Pieces: no spans cached by the other path
            pc = Pieces.refine(mesh, shape, [], True)
            pieces = range(len(pc.refs))
            layouts = [State((tuple(d0), tuple(d1))) for n in range(3) for d0 in itertools.permutations(pieces, n)
                       for d1 in itertools.permutations([p for p in pieces if p not in d0], min(1, len(pieces) - n))]
            for old, new in itertools.product(layouts[::3], layouts[::5]):
                others = moves._empty_elsewhere(pc, old)
                for k in range(2):  # dimension k split as in ``new``, the other as in ``old``
                    after = State(tuple(new.dims[k] if j == k else d for j, d in enumerate(old.dims)))
                    if set(after.dims[0]) & set(after.dims[1]):
                        continue
                    truth = bool(contains(pc.boxes(old), pc.boxes(after)).all())
                    assert moves._contained_along(pc, old, k, new.dims[k], others) == truth, (shape, old, after, limit)
                    seen.add(truth)
    assert seen == {True, False}
