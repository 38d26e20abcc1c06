"""Ops that move data without arithmetic: ``reshape``, ``transpose``, ``concat``, ``slice``, ``pad``,
``dynamic_slice``, ``dynamic_update_slice``, ``flip``, ``roll``.

- ``reshape(shape)``: the same elements in row-major order; one entry of ``shape`` may
  be -1 and is then inferred. Stored resolved (no -1) in a graph.
- ``transpose(perm)``: result dimension ``i`` is input dimension ``perm[i]``.
- ``concat(axis=0)``: joins its inputs along ``axis``; every other dimension must agree.
- ``slice(starts, stops)``: keeps ``starts[i] <= index < stops[i]`` of every dimension i
  (one entry per dimension, ``0 <= start < stop <= size``; no steps).
- ``pad(low, high, value=0)``: ``low[i]`` and ``high[i]`` elements of ``value`` before and after dimension i
  (``jnp.pad`` by a constant, ``lax.pad`` without interior padding); a negative count crops that many
  elements instead, as ``lax.pad`` does (``x[:, :-1]`` of a pad by one in front is ``pad(low=1, high=-1)``,
  a shift).
- ``dynamic_slice(sizes, starts)`` of ``[operand, *dynamic starts]``: the window of ``sizes`` from a position,
  per dimension a constant of ``starts`` or a rank-0 integer input, each clamped so that the window fits
  (``lax.dynamic_slice``; JAX's ``x[i]`` at a computed ``i``).
- ``dynamic_update_slice(starts)`` of ``[operand, update, *dynamic starts]``: the operand with ``update`` written
  from a position, per dimension a constant of ``starts`` or a rank-0 integer input, each clamped so that the
  update fits (``lax.dynamic_update_slice``).
- ``flip(axes)``: the elements in reverse order along each of ``axes`` (``jnp.flip``, ``lax.rev``).
- ``roll(shift, axis)``: the elements rotated by ``shift`` positions along ``axis``, those pushed past the end
  coming back at the start (``jnp.roll`` by a constant, which JAX writes as a concatenate of two slices).

FLOP convention: **0 FLOPs** (data movement only).

Bytes accessed: ``transpose`` and ``concat`` copy, reading every operand element once
and writing every result element once (the default); ``slice`` reads only the
elements it keeps and writes them; ``reshape`` is a new view of the same row-major
buffer (XLA's bitcast): 0 bytes, and no kernel.

VJPs move the cotangent back (reshape to the input shape, transpose by the inverse
permutation, split for concat, zero-padded for slice, sliced for pad) into fresh arrays; none
reads input values, only their shapes.

>>> RESHAPE.infer([(8, 6)], ["f32"], {"shape": [2, -1, 3]})
((2, 8, 3), 'f32')
>>> SLICE.infer([(8, 6)], ["f32"], {"starts": [0, 2], "stops": [4, 6]})
((4, 4), 'f32')
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from graphs.ops.common import (
    Shape,
    check_int,
    check_int_list,
    need_int,
    need_rank,
    normalize_axis,
    numel,
    operand,
    same_dtype,
    shape_text,
)
from graphs.dtypes import check_dtype, numpy_dtype
from graphs.ops.opdef import REQUIRED, OpDef, check_wrt, no_bytes_accessed
from planner.errors import ModelError, RuleError


def _no_flops(in_shapes, out_shape, attrs) -> int:
    return 0


def _slice_bytes(in_shapes, out_shape, itemsizes, attrs) -> int:
    """The kept elements, read in the operand's type and written in the result's."""
    return numel(out_shape) * (itemsizes[0] + itemsizes[-1])


def _copy_into(shape: Sequence[int], dtype, value: np.ndarray) -> np.ndarray:
    """A fresh C-contiguous array of ``shape`` holding ``value``'s elements in row-major order."""
    out = np.empty(tuple(shape), dtype=dtype)
    out.reshape(value.shape)[...] = value
    return out


def _shape_vjp(name: str, grad):
    """A VJP from ``grad(i, arrays, attrs, cotangent) -> fresh gradient of operand i``."""

    def vjp(arrays, attrs, result, cotangent, wrt):
        check_wrt(name, arrays, wrt)
        cot = np.asarray(cotangent)
        return tuple(grad(i, arrays, attrs, cot) for i in wrt)

    return vjp


# -- reshape ---------------------------------------------------------------------

