"""The moves of the redistribution search: one collective (or local slice) each.

Invariants every move keeps, so that plans execute exactly on the simulator:

* a state is a layout (:mod:`planner.redistribution.state`); a move goes from one
  state to another and is *valid* only if every device can build its new block
  (valid elements; padding is zero) from what the collective delivers to it —
  checked on the device index map, which is what makes non-divisible
  dimensions safe;
* axes only join a dimension at its minor end and only the most minor axes of a
  dimension leave it (anything else would not be a local reshuffle);
* bytes are what a device receives, counted on padded local buffers with the
  ring formulas of :mod:`costmodels.collectives`; a step's bytes are the largest
  over devices.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterator

import numpy as np
from scipy.optimize import linear_sum_assignment

from planner.redistribution.state import Pieces, State, contains


@dataclass(frozen=True, slots=True)
class Move:
    kind: str
    group: tuple[int, ...]  # pieces the collective runs over, in member order
    dims: tuple[int, ...]
    after: State
    p: int  # group size
    unit_bytes: int  # the shard / chunk / block size the cost formula of ``kind`` takes
    pairs: tuple[tuple[int, int], ...] = ()


def _with_dim(state: State, k: int, pieces: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    return tuple(pieces if i == k else d for i, d in enumerate(state.dims))


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


def moves(pc: Pieces, state: State, goal: State, itemsize: int) -> Iterator[Move]:
    """Every valid move from ``state`` that can bring it closer to ``goal``."""
    local = pc.local_elements(state)
    box = pc.boxes(state)
    rank = len(state.dims)
    goal_dim = {p: i for i, d in enumerate(goal.dims) for p in d}
    to_reduce = tuple(sorted(state.unreduced - goal.unreduced, key=lambda p: pc.refs[p].sort_key(pc.mesh)))

    # AllReduce every pending sum the goal does not keep, at once.
    if to_reduce:
        p = pc.size(to_reduce)
        after = State(state.dims, state.unreduced - set(to_reduce))
        chunk = -(-local // p) * itemsize
        yield Move("AllReduce", to_reduce, (), after, p, chunk)

        # ReduceScatter a subset of them onto the minor end of a dimension.
        for r in range(1, len(to_reduce) + 1):
            for subset in itertools.permutations(to_reduce, r):
                for k in range(rank):
                    after = State(_with_dim(state, k, state.dims[k] + subset), state.unreduced - set(subset))
                    if contains(box, pc.boxes(after)).all():
                        p = pc.size(subset)
                        yield Move("ReduceScatter", subset, (k,), after, p, pc.local_elements(after) * itemsize)

    for i, dim in enumerate(state.dims):
        for j in range(1, len(dim) + 1):
            group = dim[len(dim) - j:]
            rest = dim[: len(dim) - j]
            p = pc.size(group)
            lo, hi = _union_along(pc, box, group, i)
            # AllGather the most minor ``j`` pieces of dimension i.
            after = State(_with_dim(state, i, rest), state.unreduced)
            if _span_ok(pc.boxes(after), lo, hi, i):
                yield Move("AllGather", group, (i,), after, p, local * itemsize)
            # AllToAll them to the minor end of another dimension.
            for k in range(rank):
                if k == i:
                    continue
                dims = list(state.dims)
                dims[i] = rest
                dims[k] = state.dims[k] + group
                after = State(tuple(dims), state.unreduced)
                new = pc.boxes(after)
                if not _span_ok(new, lo, hi, i):
                    continue
                inside_k = (new[:, k, 1] <= new[:, k, 0]) | (
                    (box[:, k, 0] <= new[:, k, 0]) & (new[:, k, 1] <= box[:, k, 1])
                )
                if not inside_k.all():
                    continue
                chunk = local // pc.local_shape(state)[k] * pc.local_shape(after)[k] if pc.local_shape(state)[k] else 0
                yield Move("AllToAll", group, (i, k), after, p, chunk * itemsize)

    # Slice: a free piece joins the dimension the goal puts it in.
    used = state.used()
    for piece, k in sorted(goal_dim.items()):
        if piece in used:
            continue
        after = State(_with_dim(state, k, state.dims[k] + (piece,)), state.unreduced)
        if contains(box, pc.boxes(after)).all():
            yield Move("Slice", (), (k,), after, 1, 0)

    # A value becomes a pending sum over free pieces the goal keeps unreduced.
    fresh = tuple(sorted(p for p in goal.unreduced - state.unreduced if p not in used))
    if fresh:
        yield Move("Slice", fresh, (), State(state.dims, state.unreduced | set(fresh)), 1, 0)

    # CollectivePermute: straight to the goal, or to a reordering of one dimension.
    if state.unreduced == goal.unreduced:
        targets = [goal] if goal != state else []
        for i, dim in enumerate(state.dims):
            if len(dim) > 1:
                for order in itertools.permutations(dim):
                    if order != dim:
                        targets.append(State(_with_dim(state, i, order), state.unreduced))
        for target in targets:
            m = permute_move(pc, state, target, itemsize)
            if m is not None:
                yield m


def permute_move(pc: Pieces, state: State, target: State, itemsize: int) -> Move | None:
    """One CollectivePermute from ``state`` to ``target``, if a matching of holders exists.

    Devices that already hold their new block receive nothing; every other device
    receives its whole (padded) new block from a distinct device that holds it.
    """
    if state.unreduced != target.unreduced:
        return None
    old, new = pc.boxes(state), pc.boxes(target)
    need = ~contains(old, new)
    if not need.any():
        return None
    if state.unreduced:
        # pending sums may only move within their own reduction group position
        return None
    receivers = np.flatnonzero(need)
    # holders[r, s]: device s's block contains receiver r's new block
    holders = np.all(
        (old[None, :, :, 0] <= new[receivers][:, None, :, 0]) & (new[receivers][:, None, :, 1] <= old[None, :, :, 1]),
        axis=-1,
    )
    if not holders.any(axis=1).all():
        return None
    # prefer sources that are not receivers themselves, then the lowest id (deterministic)
    cost = np.where(holders, 1.0 + need[None, :] * 0.5 + np.arange(pc.mesh.size)[None, :] * 1e-6, 1e9)
    rows, cols = linear_sum_assignment(cost)
    if np.any(cost[rows, cols] >= 1e9):
        return None
    pairs = tuple(sorted((int(c), int(receivers[r])) for r, c in zip(rows, cols)))
    return Move("CollectivePermute", (), (), target, 1, pc.local_elements(target) * itemsize, pairs)
