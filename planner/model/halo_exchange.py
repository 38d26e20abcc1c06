"""XLA's halo exchange of a windowed dimension: the CollectivePermutes its SPMD partitioner emits for a
``slice`` whose sliced dimension stays sharded (``HandleSlice`` -> ``ReshardAsWindowedInput`` ->
``ExchangeHaloAndGetValidData``, xla/service/spmd), so that a plan prices and simulates what XLA compiles.
(A slice's backward, XLA's zero ``pad`` of the cotangent, goes through the same windowed reshard but also
drops halos that hold only padding, which this does not model: a plan's backward sends each piece back.)

The window: a dimension of size ``n_in`` split into ``p`` blocks becomes one of ``n_out`` (split alike; blocks
of ``ceil(size / p)``, the last padded: below, ``n/p`` is that block),
its element ``j`` the input's ``j - low`` (``low``: the padding before the input; a slice's ``-start``), zero
outside the input. Block ``i`` of the output then needs, relative to the input block it holds, a *left halo*
of ``(n_in/p - n_out/p) i + low`` elements and a *right halo* of ``(n_out/p - n_in/p)(i + 1) - low``
(negative: fewer). XLA picks one of three ways:

- a halo larger than twice the output block: the *compact* exchange (``ExchangeHaloCompact``): each block's
  window is cut into pieces at input-block boundaries, the pieces are grouped into permutes of distinct
  sources and destinations, each permute sending one range of its source blocks (the union of its pieces);
  unless twice the output block covers the whole dimension, where it gathers the input instead;
- otherwise the *neighbour* exchange (``ExchangeHalo``): one permute per block distance on the left, then
  on the right, each the halo's part that lies in that neighbour; unless the halos reach past the
  neighbours and the whole dimension, where it gathers;
- gathering: an AllGather of the input along the dimension, then a local window (:func:`halo_permutes`
  returns None).

A window of fewer positions than blocks (``x[:, 1:4]`` on 4 devices: one position per block, the last blocks
only padding) is first trimmed (``ReshardAsWindowedInput``): the blocks on the right that hold none of the input
up to the window's end are left out (keeping at least one per position), then, where the window starts further
right than it has positions, the blocks between its first ``n_out`` and the one it starts in, and each block is
cut to the part before the window's end (or from where the window starts, when it all lies in the last block
left); the exchange runs among the blocks left, so fewer and smaller permutes than over all of them.

:func:`halo_permutes` gives the permutes as ``(start, limit, pairs)``: the range ``[start, limit)`` of its
input block each source sends, and the ``(source, destination)`` block ordinals. The bytes each device
receives are the range times the block's other dimensions (a permute's buffer). benchmarks/xla_concat_slice.py
and tests/model/test_halo_exchange.py compare them with what XLA 0.10.2 compiles.

>>> halo_permutes(32, 16, 0, 8)  # x[:, :16] of 32 columns on 8 devices: a whole block, then half blocks
((0, 4, ((0, 1), (1, 2), (2, 4), (3, 6))), (2, 4, ((1, 3), (2, 5), (3, 7))))
>>> halo_permutes(32, 24, -8, 4)  # x[:, 8:] on 4 devices: each right neighbour's first 6 elements
((0, 6, ((1, 0), (2, 1), (3, 2))),)
>>> halo_permutes(8, 1, -7, 4), halo_permutes(32, 1, -5, 4)  # x[:, -1], x[:, 5]: to block 0, or already there
(((1, 2, ((3, 0),)),), ())
>>> halo_permutes(1, 8, 7, 4)  # x[:, -1]'s backward: the position's cotangent back to block 3
((0, 1, ((0, 3),)),)
>>> halo_permutes(8, 1, -3, 4)  # x[:, 3]: blocks 2 and 3 left out, a neighbour exchange between 0 and 1
((0, 2, ((1, 0),)),)
>>> halo_permutes(8, 3, -1, 4)  # x[:, 1:4]: block 3 holds only padding and is left out
((1, 2, ((0, 1), (1, 2))),)
"""

from __future__ import annotations

import math

from planner.caches import memoize
from planner.ir.layout import devices_to_positions, shard_indices

