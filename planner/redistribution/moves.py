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

from planner.redistribution.state import Pieces, State


@dataclass(frozen=True, slots=True)
class Move:
    kind: str
    group: tuple[int, ...]  # pieces the collective runs over, in member order
    dims: tuple[int, ...]
    after: State
    p: int  # group size
    unit_bytes: int  # the shard / chunk / block size the cost formula of ``kind`` takes
    pairs: tuple[tuple[int, int], ...] = ()
    # a CollectivePermute's mesh axes (indices into ``mesh.axes``) along which some sender and
    # its receiver differ: the link it runs on
    spans: tuple[int, ...] = ()
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


def _union_along(pc: Pieces, lo: np.ndarray, hi: np.ndarray, group: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per device: the span covered by its group's spans ``[lo, hi)`` (they are adjacent)."""
    labels = pc.group_key(group)  # a flat mesh position: less than the mesh's size
    n = pc.mesh.size
    first = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, labels, lo)
    np.maximum.at(last, labels, hi)
    return first[labels], last[labels]


def _span_ok(new_lo: np.ndarray, new_hi: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    empty = new_hi <= new_lo
    return bool(np.all(empty | ((lo <= new_lo) & (new_hi <= hi))))


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


def _contained_along(pc: Pieces, state: State, k: int, new: tuple[int, ...], others: list[int]) -> bool:
    """Every device's block lies in its block under ``state`` once dimension ``k`` is split by
    ``new`` instead (the other dimensions unchanged): per device, its new span along ``k`` lies in
    its old one, or its new block is empty (along ``k``, or along another dimension: the devices
    ``others[k]``, see :func:`_empty_elsewhere`)."""
    outside, empty = _span_within(pc, k, state.dims[k], new)
    return not outside & ~(empty | others[k])


def _empty_elsewhere(pc: Pieces, state: State) -> list[int]:
    """Per dimension ``k``: the devices (bits of an int) whose block under ``state`` is empty along
    some other dimension."""
    empties = [_span_within(pc, k, d, d)[1] for k, d in enumerate(state.dims)]
    out = []
    for k in range(len(empties)):
        bits = 0
        for j, e in enumerate(empties):
            if j != k:
                bits |= e
        out.append(bits)
    return out


def _span_within(pc: Pieces, k: int, old: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, int]:
    """Devices (bits of an int) whose new span along ``k`` is non-empty and not inside the old one,
    and those whose new span is empty (cached)."""
    return pc.per_dimension(("within", k, old, new), _span_within_now, pc, k, old, new)


def _span_within_now(pc: Pieces, k: int, old: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, int]:
    if pc.n > _LOOP_SPANS:  # whole arrays: a few numpy calls instead of a loop over devices
        lo, hi = pc.span_arrays(k, old)
        new_lo, new_hi = pc.span_arrays(k, new)
        empty = new_hi <= new_lo
        outside = ~empty & ((new_lo < lo) | (new_hi > hi))
        return _bits(outside), _bits(empty)
    lo, hi, _ = pc.spans(k, old)
    new_lo, new_hi, _ = pc.spans(k, new)
    outside = empty = 0
    for d, (a, b, c, e) in enumerate(zip(lo, hi, new_lo, new_hi)):
        if e <= c:
            empty |= 1 << d
        elif c < a or e > b:
            outside |= 1 << d
    return outside, empty


#: Beyond this many devices :func:`_span_within_now` works on arrays (``python benchmarks/bound.py``
#: measures the same trade-off for the bound: lists win at 16 devices, arrays at 64).
_LOOP_SPANS = 32


def _bits(mask: np.ndarray) -> int:
    """A boolean array over devices as an int whose bit ``d`` is ``mask[d]``."""
    return int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")


def _gather_ok(pc: Pieces, state: State, group: tuple[int, ...], i: int, rest: tuple[int, ...]) -> bool:
    """After gathering ``group`` (minor pieces of dim i), every new block lies in what the group holds.

    Only dimension ``i`` decides, so the answer is cached per its pieces before and after."""
    return pc.memo(("gather", i, state.dims[i], group, rest), _gather_ok_now, pc, i, state.dims[i], group, rest)


def _gather_ok_now(pc: Pieces, i: int, before: tuple[int, ...], group: tuple[int, ...], after: tuple[int, ...]) -> bool:
    lo, hi = _union_along(pc, *pc.span_arrays(i, before), group)
    return _span_ok(*pc.span_arrays(i, after), lo, hi)


def _all_to_all(pc: Pieces, state: State, i: int, k: int, group, rest, dim_k, itemsize) -> Move | None:
    """The AllToAll of ``group`` (the minor pieces of dim ``i``, ``rest`` left there) into dim
    ``k`` as ``dim_k``, if valid. Its gather along ``i`` is valid iff the AllGather of the same
    group is (:func:`_gather_ok`, which the callers check once per group)."""
    if _span_within(pc, k, state.dims[k], dim_k)[0]:  # some device's new span along k is outside its old
        return None
    dims = list(state.dims)
    dims[i] = rest
    dims[k] = dim_k
    after = State(tuple(dims), state.unreduced)
    old_k = -(-pc.shape[k] // pc.size(state.dims[k]))
    chunk = pc.local_elements(state) // old_k * -(-pc.shape[k] // pc.size(dim_k)) if old_k else 0
    return Move("AllToAll", group, (i, k), after, pc.size(group), chunk * itemsize)


def eager_moves(pc: Pieces, state: State, goal: State | None, itemsize: int) -> list[Move]:
    """:func:`moves` without its CollectivePermutes, for searches that price those lazily (see
    :func:`permute_targets`): with ``goal`` None the moves that do not depend on the goal, else
    the others (not cached: the caller keeps them)."""
    if goal is None:
        return list(_base_moves(pc, state, itemsize, False))
    return list(_goal_moves(pc, state, goal, itemsize, False))


def permute_targets(state: State, goal: State, listed: int = 0) -> list[State | int]:
    """The states :func:`moves` tries to reach with one CollectivePermute, in its order: every
    reordering of one dimension, then the goal (:func:`permute_move` says which are valid).

    With ``listed`` the reorderings of a dimension of more than ``listed`` pieces are not listed:
    the dimension's index stands for them (there are ``n! - 1``)."""
    out: list[State | int] = []
    if not state.unreduced:
        for i, dim in enumerate(state.dims):
            if listed and len(dim) > listed:
                out.append(i)
            elif len(dim) > 1:
                for order in itertools.permutations(dim):
                    if order != dim:
                        out.append(State(_with_dim(state, i, order), state.unreduced))
    if state.unreduced == goal.unreduced and goal != state and not state.unreduced:
        out.append(goal)
    return out


def _base_moves(pc: Pieces, state: State, itemsize: int, permutes: bool = True) -> Iterator[Move]:
    """Moves that do not depend on the goal: gathers, all-to-alls, slices, reorderings."""
    local = pc.local_elements(state)
    rank = len(state.dims)
    for i, dim in enumerate(state.dims):
        for j in range(1, len(dim) + 1):
            group = dim[len(dim) - j:]
            rest = dim[: len(dim) - j]
            # AllGather the most minor ``j`` pieces of dimension i.
            if not _gather_ok(pc, state, group, i, rest):
                continue  # nor can an AllToAll of them: its gather along i is this one
            yield Move("AllGather", group, (i,), State(_with_dim(state, i, rest), state.unreduced), pc.size(group),
                       local * itemsize)
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
    others = _empty_elsewhere(pc, state)
    for piece in _free_pieces(pc, used):
        for k in range(rank):
            for dim in _insertions(state.dims[k], (piece,)):
                if _contained_along(pc, state, k, dim, others):
                    yield Move("Slice", (), (k,), State(_with_dim(state, k, dim), state.unreduced), 1, 0)
    # CollectivePermute to a reordering of one dimension (the targets towards no other goal).
    if permutes:
        for target in permute_targets(state, state):
            m = permute_move(pc, state, target, itemsize)
            if m is not None:
                yield m


def replicates_in_place(size: int, blocks: int) -> bool:
    """Whether a dimension of ``size`` positions split into ``blocks`` is replicated by putting each device's
    positions in place in a zeroed dimension and all-reducing it (at least twice as many blocks as positions: XLA's
    ``ReplicatePartial``), rather than gathered."""
    return 2 * size <= blocks


def _goal_moves(pc: Pieces, state: State, goal: State, itemsize: int, permutes: bool = True) -> Iterator[Move]:
    """Moves aimed at ``goal``: reductions, jumps straight to its dimensions, runs of its slices."""
    local = pc.local_elements(state)
    rank = len(state.dims)
    goal_dim = {p: i for i, d in enumerate(goal.dims) for p in d}
    to_reduce = tuple(sorted(state.unreduced - goal.unreduced, key=lambda p: pc.refs[p].sort_key(pc.mesh)))
    used = state.used()
    free = frozenset(goal_dim) - used
    others = _empty_elsewhere(pc, state)

    # AllReduce every pending sum the goal does not keep, at once.
    if to_reduce:
        p = pc.size(to_reduce)
        after = State(state.dims, state.unreduced - set(to_reduce))
        yield Move("AllReduce", to_reduce, (), after, p, -(-local // p) * itemsize)
        # ReduceScatter a subset of them into a dimension. Members may receive any
        # disjoint pieces of their common block, so the pieces can join the
        # dimension at any position the block contains (even with free pieces of
        # the goal's arrangement, sliced at the same time).
        for subset in _scatter_groups(pc, to_reduce, goal):
            for k in range(rank):
                for dim in _insertions(state.dims[k], subset, goal.dims[k], free):
                    if _contained_along(pc, state, k, dim, others):
                        after = State(_with_dim(state, k, dim), state.unreduced - set(subset))
                        yield Move("ReduceScatter", subset, (k,), after, pc.size(subset),
                                   pc.local_elements(after) * itemsize)

    # A dimension split past its size into at least twice as many blocks as positions (a slice's window of fewer
    # positions than devices: the first devices along its pieces hold a position each, the others padding) becomes
    # whole and pending over its pieces where the goal keeps none of them there: each holder puts its position in
    # place in a zeroed dimension, the others zero theirs; an AllReduce then completes it (XLA's replication of
    # such a dimension, ``ReplicatePartial``; cheaper than gathering the padding when the blocks are more than
    # twice the positions).
    for k, dim in enumerate(state.dims):
        if dim and replicates_in_place(pc.shape[k], pc.size(dim)) and not set(dim) & set(goal.dims[k]):
            yield Move("Slice", dim, (k,), State(_with_dim(state, k, ()), state.unreduced | set(dim)), 1, 0)

    # AllToAll straight into the goal's arrangement of a dimension (slicing free pieces too).
    for i, dim in enumerate(state.dims):
        for j in range(1, len(dim) + 1):
            group, rest = dim[len(dim) - j:], dim[: len(dim) - j]
            for k in range(rank):
                if k == i:
                    continue
                jumps = _insertions(state.dims[k], group, goal.dims[k], free)[len(state.dims[k]) + 1:]
                if jumps and not _gather_ok(pc, state, group, i, rest):
                    break  # no AllToAll of this group is valid
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
            if _contained_along(pc, state, k, have + run, others):
                yield Move("Slice", (), (k,), State(_with_dim(state, k, have + run), state.unreduced), 1, 0)

    # A value becomes a pending sum over free pieces the goal keeps unreduced.
    fresh = tuple(sorted(p for p in goal.unreduced - state.unreduced if p not in used))
    if fresh:
        yield Move("Slice", fresh, (), State(state.dims, state.unreduced | set(fresh)), 1, 0)

    # CollectivePermute straight to the goal.
    if permutes and state.unreduced == goal.unreduced and goal != state:
        m = permute_move(pc, state, goal, itemsize)
        if m is not None:
            yield m


#: Up to this many pending pieces a ReduceScatter may run over any of them in any order (the
#: exhaustive search's moves); beyond it over fewer groups (:func:`_scatter_groups`), since
#: there are sum_r p!/(p-r)! ordered subsets: 64 for 4 pieces, 325 for 5, 1,956 for 6.
SCATTER_ORDERS_UP_TO = 4


def _scatter_groups(pc: Pieces, to_reduce: tuple[int, ...], goal: State) -> list[tuple[int, ...]]:
    """The groups of pending pieces a ReduceScatter may run over, in the order they are tried.

    Up to :data:`SCATTER_ORDERS_UP_TO` pieces: every ordered subset. Beyond: each piece alone,
    each mesh axis's pieces together, the pieces each dimension of the goal holds (in its order),
    and all of them (in mesh order): linear in the pieces, so a state with many pending sums
    (a=8,b=4,c=2 has six pending pieces) is expanded in bounded time."""
    if len(to_reduce) <= SCATTER_ORDERS_UP_TO:
        return [s for r in range(1, len(to_reduce) + 1) for s in itertools.permutations(to_reduce, r)]
    pending = set(to_reduce)
    groups = [(p,) for p in to_reduce]
    axes: dict[str, list[int]] = {}
    for p in to_reduce:  # in mesh order: an axis's pieces major to minor
        axes.setdefault(pc.refs[p].name, []).append(p)
    groups += [tuple(ps) for ps in axes.values()]
    groups += [tuple(p for p in d if p in pending) for d in goal.dims]
    groups.append(to_reduce)
    return list(dict.fromkeys(g for g in groups if g))


def permute_move(pc: Pieces, state: State, target: State, itemsize: int) -> Move | None:
    """One CollectivePermute from ``state`` to ``target``, if a matching of holders exists.

    A device whose new block it already holds receives nothing; any other device
    must be missing a single box of its new block (:func:`missing_box`) and receives
    exactly that box from a distinct device that holds all of it (each device sends
    at most one message and receives at most one, as XLA's collective-permute).

    The target may drop pieces the state shards over (``[{"dp"}]`` to ``[{"tp"}]``: the device that lacks its
    block receives it from one along ``dp`` that holds it): the pairs give every device of a group along a
    dropped piece the same block, so the value is invariant there (its type in a program:
    :func:`planner.partitioning.typecheck.check_step`).
    """
    if state.unreduced != target.unreduced or state.unreduced:
        return None
    found = _permute_needs(pc, state, target)
    if found is None:
        return None
    receivers, holders, most = found
    counts = np.bincount(holders[0], minlength=len(receivers))
    if not counts.all():
        return None
    senders = _forced_matching(holders, counts)
    if senders is None:
        senders = _nearest_matching(pc, receivers, holders, counts)
    if not senders:
        return None
    rows = np.array([(c, receivers[r]) for r, c in senders.items()], dtype=np.int64).reshape(-1, 2)
    digits = pc.per_dimension(("mesh digits",), _mesh_digits, pc)
    # replicas of a pair differ along the same axes as the pair (they are offset alike)
    spans = tuple(np.flatnonzero((digits[rows[:, 0]] != digits[rows[:, 1]]).any(axis=0)).tolist())
    return Move("CollectivePermute", (), (), target, 1, most * itemsize, pc.lift_pairs(rows), spans)


#: Up to this many devices :func:`permute_move` works on per-dimension spans in Python loops,
#: beyond it on the same spans as numpy arrays (``python benchmarks/bound.py --permutes``).
_LOOP_DEVICES = 16


#: A CollectivePermute is not tried when its receivers have more (receiver, holder) pairs than
#: this in all: matching them takes time and memory linear in their number, and a block
#: replicated over most of a large mesh has that many (on 8x8x8x8, a tensor sharded over one
#: axis has 512 holders per block: 2M pairs, 0.1 s per permute). Such a layout is moved by the
#: other collectives (or a permute from a less replicated layout).
PERMUTE_HOLDERS = 1 << 18


def _permute_needs(pc: Pieces, state: State, target: State):
    """:func:`missing_box` and the holders of each missing box, on the spans of each dimension
    (blocks form grids: a box lies in at most one block of the state, found per dimension).
    Returns ``(receivers, holders, largest missing volume)``, the holders as ``(receiver index,
    holder row)`` arrays sorted by receiver then row (work and memory linear in their number, not
    receivers times devices), or None if some device would miss
    more than one box or none misses anything."""
    if pc.n <= _LOOP_DEVICES:
        return _permute_needs_loop(pc, state, target)
    return _permute_needs_arrays(pc, state, target)


def _permute_needs_loop(pc: Pieces, state: State, target: State):
    """:func:`_permute_needs` in a loop over devices (few devices)."""
    rank = len(pc.shape)
    olds = [pc.spans(k, ps)[:2] for k, ps in enumerate(state.dims)]
    news = [pc.spans(k, ps)[:2] for k, ps in enumerate(target.dims)]
    locals_ = [-(-d // pc.size(ps)) for d, ps in zip(pc.shape, state.dims)]
    receivers, wants, most = [], [], 0
    for d in range(pc.n):
        box = []
        short = []
        t_empty = disjoint = False
        for k in range(rank):
            o0, o1 = olds[k][0][d], olds[k][1][d]
            t0, t1 = news[k][0][d], news[k][1][d]
            box.append([t0, t1, o0 if o0 > t0 else t0, o1 if o1 < t1 else t1])
            if t1 <= t0:
                t_empty = True
            if not (o0 <= t0 and t1 <= o1):
                short.append(k)
        if t_empty or not short:
            continue  # nothing missing
        disjoint = any(b[3] <= b[2] for b in box)
        if not disjoint:
            if len(short) != 1:
                return None
            k = short[0]
            t0, t1, lo, hi = box[k]
            if lo <= t0 and hi < t1:
                box[k][0] = hi  # it holds a prefix: the suffix is missing
            elif lo > t0 and hi >= t1:
                box[k][1] = lo
            else:
                return None
        volume = 1
        for b in box:
            volume *= b[1] - b[0] if b[1] > b[0] else 0
        if volume:
            receivers.append(d)
            wants.append(box)
            if volume > most:
                most = volume
    if not receivers:
        return None
    # the state's block holding each missing box, per dimension (its spans partition the dimension)
    by_block: dict[tuple, list[int]] = {}
    for d in range(pc.n):
        by_block.setdefault(tuple(olds[k][0][d] for k in range(rank)), []).append(d)
    holders = np.zeros((len(receivers), pc.n), dtype=bool)
    for r, (d, box) in enumerate(zip(receivers, wants)):
        starts = []
        for k, b in enumerate(box):
            a, e = b[0], b[1]
            i = a // locals_[k]
            lo, hi = i * locals_[k], min((i + 1) * locals_[k], pc.shape[k])
            if e > hi:
                break
            starts.append(lo)
        else:
            for s in by_block.get(tuple(starts), ()):
                if s != d:
                    holders[r, s] = True
    return np.array(receivers), np.nonzero(holders), most


def _permute_needs_arrays(pc: Pieces, state: State, target: State):
    """:func:`_permute_needs` on whole arrays over devices (many devices): the same receivers,
    holders and volume, from per-dimension terms cached like the bound's, stacked into one
    ``(dimensions, terms, devices)`` array so that each step is one numpy call over all dimensions."""
    if not state.dims:
        return None  # a scalar: every device holds all of it
    terms = np.stack([_permute_terms(pc, k, ps, qs) for k, (ps, qs) in enumerate(zip(state.dims, target.dims))])
    short = terms[:, _SHORT]  # the dimensions along which the old block falls short of the new
    falls = short.sum(axis=0)
    need = terms[:, _NONEMPTY].all(axis=0) & (falls > 0)  # the device misses some of its (non-empty) new block
    partial = need & ~terms[:, _APART].any(axis=0)  # old and new blocks meet: one dimension falls short,
    if (partial & (falls != 1)).any():  # by a prefix or a suffix
        return None
    receivers = np.flatnonzero(need)
    if not len(receivers):
        return None
    cut = short.astype(bool) & partial  # the missing box is cut along this dimension
    if (cut & (terms[:, _CUT_OK] == 0)).any():
        return None
    # per dimension, the missing box's length, the state's block it starts in and whether it ends there
    box = np.where(cut[:, None, :], terms[:, _CUT:_CUT + 3], terms[:, _FULL:_FULL + 3])
    volume = box[:, 0].prod(axis=0)
    fits = box[:, 2].all(axis=0)[receivers]  # the missing box lies in one block of the state
    digits, order, ordered = _held_blocks(pc, state)
    want = (box[:, 1] * digits[:, None]).sum(axis=0)[receivers]  # that block, numbered over the grid of blocks
    # the holders of a receiver's box: the devices holding its block (sorted by block, then row)
    lo = np.searchsorted(ordered, want, "left")
    counts = np.where(fits, np.searchsorted(ordered, want, "right") - lo, 0)
    if counts.sum() > PERMUTE_HOLDERS:
        return None
    rows = np.repeat(np.arange(len(receivers)), counts)
    starts = np.cumsum(counts) - counts
    cols = order[np.arange(len(rows)) - np.repeat(starts, counts) + np.repeat(lo, counts)]
    other = cols != receivers[rows]  # a device never sends to itself
    return receivers, (rows[other], cols[other]), int(volume[receivers].max())


# the rows of :func:`_permute_terms`' array, per device along one dimension from the state's
# pieces to the target's:
_NONEMPTY = 0  # the target span is not empty
_APART = 1  # the state span and the target span do not meet
_SHORT = 2  # the state span does not cover the target span
_CUT_OK = 3  # the state span covers a prefix or a suffix of it: the rest is one span
_CUT = 4  # that rest's length, the state's block it starts in, whether it ends in that block
_FULL = 7  # the same of the whole target span


def _permute_terms(pc: Pieces, k: int, ps: tuple[int, ...], qs: tuple[int, ...]) -> np.ndarray:
    """The ``(10, devices)`` terms of dimension ``k`` from ``ps`` to ``qs`` (rows :data:`_NONEMPTY`
    to :data:`_FULL`, cached)."""
    return pc.per_dimension(("permute", k, ps, qs), _permute_terms_now, pc, k, ps, qs)


def _permute_terms_now(pc: Pieces, k: int, ps: tuple[int, ...], qs: tuple[int, ...]) -> np.ndarray:
    o0, o1 = pc.span_arrays(k, ps)
    t0, t1 = pc.span_arrays(k, qs)
    lo, hi = np.maximum(o0, t0), np.minimum(o1, t1)
    prefix = (lo <= t0) & (hi < t1)  # it holds a prefix: the suffix is missing
    suffix = (lo > t0) & (hi >= t1)
    b0, b1 = np.where(prefix, hi, t0), np.where(suffix, lo, t1)
    extent = pc.shape[k]
    local = -(-extent // pc.size(ps))

    def fits(start, stop):
        return stop <= np.minimum((start // local + 1) * local, extent)

    return np.stack([
        t1 > t0, hi <= lo, ~((o0 <= t0) & (t1 <= o1)), prefix | suffix,
        b1 - b0, b0 // local, fits(b0, b1),
        t1 - t0, t0 // local, fits(t0, t1),
    ]).astype(np.int64)


def _held_blocks(pc: Pieces, state: State) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The state's blocks numbered over their grid (mixed radix, one more than the blocks per
    dimension: the last for a device whose span is empty): the weight of each dimension's block
    index, and the devices sorted by the block they hold, with those numbers (cached per state, in
    the pieces' bounded memo: there are far more states than dimensions' splits)."""
    return pc.memo(("held", state.dims), _held_blocks_now, pc, state.dims)


def _held_blocks_now(pc: Pieces, dims: tuple[tuple[int, ...], ...]):
    held = np.zeros(pc.n, dtype=np.int64)
    radices = []
    for k, ps in enumerate(dims):
        o0, o1 = pc.span_arrays(k, ps)
        extent = pc.shape[k]
        local = -(-extent // pc.size(ps))
        blocks = -(-extent // local)
        held = held * (blocks + 1) + np.where(o1 > o0, o0 // local, blocks)
        radices.append(blocks + 1)
    digits = np.ones(len(dims), dtype=np.int64)  # the weight of dimension k: the radices after it
    for k in range(len(dims) - 2, -1, -1):
        digits[k] = digits[k + 1] * radices[k + 1]
    order = np.argsort(held, kind="stable")
    return digits, order, held[order]


def _forced_matching(holders: tuple[np.ndarray, np.ndarray], counts: np.ndarray) -> dict[int, int] | None:
    """The matching of receivers (rows) to distinct senders (columns) when it is forced: a receiver
    with one possible sender takes it, which may leave another with one, and so on until every
    receiver has its sender. Then it is the only matching; ``{}`` when none exists, None when
    some receiver keeps a choice (then :func:`_nearest_matching` chooses).
    """
    if counts.min() > 1:
        return None
    rows, cols = holders
    options: list[set[int]] = [set() for _ in range(len(counts))]
    wanted: dict[int, list[int]] = {}  # sender -> the receivers it could serve
    for r, c in zip(rows.tolist(), cols.tolist()):
        options[r].add(c)
        wanted.setdefault(c, []).append(r)
    taken: dict[int, int] = {}
    ready = [r for r, o in enumerate(options) if len(o) == 1]
    while ready:
        r = ready.pop()
        if r in taken:
            continue
        if not options[r]:
            return {}
        (c,) = options[r]
        taken[r] = c
        for other in wanted[c]:  # c sends once
            o = options[other]
            if other not in taken and c in o:
                o.discard(c)
                if len(o) <= 1:
                    ready.append(other)
    if len(taken) < len(options):
        return {} if any(not o for r, o in enumerate(options) if r not in taken) else None
    return taken


def _nearest_matching(pc: Pieces, receivers: np.ndarray, holders: tuple[np.ndarray, np.ndarray],
                      counts: np.ndarray) -> dict[int, int]:
    """A sender for every receiver (rows), each sender used once; ``{}`` if there is no such matching.

    Each receiver prefers the holders that differ from it on the fewest mesh axes (the link the
    permute runs on), then the lowest device. In that order each receiver first takes its nearest
    holder still free; augmenting paths (Kuhn's algorithm, each row trying its holders in that
    order) then match the receivers left, whenever a complete matching exists. (Kuhn's algorithm
    from the empty matching, which re-matches earlier receivers to give each its first choice,
    took 0.1 s per permute of 3,528 receivers with 64 holders each on 8x8x8x8.)
    """
    digits = pc.per_dimension(("mesh digits",), _mesh_digits, pc)  # (rows, mesh axes)
    rows, cols = holders  # only the holders are ranked: work linear in their number
    far = (digits[receivers[rows]] != digits[cols]).sum(axis=-1)
    order = np.lexsort((cols, far, rows))  # per receiver: fewest axes, then lowest
    ranked = cols[order].tolist()
    ends = np.cumsum(counts).tolist()
    prefs = [ranked[a:b] for a, b in zip([0] + ends[:-1], ends)]
    owner: dict[int, int] = {}  # sender -> receiver row
    left = []
    for r0, mine in enumerate(prefs):
        for c in mine:
            if c not in owner:
                owner[c] = r0
                break
        else:
            left.append(r0)
    for r0 in left:
        if not _augment(r0, prefs, owner):
            return {}
    return {r: c for c, r in owner.items()}


def _mesh_digits(pc: Pieces) -> np.ndarray:
    """``(rows, mesh axes)``: each row's device's digit along every axis of the mesh."""
    pos, mesh = pc.positions, pc.mesh
    return np.stack([(pos // mesh.axis_stride(a.name)) % a.size for a in mesh.axes], axis=1)


def _augment(r0: int, prefs: list[list[int]], owner: dict[int, int]) -> bool:
    """Match row ``r0`` along an augmenting path (depth first, each row trying its senders in
    order), re-matching the rows on the path; False if there is none."""
    seen: set[int] = set()
    stack, tries, via = [r0], {r0: iter(prefs[r0])}, {}
    while stack:
        r = stack[-1]
        for c in tries[r]:
            if c in seen:
                continue
            seen.add(c)
            if c not in owner:  # free: every row on the path takes the sender before it
                for i in range(len(stack) - 1, -1, -1):
                    row = stack[i]
                    owner[c] = row
                    if i:
                        c = via[row]
                return True
            nxt = owner[c]  # taken: may its row move to another sender?
            via[nxt] = c
            tries[nxt] = iter(prefs[nxt])
            stack.append(nxt)
            break
        else:
            stack.pop()
    return False


def gather_then_slice(pc: Pieces, state: State, goal: State, itemsize: int) -> list[Move]:
    """The plan that always works, with no search: sum every pending sum the goal does not keep
    (AllReduce), gather every dimension (AllGather), then slice the goal's layout locally (and
    mark the goal's own pending sums). The engine falls back on it when its searches run out."""
    out: list[Move] = []
    to_reduce = tuple(sorted(state.unreduced - goal.unreduced, key=lambda p: pc.refs[p].sort_key(pc.mesh)))
    if to_reduce:
        p = pc.size(to_reduce)
        after = State(state.dims, state.unreduced - set(to_reduce))
        out.append(Move("AllReduce", to_reduce, (), after, p, -(-pc.local_elements(state) // p) * itemsize))
        state = after
    for i, dim in enumerate(state.dims):
        if dim:
            after = State(_with_dim(state, i, ()), state.unreduced)
            out.append(Move("AllGather", dim, (i,), after, pc.size(dim), pc.local_elements(state) * itemsize))
            state = after
    for k, want in enumerate(goal.dims):
        if want:
            after = State(_with_dim(state, k, want), state.unreduced)
            out.append(Move("Slice", (), (k,), after, 1, 0))
            state = after
    fresh = tuple(sorted(goal.unreduced - state.unreduced))
    if fresh:
        out.append(Move("Slice", fresh, (), State(state.dims, state.unreduced | set(fresh)), 1, 0))
    return out
