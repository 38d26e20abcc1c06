"""The route XLA's SPMD partitioner takes from one layout to another (``PartitionedHlo::ReshardNoCache`` in
xla/service/spmd/spmd_partitioner.cc), as a sequence of layouts one collective apart.

XLA reasons about an ``HloSharding``: a tile assignment, the array of device ids per tile (and, when partly
replicated, a last dimension over the replicas). A layout on a named mesh is such an array built from the mesh's
digits (:meth:`planner.ir.mesh.Mesh.digit`): here each tensor dimension holds prime digits ``(stride, size)``
of the flat mesh position, major to minor, and the replicas the unused ones in mesh order, as JAX builds an
``HloSharding`` from a ``NamedSharding``. XLA's reshapes and transposes of tile assignments then move digits,
and its rules read:

1. the same tile assignment: nothing;
2. the same tile shape, other devices: one ``CollectivePermute``;
3. the per-dimension tile counts a permutation of each other's: an ``AllToAll`` per pair of dimensions (the
   minor digits of the source dimension joining the target dimension's minor end), then a ``CollectivePermute``
   where the device order still differs;
4. from a partly replicated layout: slice each device's part out of its replicas where the target refines it;
5. to a partly replicated layout: ``AllGather`` the dimensions the target coarsens (each a collective, the last
   dimension first), after a ``CollectivePermute`` where the devices' order asks for it;
6. dimensions whose tile counts already agree are set aside (XLA's grouping) and the rest resharded inside
   each group, then the whole resharded once more;
7. otherwise gather every dimension (each an ``AllGather``, the last first) and slice the target from the whole.

:func:`xla_route` gives the layouts after each collective, or None where XLA's route leaves what a named
layout can say (a dimension padded past its size, prime digits that do not line up): the caller then keeps the
engine's own plan. The engine realises each hop (:mod:`planner.redistribution.xla_policy`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.ir.axis import axes_for_digit, merge_adjacent, prime_factors
from planner.ir.sharding import DimSharding, TensorSharding

__all__ = ["xla_route"]

Digit = tuple[int, int]  # (stride, size) of a prime piece of the flat mesh position


@dataclass(frozen=True)
class _Tiles:
    """An HloSharding as digits: ``dims[d]`` the digits tiling tensor dimension ``d`` (major to minor),
    ``repl`` those of the replicas (major to minor), ``ctx`` the digits that number the devices in play (all
    of the mesh, or a group's inside XLA's grouping)."""

    dims: tuple[tuple[Digit, ...], ...]
    repl: tuple[Digit, ...]
    ctx: tuple[Digit, ...]

    def counts(self) -> tuple[int, ...]:
        return tuple(_size(d) for d in self.dims)

    def replicas(self) -> int:
        return _size(self.repl)

    def maximal(self) -> bool:  # XLA's IsTileMaximal: replicated
        return all(c == 1 for c in self.counts())

    def partial(self) -> bool:  # XLA's ReplicateOnLastTileDim
        return not self.maximal() and self.replicas() > 1

    def assignment_dims(self) -> tuple[int, ...]:
        return self.counts() + ((self.replicas(),) if self.partial() else ())

    def devices(self) -> np.ndarray:
        """The tile assignment: the in-context device number at each tile (and replica) index. A device's number
        is the mixed radix of its ``ctx`` digits, major first, so each digit's value is read off the number."""
        number = np.arange(_size(self.ctx))
        values, place = {}, 1
        for d in reversed(self.ctx):
            values[d] = (number // place) % d[1]
            place *= d[1]
        index = []
        for digits in (*self.dims, *((self.repl,) if self.partial() else ())):
            i = np.zeros_like(number)
            for d in digits:
                i = i * d[1] + values[d]
            index.append(i)
        out = np.zeros(self.assignment_dims() or (1,), dtype=np.int64)
        out[tuple(index) if index else (np.zeros_like(number),)] = number
        return out

    def same(self, other: "_Tiles") -> bool:
        if self.maximal() and other.maximal():
            return True
        return self.assignment_dims() == other.assignment_dims() and np.array_equal(self.devices(), other.devices())


def _size(digits) -> int:
    n = 1
    for _, s in digits:
        n *= s
    return n


class _Unmodelled(Exception):
    """XLA's route leaves what this emulation models."""


def _primes(stride: int, size: int) -> tuple[Digit, ...]:
    """The prime digits of ``(stride, size)``, major to minor."""
    out, place = [], stride * size
    for p in reversed(prime_factors(size)):
        place //= p
        out.append((place, p))
    return tuple(out)


def _split(digits: tuple[Digit, ...], major: int) -> tuple[tuple[Digit, ...], tuple[Digit, ...]]:
    """``digits`` cut into a major part of size ``major`` and the minor rest (at a prime boundary)."""
    size = 1
    for i, (_, s) in enumerate(digits):
        if size == major:
            return digits[:i], digits[i:]
        size *= s
    if size == major:
        return digits, ()
    raise _Unmodelled(f"no prime boundary at {major}")


def _of(sharding: TensorSharding) -> _Tiles:
    mesh = sharding.mesh
    everything = tuple(d for a in mesh.axes for d in _primes(*mesh.digit(a.name)))
    dims = tuple(tuple(d for a in dim.axes for d in _primes(*a.digit(mesh))) for dim in sharding.dims)
    used = [d for dim in dims for d in dim]
    if len(set(used)) != len(used) or not set(used) <= set(everything):
        raise _Unmodelled("sub-axes that cut an axis's primes another way")  # e.g. "x":(1)2 of x=6
    return _Tiles(dims, tuple(d for d in everything if d not in used), everything)


def _layout(tiles: _Tiles, like: TensorSharding) -> TensorSharding:
    mesh = like.mesh
    dims = []
    for digits in tiles.dims:
        axes = []
        for stride, size in digits:
            axes.extend(axes_for_digit(mesh, stride, size))
        dims.append(DimSharding(merge_adjacent(tuple(axes), mesh)))
    return TensorSharding(mesh, tuple(dims))


# -- XLA's rules, on tile assignments -------------------------------------------------------------------------------

def _can_permute(a: _Tiles, b: _Tiles) -> bool:
    return (not a.maximal() and not b.maximal() and a.assignment_dims() == b.assignment_dims()
            and a.partial() == b.partial() and not a.same(b))


def _all_to_all_dims(a: _Tiles, b: _Tiles):
    """XLA's GetReshardAllToAllSourceTargetDims: ``[(source dim, target dim), ...]`` or None."""
    if a.maximal() or b.maximal() or len(a.assignment_dims()) != len(b.assignment_dims()):
        return None
    if np.prod(a.counts()) != np.prod(b.counts()):
        return None
    sa, sb = a.assignment_dims(), b.assignment_dims()
    src: dict[int, list[int]] = {}
    tgt: dict[int, list[int]] = {}
    for i, (x, y) in enumerate(zip(sa, sb)):
        if x != y:
            src.setdefault(x, []).append(i)
            tgt.setdefault(y, []).append(i)
    if not src or len(src) != len(tgt) or any(len(tgt.get(k, ())) != len(v) for k, v in src.items()):
        return None

    def remove(size, dim, table):
        table[size] = [x for x in table[size] if x != dim]
        if not table[size]:
            del table[size]

    out = []
    while src:
        source_size = min(src)
        i = src[source_size][-1]
        target_i = sb[i]
        if target_i == source_size:
            remove(source_size, i, src)
            remove(source_size, i, tgt)
            continue
        candidates = src[target_i]
        j = candidates[0]
        if source_size == 1:
            for c in candidates:
                j = c
                if sb[c] != 1:
                    break
        elif target_i % source_size == 0:
            for c in candidates:
                j = c
                if sb[c] == source_size:
                    break
        else:
            return None
        out.append((j, i))
        remove(target_i, i, tgt)
        src[source_size][-1] = j
        remove(target_i, j, src)
    return out


def _swap(a: _Tiles, source: int, target: int) -> _Tiles:
    """XLA's GetAllToAllSharding for one pair: the source dimension's minor digits join the target's minor end."""
    dims = list(a.dims)
    if source >= len(dims) or target >= len(dims):
        raise _Unmodelled("an AllToAll with the replicas")
    keep, moved = _split(dims[source], _size(dims[target]))
    dims[source], dims[target] = keep, dims[target] + moved
    return _Tiles(tuple(dims), a.repl, a.ctx)


def _compatible(partial: _Tiles, target: _Tiles) -> _Tiles | None:
    """XLA's PartialReplicateReshardCompatibleSharding: ``target``'s tile counts from ``partial``'s layout by
    taking replicas' digits onto the dimensions ``target`` refines: the very digits ``target`` adds where the
    replicas hold them (named axes), else the replicas' digits major first (a tile assignment reshaped)."""
    if not partial.partial():
        return None
    grows = []
    for p, t in zip(partial.counts(), target.counts()):
        if t % p:
            return None
        grows.append(t // p)
    kept = target.replicas() if target.partial() else 1
    if partial.replicas() % kept or partial.replicas() // kept != int(np.prod(grows)):
        return None
    free = set(partial.repl)
    named = []
    for digits, want, g in zip(partial.dims, target.dims, grows):
        extra = want[len(digits):]
        if g > 1 and (want[:len(digits)] != digits or not set(extra) <= free):
            break
        if g > 1:
            free -= set(extra)
            digits = want
        named.append(digits)
    else:
        return _Tiles(tuple(named), tuple(d for d in partial.repl if d in free), partial.ctx)
    rest = partial.repl
    dims = []
    for digits, g in zip(partial.dims, grows):
        if g > 1:
            taken, rest = _split(rest, g)
            digits = digits + taken
        dims.append(digits)
    return _Tiles(tuple(dims), rest, partial.ctx)


def _gather(a: _Tiles, dims_to_gather, goal: _Tiles) -> list[tuple[str, _Tiles]]:
    """AllGathers of ``dims_to_gather`` (the last first) down to ``goal``'s counts there."""
    hops, cur = [], a
    for d in sorted(dims_to_gather, reverse=True):
        keep, _ = _split(cur.dims[d], goal.counts()[d])
        dims = list(cur.dims)
        dims[d] = keep
        cur = _Tiles(tuple(dims), goal.repl if d == min(dims_to_gather) else cur.repl, cur.ctx)
        hops.append(("AllGather", cur))
    return hops


class _NoRoute(Exception):
    """An inner reshard that would replicate the whole tensor, which XLA's complex handling does not allow."""


def _route(a: _Tiles, b: _Tiles, shape, depth: int = 0, full: bool = True) -> list[tuple[str, _Tiles]]:
    """XLA's ReshardNoCache from ``a`` to ``b``; ``full``: whether it may replicate the whole tensor."""
    if depth > 12:
        raise _Unmodelled("too deep")
    if a.same(b):
        return []
    if _can_permute(a, b):
        return [("CollectivePermute", b)]
    pairs = _all_to_all_dims(a, b)
    if pairs is not None:
        return _with_all_to_all(a, b, pairs)
    if not b.maximal() and a.partial():
        temp = _compatible(a, b)
        if temp is not None:
            return [("Slice", temp)] + _route(temp, b, shape, depth + 1, full)
        hops = _partial_all_to_all(a, b, shape, depth, full)
        if hops is not None:
            return hops
    if not a.maximal() and b.partial():
        temp = _compatible(b, a)
        if temp is not None:
            hops, cur = [], a
            if _can_permute(a, temp):
                hops.append(("CollectivePermute", temp))
                cur = temp
            coarser = [d for d, (x, y) in enumerate(zip(temp.counts(), b.counts())) if x > y]
            hops += _gather(cur, coarser, b)
            return hops + _route(hops[-1][1] if hops else a, b, shape, depth + 1, full)
        hops = _partial_all_to_all(a, b, shape, depth, full)
        if hops is not None:
            return hops
    if not a.maximal():
        if not b.maximal():
            hops = _complex(a, b, shape, depth)
            if hops is not None:
                return hops
            equal = [d for d, (x, y) in enumerate(zip(a.counts(), b.counts())) if x != 1 and x == y]
            if equal:
                return _grouped(a, b, equal, shape, depth, full)
        if not full:
            raise _NoRoute()
        whole = _Tiles(tuple(() for _ in a.dims), a.ctx, a.ctx)
        hops = _gather(a, [d for d, c in enumerate(a.counts()) if c > 1], whole)
        return hops + _route(whole, b, shape, depth + 1, full)
    return [] if b.maximal() else [("Slice", b)]


def _with_all_to_all(a: _Tiles, b: _Tiles, pairs) -> list[tuple[str, _Tiles]]:
    """XLA's ReshardWithAllToAll: one AllToAll per pair, then a CollectivePermute where the order differs."""
    hops, cur = [], a
    for source, target in pairs:
        cur = _swap(cur, source, target)
        hops.append(("AllToAll", cur))
    if not cur.same(b):
        hops.append(("CollectivePermute", b))
    return hops


def _flat(t: _Tiles) -> tuple[Digit, ...]:
    return tuple(d for dim in t.dims for d in dim) + t.repl


def _partial_all_to_all(a: _Tiles, b: _Tiles, shape, depth, full):
    """XLA's ReshardPartialReplicateWithAllToAll: between ``[1, X.., Y] replicated`` and ``[X.., Y]`` with the
    same devices in order, the last sharded dimension's tiles swapped with the replicas by an AllToAll."""
    partial, tiled = (a, b) if a.partial() else (b, a)
    if not partial.partial() or tiled.partial() or tiled.maximal():
        return None
    replicas = partial.replicas()
    counts, pcounts = tiled.counts(), partial.assignment_dims()
    if pcounts[0] != 1:
        return None
    last = None
    for i in range(len(counts) - 1, -1, -1):
        if counts[i] > 1 and last is None:
            if counts[i] != replicas:
                return None
            last = i
        if counts[i] != pcounts[i + 1]:
            return None
    if last is None or _sizes(_flat(partial)) != _sizes(_flat(tiled)) or not np.array_equal(
            partial.devices().reshape(-1), tiled.devices().reshape(-1)):
        return None
    dims = list(tiled.dims)
    tmp = _Tiles(tuple(() if k == last else d for k, d in enumerate(dims)), tiled.dims[last], tiled.ctx)
    if a is partial:
        pairs = _all_to_all_dims(a, tmp)
        if pairs is None:
            return None
        return _with_all_to_all(a, tmp, pairs) + _route(tmp, b, shape, depth + 1, full)
    hops = _route(a, tmp, shape, depth + 1, full)
    pairs = _all_to_all_dims(tmp, b)
    if pairs is None:
        return None
    return hops + _with_all_to_all(tmp, b, pairs)


def _sizes(digits) -> tuple[int, ...]:
    return tuple(s for _, s in digits)


def _regroup(digits: tuple[Digit, ...], sizes) -> tuple[tuple[Digit, ...], ...]:
    """``digits`` cut into consecutive groups of the given sizes (a tile assignment reshaped)."""
    out, rest = [], digits
    for n in sizes:
        part, rest = _split(rest, n)
        out.append(part)
    if rest:
        raise _Unmodelled("digits left over")
    return tuple(out)


def _merge_or_split(a: _Tiles, b: _Tiles, shape, depth):
    """XLA's PatternMatchMergeOrSplitSharding: two dimensions whose tile counts trade a factor are resharded as
    three, dimension ``i`` split in two (its major part one element per device), then merged back. None where no
    pair matches; ``()`` where one matches but the reshard would replicate the tensor (XLA then tries nothing
    else of its complex handling)."""
    if a.partial() != b.partial() or (a.partial() and a.replicas() != b.replicas()):
        return None
    sa, sb = a.counts(), b.counts()
    local = [n // c for n, c in zip(shape, sa)]
    diff = [k for k in range(len(sa)) if sa[k] != sb[k]]
    for x in range(len(diff)):
        for y in range(x + 1, len(diff)):
            i, j = diff[x], diff[y]
            ones = sum((sa[i] == 1, sa[j] == 1, sb[i] == 1, sb[j] == 1))
            if ones == 1:
                if sa[i] * sa[j] != sb[i] * sb[j]:
                    continue
                if sa[i] == 1 or sb[i] == 1:
                    i, j = j, i
                if sb[j] == 1:
                    if local[i] % sa[j]:
                        continue
                    new = sa[i]
                else:
                    if shape[i] % sa[i]:
                        continue
                    new = sb[i]
            elif ones == 0:
                if sa[i] < sb[i]:
                    i, j = j, i
                if sa[i] != sb[i] * sb[j] or shape[i] % sa[i]:
                    continue
                new = sb[i]
            else:
                continue
            major, minor = _split(a.dims[i], new)
            before = _Tiles(a.dims[:i] + (major, minor) + a.dims[i + 1:], a.repl, a.ctx)
            sizes = list(before.counts())
            k = j + (1 if j > i else 0)
            sizes[i + 1], sizes[k] = sizes[k], sizes[i + 1]
            # the target's tile assignment reshaped to the split dimensions (its replicas, alike, stay last)
            target = _Tiles(_regroup(tuple(d for dim in b.dims for d in dim), sizes), b.repl, b.ctx)
            split = tuple(shape[:i]) + (new, shape[i] // new) + tuple(shape[i + 1:])
            try:
                inner = _route(before, target, split, depth + 1, False)
            except _NoRoute:
                return ()  # matched, but XLA's inner reshard would replicate: XLA gives the pattern up
            hops = []
            for kind, t in inner:
                if _size(t.dims[i]) != new and t.dims[i + 1]:
                    raise _Unmodelled("a split dimension no longer one element per device")
                hops.append((kind, _Tiles(t.dims[:i] + (t.dims[i] + t.dims[i + 1],) + t.dims[i + 2:], t.repl, t.ctx)))
            merged = _Tiles(target.dims[:i] + (target.dims[i] + target.dims[i + 1],) + target.dims[i + 2:],
                            target.repl, target.ctx)
            try:
                return hops + _route(merged, b, shape, depth + 1, False)
            except _NoRoute:
                return ()
    return None


def _complex(a: _Tiles, b: _Tiles, shape, depth):
    """XLA's TryComplexReshardHandling: a pair of dimensions trading a factor (:func:`_merge_or_split`); or
    replicate a dimension the target replicates where that makes the replica counts agree, or move a partial
    layout's replicas onto a dimension the target tiles; each then resharded without replicating the whole
    tensor."""
    hops = _merge_or_split(a, b, shape, depth)
    if hops is not None:
        return hops or None
    if b.partial():
        held = a.replicas() if a.partial() else 1
        for i, c in enumerate(a.counts()):
            if c != 1 and c * held == b.replicas():
                dims = list(a.dims)
                moved, dims[i] = dims[i], ()
                middle = _Tiles(tuple(dims), moved + a.repl, a.ctx)
                try:
                    return _route(a, middle, shape, depth + 1) + _route(middle, b, shape, depth + 1, False)
                except _NoRoute:
                    return None
    if a.partial() and not b.partial():
        amount = a.replicas()
        for i, (x, y) in enumerate(zip(a.counts(), b.counts())):
            if x != y and x == 1 and y % amount == 0:
                dims = list(a.dims)
                dims[i] = a.repl
                middle = _Tiles(tuple(dims), (), a.ctx)
                try:
                    return _route(a, middle, shape, depth + 1) + _route(middle, b, shape, depth + 1, False)
                except _NoRoute:
                    return None
    return None


def _grouped(a: _Tiles, b: _Tiles, equal, shape, depth, full) -> list[tuple[str, _Tiles]]:
    """XLA's grouping on the dimensions whose tile counts agree: reshard the rest inside each group of devices
    that share those dimensions' digits, then the whole once more."""
    group = tuple(d for k in equal for d in a.dims[k])
    inner_ctx = tuple(d for d in a.ctx if d not in group)
    empty = lambda t: tuple(() if k in equal else dim for k, dim in enumerate(t.dims))  # noqa: E731
    inner_a = _Tiles(empty(a), a.repl, inner_ctx)
    if tuple(d for k in equal for d in b.dims[k]) == group:
        inner_b = _Tiles(empty(b), b.repl, inner_ctx)
    else:
        # XLA aligns the target's groups with the source's by position: the n-th device of a target group is
        # the n-th of the source's (row-major over the other dimensions and the replicas)
        order_a = [d for k, dim in enumerate(a.dims) if k not in equal for d in dim] + list(a.repl)
        order_b = [d for k, dim in enumerate(b.dims) if k not in equal for d in dim] + list(b.repl)
        if [s for _, s in order_a] != [s for _, s in order_b]:
            raise _Unmodelled("groups of unlike digits")
        swap = dict(zip(order_b, order_a))
        inner_b = _Tiles(tuple(() if k in equal else tuple(swap[d] for d in dim) for k, dim in enumerate(b.dims)),
                         tuple(swap[d] for d in b.repl), inner_ctx)
    whole = lambda t: _Tiles(tuple(a.dims[k] if k in equal else dim for k, dim in enumerate(t.dims)),  # noqa: E731
                             t.repl, a.ctx)
    hops = [(kind, whole(t)) for kind, t in _route(inner_a, inner_b, shape, depth + 1, full)]
    last = whole(inner_b)
    return hops + _route(last, b, shape, depth + 1, full)


def xla_route(shape, source: TensorSharding, destination: TensorSharding) -> list[tuple[str, TensorSharding]] | None:
    """The layouts after each collective of XLA's reshard from ``source`` to ``destination`` (both without
    pending axes, on one mesh), as ``(kind, layout)``; hops that change only the order of replicas (no data
    moves in a named layout) are left out. None where the route leaves what this emulation models: a
    dimension the route tiles unevenly, or pieces that do not line up."""
    try:
        a, b = _of(source), _of(destination)
        if any(n % c for t in (a, b) for n, c in zip(shape, t.counts())):
            return None  # XLA pads an uneven layout and exchanges halos: not modelled here
        hops = _route(a, b, tuple(shape))
    except (_Unmodelled, _NoRoute):
        return None
    out, previous = [], source.layout_only()
    for kind, tiles in hops:
        if any(n % c for n, c in zip(shape, tiles.counts())):
            return None
        layout = _layout(tiles, source)
        if layout == previous:
            continue
        out.append((kind, layout))
        previous = layout
    if previous != destination.layout_only():
        return None
    return out