Permute = tuple[int, int, tuple[tuple[int, int], ...]]


def _trunc_div(a: int, b: int) -> int:
    """C++'s integer division (toward zero), as XLA's offset arithmetic."""
    return a // b if a >= 0 else -((-a) // b)


def _ceil_ratio(a: int, b: int) -> int:
    """XLA's ``CeilOfRatio`` on C++ integers (toward zero for a negative numerator)."""
    return _trunc_div(a + b - 1, b)


@memoize("halo exchanges", maxsize=1024)
def halo_permutes(n_in: int, n_out: int, low: int, p: int) -> tuple[Permute, ...] | None:
    """XLA's permutes for the window of ``n_out`` elements at padding ``low`` (a slice from ``start``: ``-start``)
    on a dimension of ``n_in`` split ``p`` ways (see the module docstring), in the order it emits them; None
    where it gathers the dimension instead."""
    if n_out < p and low <= 0 and n_out - low <= n_in:
        return _trimmed(n_in, n_out, -low, p)
    return _exchange(n_in, n_out, low, p)


def _trimmed(n_in: int, n_out: int, start: int, p: int) -> tuple[Permute, ...] | None:
    """A slice's window of fewer positions than blocks (``ReshardAsWindowedInput``): each output block holds one
    position (the last ones only padding), so XLA leaves out the blocks on the right that hold none of the input up
    to the window's end (keeping one per position), then, when the window starts further right than it has
    positions, the blocks between the first ``n_out`` and the one the window starts in, and cuts what lies before
    the window (or past its end) out of each block; the exchange runs among the blocks left. Its ranges are
    given back in the input's blocks."""
    bi = -(-n_in // p)
    limit = start + n_out
    size, count, skip = bi, p, 0  # each block's part exchanged: ``size`` elements from ``skip``
    useful = -(-limit // bi)
    if useful < p:
        count = max(useful, n_out)
        if count == 1:  # block 0 holds the whole window
            return ()
        if limit < bi and limit < n_in:
            size = limit
    blocks = list(range(count))
    low = -start
    middle = start // size - n_out
    if n_out < count and middle > 0:
        blocks = blocks[:n_out] + blocks[n_out + middle:]
        count -= middle
        low += middle * size
        if -low > size * (count - 1):  # all of the window in the last block left: cut its start off each block
            skip = -low - size * (count - 1)
            size -= skip
            low += skip * count
            if n_out < size:
                low += (size - n_out) * (count - 1)
                size = n_out
    permutes = _exchange(size * count, n_out, low, count)
    if permutes is None:
        return None
    return tuple((lo + skip, hi + skip, tuple((blocks[a], blocks[b]) for a, b in pairs)) for lo, hi, pairs in permutes)


def _exchange(n_in: int, n_out: int, low: int, p: int) -> tuple[Permute, ...] | None:
    """``ExchangeHaloAndGetValidData`` of ``p`` blocks of ``ceil(n_in / p)`` into blocks of ``ceil(n_out / p)``."""
    bi, bo = -(-n_in // p), -(-n_out // p)  # blocks of ceil(size / p), the last one padded
    left = [(bi - bo) * i + low for i in range(p)]
    right = [(bo - bi) * (i + 1) - low for i in range(p)]
    if max(left + right) > 2 * bo:  # XLA's window of a block is bo elements: the compact exchange
        if n_in == 1 and 0 <= low < n_out:  # a pad of one position (a slice's backward): back to the block holding it
            held = low // bo
            return ((0, 1, ((0, held),)),) if held else ()
        return None if 2 * bo >= p * bi else _compact(n_in, bi, p, left, right)
    max_left, max_right = max(left[1:]), max(right[:-1])
    if max_left + max_right + bi >= bi * p and (max_left > bi or max_right > bi):
        return None
    left_bound, right_bound = -max(left), bi + max(right)
    if left_bound >= right_bound:
        return None
    permutes: list[Permute] = []
    i = _ceil_ratio(max_left, bi) - 1
    while i >= 0 and (-i - 1) * bi < right_bound:  # from the farthest left neighbour in
        whole = min(max_left - bi * i, bi)
        skip = max(-i * bi - right_bound, 0)
        permutes.append((bi - whole, bi - skip, tuple((d - i - 1, d) for d in range(i + 1, p))))
        i -= 1
    first = _trunc_div(min(max(left_bound - bi, 0), max(max_right, 0)), bi)
    for i in range(first, _ceil_ratio(max_right, bi)):  # then the right neighbours, nearest first
        whole = min(max_right - bi * i, bi)
        skip = max(left_bound - (i + 1) * bi, 0)
        permutes.append((skip, whole, tuple((d, d - i - 1) for d in range(i + 1, p))))
    # a neighbour past the last block has no pair, and a permute only to blocks wholly past the window (their output
    # all padding) serves nothing: XLA removes both (probed: x[:, 2] of 8 positions on 4 devices moves the right
    # neighbour's halo to blocks 0-2 and no left halo)
    return tuple(q for q in permutes if any(dst * bo < n_out for _, dst in q[2]))


def _compact(n: int, bi: int, p: int, left: list[int], right: list[int]) -> tuple[Permute, ...]:
    """``ExchangeHaloCompact``: each block's window cut at input-block boundaries into pieces, the pieces from
    other blocks grouped into permutes of distinct destinations, a source's pieces in window order."""
    pad, own = "fill", "own"
    pieces: list[list[dict]] = []
    for i in range(p):
        lo, hi = i * bi - left[i], (i + 1) * bi + right[i]
        at, mine = lo, []
        while at < hi:
            piece = {"offset": at - lo, "start": at % bi, "from": own}
            size = hi - at
            if at < 0 or at >= n:
                size = min(size, -at) if at < 0 else size
                piece.update(limit=piece["start"] + size, kind=pad)
            else:
                size = min(bi - piece["start"], size)
                piece.update(limit=piece["start"] + size, kind=own, block=at // bi)
            mine.append(piece)
            at += size
        pieces.append(mine)
    # at each position of the windows, padding longer than a block is cut to a block unless all is padding
    sources: list[list[dict]] = [[] for _ in range(p)]
    cut: list[list[dict]] = [[] for _ in range(p)]
    nxt = [0] * p
    while any(nxt[i] < len(pieces[i]) for i in range(p)):
        all_padding = all(pieces[i][nxt[i]]["kind"] == pad for i in range(p) if nxt[i] < len(pieces[i]))
        for i in range(p):
            if nxt[i] >= len(pieces[i]):
                continue
            piece = pieces[i][nxt[i]]
            kept = dict(piece, dst=i)
            cut[i].append(kept)
            if not all_padding and piece["kind"] == pad and piece["limit"] > bi:
                kept["limit"] = bi
                piece["start"], piece["limit"] = 0, piece["limit"] - bi
            else:
                nxt[i] += 1
            if piece["kind"] != pad and piece["block"] != i:
                sources[piece["block"]].append(kept)
    for queue in sources:
        queue.sort(key=lambda piece: piece["offset"])  # stable, as absl::c_stable_sort
    permutes: list[Permute] = []
    taken = [0] * p
    while True:
        pairs: list[tuple[int, int]] = []
        seen: set[int] = set()
        lo, hi = bi, 0
        for src in range(p):
            if taken[src] >= len(sources[src]):
                continue
            piece = sources[src][taken[src]]
            if pairs and (piece["dst"] in seen or (lo > piece["limit"] and hi == bi and piece["start"] == 0)
                          or (hi < piece["start"] and lo == 0 and piece["limit"] == bi)):
                continue  # a destination already served, or a small left halo beside a small right one
            seen.add(piece["dst"])
            pairs.append((src, piece["dst"]))
            lo, hi = min(lo, piece["start"]), max(hi, piece["limit"])
            taken[src] += 1
        if not pairs:
            return tuple(permutes)
        permutes.append((lo, hi, tuple(pairs)))


def device_pairs(layout, axes, dim: int, pairs) -> tuple[tuple[int, int], ...]:
    """A permute's ``(source, destination)`` block-ordinal ``pairs`` as device ids, in every group of devices
    that hold the same blocks but along ``dim`` (split by ``axes``), sorted by destination."""
    import numpy as np  # lazily: `import planner` stays light

    mesh = layout.mesh
    positions = devices_to_positions(mesh)
    key = positions.copy()
    for ref in axes:
        stride, size = ref.digit(mesh)
        key -= ((positions // stride) % size) * stride
    ordinal = shard_indices(layout)[:, dim]
    device = {(int(k), int(o)): d for d, (k, o) in enumerate(zip(key, ordinal))}
    wanted = dict((dst, src) for src, dst in pairs)
    out = [(device[(int(key[d]), wanted[int(ordinal[d])])], d) for d in range(mesh.size)
           if int(ordinal[d]) in wanted]
    return tuple(sorted(out, key=lambda pair: pair[1]))


def mirror_pairs(layout, dims) -> tuple[tuple[int, int], ...]:
    """A flip's permute as ``(source, destination)`` device ids: the device holding block ``i`` of ``p`` along
    each of ``dims`` sends it to the device holding block ``p - 1 - i`` there, the same on every other mesh
    coordinate (one CollectivePermute, as XLA partitions a reverse); devices that are their own mirror send
    nothing. Sorted by destination."""
    import numpy as np  # lazily: `import planner` stays light

    mesh = layout.mesh
    positions = devices_to_positions(mesh)
    target = positions.copy()
    for d in dims:
        digits = [ref.digit(mesh) for ref in layout.dims[d].axes]
        index = np.zeros_like(positions)
        for stride, size in digits:  # the block index along d: its axes' digits, major first
            index = index * size + (positions // stride) % size
        count = math.prod(size for _, size in digits)
        mirrored = count - 1 - index
        for stride, size in reversed(digits):  # the mirrored index's digits in place of the old ones
            target += (mirrored % size - (positions // stride) % size) * stride
            mirrored //= size
    device = np.empty_like(positions)
    device[positions] = np.arange(mesh.size)
    return tuple(sorted(((int(device[t]), d) for d, t in enumerate(target) if device[t] != d),
                        key=lambda pair: pair[1]))


def rotation_pieces(n: int, p: int, shift: int) -> tuple[tuple[int, int, int], ...]:
    """A roll by ``shift`` of a dimension of ``n`` split evenly ``p`` ways, as the pieces each output block is
    made of, in its order: ``(offset, start, limit)``, the range ``[start, limit)`` of the input block ``offset``
    blocks after it (cyclically). Output block ``j`` starts at the input's ``j * n/p - shift``: the rest of that
    block, then the start of the next (XLA's partitioning of ``concatenate(x[k:], x[:k])``, read off what it
    compiles); empty pieces left out.

    >>> rotation_pieces(32, 4, -12)  # jnp.roll(x, -12): half of the next block, then half of the one after
    ((1, 4, 8), (2, 0, 4))
    >>> rotation_pieces(32, 4, 1)  # the previous block's last element, then this block's first seven
    ((3, 7, 8), (4, 0, 7))
    """
    block = n // p
    q, r = divmod((-shift) % n, block)
    return tuple(piece for piece in ((q, r, block), (q + 1, 0, r)) if piece[2] > piece[1])


def rotation_permutes(n: int, p: int, shift: int) -> tuple[Permute, ...]:
    """The CollectivePermutes of a roll (:func:`rotation_pieces`), as :func:`halo_permutes` gives them: per piece
    that comes from another block, ``(start, limit, pairs)`` with ``(source, destination)`` block ordinals; a
    piece of the block itself moves nothing.

    >>> rotation_permutes(32, 4, -8)  # one whole block from the next: XLA's one permute
    ((0, 8, ((1, 0), (2, 1), (3, 2), (0, 3))),)
    >>> rotation_permutes(32, 4, 1)  # a block's last element to the next block
    ((7, 8, ((3, 0), (0, 1), (1, 2), (2, 3))),)
    """
    return tuple((start, limit, tuple(((j + offset) % p, j) for j in range(p)))
                 for offset, start, limit in rotation_pieces(n, p, shift) if offset % p)


__all__ = ["device_pairs", "halo_permutes", "mirror_pairs", "rotation_permutes", "rotation_pieces"]
