"""Reductions over a list of axes: ``sum``, ``mean``, ``max``, ``min``; ``argmax``, ``argmin`` over one; the
cumulative sum ``cumsum`` along one; and ``top_k`` along one.

Attributes: ``axes`` (a list of dimensions, negative counting from the end; absent
or null means every dimension) and ``keepdims`` (keep reduced dimensions as size
1; default false). In a graph, ``axes`` is stored canonically: sorted,
non-negative, listed in full.

FLOP convention: **1 FLOP per input element** (one add or compare each); ``mean``
adds 1 per output element for the division.

Bytes accessed: the default (:func:`~graphs.ops.opdef.every_element_once`): every operand element
read once, every result element written once.

VJPs: ``sum`` broadcasts the cotangent back over the reduced axes, ``mean`` also
divides it by the number of reduced elements (both read only the input's shape);
``max`` (``min``) sends it to the positions equal to the maximum (minimum), split
equally among tied positions (reads the input and its result).

``argmax`` (``argmin``) gives the index of the first maximum (minimum) along its one ``axis``, as
``jnp.argmax``: attributes ``axis`` (required) and ``index_dtype`` (``i32``, default, or ``i64``); the result
drops that axis. 1 FLOP per input element; an integer result, so no gradient.

``cumsum`` gives the running sum along its one ``axis`` (``reverse``: from the end), as ``jnp.cumsum`` /
``lax.cumsum``: the same shape and dtype, 1 FLOP per element; its VJP is the cumulative sum of the cotangent the
other way (JAX's transpose of ``cumsum``).

``top_k`` gives the ``k`` largest elements along its ``axis`` in descending order (ties: the lower index first),
as ``lax.top_k``: attribute ``returns`` picks the ``values`` (the operand's dtype; the cotangent goes back to the
positions they came from) or their ``indices`` (``i32``, no gradient); the result's ``axis`` has size ``k``.
``lax.top_k``'s two results are two such ops. ``k`` FLOPs per input element (a partial sort).

>>> SUM.infer([(4, 8, 16)], ["f32"], {"axes": [-1, 0]})
((8,), 'f32')
>>> MEAN.infer([(4, 8)], ["f32"], {"keepdims": True})
((1, 1), 'f32')
>>> MEAN.flops([(4, 8)], (), {})
33
>>> ARGMAX.infer([(4, 8)], ["f32"], {"axis": -1}), ARGMAX.reference([np.array([[1, 3, 3], [2, 0, 1]])], {"axis": 1})
(((4,), 'i32'), array([1, 0], dtype=int32))
>>> TOP_K.reference([np.array([[1, 3, 3, 2]])], {"k": 3, "axis": 1, "returns": "indices"})
array([[1, 2, 3]], dtype=int32)
>>> x = np.array([1, 2, 3])
>>> CUMSUM.reference([x], {"axis": 0}), CUMSUM.reference([x], {"axis": 0, "reverse": True})
(array([1, 3, 6]), array([6, 5, 3]))
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from graphs.dtypes import check_dtype, numpy_dtype
from graphs.ops.common import Shape, check_bool, need_float, need_numeric, normalize_axis, numel
from graphs.ops.opdef import REQUIRED, OpDef, check_wrt
from planner.errors import ModelError


def reduced_axes(op: str, rank: int, axes: Any) -> tuple[int, ...]:
    """The sorted non-negative axes a reduction reduces (every axis when ``axes`` is None)."""
    if axes is None:
        return tuple(range(rank))
    if not isinstance(axes, (list, tuple)):
        axes = [axes]
    out = [normalize_axis(a, rank, f"{op} axis") for a in axes]
    for a in out:
        if out.count(a) > 1:
            raise ModelError(f"{op} lists axis {a} twice in axes {list(axes)}")
    return tuple(sorted(out))


def _canonical(op: str):
    def canonical(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> dict:
        return {
            "axes": reduced_axes(op, len(shapes[0]), attrs.get("axes")),
            "keepdims": attrs.get("keepdims", False),
        }

    return canonical


def _kept(a: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """A reduction's result or cotangent with its reduced axes present as size 1."""
    a = np.asarray(a)
    return a if keepdims else np.expand_dims(a, axes)


