"""The lower bound a redistribution is scored against.

Without pending sums it is information-theoretic: the largest number of bytes any
device must receive because its destination block holds elements its source
block does not (valid elements only; padding never needs to move).

For a source with pending sums over ``p`` devices (the reduction group; the
destination keeps none of them) every element is the sum of ``p`` partial values
held on ``p`` different devices (possibly with replicas elsewhere). If ``k`` devices
need an element, at least ``(p-1) + k - c`` transfers of a value derived from it
take place, where ``c`` is 1 if one of those devices holds a partial of it and 0
otherwise: ``p-1`` merges before the first device knows the sum (a transfer joins
at most two sets of partials), a completing receipt for every other device that
needs it (none of those merges: a merge into a device precedes the first full
sum), and one more receipt when the first to know the sum started with no partial.
So any plan moves at least ``n*(p-1) + sum_d |B_d| - |C|`` values in all (``n``
elements, ``B_d`` device d's destination block, ``C`` the elements some device
needs and holds a partial of), and some device receives at least that divided by
the number of devices; each device also receives at least one value
per element of ``B_d``. The bound is the larger of the two. For an AllReduce over
all devices it is ``2(p-1)/p * n``, which the ring meets (Patarasuk and Yuan,
JPDC 2009); where partial sums are replicated, fewer transfers can suffice and
the bound says so. When the destination keeps some pending sums, only the
per-device term is used.

>>> from planner.ir import parse_mesh, parse_sharding
>>> m = parse_mesh('@m = <["x"=2, "y"=4]>')
>>> src, dst = parse_sharding('[{"x"}, {}]', m), parse_sharding('[{}, {"x"}]', m)
>>> lower_bound_bytes(src, dst, (64, 32), 4)   # half of the 32x32 local block moves
2048
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from graphs.dtypes import dtype_itemsize
from planner.caches import memoize
from planner.ir.axis import AxisRef
from planner.ir.layout import device_index_ranges
from planner.ir.sharding import TensorSharding
from planner.redistribution.state import box_volume, distinct, overlap_volume

NOTE = (
    "elements each device must receive that it did not hold; with pending sums over p "
    "devices, max(|B_d|, (n*(p-1) + sum_d |B_d| - n) / devices)"
)


def _reduced_axes(src: TensorSharding, dst: TensorSharding) -> tuple[AxisRef, ...]:
    """Source pending-sum axes the destination does not keep (compared as device digits)."""
    keep = {r.digit(dst.mesh) for r in dst.unreduced}
    return tuple(r for r in src.unreduced if r.digit(src.mesh) not in keep)


def lower_bound_bytes(src: TensorSharding, dst: TensorSharding, shape: Sequence[int], itemsize: int) -> int:
    """Bytes per device any plan must receive at least (see the module docstring)."""
    sb = device_index_ranges(src, shape)
    db = device_index_ranges(dst, shape)
    reduced = _reduced_axes(src, dst)
    if not reduced:
        need = box_volume(db) - overlap_volume(sb, db)
        return int(need.max(initial=0)) * itemsize
    mesh = src.mesh
    p = 1
    for ref in reduced:
        p *= ref.size_in(mesh)
    vol = box_volume(db)
    per_device = int(vol.max(initial=0))
    if dst.unreduced:
        return per_device * itemsize
    n = 1
    for d in shape:
        n *= d
    covered = _union_volume(_intersections(sb, db), shape)
    total = n * (p - 1) + int(vol.sum()) - covered
    average = -(-total // mesh.size)
    return max(per_device, average) * itemsize


def _intersections(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    lo = np.maximum(a[..., 0], b[..., 0])
    hi = np.maximum(np.minimum(a[..., 1], b[..., 1]), lo)
    return np.stack([lo, hi], axis=-1)


def _union_volume(boxes: np.ndarray, shape: Sequence[int]) -> int:
    """Volume of the union of ``boxes``, the intersections of two layouts' device blocks.

    Every layout's blocks form a grid (along each dimension the spans partition it), so two
    devices' intersections are equal or disjoint along each dimension, hence as boxes: the
    union's volume is the sum of the distinct boxes' volumes (:func:`_distinct_volume`): a sort
    over the devices, however many blocks there are."""
    if not len(shape):
        return 1  # a scalar
    return _distinct_volume(_span_codes(boxes[:, k, 0], boxes[:, k, 1], d) for k, d in enumerate(shape))


def _span_codes(lo: np.ndarray, hi: np.ndarray, extent: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Per device, the number of its span ``[lo, hi)`` (of a dimension of ``extent``) among the
    distinct ones, its length (0 if empty), and how many distinct spans there are."""
    length = np.maximum(hi - lo, 0)
    key = np.where(length > 0, lo * (extent + 1) + hi, -1)  # every empty span is one
    values = distinct(key)
    return np.searchsorted(values, key).astype(np.int64), length, len(values)


