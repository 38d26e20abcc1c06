"""The moves of the redistribution search: one collective (or local slice) each.

Invariants every move keeps, so that plans execute exactly on the simulator:

* a state is a layout (:mod:`planner.redistribution.state`); a move goes from one
  state to another and is *valid* only if every device can build its new block
  (valid elements; padding is zero) from what the collective delivers to it —
  checked on the device index map, which is what makes non-divisible
  dimensions safe;
* only the most minor axes of a dimension leave it (so that a group's blocks are
  adjacent and concatenate); axes may join a dimension at any position, since the
  validity check on the index map decides whether each device's new block lies in
  what it has (Slice, ReduceScatter) or receives (AllToAll);
* bytes are what a device receives, counted on padded local buffers with the
  ring formulas of :mod:`costmodels.collectives`; a step's bytes are the largest
  over devices.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from planner.redistribution.state import Pieces, State, box_volume, contains, missing_box


@dataclass(frozen=True, slots=True)
class Move:
    kind: str
    group: tuple[int, ...]  # pieces the collective runs over, in member order
    dims: tuple[int, ...]
    after: State
    p: int  # group size
    unit_bytes: int  # the shard / chunk / block size the cost formula of ``kind`` takes
    pairs: tuple[tuple[int, int], ...] = ()
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self):  # moves key the engine's cost cache: hash them once
        object.__setattr__(
            self, "_hash", hash((self.kind, self.group, self.dims, self.after, self.p, self.unit_bytes, self.pairs))
        )

    def __hash__(self) -> int:
        return self._hash


def _with_dim(state: State, k: int, pieces: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    return tuple(pieces if i == k else d for i, d in enumerate(state.dims))


def _insertions(
    dim: tuple[int, ...], group: tuple[int, ...], goal: tuple[int, ...] = (), free: frozenset = frozenset()
) -> list[tuple[int, ...]]:
    """``dim`` with ``group`` inserted as a block at every position, minor end first.

    Also the goal's own arrangement of the dimension when it holds ``dim`` and
    ``group`` plus only ``free`` pieces: a collective whose members each keep a
    smaller block may take the free pieces' slice at the same time.
    """
    out = [dim[:j] + group + dim[j:] for j in range(len(dim), -1, -1)]
    extra = set(goal) - set(dim) - set(group)
    if goal and set(dim) | set(group) <= set(goal) and extra and extra <= free and goal not in out:
        out.append(goal)
    return out


def _free_pieces(pc: Pieces, used: set[int]) -> list[int]:
    return [p for p in range(len(pc.refs)) if p not in used]


def _union_along(pc: Pieces, box: np.ndarray, group: tuple[int, ...], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per device: the span along dim ``k`` covered by its group's boxes (they are adjacent)."""
    _, labels = np.unique(pc.group_key(group), return_inverse=True)
    n = labels.max() + 1
    lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(lo, labels, box[:, k, 0])
    np.maximum.at(hi, labels, box[:, k, 1])
    return lo[labels], hi[labels]


def _span_ok(new: np.ndarray, lo: np.ndarray, hi: np.ndarray, k: int) -> bool:
    empty = new[:, k, 1] <= new[:, k, 0]
    return bool(np.all(empty | ((lo <= new[:, k, 0]) & (new[:, k, 1] <= hi))))


def moves(pc: Pieces, state: State, goal: State, itemsize: int) -> list[Move]:
    """Every valid move from ``state`` that can bring it closer to ``goal``.

    The moves that do not depend on the goal are computed once per state and
    kept on ``pc`` (shared by every search over the same pieces), the rest once
    per (state, goal).
    """
    base = pc.memo(("base", state, itemsize), _listed, _base_moves, pc, state, itemsize)
    extra = pc.memo(("goal", state, goal, itemsize), _listed, _goal_moves, pc, state, goal, itemsize)
    return base + extra


def _listed(gen, *args) -> list:
    return list(gen(*args))


def _contained(pc: Pieces, old: State, new: State) -> bool:
    """Every device's block under ``new`` lies in its block under ``old`` (cached)."""
    return pc.memo(("in", old.dims, new.dims), _contained_now, pc, old, new)


def _contained_now(pc: Pieces, old: State, new: State) -> bool:
    return bool(contains(pc.boxes(old), pc.boxes(new)).all())