def _reduction_vjp(name: str):
    def vjp(arrays, attrs, result, cotangent, wrt):
        check_wrt(name, arrays, wrt)
        x, cot = arrays[0], np.asarray(cotangent)
        shape = np.shape(x)
        axes = reduced_axes(name, len(shape), attrs.get("axes"))
        c = _kept(cot, axes, attrs.get("keepdims", False))
        if name == "mean":
            c = c / numel([shape[a] for a in axes])  # on the small side, before broadcasting
        out = []
        for _ in wrt:
            if name in EXTREMA:
                g = np.equal(x, _kept(result, axes, attrs.get("keepdims", False))).astype(cot.dtype)
                count = g.sum(axis=axes, keepdims=True)
                g *= c / count
            else:
                g = np.empty(shape, dtype=cot.dtype)
                g[...] = c
            out.append(g)
        return tuple(out)

    return vjp


# The reductions in ``jax.numpy``, each self-contained (a generated module embeds its source: graphs.ops.opdef)

def _sum_jax(jnp, lax, a, attrs):
    """An integer sum keeps its declared type, as the graph declares it."""
    x = a[0]
    return jnp.sum(x, axis=tuple(attrs["axes"]), keepdims=attrs.get("keepdims", False), dtype=x.dtype)


def _max_jax(jnp, lax, a, attrs):
    return jnp.max(a[0], axis=tuple(attrs["axes"]), keepdims=attrs.get("keepdims", False))


def _min_jax(jnp, lax, a, attrs):
    return jnp.min(a[0], axis=tuple(attrs["axes"]), keepdims=attrs.get("keepdims", False))


def _mean_jax(jnp, lax, a, attrs):
    return jnp.mean(a[0], axis=tuple(attrs["axes"]), keepdims=attrs.get("keepdims", False))


#: The reductions that pick an element (a pending maximum or minimum where their reduced axes are sharded).
EXTREMA = ("max", "min")


def _identity(name: str, dtype) -> Any:
    """The identity of ``name``'s reduction in ``dtype``: for a maximum ``-inf`` or the smallest integer, for a
    minimum ``inf`` or the largest."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return -np.inf if name == "max" else np.inf
    return np.iinfo(dtype).min if name == "max" else np.iinfo(dtype).max


def _extremum_local(name: str):
    """A device's maximum (minimum) of its block, its padding the reduction's identity (the simulator zeroes
    padding, and a zero would beat a row of negative numbers): with the reduced axes sharded, one of the values
    that the AllReduce by max (min) combines."""
    def local_reference(arrays, attrs, ctx, rule):
        x, block = np.asarray(arrays[0]), ctx.operands[0]
        if block.valid_shape != block.local_shape:
            x = np.where(block.valid_mask(), x, np.asarray(_identity(name, x.dtype), x.dtype))
        return _BY_NAME[name].reference([x], attrs)

    return local_reference


def _extremum_local_vjp(name: str):
    """The catalogue VJP on the block, its extremum recomputed without the padding. Only over whole reduced
    dimensions: where they are sharded the tied positions and their count are global (a pending maximum or
    minimum has no transpose, JAX's ``pmax`` and ``pmin`` none), so a training plan keeps them unsharded."""
    def local_vjp(arrays, attrs, cotangent, ctx, wrt):
        block = ctx.operands[0]
        split = [d for d in reduced_axes(name, len(block.global_shape), attrs.get("axes")) if not block.is_whole(d)]
        if split:
            raise ModelError(f"{name} has no local backward over its sharded reduced dimensions {split}: the "
                             f"positions of the {name}imum and their count are global; reduce over whole dimensions "
                             f"to train")
        op = _BY_NAME[name]
        return op.vjp(arrays, attrs, _extremum_local(name)(arrays, attrs, ctx, None), cotangent, wrt)

    return local_vjp


def _max_jax_local(jnp, lax, a, attrs, ctx):
    x = a[0]
    keep = ctx.valid(0)
    if keep is not None:
        import numpy as np

        low = -np.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
        x = jnp.where(keep, x, jnp.asarray(low, x.dtype))
    return jnp.max(x, axis=tuple(attrs["axes"]), keepdims=attrs.get("keepdims", False))


def _min_jax_local(jnp, lax, a, attrs, ctx):
    x = a[0]
    keep = ctx.valid(0)
    if keep is not None:
        import numpy as np

        high = np.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).max
        x = jnp.where(keep, x, jnp.asarray(high, x.dtype))
    return jnp.min(x, axis=tuple(attrs["axes"]), keepdims=attrs.get("keepdims", False))


