"""The same layout on another mesh over the same devices (seed 000, "várias malhas lógicas").

Several meshes may describe one set of devices in different orders (``device_ids``).
:func:`equivalent_sharding` re-expresses a sharding on another mesh: it finds a
sharding of that mesh which gives *every device exactly the same index ranges* of a
tensor of the given shape (:func:`~planner.ir.layout.device_index_ranges`) and the
same pending-sum groups (:func:`~planner.ir.layout.partial_groups`), or says that
none exists.

Search
------
For each tensor dimension the candidates are sequences (major to minor) of
*pieces* of the target mesh -- full axes and sub-axes ``"x":(m)k`` -- whose sizes
multiply to that dimension's shard count, pairwise disjoint and fitting one
factorisation per axis (the invariants of seed 000), never two adjacent pieces of
one axis in a row (those would be written as one, maximal piece). Every time a
piece is appended, each device's partial shard index is checked against the
interval of shard indices that would give it its original range; a prefix that
fails for some device is dropped at once. For divisible dimensions that interval
is the original shard index; for a padded one, every device that holds only
padding may take any padding shard. The search runs twice: first it asks for the
original shard indices on every dimension (an answer valid for every shape, found
in a few steps since about one piece passes the device check each time), and only
if there is none does it allow the padding shards to move; it is a branch and
bound on the order below.

The **bound**: an axis of size ``n`` has ``sum over m | n of (divisors(n/m) - 1)``
pieces (3 for ``n=4``, 6 for ``n=8``, 10 for ``n=16``, 15 for ``n=32``), a
dimension of ``S`` shards takes at most ``log2(S)`` pieces, and the whole search
stops after :data:`MAX_STEPS` (20 000) piece extensions. In practice the search
takes tens of steps (24 on four axes of 8 = 4096 devices) and a few hundred when
padding leaves most devices free (shape ``1x64`` sharded 4096 ways). If the bound
is reached, the best sharding found so far is returned (still deterministic) or,
if none was found yet, :class:`~planner.errors.ShardingError` is raised -- never a
wrong ``None``.

Canonical answer
----------------
Among all equivalent shardings the one returned minimises, in this order: the
number of dimensions whose shard count changes (only a zero-size dimension may
change it), the number of dimensions whose device -> shard-index map differs
from the original (so an answer valid for *every* shape is preferred to one
valid only because of padding), the number of sub-axes (whole axes first), the
number of pieces, and finally mesh order. On two meshes with the same device
order this is exactly the axis renaming done by
:func:`planner.model.annotations.translate` wherever that renaming exists
(it refuses axes that do not line up, e.g. ``[{"x", "y"}]`` from ``x=3, y=2`` to
``a=2, b=3``, where this function answers ``[{"a", "b"}]``).

Open/closed flags and priorities are copied per dimension. Pending-sum axes
(``unreduced``) must give the same device groups, or there is no equivalent.
Explicitly replicated axes are translated as a whole when some pieces of the
target mesh span the same device groups as all of them together; otherwise one by
one, dropping those that have no such pieces (they constrain propagation, not the
layout).

>>> from planner.ir.text import parse_mesh, parse_sharding
>>> m0 = parse_mesh('@m0 = <["a"=2, "b"=2]>')
>>> m1 = parse_mesh('@m1 = {<["x"=2, "y"=2]>, device_ids=[0, 2, 1, 3]}')
>>> str(equivalent_sharding(parse_sharding('[{"a"}, {"b", ?}]', m0), m1, (4, 4)))
'sharding<@m1, [{"y"}, {"x", ?}]>'
>>> print(equivalent_sharding(parse_sharding('[{"a", "b"}]', m0), parse_mesh('@r = {<["d"=4]>, device_ids=[1, 0, 2, 3]}'), (4,)))
None
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Sequence

import numpy as np

from planner.errors import ShardingError
from planner.ir.axis import AxisRef, make_axis, merge_adjacent, sort_axes
from planner.ir.layout import (
    device_index_ranges,
    devices_to_positions,
    positions_to_devices,
    shard_indices,
)
from planner.ir.mesh import Mesh
from planner.ir.sharding import DimSharding, TensorSharding

#: The search stops after this many piece extensions (see the module docstring).
MAX_STEPS = 20_000


@dataclass(frozen=True, eq=False)
class _Piece:
    """A full axis or sub-axis of the target mesh, with its digit per device id."""

    ref: AxisRef
    axis: int  # index of the axis in the mesh
    lo: int  # the piece covers [lo, hi) of its axis (multiplicatively)
    hi: int
    stride: int
    size: int
    values: np.ndarray  # digit of each device id along this piece

    @property
    def is_sub(self) -> bool:
        return not self.ref.is_full

    @property
    def order(self) -> tuple[int, int, int]:
        return self.axis, self.lo, self.hi


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def _pieces(mesh: Mesh, positions: np.ndarray) -> list[_Piece]:
    """Every piece of ``mesh``: full axes first (mesh order), then sub-axes, larger first."""
    out = []
    for i, axis in enumerate(mesh.axes):
        n = axis.size
        for m in _divisors(n):
            for k in _divisors(n // m):
                if k == 1:
                    continue
                ref = make_axis(mesh, axis.name, m, k)
                stride, size = ref.digit(mesh)
                values = (positions // stride) % size
                values.setflags(write=False)
                out.append(_Piece(ref, i, m, m * k, stride, size, values))
    out.sort(key=lambda p: (p.is_sub, -p.size, p.axis, p.lo))
    return out


def _fits(piece: _Piece, used: Sequence[_Piece]) -> bool:
    """Disjoint from, and part of one factorisation with, every used piece of its axis."""
    for u in used:
        if u.axis != piece.axis:
            continue
        a, b = (u, piece) if u.lo <= piece.lo else (piece, u)
        if b.lo < a.hi or b.lo % a.hi:
            return False
    return True


def _labels(positions: np.ndarray, digits: Sequence[tuple[int, int]]) -> np.ndarray:
    """Per device id, a label shared by the devices that differ only along ``digits``."""
    key = positions.copy()
    for stride, size in digits:
        key = key - ((positions // stride) % size) * stride
    _, labels = np.unique(key, return_inverse=True)
    return labels.reshape(-1)


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    pairs = np.unique(np.stack([a, b], axis=1), axis=0)
    return len(pairs) == len(np.unique(a)) == len(np.unique(b))


class _Search:
    def __init__(self, sharding: TensorSharding, mesh: Mesh, shape: tuple[int, ...], exact: bool):
        self.sharding = sharding
        self.exact = exact
        self.mesh = mesh
        self.shape = shape
        self.src_pos = devices_to_positions(sharding.mesh)
        self.pos = devices_to_positions(mesh)
        self.ids = positions_to_devices(mesh)
        self.pieces = _pieces(mesh, self.pos)
        self.counts = sharding.shard_counts()
        self.src_idx = shard_indices(sharding)
        ranges = device_index_ranges(sharding, shape)
        # per dimension, the allowed shard indices [lo, hi) of each device
        self.allowed = []
        for i, (d, s) in enumerate(zip(shape, self.counts)):
            start, stop = ranges[:, i, 0], ranges[:, i, 1]
            if exact:
                lo = self.src_idx[:, i]
                hi = lo + 1
            elif d == 0:
                lo, hi = np.zeros_like(start), np.full_like(start, s)
            else:
                local = -(-d // s)
                real = start < stop
                lo = np.where(real, start // local, -(-d // local))
                hi = np.where(real, lo + 1, s)
            self.allowed.append((lo, hi))
        self.src_unreduced = _labels(self.src_pos, [r.digit(sharding.mesh) for r in sharding.unreduced])
        self.unreduced_size = int(np.prod([r.size_in(sharding.mesh) for r in sharding.unreduced], dtype=np.int64))
        self.steps = 0
        self.truncated = False
        self.best_key = None
        self.best = None

    # -- dimensions -----------------------------------------------------------------------------
    def run(self) -> None:
        self._dim(0, [], [], (0, 0, 0, 0))

    def _worse(self, partial: tuple) -> bool:
        return self.best_key is not None and partial > self.best_key[:4]

    def _dim(self, i: int, chosen: list[tuple[_Piece, ...]], used: list[_Piece], key: tuple) -> None:
        if self.truncated or self._worse(key):
            return
        if i == len(self.shape):
            self._leaf(chosen, used, key)
            return
        s = self.counts[i]
        lo, hi = self.allowed[i]
        for seq, exact in self._sequences(i, s, lo, hi, used, key):
            changed, inexact, subs, npieces = key
            nkey = (changed, inexact + (not exact), subs + sum(p.is_sub for p in seq), npieces + len(seq))
            self._dim(i + 1, chosen + [seq], used + list(seq), nkey)
            if self.truncated:
                return
        if not self.exact and self.shape[i] == 0 and s > 1:
            # every device holds nothing of a zero-size dimension: leaving it unsharded is the same layout
            changed, inexact, subs, npieces = key
            self._dim(i + 1, chosen + [()], used, (changed + 1, inexact, subs, npieces))

    def _sequences(self, i, s, lo, hi, used, key):
        """Piece sequences of product ``s`` for dimension ``i``, device-checked prefix by prefix."""
        src = self.src_idx[:, i]
        n = len(src)

        def rec(seq, top, remaining, exact):
            if remaining == 1:
                yield tuple(seq), exact
                return
            for piece in self.pieces:
                if remaining % piece.size or not _fits(piece, used + seq):
                    continue
                if seq and seq[-1].axis == piece.axis and seq[-1].hi == piece.lo:
                    continue  # would be written as one maximal piece
                self.steps += 1
                if self.steps > MAX_STEPS:
                    self.truncated = True
                    return
                rest = remaining // piece.size
                new = top * piece.size + piece.values
                if np.any(new * rest >= hi) or np.any((new + 1) * rest <= lo):
                    continue
                still = exact and bool(np.array_equal(new, src // rest))
                changed, inexact, subs, npieces = key
                if self._worse((changed, inexact + (not still), subs + sum(p.is_sub for p in seq) + piece.is_sub,
                                npieces + len(seq) + 1 + (rest > 1))):
                    continue
                yield from rec(seq + [piece], new, rest, still)
                if self.truncated:
                    return

        yield from rec([], np.zeros(n, dtype=np.int64), s, True)

    # -- pending sums, then the candidate ---------------------------------------------------------
    def _leaf(self, chosen, used, key) -> None:
        unreduced = self._groups(self.src_unreduced, self.unreduced_size, used)
        if unreduced is None:
            return
        changed, inexact, subs, npieces = key
        full = (changed, inexact, subs + sum(p.is_sub for p in unreduced), npieces + len(unreduced),
                tuple(tuple(p.order for p in seq) for seq in chosen), tuple(p.order for p in unreduced))
        if self.best_key is None or full < self.best_key:
            self.best_key = full
            self.best = (chosen, unreduced)

    def _groups(self, labels: np.ndarray, size: int, used: Sequence[_Piece]) -> tuple[_Piece, ...] | None:
        """The fewest pieces, disjoint from ``used``, whose device groups are ``labels``; else None."""
        if size == 1:
            return () if len(np.unique(labels)) == len(labels) else None
        candidates = []
        for piece in self.pieces:
            if size % piece.size or not _fits(piece, used):
                continue
            # moving one step along the piece must stay inside the device's group
            p = self.pos
            moved = p - piece.values * piece.stride + ((piece.values + 1) % piece.size) * piece.stride
            if np.array_equal(labels[self.ids[moved]], labels):
                candidates.append(piece)
        candidates.sort(key=lambda q: q.order)
        for r in range(1, size.bit_length()):
            for combo in combinations(candidates, r):
                if int(np.prod([q.size for q in combo])) != size:
                    continue
                if not all(_fits(q, list(combo[:j])) for j, q in enumerate(combo)):
                    continue
                if _same_partition(_labels(self.pos, [(q.stride, q.size) for q in combo]), labels):
                    return combo
        return None

    def result(self) -> TensorSharding | None:
        if self.best is None:
            if self.truncated:
                raise ShardingError(
                    f"looking for {self.sharding} on mesh @{self.mesh.name} ({self.mesh.short()}) took more "
                    f"than {MAX_STEPS} steps without an answer; use meshes with fewer or smaller axes"
                )
            return None
        chosen, unreduced = self.best
        mesh = self.mesh
        used = [p for seq in chosen for p in seq] + list(unreduced)
        # explicitly replicated axes: all together if possible, else one by one
        digits = [ref.digit(self.sharding.mesh) for ref in self.sharding.replicated]
        together = self._groups(_labels(self.src_pos, digits), int(np.prod([k for _, k in digits], dtype=np.int64)),
                                used)
        replicated: list[_Piece] = list(together or ())
        if together is None:
            for digit in digits:
                found = self._groups(_labels(self.src_pos, [digit]), digit[1], used + replicated)
                if found is not None:
                    replicated += found
        dims = []
        for seq, old in zip(chosen, self.sharding.dims):
            axes = tuple(p.ref for p in seq)
            priority = old.priority if (axes or old.is_open) else 0
            dims.append(DimSharding(axes, old.is_open, priority))
        rep = merge_adjacent(sort_axes([p.ref for p in replicated], mesh), mesh)
        unr = merge_adjacent(sort_axes([p.ref for p in unreduced], mesh), mesh)
        return TensorSharding(mesh, tuple(dims), rep, unr)


def equivalent_sharding(sharding: TensorSharding, mesh: Mesh, shape: Sequence[int]) -> TensorSharding | None:
    """A sharding on ``mesh`` with the same layout as ``sharding`` for a tensor of ``shape``, or None.

    "Same layout" is :func:`~planner.ir.layout.same_layout`: every device holds the
    same index ranges and the pending sums span the same device groups. The answer is
    canonical and the search bounded (see the module docstring). Meshes of different
    sizes have no equivalent (None).
    """
    shape = tuple(int(d) for d in shape)
    sharding.check_rank(shape)
    if mesh.size != sharding.mesh.size:
        return None
    if sharding.mesh == mesh:
        return sharding
    # first the shardings with the very same shard indices (valid for every shape): with them the
    # device check leaves about one candidate per step; then those that differ only in padding
    search = _Search(sharding, mesh, shape, exact=True)
    search.run()
    if search.best is None and not search.truncated:
        search = _Search(sharding, mesh, shape, exact=False)
        search.run()
    return search.result()