def _gather_ok(pc: Pieces, state: State, group: tuple[int, ...], i: int, after: State) -> bool:
    """After gathering ``group`` (minor pieces of dim i), every new block lies in what the group holds."""
    return pc.memo(("gather", state.dims, group, i, after.dims), _gather_ok_now, pc, state, group, i, after)


def _gather_ok_now(pc: Pieces, state: State, group: tuple[int, ...], i: int, after: State) -> bool:
    lo, hi = _union_along(pc, pc.boxes(state), group, i)
    return _span_ok(pc.boxes(after), lo, hi, i)


def _along_ok(pc: Pieces, old: State, new: State, k: int) -> bool:
    return pc.memo(("along", old.dims, new.dims, k), _along_ok_now, pc, old, new, k)


def _along_ok_now(pc: Pieces, old: State, new: State, k: int) -> bool:
    box, nb = pc.boxes(old), pc.boxes(new)
    return bool(np.all((nb[:, k, 1] <= nb[:, k, 0]) | ((box[:, k, 0] <= nb[:, k, 0]) & (nb[:, k, 1] <= box[:, k, 1]))))


def _all_to_all(pc: Pieces, state: State, i: int, k: int, group, rest, dim_k, itemsize) -> Move | None:
    dims = list(state.dims)
    dims[i] = rest
    dims[k] = dim_k
    after = State(tuple(dims), state.unreduced)
    if not _gather_ok(pc, state, group, i, after) or not _along_ok(pc, state, after, k):
        return None
    old_local, new_local = pc.local_shape(state), pc.local_shape(after)
    chunk = pc.local_elements(state) // old_local[k] * new_local[k] if old_local[k] else 0
    return Move("AllToAll", group, (i, k), after, pc.size(group), chunk * itemsize)


def _base_moves(pc: Pieces, state: State, itemsize: int) -> Iterator[Move]:
    """Moves that do not depend on the goal: gathers, all-to-alls, slices, reorderings."""
    local = pc.local_elements(state)
    rank = len(state.dims)
    for i, dim in enumerate(state.dims):
        for j in range(1, len(dim) + 1):
            group = dim[len(dim) - j:]
            rest = dim[: len(dim) - j]
            # AllGather the most minor ``j`` pieces of dimension i.
            after = State(_with_dim(state, i, rest), state.unreduced)
            if _gather_ok(pc, state, group, i, after):
                yield Move("AllGather", group, (i,), after, pc.size(group), local * itemsize)
            # AllToAll them into another dimension (at any position its block contains).
            for k in range(rank):
                if k != i:
                    for dim_k in _insertions(state.dims[k], group):
                        m = _all_to_all(pc, state, i, k, group, rest, dim_k, itemsize)
                        if m is not None:
                            yield m
    # Any free piece may split a dimension for a while: work on a smaller block,
    # gather it back later (e.g. a reduction shared among replicas).
    used = state.used()
    for piece in _free_pieces(pc, used):
        for k in range(rank):
            for dim in _insertions(state.dims[k], (piece,)):
                after = State(_with_dim(state, k, dim), state.unreduced)
                if _contained(pc, state, after):
                    yield Move("Slice", (), (k,), after, 1, 0)
    # CollectivePermute to a reordering of one dimension.
    if not state.unreduced:
        for i, dim in enumerate(state.dims):
            if len(dim) > 1:
                for order in itertools.permutations(dim):
                    if order != dim:
                        m = permute_move(pc, state, State(_with_dim(state, i, order), state.unreduced), itemsize)
                        if m is not None:
                            yield m