def resolve_reshape(in_shape: Shape, target: Any, names: Sequence[str] | None = None) -> Shape:
    """``target`` with its -1 resolved; ModelError if the element counts differ."""
    target = check_int_list(target, "reshape attribute shape")
    n = numel(in_shape)
    unknown = [i for i, d in enumerate(target) if d == -1]
    if len(unknown) > 1 or any(d < -1 or d == 0 for d in target):
        raise ModelError(f"reshape shape {list(target)} may hold positive sizes and at most one -1")
    known = numel([d for d in target if d != -1])
    if unknown:
        if n % known:
            raise ModelError(
                f"reshape cannot fit {operand(names, [in_shape], 0)} ({n} elements) into {list(target)}: "
                f"{n} is not a multiple of {known}"
            )
        target = tuple(n // known if d == -1 else d for d in target)
    if numel(target) != n:
        raise ModelError(
            f"reshape changes the number of elements: {operand(names, [in_shape], 0)} has {n} but "
            f"{shape_text(target)} has {numel(target)}"
        )
    return tuple(target)


def _reshape_infer(shapes, dtypes, attrs, names=None):
    return resolve_reshape(tuple(shapes[0]), attrs.get("shape"), names), dtypes[0]


def _reshape_reference(arrays, attrs):
    x = np.asarray(arrays[0])
    return x.reshape(resolve_reshape(x.shape, attrs["shape"]))


def _reshape_canonical(shapes, attrs):
    return {"shape": resolve_reshape(tuple(shapes[0]), attrs["shape"])}


def _reshape_local_reference(arrays, attrs, ctx, rule):
    """The block reshaped to the local result shape the rule gives from the operand's block."""
    target = ctx.rule_result_shape(rule)
    if target != ctx.result.local_shape:
        raise RuleError(f"reshape: the rule implies the local result shape {target} but the result's "
                        f"sharding gives {ctx.result.local_shape}")
    return np.asarray(arrays[0]).reshape(target)


def _reshape_local_vjp(arrays, attrs, cotangent, ctx, wrt):
    return [cotangent.reshape(ctx.operands[0].local_shape)]


def _reshape_jax(jnp, lax, a, attrs):
    return jnp.reshape(a[0], tuple(attrs["shape"]))


def _reshape_jax_local(jnp, lax, a, attrs, ctx):
    return jnp.reshape(a[0], ctx.local_shapes[-1])


RESHAPE = OpDef("reshape", "shape", 1, 1, (("shape", REQUIRED),), _reshape_infer, _no_flops,
                _reshape_reference, _reshape_canonical, vjp_reads_inputs=False, bytes_accessed=no_bytes_accessed,
                vjp=_shape_vjp("reshape", lambda i, xs, attrs, c: _copy_into(np.shape(xs[0]), c.dtype, c)),
                rule="shape_ops.reshape", passes_shardings=True, keeps_padding=False,
                jax_form=_reshape_jax,
                local_reference=_reshape_local_reference, local_vjp=_reshape_local_vjp,
                jax_local_form=_reshape_jax_local)


# -- transpose -------------------------------------------------------------------

def _check_perm(perm: Any, rank: int, names, shapes) -> tuple[int, ...]:
    perm = check_int_list(perm, "transpose attribute perm")
    if sorted(perm) != list(range(rank)):
        raise ModelError(
            f"transpose perm {list(perm)} is not a permutation of 0..{rank - 1} for "
            f"{operand(names, shapes, 0)}"
        )
    return perm


def _transpose_infer(shapes, dtypes, attrs, names=None):
    shape = tuple(shapes[0])
    perm = _check_perm(attrs.get("perm"), len(shape), names, shapes)
    return tuple(shape[p] for p in perm), dtypes[0]


def _transpose_reference(arrays, attrs):
    return np.transpose(np.asarray(arrays[0]), tuple(attrs["perm"]))


def _transpose_canonical(shapes, attrs):
    return {"perm": tuple(attrs["perm"])}


def _transpose_grad(i, arrays, attrs, cot):
    return np.transpose(cot, tuple(np.argsort(attrs["perm"]))).copy()


def _transpose_jax(jnp, lax, a, attrs):
    return jnp.transpose(a[0], tuple(attrs["perm"]))


TRANSPOSE = OpDef("transpose", "shape", 1, 1, (("perm", REQUIRED),), _transpose_infer, _no_flops,
                  _transpose_reference, _transpose_canonical, vjp=_shape_vjp("transpose", _transpose_grad),
                  vjp_reads_inputs=False, rule="shape_ops.transpose", passes_shardings=True,
                  jax_form=_transpose_jax, keeps_pending=True)


# -- concat ----------------------------------------------------------------------

def _concat_infer(shapes, dtypes, attrs, names=None):
    dtype = same_dtype("concat", dtypes, names)
    rank = len(shapes[0])
    if rank == 0:
        raise ModelError(f"concat cannot join scalars ({operand(names, shapes, 0)})")
    axis = normalize_axis(attrs.get("axis", 0), rank, "concat axis")
    total = 0
    for i, s in enumerate(shapes):
        if len(s) != rank or any(d != e for k, (d, e) in enumerate(zip(s, shapes[0])) if k != axis):
            raise ModelError(
                f"concat along axis {axis} needs equal other dimensions: {operand(names, shapes, 0)} "
                f"and {operand(names, shapes, i)} differ"
            )
        total += s[axis]
    out = list(shapes[0])
    out[axis] = total
    return tuple(out), dtype


def _concat_reference(arrays, attrs):
    return np.concatenate([np.asarray(a) for a in arrays], axis=attrs.get("axis", 0))


def _concat_canonical(shapes, attrs):
    return {"axis": normalize_axis(attrs.get("axis", 0), len(shapes[0]), "concat axis")}


def _concat_grad(i, arrays, attrs, cot):
    axis = attrs.get("axis", 0) % cot.ndim
    start = sum(np.shape(a)[axis] for a in arrays[:i])
    index = (slice(None),) * axis + (slice(start, start + np.shape(arrays[i])[axis]),)
    return cot[index].copy()


def _concat_jax(jnp, lax, a, attrs):
    return jnp.concatenate(a, axis=attrs.get("axis", 0))


CONCAT = OpDef("concat", "shape", 1, None, (("axis", 0),), _concat_infer, _no_flops, _concat_reference,
               _concat_canonical, vjp=_shape_vjp("concat", _concat_grad), vjp_reads_inputs=False,
               rule="shape_ops.concat", jax_form=_concat_jax, keeps_pending=True)


# -- slice -----------------------------------------------------------------------

def _slice_bounds(shape: Shape, attrs: Mapping[str, Any], names=None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    starts = check_int_list(attrs.get("starts"), "slice attribute starts")
    stops = check_int_list(attrs.get("stops"), "slice attribute stops")
    for what, v in (("starts", starts), ("stops", stops)):
        if len(v) != len(shape):
            raise ModelError(
                f"slice {what} has {len(v)} entries but {operand(names, [shape], 0)} has rank {len(shape)}; "
                "give one per dimension"
            )
    for i, (a, b, d) in enumerate(zip(starts, stops, shape)):
        if not 0 <= a < b <= d:
            raise ModelError(
                f"slice of dimension {i} keeps [{a}, {b}) but needs 0 <= start < stop <= {d} "
                f"(input {operand(names, [shape], 0)})"
            )
    return starts, stops


def _slice_infer(shapes, dtypes, attrs, names=None):
    starts, stops = _slice_bounds(tuple(shapes[0]), attrs, names)
    return tuple(b - a for a, b in zip(starts, stops)), dtypes[0]


def _slice_reference(arrays, attrs):
    x = np.asarray(arrays[0])
    starts, stops = _slice_bounds(x.shape, attrs)
    return x[tuple(slice(a, b) for a, b in zip(starts, stops))]


def _slice_canonical(shapes, attrs):
    starts, stops = _slice_bounds(tuple(shapes[0]), attrs)
    return {"starts": starts, "stops": stops}


def _slice_grad(i, arrays, attrs, cot):
    shape = np.shape(arrays[0])
    starts, stops = _slice_bounds(shape, attrs)
    g = np.zeros(shape, dtype=cot.dtype)
    g[tuple(slice(a, b) for a, b in zip(starts, stops))] = cot
    return g


def _slice_jax(jnp, lax, a, attrs):
    return a[0][tuple(slice(lo, hi) for lo, hi in zip(attrs["starts"], attrs["stops"]))]


def _local_index(attrs, block) -> tuple[tuple[slice, ...], bool]:
    """The slice of a device's block, and whether the device holds it: a sliced dimension is whole on every
    device (the rule says so), except one cut to a single position (a reduction factor), which only the device
    whose block holds that position gives (the others give zeros)."""
    index, held = [], True
    for d, (start, stop) in enumerate(zip(attrs["starts"], attrs["stops"])):
        lo, hi = block.ranges[d]
        if (start, stop) == (0, block.global_shape[d]):
            index.append(slice(None))
        elif (lo, hi) == (0, block.global_shape[d]):
            index.append(slice(start, stop))
        else:  # one position of a sharded dimension
            held = held and lo <= start < hi
            index.append(slice(start - lo, start - lo + 1) if lo <= start < hi else slice(0, 1))
    return tuple(index), held


def _slice_jax_local(jnp, lax, a, attrs, ctx):
    """Whole dimensions sliced as they are; a sharded one cut to a single position read at its offset in this
    block, zero on the devices whose block does not hold it."""
    x, held = a[0], None
    for d, (lo, hi, n, local) in enumerate(zip(attrs["starts"], attrs["stops"], ctx.global_shapes[0],
                                               ctx.local_shapes[0])):
        if (lo, hi) == (0, n):
            continue
        if local == n:
            x = lax.slice_in_dim(x, lo, hi, axis=d)
            continue
        at = lo - ctx.start(0, d)
        here = (at >= 0) & (at < local)
        x = lax.dynamic_slice_in_dim(x, jnp.clip(at, 0, local - 1), 1, axis=d)
        held = here if held is None else held & here
    return x if held is None else jnp.where(held, x, jnp.zeros((), x.dtype))


def _slice_local_reference(arrays, attrs, ctx, rule):
    index, held = _local_index(attrs, ctx.operands[0])
    out = np.asarray(arrays[0])[index]
    return out if held else np.zeros_like(out)


def _slice_local_vjp(arrays, attrs, cotangent, ctx, wrt):
    block = ctx.operands[0]
    out = np.zeros(block.local_shape, dtype=cotangent.dtype)
    index, held = _local_index(attrs, block)
    if held:
        out[index] = cotangent
    return [out]


SLICE = OpDef("slice", "shape", 1, 1, (("starts", REQUIRED), ("stops", REQUIRED)), _slice_infer, _no_flops,
              _slice_reference, _slice_canonical, vjp=_shape_vjp("slice", _slice_grad), vjp_reads_inputs=False,
              rule="shape_ops.slice_", jax_form=_slice_jax, local_reference=_slice_local_reference,
              local_vjp=_slice_local_vjp, jax_local_form=_slice_jax_local, bytes_accessed=_slice_bytes,
              keeps_pending=True)



# -- pad --------------------------------------------------------------------------------

def _pad_attrs(shape: tuple[int, ...], attrs: Mapping[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...], float]:
    low = check_int_list(attrs.get("low"), "pad attribute low")
    high = check_int_list(attrs.get("high"), "pad attribute high")
    for what, v in (("low", low), ("high", high)):
        if len(v) != len(shape):
            raise ModelError(f"pad {what} needs one count per dimension of the operand (rank {len(shape)}), "
                             f"got {list(v)}")
    for d, (n, a, z) in enumerate(zip(shape, low, high)):
        if n + a + z < 1 or -a > n or -z > n:
            raise ModelError(f"pad of dimension {d} ({n} elements) by low {a} and high {z} leaves nothing; a "
                             "negative count crops at most the dimension's size and the result keeps an element")
    value = attrs.get("value", 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelError(f"pad attribute value must be a number, got {value!r}")
    return low, high, float(value)


def _pad_infer(shapes, dtypes, attrs, names=None):
    low, high, _ = _pad_attrs(tuple(shapes[0]), attrs)
    return tuple(n + a + b for n, a, b in zip(shapes[0], low, high)), dtypes[0]


def _pad_canonical(shapes, attrs):
    low, high, value = _pad_attrs(tuple(shapes[0]), attrs)
    return {"low": low, "high": high, "value": value}


def _pad_reference(arrays, attrs):
    x = np.asarray(arrays[0])
    widths = [(max(a, 0), max(z, 0)) for a, z in zip(attrs["low"], attrs["high"])]
    padded = np.pad(x, widths, constant_values=np.asarray(attrs["value"], x.dtype))
    # then the crops: a negative count drops that many elements
    return padded[tuple(slice(max(-a, 0), padded.shape[d] - max(-z, 0))
                        for d, (a, z) in enumerate(zip(attrs["low"], attrs["high"])))]


def _pad_grad(i, arrays, attrs, cot):
    """The cotangent's elements the operand's land on (a cropped element's is zero)."""
    shape = np.shape(arrays[0])
    g = np.zeros(shape, dtype=cot.dtype)
    src, dst = [], []
    for n, a, m in zip(shape, attrs["low"], cot.shape):
        lo, hi = max(0, -a), min(n, m - a)  # the operand's elements inside the result
        dst.append(slice(lo, hi))
        src.append(slice(lo + a, hi + a))
    g[tuple(dst)] = cot[tuple(src)]
    return g


def _pad_jax(jnp, lax, a, attrs):
    x = a[0]
    return lax.pad(x, jnp.asarray(attrs["value"], x.dtype), [(lo, hi, 0) for lo, hi in zip(attrs["low"], attrs["high"])])


PAD = OpDef("pad", "shape", 1, 1, (("low", REQUIRED), ("high", REQUIRED), ("value", 0.0)), _pad_infer, _no_flops,
            _pad_reference, _pad_canonical, vjp=_shape_vjp("pad", _pad_grad), vjp_reads_inputs=False,
            rule="shape_ops.pad", jax_form=_pad_jax)


# -- dynamic slices: the start positions ---------------------------------------------------

def _starts(rank: int, attrs: Mapping[str, Any], op: str) -> tuple[int | None, ...]:
    """Attribute ``starts`` of a dynamic slice or update: per dimension a constant start, or None for an input."""
    starts = attrs.get("starts")
    if starts is None:
        return (None,) * rank
    if not isinstance(starts, (list, tuple)) or len(starts) != rank:
        raise ModelError(f"{op} attribute starts needs one entry per dimension of the operand (rank {rank}): a "
                         f"constant start or null for one given as an input, got {starts!r}")
    return tuple(None if v is None else check_int(v, f"{op} start") for v in starts)


def _check_start_inputs(op: str, shapes, dtypes, names, first: int) -> None:
    """The start indices given as inputs (from ``first`` on): rank-0 integers."""
    for i in range(first, len(shapes)):
        if tuple(shapes[i]) != ():
            raise ModelError(f"{op} start index {operand(names, shapes, i)} must be a rank-0 integer")
        need_int(op, dtypes[i], names, i, "start indices")


def _clamped_starts(given, attrs, shape, size, op: str) -> tuple[int, ...]:
    """The window's start per dimension (the constants of ``starts`` and the ``given`` start inputs in order),
    clamped into ``[0, shape - size]`` as StableHLO clamps it."""
    given = iter(given)
    starts = [next(given) if v is None else v for v in _starts(len(shape), attrs, op)]
    return tuple(min(max(int(np.asarray(s)), 0), n - u) for s, n, u in zip(starts, shape, size))


# -- dynamic_slice -------------------------------------------------------------------------
#
# Inputs ``[operand, *dynamic starts]``, attributes ``sizes`` (the window's size per dimension, at least 1, at most
# the operand's) and ``starts`` (as ``dynamic_update_slice``'s: a constant per dimension or ``None`` for a rank-0
# integer input, in order; no ``starts``: every one an input): the window of the operand from the starts, each
# clamped into ``[0, size - window size]`` as StableHLO's are (``x[i]`` at a computed ``i``, which JAX writes as a
# dynamic slice of one row, a cache's entry read at its position). 0 FLOPs; bytes: the kept elements read and
# written (as ``slice``). VJP: the cotangent placed at the window, zeros elsewhere.

def _ds_infer(shapes, dtypes, attrs, names=None):
    need_rank("dynamic_slice", shapes, names, 0, 1, "the operand")
    shape = tuple(shapes[0])
    sizes = check_int_list(attrs.get("sizes"), "dynamic_slice attribute sizes")
    if len(sizes) != len(shape) or not all(1 <= k <= n for k, n in zip(sizes, shape)):
        raise ModelError(f"dynamic_slice of {operand(names, shapes, 0)} needs sizes, one per dimension, each at least "
                         f"1 and at most the dimension's size, got {list(sizes)}")
    dynamic = _starts(len(shape), attrs, "dynamic_slice").count(None)
    if len(shapes) != 1 + dynamic:
        raise ModelError(f"dynamic_slice of {operand(names, shapes, 0)} needs the operand and {dynamic} start indices "
                         f"(a rank-0 integer for each dimension whose start is not a constant of attribute starts), "
                         f"got {len(shapes)} inputs")
    _check_start_inputs("dynamic_slice", shapes, dtypes, names, 1)
    return sizes, dtypes[0]


def _ds_canonical(shapes, attrs):
    return {"sizes": check_int_list(attrs.get("sizes"), "dynamic_slice attribute sizes"),
            "starts": _starts(len(shapes[0]), attrs, "dynamic_slice")}


def _ds_window(arrays, attrs) -> tuple[slice, ...]:
    shape, sizes = np.shape(arrays[0]), tuple(attrs["sizes"])
    starts = _clamped_starts(arrays[1:], attrs, shape, sizes, "dynamic_slice")
    return tuple(slice(s, s + k) for s, k in zip(starts, sizes))


def _ds_reference(arrays, attrs):
    return np.array(np.asarray(arrays[0])[_ds_window(arrays, attrs)], copy=True)


def _ds_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("dynamic_slice", arrays, wrt, ("operand",) + ("start index",) * (len(arrays) - 1))
    cot = np.asarray(cotangent)
    g = np.zeros(np.shape(arrays[0]), dtype=cot.dtype)
    g[_ds_window(arrays, attrs)] = cot
    return (g,)


def _ds_local_attrs(attrs, block) -> dict:
    """``attrs`` on a device's block: a dimension the window keeps whole is split alike on the operand and the
    result (the rule gives them one factor), so the window is the whole block there; a cut one is whole."""
    sizes = tuple(local if k == n else k for k, n, local in zip(attrs["sizes"], block.global_shape,
                                                                 block.local_shape))
    return {**attrs, "sizes": sizes}


def _ds_local_reference(arrays, attrs, ctx, rule):
    return _ds_reference(arrays, _ds_local_attrs(attrs, ctx.operands[0]))


def _ds_local_vjp(arrays, attrs, cotangent, ctx, wrt):
    return list(_ds_vjp(arrays, _ds_local_attrs(attrs, ctx.operands[0]), None, cotangent, wrt))


def _ds_jax_local(jnp, lax, a, attrs, ctx):
    """The window on this device's block: whole along a dimension it keeps whole (split alike on both sides)."""
    x = a[0]
    sizes = [local if k == n else k for k, n, local in zip(attrs["sizes"], ctx.global_shapes[0], x.shape)]
    given = iter(a[1:])
    starts = [next(given) if v is None else v for v in attrs["starts"]]
    return lax.dynamic_slice(x, [jnp.clip(jnp.asarray(s, jnp.int32), 0, n - k)
                                 for s, n, k in zip(starts, x.shape, sizes)], tuple(sizes))


def _ds_jax(jnp, lax, a, attrs):
    """The primitive's clamped starts (``lax.dynamic_slice`` itself would first wrap a negative one)."""
    given = iter(a[1:])
    starts = [next(given) if v is None else v for v in attrs["starts"]]
    return lax.dynamic_slice(a[0], [jnp.clip(jnp.asarray(s, jnp.int32), 0, n - k)
                                    for s, n, k in zip(starts, a[0].shape, attrs["sizes"])], tuple(attrs["sizes"]))


DYNAMIC_SLICE = OpDef("dynamic_slice", "shape", 1, None, (("sizes", REQUIRED), ("starts", None)), _ds_infer, _no_flops,
                      _ds_reference, _ds_canonical, vjp=_ds_vjp, rule="shape_ops.dynamic_slice", jax_form=_ds_jax,
                      local_reference=_ds_local_reference, local_vjp=_ds_local_vjp, jax_local_form=_ds_jax_local,
                      bytes_accessed=_slice_bytes)


# -- dynamic_update_slice -----------------------------------------------------------------
#
# Inputs ``[operand, update, *dynamic starts]``: ``update`` (the operand's rank and dtype, no dimension larger)
# written over the operand from a start position, one per dimension: ``starts`` gives each as a constant or
# ``None`` for one computed by the program, a rank-0 integer input, in order (no ``starts``: every one an input,
# as ``lax.dynamic_update_slice`` takes them). Each start is clamped into ``[0, size - update size]`` as StableHLO's
# are (a KV cache's new token written at its position). The result is the updated copy. Which starts are constants
# matters to the partitioner (:func:`planner.rules.shape_ops.dynamic_update_slice`). 0 FLOPs; bytes: the default
# (operand and update read, result written: XLA copies the operand unless the program donates it). VJP: the
# operand's cotangent is the cotangent with the window zeroed, the update's the window; the starts are integers.

def _dus_infer(shapes, dtypes, attrs, names=None):
    need_rank("dynamic_update_slice", shapes, names, 0, 1, "the operand")
    rank = len(shapes[0])
    dynamic = _starts(rank, attrs, "dynamic_update_slice").count(None)
    if len(shapes) != 2 + dynamic:
        raise ModelError(f"dynamic_update_slice of {operand(names, shapes, 0)} needs the operand, the update and "
                         f"{dynamic} start indices (a rank-0 integer for each dimension whose start is not a constant "
                         f"of attribute starts), got {len(shapes)} inputs")
    if len(shapes[1]) != rank or any(u > n for u, n in zip(shapes[1], shapes[0])):
        raise ModelError(f"dynamic_update_slice writes {operand(names, shapes, 1)} into {operand(names, shapes, 0)}: "
                         "the update needs the operand's rank and no dimension larger than the operand's")
    same_dtype("dynamic_update_slice", dtypes[:2], names)
    _check_start_inputs("dynamic_update_slice", shapes, dtypes, names, 2)
    return tuple(shapes[0]), dtypes[0]


def _dus_canonical(shapes, attrs):
    return {"starts": _starts(len(shapes[0]), attrs, "dynamic_update_slice")}


def _dus_reference(arrays, attrs):
    out = np.array(arrays[0], copy=True)
    size = np.shape(arrays[1])
    starts = _clamped_starts(arrays[2:], attrs, out.shape, size, "dynamic_update_slice")
    out[tuple(slice(s, s + u) for s, u in zip(starts, size))] = arrays[1]
    return out


def _dus_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("dynamic_update_slice", arrays, wrt, ("operand", "update") + ("start index",) * (len(arrays) - 2))
    cot = np.asarray(cotangent)
    size = np.shape(arrays[1])
    starts = _clamped_starts(arrays[2:], attrs, cot.shape, size, "dynamic_update_slice")
    window = tuple(slice(s, s + u) for s, u in zip(starts, size))
    out = []
    for i in wrt:
        if i == 0:
            g = np.array(cot, copy=True)
            g[window] = 0
        else:
            g = np.array(cot[window], copy=True)
        out.append(g)
    return tuple(out)


def _dus_local_window(arrays, attrs, ctx) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """The part of the window inside this device's operand block: its index in the block and in the update's
    block (a dimension the update covers whole is split alike in both: the rule gives them one factor)."""
    block, update = ctx.operands[0], ctx.operands[1]
    starts = _clamped_starts(arrays[2:], attrs, block.global_shape, update.global_shape, "dynamic_update_slice")
    here, there = [], []
    for d, s in enumerate(starts):
        lo, hi = block.ranges[d]
        u = update.global_shape[d]
        if u == block.global_shape[d]:
            here.append(slice(None))
            there.append(slice(None))
            continue
        a, b = max(lo, s), min(hi, s + u)
        a = min(a, b)
        here.append(slice(a - lo, b - lo))
        there.append(slice(a - s, b - s))
    return tuple(here), tuple(there)


def _dus_local_reference(arrays, attrs, ctx, rule):
    """The update's elements that fall in this device's operand block written there (a dimension the update
    covers in part may be split: the update is whole along it and each device writes its part)."""
    out = np.array(arrays[0], copy=True)
    here, there = _dus_local_window(arrays, attrs, ctx)
    out[here] = np.asarray(arrays[1])[there]
    return out


def _dus_local_vjp(arrays, attrs, cotangent, ctx, wrt):
    """The operand's cotangent block with the window's part zeroed; the update's: the window's part of this block
    (zeros elsewhere: the devices along a split dimension each give their part, summed)."""
    here, there = _dus_local_window(arrays, attrs, ctx)
    cot = np.asarray(cotangent)
    out = []
    for i in wrt:
        if i == 0:
            g = np.array(cot, copy=True)
            g[here] = 0
        elif i == 1:
            g = np.zeros(ctx.operands[1].local_shape, dtype=cot.dtype)
            g[there] = cot[here]
        else:
            raise RuleError("dynamic_update_slice: the start indices are integers and have no cotangent")
        out.append(g)
    return out


def _dus_jax(jnp, lax, a, attrs):
    """The primitive's clamped starts (``lax.dynamic_update_slice`` itself would first wrap a negative one)."""
    given = iter(a[2:])
    starts = [next(given) if v is None else v for v in attrs["starts"]]
    return lax.dynamic_update_slice(a[0], a[1], [jnp.clip(jnp.asarray(s, jnp.int32), 0, n - u)
                                                 for s, n, u in zip(starts, a[0].shape, a[1].shape)])


def _dus_jax_local(jnp, lax, a, attrs, ctx):
    """Each position of this device's operand block inside the window takes the update's element there: per
    dimension the update covers in part, the block's global positions, the window (start clamped) and the
    update's element at each."""
    x, update = a[0], a[1]
    given = iter(a[2:])
    starts = [next(given) if v is None else v for v in attrs["starts"]]
    inside = None
    for d in range(x.ndim):
        n, u = ctx.global_shapes[0][d], ctx.global_shapes[1][d]
        if u == n:
            continue
        s = jnp.clip(jnp.asarray(starts[d], jnp.int32), 0, n - u)
        at = ctx.start(0, d) + jnp.arange(x.shape[d], dtype=jnp.int32) - s
        hit = (at >= 0) & (at < u)
        update = jnp.take(update, jnp.clip(at, 0, u - 1), axis=d)
        hit = hit.reshape((1,) * d + (x.shape[d],) + (1,) * (x.ndim - d - 1))
        inside = hit if inside is None else inside & hit
    return update if inside is None else jnp.where(inside, update, x)


DYNAMIC_UPDATE_SLICE = OpDef("dynamic_update_slice", "shape", 2, None, (("starts", None),), _dus_infer, _no_flops,
                             _dus_reference, _dus_canonical, vjp=_dus_vjp, rule="shape_ops.dynamic_update_slice",
                             jax_form=_dus_jax, local_reference=_dus_local_reference, local_vjp=_dus_local_vjp,
                             jax_local_form=_dus_jax_local, typed_alike=(0, 1))


# -- flip -------------------------------------------------------------------------------

def _flip_axes(shape: tuple[int, ...], attrs: Mapping[str, Any]) -> tuple[int, ...]:
    axes = check_int_list(attrs.get("axes"), "flip attribute axes")
    out = tuple(sorted({normalize_axis(a, len(shape), "flip axis") for a in axes}))
    if not out:
        raise ModelError("flip needs at least one axis to reverse")
    return out


def _flip_infer(shapes, dtypes, attrs, names=None):
    _flip_axes(tuple(shapes[0]), attrs)
    return tuple(shapes[0]), dtypes[0]


def _flip_canonical(shapes, attrs):
    return {"axes": _flip_axes(tuple(shapes[0]), attrs)}


def _flip_reference(arrays, attrs):
    return np.flip(np.asarray(arrays[0]), tuple(attrs["axes"]))


def _flip_grad(i, arrays, attrs, cot):
    return np.array(np.flip(cot, tuple(attrs["axes"])))


def _flip_jax(jnp, lax, a, attrs):
    return lax.rev(a[0], tuple(attrs["axes"]))


FLIP = OpDef("flip", "shape", 1, 1, (("axes", REQUIRED),), _flip_infer, _no_flops, _flip_reference, _flip_canonical,
             vjp=_shape_vjp("flip", _flip_grad), vjp_reads_inputs=False, rule="shape_ops.flip", jax_form=_flip_jax)


# -- roll -------------------------------------------------------------------------------

def roll_attrs(shape: Sequence[int], attrs: Mapping[str, Any]) -> tuple[int, int]:
    """``(shift, axis)`` of a roll of ``shape``: the axis normalised, the shift taken modulo its size (a roll by
    the size is none)."""
    axis = normalize_axis(check_int(attrs.get("axis"), "roll attribute axis"), len(shape), "roll axis")
    shift = check_int(attrs.get("shift"), "roll attribute shift")
    return shift % shape[axis] if shape[axis] else 0, axis


def _roll_infer(shapes, dtypes, attrs, names=None):
    roll_attrs(tuple(shapes[0]), attrs)
    return tuple(shapes[0]), dtypes[0]


def _roll_canonical(shapes, attrs):
    shift, axis = roll_attrs(tuple(shapes[0]), attrs)
    return {"shift": shift, "axis": axis}


def _roll_reference(arrays, attrs):
    return np.roll(np.asarray(arrays[0]), attrs["shift"], attrs["axis"])


def _roll_grad(i, arrays, attrs, cot):
    return np.array(np.roll(cot, -attrs["shift"], attrs["axis"]))


def _roll_jax(jnp, lax, a, attrs):
    return jnp.roll(a[0], attrs["shift"], attrs["axis"])


ROLL = OpDef("roll", "shape", 1, 1, (("shift", REQUIRED), ("axis", REQUIRED)), _roll_infer, _no_flops, _roll_reference,
             _roll_canonical, vjp=_shape_vjp("roll", _roll_grad), vjp_reads_inputs=False, rule="shape_ops.roll",
             jax_form=_roll_jax)

# -- iota -------------------------------------------------------------------------------------

def _iota_attrs(attrs: Mapping[str, Any]) -> tuple[tuple[int, ...], int, str]:
    shape = check_int_list(attrs.get("shape"), "iota attribute shape")
    if any(d < 1 for d in shape):
        raise ModelError(f"iota attribute shape {list(shape)} must have sizes >= 1")
    dim = normalize_axis(attrs.get("dimension", 0), len(shape), "iota dimension") if shape else 0
    return shape, dim, check_dtype(attrs.get("dtype", "i32"))


def _iota_infer(shapes, dtypes, attrs, names=None):
    shape, _, dtype = _iota_attrs(attrs)
    if not shape:
        raise ModelError("iota needs a shape of rank >= 1")
    return shape, dtype


def _iota_canonical(shapes, attrs):
    shape, dim, dtype = _iota_attrs(attrs)
    return {**attrs, "shape": shape, "dimension": dim, "dtype": dtype}


def _counting(start: int, shape: Sequence[int], dim: int, dtype: str) -> np.ndarray:
    """``start, start + 1, ...`` along ``dim`` of an array of ``shape``."""
    line = np.arange(start, start + shape[dim]).reshape([-1 if k == dim else 1 for k in range(len(shape))])
    return np.broadcast_to(line, tuple(shape)).astype(numpy_dtype(dtype))


def _iota_reference(arrays, attrs):
    return _counting(0, attrs["shape"], attrs["dimension"], attrs["dtype"])


def _iota_local_reference(arrays, attrs, ctx, rule):
    """A device's block counts from where it starts along the counted dimension (its padding counts on)."""
    block = ctx.result
    return _counting(block.ranges[attrs["dimension"]][0], block.local_shape, attrs["dimension"], attrs["dtype"])


def _iota_local_vjp(arrays, attrs, cotangent, ctx, wrt):
    return ()  # no operands


def _iota_jax(jnp, lax, a, attrs):
    names = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "i32": "int32", "i64": "int64", "bool": "bool"}
    return lax.broadcasted_iota(jnp.dtype(names[attrs["dtype"]]), tuple(attrs["shape"]), attrs["dimension"])


def _iota_jax_local(jnp, lax, a, attrs, ctx):
    names = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "i32": "int32", "i64": "int64", "bool": "bool"}
    d = attrs["dimension"]
    start = ctx.start(0, d)
    return lax.broadcasted_iota(jnp.dtype(names[attrs["dtype"]]), ctx.local_shapes[0], d) + jnp.asarray(start).astype(
        jnp.dtype(names[attrs["dtype"]]))


# 0, 1, 2, ... along one dimension (jnp.arange, jax.nn.one_hot, jnp.tril's masks): no inputs, no gradient
IOTA = OpDef("iota", "shape", 0, 0, (("shape", REQUIRED), ("dimension", 0), ("dtype", "i32")), _iota_infer,
             lambda in_shapes, out_shape, attrs: 0, _iota_reference, _iota_canonical, vjp=lambda *a: (),
             vjp_reads_inputs=False, rule="shape_ops.iota", jax_form=_iota_jax,
             local_reference=_iota_local_reference, local_vjp=_iota_local_vjp, jax_local_form=_iota_jax_local)