def _global_count(ctx, attrs) -> int:
    """How many elements of the *global* operand one result element reduces."""
    shape = ctx.operands[0].global_shape
    axes = attrs.get("axes")
    axes = range(len(shape)) if axes is None else axes
    return math.prod(shape[a] for a in axes)


def _mean_local_reference(arrays, attrs, ctx, rule):
    """A device's sum of its block divided by the global count: with the reduced axes sharded, a partial mean."""
    total = SUM.reference(arrays, attrs)
    return np.asarray(np.asarray(total) / _global_count(ctx, attrs))


def _mean_local_vjp(arrays, attrs, cotangent, ctx, wrt):
    return SUM.vjp(arrays, attrs, None, cotangent / _global_count(ctx, attrs), wrt)


def _mean_jax_local(jnp, lax, a, attrs, ctx):
    import math

    axes = attrs.get("axes")
    shape = ctx.global_shapes[0]
    count = math.prod(shape[d] for d in (range(len(shape)) if axes is None else axes))
    return jnp.sum(a[0], axis=None if axes is None else tuple(axes), keepdims=attrs.get("keepdims", False)) / count


def _reduction(name: str, fn, floats_only: bool, extra_per_output: int, rule: str, jax_form, **traits) -> OpDef:
    def infer(shapes, dtypes, attrs, names=None):
        shape = tuple(shapes[0])
        axes = reduced_axes(name, len(shape), attrs.get("axes"))
        keep = check_bool(attrs.get("keepdims", False), f"{name} attribute keepdims")
        if floats_only:
            need_float(name, dtypes[0], names)
        else:
            need_numeric(name, dtypes, names)
        if keep:
            out = tuple(1 if i in axes else d for i, d in enumerate(shape))
        else:
            out = tuple(d for i, d in enumerate(shape) if i not in axes)
        return out, dtypes[0]

    def flops(in_shapes, out_shape, attrs):
        return numel(in_shapes[0]) + extra_per_output * numel(out_shape)

    def reference(arrays, attrs):
        x = np.asarray(arrays[0])
        axes = reduced_axes(name, x.ndim, attrs.get("axes"))
        return np.asarray(fn(x, axis=axes, keepdims=attrs.get("keepdims", False)))

    return OpDef(name, "reduction", 1, 1, (("axes", None), ("keepdims", False)), infer, flops, reference,
                 _canonical(name), vjp=_reduction_vjp(name), vjp_reads_inputs=name in EXTREMA,
                 vjp_reads_result=name in EXTREMA, rule=rule, jax_form=jax_form, reduces_by_dimension=True, **traits)


MAX = _reduction("max", np.max, floats_only=False, extra_per_output=0, rule="reductions.max_", jax_form=_max_jax,
                 local_reference=_extremum_local("max"), local_vjp=_extremum_local_vjp("max"),
                 jax_local_form=_max_jax_local)
MIN = _reduction("min", np.min, floats_only=False, extra_per_output=0, rule="reductions.min_", jax_form=_min_jax,
                 local_reference=_extremum_local("min"), local_vjp=_extremum_local_vjp("min"),
                 jax_local_form=_min_jax_local)