#: Box codes stay below this (int64): past it :func:`_distinct_volume` renumbers them densely first.
_CODES_BELOW = 1 << 62


def _distinct_volume(dims) -> int:
    """The summed volume of the distinct boxes given per dimension as :func:`_span_codes`: a
    device's box is the tuple of its span numbers, read as one mixed-radix code."""
    codes = volume = None
    radix = 1  # codes lie below it
    for code, length, distinct_spans in dims:
        if codes is None:
            codes, volume, radix = code, length, distinct_spans
            continue
        if radix * distinct_spans >= _CODES_BELOW:  # renumber the codes densely (fewer than the devices)
            values = distinct(codes)
            codes, radix = np.searchsorted(values, codes).astype(np.int64), len(values)
        codes = codes * distinct_spans + code
        radix *= distinct_spans
        volume = volume * length
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    first = np.empty(len(ordered), dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return int(volume[order[first]].sum())


@memoize("redistribution lower bounds", maxsize=65536)
def cached_lower_bound(src: TensorSharding, dst: TensorSharding, shape: tuple[int, ...], dtype: str) -> int:
    return lower_bound_bytes(src, dst, shape, dtype_itemsize(dtype))



def state_bound(pc, state, goal) -> tuple[int, int]:
    """Lower bounds on any plan from ``state`` to ``goal`` (search states over the pieces ``pc``):
    the elements some device must receive, and the number of other devices some one device
    must receive data from (its sources). The engine's A* takes its heuristic from them.

    The elements are the bound of :func:`lower_bound_bytes` on the pieces' device boxes.
    A state's blocks form a grid (two devices hold the same block or disjoint ones), so a
    device must hear from one holder of every other block that meets its goal block; with
    pending sums over ``p`` devices to complete, from one holder of each of the ``p`` partial
    sums of every block that meets it (but its own partial of its own block).
    """
    reduced = state.unreduced - goal.unreduced
    p = pc.size(tuple(reduced))
    if pc.n <= LOOP_DEVICES:
        need_max, vol_max, vol_sum, sources = _needs(pc, state, goal, p)
    else:
        need_max, vol_max, vol_sum, sources = _needs_arrays(pc, state, goal, p)
    if not reduced:
        return need_max, sources
    per_device = vol_max
    if goal.unreduced:
        return per_device, sources
    n = 1
    for d in pc.shape:
        n *= d
    total = n * (p - 1) + vol_sum - _covered(pc, state, goal)
    return max(per_device, -(-total // pc.n)), sources  # totals over rows: per row as per device


#: Up to this many devices :func:`state_bound` combines cached per-dimension terms in Python
#: lists, beyond it in numpy arrays (``python benchmarks/bound.py``: lists and arrays tie at 16
#: devices, arrays win at 32 (14.3 against 21.7 us on 4x2x2x2), 10x at 512).
LOOP_DEVICES = 16


def _needs(pc, state, goal, p: int = 1) -> tuple[int, int, int, int]:
    """Over devices: the most elements of a goal block missing from the state's, the largest
    goal block, the goal blocks' total volume, and the most sources of a device: the state
    blocks its goal block meets, times the ``p`` partial sums of each, but its own."""
    need_max = vol_max = vol_sum = sources_max = 0
    dims = [_dim_terms(pc, k, ps, qs) for k, (ps, qs) in enumerate(zip(state.dims, goal.dims))]
    if not dims:
        return 0, 1, pc.n, 0
    vols, overs, blocks = dims[0]
    for v, o, b in dims[1:]:
        vols = [x * y for x, y in zip(vols, v)]
        overs = [x * y for x, y in zip(overs, o)]
        blocks = [x * y for x, y in zip(blocks, b)]
    for vol, over, block in zip(vols, overs, blocks):
        need = vol - over
        vol_sum += vol
        if vol > vol_max:
            vol_max = vol
        if need > need_max:
            need_max = need
        block = block * p - (1 if over else 0)  # its own partial of its own block is no source
        if block > sources_max:
            sources_max = block
    return need_max, vol_max, vol_sum, sources_max


def _dim_terms(pc, k: int, ps: tuple[int, ...], qs: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Per device, along dimension ``k`` split by ``ps`` (state) and ``qs`` (goal): the goal span's
    length, its overlap with the state's, and how many state spans it meets (cached)."""
    return pc.per_dimension(("terms", k, ps, qs), _dim_terms_now, pc, k, ps, qs)


def _dim_terms_now(pc, k: int, ps: tuple[int, ...], qs: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    s, t, _ = pc.spans(k, ps)
    g, h, _ = pc.spans(k, qs)
    local = -(-pc.shape[k] // pc.size(ps))
    vols, overs, blocks = [], [], []
    for lo, hi, a, b in zip(s, t, g, h):
        vols.append(b - a)
        o = (hi if hi < b else b) - (lo if lo > a else a)
        overs.append(o if o > 0 else 0)
        blocks.append((b - 1) // local - a // local + 1 if b > a else 0)  # state spans [a, b) meets
    return tuple(vols), tuple(overs), tuple(blocks)


def _needs_arrays(pc, state, goal, p: int = 1) -> tuple[int, int, int, int]:
    """:func:`_needs` on the same cached per-dimension terms, as numpy arrays (many devices)."""
    terms = None  # rows: the goal block's volume, its overlap with the state's, the state blocks it meets
    for k, (ps, qs) in enumerate(zip(state.dims, goal.dims)):
        t = _dim_arrays(pc, k, ps, qs)
        terms = t if terms is None else terms * t
    if terms is None:
        return 0, 1, pc.n, 0
    vols, overs, blocks = terms
    need = vols - overs
    sources = blocks * p - (overs > 0)
    return int(need.max()), int(vols.max()), int(vols.sum()), int(sources.max())


def _dim_arrays(pc, k: int, ps: tuple[int, ...], qs: tuple[int, ...]) -> np.ndarray:
    """:func:`_dim_terms` as one ``(3, devices)`` int64 array (cached)."""
    return pc.per_dimension(("term arrays", k, ps, qs), _dim_arrays_now, pc, k, ps, qs)


def _dim_arrays_now(pc, k: int, ps: tuple[int, ...], qs: tuple[int, ...]) -> np.ndarray:
    s, t = pc.span_arrays(k, ps)
    g, h = pc.span_arrays(k, qs)
    local = -(-pc.shape[k] // pc.size(ps))
    vols = h - g
    overs = np.maximum(np.minimum(t, h) - np.maximum(s, g), 0)
    blocks = np.where(h > g, (h - 1) // local - g // local + 1, 0)  # state spans [g, h) meets
    return np.stack([vols, overs, blocks])


def _covered(pc, state, goal) -> int:
    """Volume of the union over devices of (state block & goal block): :func:`_union_volume` on
    the per-dimension span numbers of the pieces (cached, :func:`_cover_terms`)."""
    if not state.dims:
        return 1  # a scalar
    return _distinct_volume(_cover_terms(pc, k, ps, qs) for k, (ps, qs) in enumerate(zip(state.dims, goal.dims)))


def _cover_terms(pc, k: int, ps: tuple[int, ...], qs: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, int]:
    """Along dimension ``k`` split by ``ps`` (state) and ``qs`` (goal), per device: the number of
    its intersection span among the distinct ones, and its length (0 if empty); and how many
    distinct spans there are (cached)."""
    return pc.per_dimension(("cover", k, ps, qs), _cover_terms_now, pc, k, ps, qs)


def _cover_terms_now(pc, k: int, ps: tuple[int, ...], qs: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, int]:
    s, t = pc.span_arrays(k, ps)
    g, h = pc.span_arrays(k, qs)
    return _span_codes(np.maximum(s, g), np.minimum(t, h), pc.shape[k])
