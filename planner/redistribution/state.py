"""The search state of the redistribution engine: a layout over refined axis pieces.

Source and destination shardings may cut one mesh axis differently (``"d"`` in one,
``"d":(1)2`` and ``"d":(2)4`` in the other). Both are rewritten over the common
refinement of every axis: the *pieces* between all cut points either of them uses.
A state then says, per tensor dimension, which pieces split it (major to minor)
and which pieces carry a pending sum. States convert back to
:class:`~planner.ir.sharding.TensorSharding` (adjacent pieces merged).

Everything about where data sits is computed from the device index map, vectorised
over devices: the ``[start, stop)`` box per device and dimension (clipped to the
tensor, as :func:`planner.ir.layout.device_index_ranges` gives it) and the local,
padded shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence, TypeVar

import numpy as np

from planner.caches import BoundedCache, memoize
from planner.ir.axis import AxisRef, make_axis, prime_factors
from planner.ir.layout import devices_to_positions
from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding

T = TypeVar("T")

#: Entries each :class:`Pieces` keeps of its search results (boxes, moves, costs): a
#: few thousand for an 8-device mesh; at most 512 Pieces are cached (see planner.caches).
MEMO_SIZE = 65536


@dataclass(frozen=True, slots=True)
class State:
    """Pieces per dimension (indices into :attr:`Pieces.refs`) and pieces pending a sum."""

    dims: tuple[tuple[int, ...], ...]
    unreduced: frozenset[int] = frozenset()
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_hash", hash((self.dims, self.unreduced)))

    def __hash__(self) -> int:
        return self._hash

    def used(self) -> set[int]:
        return {p for d in self.dims for p in d} | set(self.unreduced)

    def dim_of(self, piece: int) -> int | None:
        for i, d in enumerate(self.dims):
            if piece in d:
                return i
        return None


@dataclass(frozen=True, eq=False)
class Pieces:
    """The refined pieces of a mesh, with their digits and the geometry they imply.

    Per-device arrays have one row per device, or, when the pieces leave some of the mesh out
    (a search ``within`` some axes), one row per *representative*: the devices whose digits
    on the pieces left out are 0. The others hold and do what their representative does, so
    bounds, boxes and moves computed on the representatives hold for every device, and a
    CollectivePermute between representatives is the same permute in every replica
    (:meth:`lift_pairs`). ``n`` is the number of rows.
    """

    mesh: Mesh
    shape: tuple[int, ...]
    refs: tuple[AxisRef, ...]
    strides: np.ndarray = field(repr=False)
    sizes: np.ndarray = field(repr=False)
    positions: np.ndarray = field(repr=False)  # flat mesh position of each row's device
    _digits: np.ndarray = field(repr=False)  # (rows, pieces) digit value of each row's device
    devices: np.ndarray = field(repr=False)  # device id of each row
    offsets: np.ndarray = field(repr=False)  # position offsets of a row's replicas (0 first)
    device_at: np.ndarray = field(repr=False)  # device id at each flat mesh position
    piece_sizes: tuple[int, ...] = field(repr=False)  # ``sizes`` as Python ints (the searches' hot loops)
    _memo: BoundedCache = field(
        default_factory=lambda: BoundedCache("pieces memo", MEMO_SIZE, register=False), repr=False, compare=False
    )
    # per-dimension geometry and what is derived from it (spans, bound terms, containment), keyed
    # by a dimension and its pieces: few keys (far fewer than states), a plain dict for speed
    _spans: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def refine(cls, mesh: Mesh, shape: Sequence[int], shardings: Sequence[TensorSharding],
               primes: bool = True, within: Sequence[AxisRef] | None = None) -> "Pieces":
        """The pieces of ``mesh``: cut wherever one of ``shardings`` cuts an axis and, with
        ``primes``, into prime factors, so that a collective may run over part of an axis
        (a size-4 axis is two size-2 pieces the search may move separately). Shared and cached.

        ``within`` (None: the whole mesh) keeps only the pieces inside those mesh pieces or
        used by ``shardings``: the search then never moves data over the others (the devices
        along them hold the same and do the same, as on a mesh without those axes)."""
        used = tuple(ref for s in shardings for ref in s.used_axes())
        refs = _cut_refs(mesh, used, primes, None if within is None else tuple(within))
        return _pieces(mesh, tuple(shape), refs)

    @classmethod
    def _make(cls, mesh: Mesh, shape: tuple[int, ...], refs: tuple[AxisRef, ...]) -> "Pieces":
        digits = [r.digit(mesh) for r in refs]
        strides = np.array([d[0] for d in digits], dtype=np.int64)
        sizes = np.array([d[1] for d in digits], dtype=np.int64)
        positions = devices_to_positions(mesh)
        values = (positions[:, None] // strides[None, :]) % sizes[None, :]
        rest = positions - (values * strides[None, :]).sum(axis=1)  # the digits of pieces left out
        rows = np.flatnonzero(rest == 0)
        device_at = np.empty(mesh.size, dtype=np.int64)
        device_at[positions] = np.arange(mesh.size)
        return cls(mesh, tuple(shape), tuple(refs), strides, sizes, positions[rows], values[rows], rows,
                   distinct(rest), device_at, tuple(int(d[1]) for d in digits))

    @property
    def n(self) -> int:
        """Rows of the per-device arrays: the devices, or their representatives (see the class)."""
        return len(self.devices)

    def lift_pairs(self, pairs) -> tuple[tuple[int, int], ...]:
        """``(sender row, receiver row)`` pairs as device ids on the whole mesh, every replica's, sorted."""
        rows = np.asarray(pairs if isinstance(pairs, np.ndarray) else list(pairs), dtype=np.int64).reshape(-1, 2)
        at = self.positions[rows][:, :, None] + self.offsets[None, None, :]  # (pairs, 2, replicas)
        devices = self.device_at[at].transpose(0, 2, 1).reshape(-1, 2)
        return tuple(sorted(map(tuple, devices.tolist())))

    def memo(self, key, fn: Callable[..., T], *args) -> T:
        """``fn(*args)``, computed once per ``key`` over these pieces (a bounded LRU).

        Searches over the same pieces share it: device boxes, valid moves, their
        costs. ``key`` must determine the result (it starts with a tag naming what
        is cached, e.g. ``("boxes", state.dims)``).
        """
        return self._memo.get_or_compute(key, fn, *args)

    def per_dimension(self, key, fn: Callable[..., T], *args) -> T:
        """``fn(*args)``, computed once per ``key`` in a plain dict: for the per-dimension geometry
        the searches read most (few keys, faster than :meth:`memo`'s LRU). ``key`` starts with a
        tag naming what is cached."""
        out = self._spans.get(key)
        if out is None:
            out = self._spans[key] = fn(*args)
        return out

    # -- conversions -------------------------------------------------------------
    def pieces_of(self, ref: AxisRef) -> tuple[int, ...]:
        lo, hi = ref.interval(self.mesh)
        found = [
            i for i, p in enumerate(self.refs)
            if p.name == ref.name and lo <= p.interval(self.mesh)[0] and p.interval(self.mesh)[1] <= hi
        ]
        return tuple(sorted(found, key=lambda i: self.refs[i].pre_size))

    def state_of(self, sharding: TensorSharding) -> State:
        return self.memo(("state", sharding), self._state_of, sharding)

    def _state_of(self, sharding: TensorSharding) -> State:
        dims = tuple(tuple(p for ref in d.axes for p in self.pieces_of(ref)) for d in sharding.dims)
        unreduced = frozenset(p for ref in sharding.unreduced for p in self.pieces_of(ref))
        return State(dims, unreduced)

    def sharding_of(self, state: State) -> TensorSharding:
        return self._memo.get_or_compute(("sharding", state), self._sharding_of, state)

    def _sharding_of(self, state: State) -> TensorSharding:
        return TensorSharding.build(
            self.mesh,
            [[self.refs[p] for p in d] for d in state.dims],
            unreduced=[self.refs[p] for p in state.unreduced],
        )

    def axes_of(self, pieces: Sequence[int]) -> tuple[AxisRef, ...]:
        """The pieces as canonical axis references (adjacent pieces merged), in mesh order."""
        refs = sorted((self.refs[p] for p in pieces), key=lambda r: r.sort_key(self.mesh))
        merged: list[AxisRef] = []
        for r in refs:
            if merged and merged[-1].name == r.name and merged[-1].interval(self.mesh)[1] == r.interval(self.mesh)[0]:
                lo = merged[-1].interval(self.mesh)[0]
                merged[-1] = make_axis(self.mesh, r.name, lo, r.interval(self.mesh)[1] // lo)
            else:
                merged.append(r)
        return tuple(merged)

    # -- geometry -----------------------------------------------------------------
    def size(self, pieces: Sequence[int]) -> int:
        n = 1
        sizes = self.piece_sizes
        for p in pieces:
            n *= sizes[p]
        return n

    def local_shape(self, state: State) -> tuple[int, ...]:
        """The padded local block's shape under ``state`` (cached per its dimensions)."""
        key = ("local", state.dims)
        out = self._spans.get(key)
        if out is None:
            out = self._spans[key] = tuple(-(-d // self.size(ps)) for d, ps in zip(self.shape, state.dims))
        return out

    def local_elements(self, state: State) -> int:
        """The padded local block's elements under ``state`` (cached per its dimensions)."""
        key = ("elements", state.dims)
        out = self._spans.get(key)
        if out is None:
            out = 1
            for s in self.local_shape(state):
                out *= s
            self._spans[key] = out
        return out

    def shard_index(self, pieces: Sequence[int]) -> np.ndarray:
        """Each device's mixed-radix index over ``pieces`` (major to minor)."""
        idx = np.zeros(self.n, dtype=np.int64)
        for p in pieces:
            idx = idx * self.piece_sizes[p] + self._digits[:, p]
        return idx

    def boxes(self, state: State) -> np.ndarray:
        """``(devices, rank, 2)`` clipped ``[start, stop)`` of every device (cached)."""
        return self._memo.get_or_compute(("boxes", state.dims), self._boxes, state.dims)

    def _boxes(self, dims: tuple[tuple[int, ...], ...]) -> np.ndarray:
        box = np.zeros((self.n, len(self.shape), 2), dtype=np.int64)
        for k, (d, ps) in enumerate(zip(self.shape, dims)):
            local = -(-d // self.size(ps))
            idx = self.shard_index(ps)
            box[:, k, 0] = np.minimum(idx * local, d)
            box[:, k, 1] = np.minimum((idx + 1) * local, d)
        return box

    def spans(self, k: int, pieces: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """Dimension ``k`` split by ``pieces``: every device's clipped ``start`` and ``stop`` (as
        tuples, for loops over few devices) and the longest span (cached)."""
        key = (k, pieces)
        out = self._spans.get(key)
        if out is None:
            lo, hi = self.span_arrays(k, pieces)
            out = self._spans[key] = (tuple(lo.tolist()), tuple(hi.tolist()), int((hi - lo).max(initial=0)))
        return out

    def span_arrays(self, k: int, pieces: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`spans` as arrays over devices (cached)."""
        key = ("arrays", k, pieces)
        out = self._spans.get(key)
        if out is None:
            d = self.shape[k]
            local = -(-d // self.size(pieces))
            idx = self.shard_index(pieces)
            out = self._spans[key] = (np.minimum(idx * local, d), np.minimum((idx + 1) * local, d))
        return out

    def group_key(self, pieces: Sequence[int]) -> np.ndarray:
        """Label per device: equal labels are one group of a collective over ``pieces``."""
        key = self.positions.copy()
        for p in pieces:
            key -= self._digits[:, p] * self.strides[p]
        return key

    def groups(self, pieces: Sequence[int]) -> list[np.ndarray]:
        """Rows of each group, each ordered by its members' index over ``pieces``."""
        key = self.group_key(pieces)
        member = self.shard_index(pieces)
        order = np.lexsort((member, key))
        sorted_keys = key[order]
        cuts = np.flatnonzero(np.diff(sorted_keys)) + 1
        return [g for g in np.split(order, cuts)]

    def digits(self) -> np.ndarray:
        return self._digits


@memoize("redistribution cuts", maxsize=4096)
def _cut_refs(mesh: Mesh, used: tuple[AxisRef, ...], primes: bool,
              within: tuple[AxisRef, ...] | None) -> tuple[AxisRef, ...]:
    """The pieces :meth:`Pieces.refine` cuts ``mesh`` into for shardings that use ``used``: the
    planner asks for the same few layouts over and over, so the cuts are computed once."""
    keep = None if within is None else list(within) + list(used)
    refs: list[AxisRef] = []
    for axis in mesh.axes:
        cuts = {1, axis.size}
        for ref in used if keep is None else keep:
            if ref.name == axis.name:
                lo, hi = ref.interval(mesh)
                cuts.update((lo, hi))
        cuts = sorted(cuts)
        for lo, hi in zip(cuts, cuts[1:]):
            piece = make_axis(mesh, axis.name, lo, hi // lo)
            if keep is not None and not any(k.contains(piece, mesh) for k in keep):
                continue
            pre = lo
            for p in prime_factors(hi // lo) if primes else [hi // lo]:
                refs.append(make_axis(mesh, axis.name, pre, p))
                pre *= p
    return tuple(refs)


@memoize("redistribution pieces", maxsize=512)
def _pieces(mesh: Mesh, shape: tuple[int, ...], refs: tuple[AxisRef, ...]) -> Pieces:
    """One :class:`Pieces` per (mesh, shape, refinement): searches over it share their caches."""
    return Pieces._make(mesh, shape, refs)


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted: ``np.unique`` without its first call's import of ``numpy.ma``
    (a noticeable part of a short ``shardplan reshard`` command)."""
    out = np.sort(np.ravel(values))
    if len(out) > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def contains(outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """Per device: whether box ``inner`` lies in box ``outer`` (empty boxes lie anywhere)."""
    empty = np.any(inner[..., 1] <= inner[..., 0], axis=-1)
    inside = np.all((outer[..., 0] <= inner[..., 0]) & (inner[..., 1] <= outer[..., 1]), axis=-1)
    return empty | inside


def box_volume(box: np.ndarray) -> np.ndarray:
    return np.prod(np.maximum(box[..., 1] - box[..., 0], 0), axis=-1)


def overlap_volume(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    lo = np.maximum(a[..., 0], b[..., 0])
    hi = np.minimum(a[..., 1], b[..., 1])
    return np.prod(np.maximum(hi - lo, 0), axis=-1)


def missing_box(own: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per device: whether ``target`` minus ``own`` is one box, and that box.

    The difference of two boxes is a box when they are disjoint (all of ``target``),
    or when ``own`` covers ``target`` in every dimension but one and, in that one,
    covers a prefix or a suffix of it. Devices whose ``own`` covers ``target`` get an
    empty box. Returns ``(ok, box)`` with ``box`` shaped like ``target``.
    """
    lo = np.maximum(own[..., 0], target[..., 0])
    hi = np.minimum(own[..., 1], target[..., 1])
    t_empty = np.any(target[..., 1] <= target[..., 0], axis=-1)
    disjoint = np.any(hi <= lo, axis=-1) & ~t_empty
    covers = (own[..., 0] <= target[..., 0]) & (target[..., 1] <= own[..., 1])  # per dim
    full = np.all(covers, axis=-1) | t_empty
    short = ~covers
    one = short.sum(axis=-1) == 1
    box = target.copy()
    ok = full | disjoint
    # exactly one dimension falls short: own must be a prefix or a suffix there
    k = np.argmax(short, axis=-1)
    rows = np.arange(target.shape[0])
    t0, t1 = target[rows, k, 0], target[rows, k, 1]
    o0, o1 = lo[rows, k], hi[rows, k]
    prefix = one & ~disjoint & (o0 <= t0) & (o1 < t1)
    suffix = one & ~disjoint & (o0 > t0) & (o1 >= t1)
    box[rows[prefix], k[prefix], 0] = o1[prefix]
    box[rows[suffix], k[suffix], 1] = o0[suffix]
    ok |= prefix | suffix
    box[full] = target[full]
    box[full, :, 1] = box[full, :, 0]  # nothing missing
    return ok, box