def _goal_moves(pc: Pieces, state: State, goal: State, itemsize: int) -> Iterator[Move]:
    """Moves aimed at ``goal``: reductions, jumps straight to its dimensions, runs of its slices."""
    local = pc.local_elements(state)
    rank = len(state.dims)
    goal_dim = {p: i for i, d in enumerate(goal.dims) for p in d}
    to_reduce = tuple(sorted(state.unreduced - goal.unreduced, key=lambda p: pc.refs[p].sort_key(pc.mesh)))
    used = state.used()
    free = frozenset(goal_dim) - used

    # AllReduce every pending sum the goal does not keep, at once.
    if to_reduce:
        p = pc.size(to_reduce)
        after = State(state.dims, state.unreduced - set(to_reduce))
        yield Move("AllReduce", to_reduce, (), after, p, -(-local // p) * itemsize)
        # ReduceScatter a subset of them into a dimension. Members may receive any
        # disjoint pieces of their common block, so the pieces can join the
        # dimension at any position the block contains (even with free pieces of
        # the goal's arrangement, sliced at the same time).
        for r in range(1, len(to_reduce) + 1):
            for subset in itertools.permutations(to_reduce, r):
                for k in range(rank):
                    for dim in _insertions(state.dims[k], subset, goal.dims[k], free):
                        after = State(_with_dim(state, k, dim), state.unreduced - set(subset))
                        if _contained(pc, state, after):
                            yield Move("ReduceScatter", subset, (k,), after, pc.size(subset),
                                       pc.local_elements(after) * itemsize)

    # AllToAll straight into the goal's arrangement of a dimension (slicing free pieces too).
    for i, dim in enumerate(state.dims):
        for j in range(1, len(dim) + 1):
            group, rest = dim[len(dim) - j:], dim[: len(dim) - j]
            for k in range(rank):
                if k == i:
                    continue
                jumps = _insertions(state.dims[k], group, goal.dims[k], free)[len(state.dims[k]) + 1:]
                for dim_k in jumps:
                    m = _all_to_all(pc, state, i, k, group, rest, dim_k, itemsize)
                    if m is not None:
                        yield m

    # Slice a run of the goal's own suffix at once (on non-divisible dimensions
    # the pieces one by one may not be local even when the run is).
    for k, (have, want) in enumerate(zip(state.dims, goal.dims)):
        if want[: len(have)] != have:
            continue
        suffix = want[len(have):]
        for j in range(2, len(suffix) + 1):
            run = suffix[:j]
            if any(p in used for p in run):
                break
            after = State(_with_dim(state, k, have + run), state.unreduced)
            if _contained(pc, state, after):
                yield Move("Slice", (), (k,), after, 1, 0)

    # A value becomes a pending sum over free pieces the goal keeps unreduced.
    fresh = tuple(sorted(p for p in goal.unreduced - state.unreduced if p not in used))
    if fresh:
        yield Move("Slice", fresh, (), State(state.dims, state.unreduced | set(fresh)), 1, 0)

    # CollectivePermute straight to the goal.
    if state.unreduced == goal.unreduced and goal != state:
        m = permute_move(pc, state, goal, itemsize)
        if m is not None:
            yield m


def permute_move(pc: Pieces, state: State, target: State, itemsize: int) -> Move | None:
    """One CollectivePermute from ``state`` to ``target``, if a matching of holders exists.

    A device whose new block it already holds receives nothing; any other device
    must be missing a single box of its new block (:func:`missing_box`) and receives
    exactly that box from a distinct device that holds all of it (each device sends
    at most one message and receives at most one, as XLA's collective-permute).
    """
    if state.unreduced != target.unreduced or state.unreduced:
        return None
    old, new = pc.boxes(state), pc.boxes(target)
    ok, missing = missing_box(old, new)
    volume = box_volume(missing)
    if not ok.all() or not volume.any():
        return None
    receivers = np.flatnonzero(volume)
    want = missing[receivers]
    # holders[r, s]: device s holds receiver r's missing box
    holders = np.all((old[None, :, :, 0] <= want[:, None, :, 0]) & (want[:, None, :, 1] <= old[None, :, :, 1]), axis=-1)
    holders[np.arange(len(receivers)), receivers] = False
    if not holders.any(axis=1).all():
        return None
    cost = np.where(holders, 1.0 + np.arange(pc.mesh.size)[None, :] * 1e-6, 1e9)
    from scipy.optimize import linear_sum_assignment  # SciPy costs 0.4 s to import: only when a permute is priced

    rows, cols = linear_sum_assignment(cost)
    if len(rows) < len(receivers) or np.any(cost[rows, cols] >= 1e9):
        return None
    pairs = tuple(sorted((int(c), int(receivers[r])) for r, c in zip(rows, cols)))
    return Move("CollectivePermute", (), (), target, 1, int(volume.max()) * itemsize, pairs)