MEAN = _reduction("mean", np.mean, floats_only=True, extra_per_output=1, rule="reductions.sum_", jax_form=_mean_jax,
                  local_reference=_mean_local_reference, local_vjp=_mean_local_vjp, jax_local_form=_mean_jax_local)
SUM = _reduction("sum", np.sum, floats_only=False, extra_per_output=0, rule="reductions.sum_", jax_form=_sum_jax,
                 keeps_pending=True)

_BY_NAME = {"max": MAX, "min": MIN}


# -- argmax and argmin: the index of the first maximum (minimum) along one axis ------------------------------------

def _arg_attrs(name: str, shape: Sequence[int], attrs: Mapping[str, Any]) -> tuple[int, str]:
    if not shape:
        raise ModelError(f"{name} needs an operand of rank >= 1 (it reduces one axis)")
    axis = normalize_axis(attrs.get("axis"), len(shape), f"{name} axis")
    dtype = check_dtype(attrs.get("index_dtype", "i32"))
    if dtype not in ("i32", "i64"):
        raise ModelError(f"{name} attribute index_dtype must be i32 or i64, got {dtype}")
    return axis, dtype


def _arg(name: str, pick, jax_form) -> OpDef:
    def infer(shapes, dtypes, attrs, names=None):
        need_numeric(name, dtypes, names)
        axis, dtype = _arg_attrs(name, shapes[0], attrs)
        return tuple(d for i, d in enumerate(shapes[0]) if i != axis), dtype

    def canonical(shapes, attrs):
        axis, dtype = _arg_attrs(name, shapes[0], attrs)
        return {**attrs, "axis": axis, "index_dtype": dtype}

    def reference(arrays, attrs):
        return np.asarray(pick(np.asarray(arrays[0]), axis=attrs["axis"])).astype(
            numpy_dtype(attrs.get("index_dtype", "i32")))

    def vjp(arrays, attrs, result, cotangent, wrt):
        if wrt:
            raise ModelError(f"{name} has no gradient: its result is an integer index")
        return ()

    return OpDef(name, "reduction", 1, 1, (("axis", REQUIRED), ("index_dtype", "i32")), infer,
                 lambda in_shapes, out_shape, attrs: numel(in_shapes[0]), reference, canonical, vjp=vjp,
                 vjp_reads_inputs=False, rule="reductions.arg_", jax_form=jax_form,
                 gathered_statistics=("operand", "result"))


def _argmax_jax(jnp, lax, a, attrs):
    # lax.argmax computes in the index dtype itself (jnp.argmax would in int64 under x64, and XLA would move that)
    names = {"i32": "int32", "i64": "int64"}
    return lax.argmax(a[0], attrs["axis"], jnp.dtype(names[attrs.get("index_dtype", "i32")]))


def _argmin_jax(jnp, lax, a, attrs):
    names = {"i32": "int32", "i64": "int64"}
    return lax.argmin(a[0], attrs["axis"], jnp.dtype(names[attrs.get("index_dtype", "i32")]))


ARGMAX = _arg("argmax", np.argmax, _argmax_jax)
ARGMIN = _arg("argmin", np.argmin, _argmin_jax)


# -- cumsum: the running sum along one axis --------------------------------------------------------------------------

def _cumsum(x: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    if reverse:
        return np.flip(np.cumsum(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return np.cumsum(x, axis=axis, dtype=x.dtype)


def _cumsum_attrs(shape: Sequence[int], attrs: Mapping[str, Any]) -> tuple[int, bool]:
    if not shape:
        raise ModelError("cumsum needs an operand of rank >= 1 (it sums along one axis)")
    return (normalize_axis(attrs.get("axis"), len(shape), "cumsum axis"),
            check_bool(attrs.get("reverse", False), "cumsum attribute reverse"))


def _cumsum_infer(shapes, dtypes, attrs, names=None):
    need_numeric("cumsum", dtypes, names)
    _cumsum_attrs(shapes[0], attrs)
    return tuple(shapes[0]), dtypes[0]


def _cumsum_canonical(shapes, attrs):
    axis, reverse = _cumsum_attrs(shapes[0], attrs)
    return {**attrs, "axis": axis, "reverse": reverse}


def _cumsum_reference(arrays, attrs):
    return _cumsum(np.asarray(arrays[0]), attrs["axis"], attrs.get("reverse", False))


def _cumsum_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("cumsum", arrays, wrt)
    cot = np.asarray(cotangent)
    return tuple(_cumsum(cot, attrs["axis"], not attrs.get("reverse", False)) for _ in wrt)


def _cumsum_jax(jnp, lax, a, attrs):
    return lax.cumsum(a[0], axis=attrs["axis"], reverse=attrs.get("reverse", False))


CUMSUM = OpDef("cumsum", "reduction", 1, 1, (("axis", REQUIRED), ("reverse", False)), _cumsum_infer,
               lambda in_shapes, out_shape, attrs: numel(in_shapes[0]), _cumsum_reference, _cumsum_canonical,
               vjp=_cumsum_vjp, vjp_reads_inputs=False, rule="reductions.cumsum_", jax_form=_cumsum_jax)


# -- top_k: the k largest along one axis, values or indices ----------------------------------------------------------

TOP_K_RETURNS = ("values", "indices")


def _top_k_attrs(shape: Sequence[int], attrs: Mapping[str, Any]) -> tuple[int, int, str]:
    if not shape:
        raise ModelError("top_k needs an operand of rank >= 1 (it selects along one axis)")
    axis = normalize_axis(attrs.get("axis", -1), len(shape), "top_k axis")
    k = attrs.get("k")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= shape[axis]:
        raise ModelError(f"top_k attribute k must be a whole number from 1 to the axis's size {shape[axis]}, "
                         f"got {k!r}")
    returns = attrs.get("returns", "values")
    if returns not in TOP_K_RETURNS:
        raise ModelError(f"top_k attribute returns must be one of {', '.join(TOP_K_RETURNS)}, got {returns!r}")
    return axis, int(k), returns


def _top_k_infer(shapes, dtypes, attrs, names=None):
    need_numeric("top_k", dtypes, names)
    axis, k, returns = _top_k_attrs(shapes[0], attrs)
    shape = tuple(k if d == axis else n for d, n in enumerate(shapes[0]))
    return shape, dtypes[0] if returns == "values" else "i32"


def _top_k_canonical(shapes, attrs):
    axis, k, returns = _top_k_attrs(shapes[0], attrs)
    return {**attrs, "axis": axis, "k": k, "returns": returns}


def _top_k_indices(x: np.ndarray, axis: int, k: int) -> np.ndarray:
    """The positions of the ``k`` largest along ``axis``, largest first, ties by the lower index (lax.top_k)."""
    return np.take(np.argsort(-x, axis=axis, kind="stable"), np.arange(k), axis=axis)


def _top_k_reference(arrays, attrs):
    x = np.asarray(arrays[0])
    axis = attrs.get("axis", -1) % x.ndim
    idx = _top_k_indices(x, axis, attrs["k"])
    if attrs.get("returns", "values") == "indices":
        return idx.astype(np.int32)
    return np.take_along_axis(x, idx, axis=axis)


def _top_k_vjp(arrays, attrs, result, cotangent, wrt):
    if attrs.get("returns", "values") == "indices":
        if wrt:
            raise ModelError("top_k's indices have no gradient: they are integers")
        return ()
    check_wrt("top_k", arrays, wrt)
    x, cot = np.asarray(arrays[0]), np.asarray(cotangent)
    axis = attrs.get("axis", -1) % x.ndim
    g = np.zeros(x.shape, cot.dtype)
    np.put_along_axis(g, _top_k_indices(x, axis, attrs["k"]), cot, axis=axis)
    return tuple(g for _ in wrt)


def _top_k_jax(jnp, lax, a, attrs):
    values, indices = lax.top_k(a[0], attrs["k"], axis=attrs.get("axis", -1))
    return values if attrs.get("returns", "values") == "values" else indices


TOP_K = OpDef("top_k", "selection", 1, 1, (("k", REQUIRED), ("axis", -1), ("returns", "values")), _top_k_infer,
              lambda in_shapes, out_shape, attrs: numel(in_shapes[0]) * int(attrs["k"]), _top_k_reference,
              _top_k_canonical, vjp=_top_k_vjp, rule="reductions.top_k_", jax_form=_top_k_jax, xla_replicates=True)


# -- sort: keys in order along one axis, a payload permuted alike ------------------------------------------------------

SORT_RETURNS = ("keys", "payload")


def _sort_attrs(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> tuple[int, str]:
    if not shapes[0]:
        raise ModelError("sort needs operands of rank >= 1 (it orders along one axis)")
    if len(shapes) == 2 and tuple(shapes[1]) != tuple(shapes[0]):
        raise ModelError(f"sort's payload must have its keys' shape {tuple(shapes[0])}, got {tuple(shapes[1])}")
    axis = normalize_axis(attrs.get("axis", -1), len(shapes[0]), "sort axis")
    returns = attrs.get("returns", "keys")
    if returns not in SORT_RETURNS or (returns == "payload" and len(shapes) < 2):
        raise ModelError(f"sort attribute returns must be keys, or payload when a payload is given; got {returns!r}")
    return axis, returns


def _sort_infer(shapes, dtypes, attrs, names=None):
    need_numeric("sort", dtypes[:1], names)
    _, returns = _sort_attrs(shapes, attrs)
    return tuple(shapes[0]), dtypes[SORT_RETURNS.index(returns)]


def _sort_canonical(shapes, attrs):
    axis, returns = _sort_attrs(shapes, attrs)
    return {**attrs, "axis": axis, "returns": returns}


def _sort_flops(in_shapes, out_shape, attrs):
    n = in_shapes[0][attrs.get("axis", -1) % len(in_shapes[0])]
    return numel(in_shapes[0]) * max(1, math.ceil(math.log2(n))) if n > 1 else 0  # comparisons


def _sort_order(keys: np.ndarray, axis: int) -> np.ndarray:
    """The keys' ascending order along ``axis``, ties by position, NaN last (a stable lax.sort)."""
    return np.argsort(keys, axis=axis, kind="stable")


def _sort_reference(arrays, attrs):
    axis = attrs["axis"]
    order = _sort_order(np.asarray(arrays[0]), axis)
    return np.take_along_axis(np.asarray(arrays[SORT_RETURNS.index(attrs["returns"])]), order, axis=axis)


def _sort_vjp(arrays, attrs, result, cotangent, wrt):
    """The returned operand's cotangent put back where each element came from; the other's is zero (the keys
    only choose the order)."""
    check_wrt("sort", arrays, wrt, ("keys", "payload"))
    axis, cot = attrs["axis"], np.asarray(cotangent)
    order = _sort_order(np.asarray(arrays[0]), axis)
    out = []
    for k in wrt:
        g = np.zeros(np.shape(arrays[k]), dtype=cot.dtype)
        if k == SORT_RETURNS.index(attrs["returns"]):
            np.put_along_axis(g, order, cot, axis=axis)
        out.append(g)
    return tuple(out)


def _sort_jax(jnp, lax, a, attrs):
    out = lax.sort(tuple(a), dimension=attrs["axis"], is_stable=True, num_keys=1)
    return out[1] if attrs.get("returns", "keys") == "payload" else out[0]


SORT = OpDef("sort", "selection", 1, 2, (("axis", -1), ("returns", "keys")), _sort_infer, _sort_flops,
             _sort_reference, _sort_canonical, vjp=_sort_vjp, rule="reductions.sort_", jax_form=_sort_jax,
             permutation_backward=False, sharded_alike=(0, 1))
