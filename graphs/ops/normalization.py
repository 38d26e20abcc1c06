"""Normalisations: ``softmax`` over one axis, ``layernorm`` and ``rmsnorm`` over the last axis.

``softmax`` has attribute ``axis`` (default -1; stored non-negative in a graph).
``layernorm(x, [weight, [bias]])`` and ``rmsnorm(x, [weight])`` normalise over the
last dimension of ``x``; ``weight`` and ``bias`` have shape ``[x.shape[-1]]``.
Attribute ``eps`` (default 1e-5) is added to the variance (mean square for
rmsnorm) before the square root.

FLOP convention (per element of ``x``; small constants, not exact instruction counts):
softmax **5** (max, subtract, exp, sum, divide); layernorm **7** (mean, subtract,
square, variance sum, scale by the reciprocal root, and 2 amortised) plus 1 each
for a weight and a bias; rmsnorm **4** (square, sum, scale, and 1 amortised) plus 1
for a weight.

Bytes accessed: the default (:func:`~graphs.ops.opdef.every_element_once`): every operand element
read once, every result element written once (one fused pass over the normalised axis).

Statistics over a sharded normalised axis (``OpDef.statistics``; the backward reuses the
forward's): softmax's forward AllReduces its row max, then its row sum of exponentials, its
backward ``sum(dy y)``; layernorm's forward its mean, then its variance, its backward ``sum(g)``
and ``sum(g x̂)`` in one AllReduce; rmsnorm's forward its mean square, its backward
``sum(g x)``. The forwards are what XLA's SPMD partitioner compiles (JAX 0.10.2, 8 host CPU
devices); XLA's backwards of the JAX forms reduce one statistic more (layernorm a second
AllReduce, rmsnorm a second statistic in its AllReduce).

VJPs: softmax reads only its result (``dx = y (dy - sum(dy y))``); layernorm and
rmsnorm recompute the normalised input from ``x`` (``dx = r (g - mean(g) - x̂ mean(g x̂))``
with ``g = dy·weight``, ``r`` the reciprocal root; rmsnorm without the ``mean(g)``
term); weight and bias get ``dy·x̂`` and ``dy`` summed over the leading dimensions.

>>> LAYERNORM.infer([(2, 8), (8,), (8,)], ["f32"] * 3, {})
((2, 8), 'f32')
>>> SOFTMAX.flops([(2, 8)], (2, 8), {})
80
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from graphs.ops.common import Shape, need_float, need_rank, normalize_axis, numel, operand, same_dtype
from graphs.ops.opdef import OpDef, check_wrt
from planner.errors import ModelError, quote
from planner.ir.sharding import PENDING_MAX, PENDING_SUM

SOFTMAX_FLOPS_PER_ELEMENT = 5
LAYERNORM_FLOPS_PER_ELEMENT = 7
RMSNORM_FLOPS_PER_ELEMENT = 4
DEFAULT_EPS = 1e-5


# -- softmax ---------------------------------------------------------------------

def _softmax_infer(shapes, dtypes, attrs, names=None):
    need_rank("softmax", shapes, names, 0, 1)
    normalize_axis(attrs.get("axis", -1), len(shapes[0]), "softmax axis")
    need_float("softmax", dtypes[0], names)
    return tuple(shapes[0]), dtypes[0]


def _softmax_flops(in_shapes, out_shape, attrs):
    return SOFTMAX_FLOPS_PER_ELEMENT * numel(out_shape)


def _softmax_reference(arrays, attrs):
    x = np.asarray(arrays[0])
    axis = attrs.get("axis", -1)
    e = x - np.max(x, axis=axis, keepdims=True)
    np.exp(e, out=e)
    e /= np.sum(e, axis=axis, keepdims=True)
    return e


def _softmax_canonical(shapes: Sequence[Shape], attrs: Mapping[str, Any]) -> dict:
    return {"axis": normalize_axis(attrs.get("axis", -1), len(shapes[0]), "softmax axis")}


def _softmax_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("softmax", arrays, wrt)
    y, cot = np.asarray(result), np.asarray(cotangent)
    axis = attrs.get("axis", -1)
    out = []
    for _ in wrt:
        g = np.multiply(cot, y, dtype=cot.dtype)
        s = np.sum(g, axis=axis, keepdims=True)
        np.subtract(cot, s, out=g)
        g *= y
        out.append(g)
    return tuple(out)


def _softmax_vjp_in_place(arrays, attrs, result, cotangent, wrt):
    """:func:`_softmax_vjp` written into ``cotangent``'s own buffer (its caller owns it and is done with it):
    the attention probabilities' cotangent is the largest array of a transformer's backward."""
    check_wrt("softmax", arrays, wrt)
    y, g = np.asarray(result), cotangent
    axis = attrs.get("axis", -1)
    s = np.expand_dims(np.einsum("...i,...i->...", np.moveaxis(g, axis, -1), np.moveaxis(y, axis, -1)), axis)
    g -= s
    g *= y
    return (g,)


def _softmax_jax(jnp, lax, a, attrs):
    x, axis = a[0], attrs.get("axis", -1)
    e = jnp.exp(x - jnp.max(x, axis=axis, keepdims=True))
    return e / jnp.sum(e, axis=axis, keepdims=True)


SOFTMAX = OpDef("softmax", "normalization", 1, 1, (("axis", -1),), _softmax_infer, _softmax_flops,
                _softmax_reference, _softmax_canonical, vjp=_softmax_vjp, vjp_reads_inputs=False,
                vjp_reads_result=True, vjp_in_place=_softmax_vjp_in_place, rule="normalization.softmax",
                statistics=(((PENDING_MAX,), (PENDING_SUM,)), ((PENDING_SUM,),)),
                jax_form=_softmax_jax)


# -- layernorm / rmsnorm -----------------------------------------------------------

def _norm_infer(op: str):
    def infer(shapes, dtypes, attrs, names=None):
        need_rank(op, shapes, names, 0, 1)
        dtype = same_dtype(op, dtypes, names)
        need_float(op, dtype, names)
        eps = attrs.get("eps", DEFAULT_EPS)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
            raise ModelError(f"{op} attribute eps must be a non-negative number, got {quote(eps)}")
        h = shapes[0][-1]
        roles = ("weight", "bias")
        for i in range(1, len(shapes)):
            if tuple(shapes[i]) != (h,):
                raise ModelError(
                    f"{op} {roles[i - 1]} {operand(names, shapes, i)} must have shape [{h}], the last "
                    f"dimension of {operand(names, shapes, 0)}"
                )
        return tuple(shapes[0]), dtype

    return infer


def _norm_flops(per_element: int):
    def flops(in_shapes, out_shape, attrs):
        return (per_element + len(in_shapes) - 1) * numel(out_shape)

    return flops


def _layernorm_reference(arrays, attrs):
    x = np.asarray(arrays[0])
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + attrs.get("eps", DEFAULT_EPS))
    if len(arrays) > 1:
        y = y * np.asarray(arrays[1])
    if len(arrays) > 2:
        y = y + np.asarray(arrays[2])
    return y


def _rmsnorm_reference(arrays, attrs):
    x = np.asarray(arrays[0])
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + attrs.get("eps", DEFAULT_EPS))
    if len(arrays) > 1:
        y = y * np.asarray(arrays[1])
    return y


def _sum_rows(g: np.ndarray) -> np.ndarray:
    """``g [..., h]`` summed over every leading dimension -> ``[h]``."""
    return np.asarray(g.reshape(-1, g.shape[-1]).sum(axis=0)) if g.ndim > 1 else g.copy()


def _norm_vjp(op: str, centre: bool):
    roles = ("x", "weight", "bias")

    def vjp(arrays, attrs, result, cotangent, wrt):
        check_wrt(op, arrays, wrt, roles)
        x, cot = np.asarray(arrays[0]), np.asarray(cotangent)
        dtype = np.result_type(x, cot)
        eps = attrs.get("eps", DEFAULT_EPS)
        # recompute x̂ = (x - mean) r and r = 1 / sqrt(var + eps) as the reference does
        if centre:
            xhat = np.subtract(x, np.mean(x, axis=-1, keepdims=True), dtype=dtype)
            var = np.mean(xhat * xhat, axis=-1, keepdims=True)
        else:
            xhat = np.array(x, dtype=dtype)
            var = np.mean(xhat * xhat, axis=-1, keepdims=True)
        r = var
        r += eps
        np.sqrt(r, out=r)
        np.divide(1.0, r, out=r)
        xhat *= r
        out = {}
        if 1 in wrt:
            out[1] = _sum_rows(cot * xhat)
        if 2 in wrt:
            out[2] = _sum_rows(cot)
        if 0 in wrt:
            g = cot * np.asarray(arrays[1]) if len(arrays) > 1 else np.array(cot, dtype=dtype)
            dx = np.mean(g * xhat, axis=-1, keepdims=True)
            dx = xhat * dx
            if centre:
                dx += np.mean(g, axis=-1, keepdims=True)
            np.subtract(g, dx, out=dx)
            dx *= r
            out[0] = dx
        return tuple(np.asarray(out[i], dtype=cot.dtype) for i in wrt)

    return vjp


# The JAX forms are self-contained (a generated module embeds their source: graphs.ops.opdef): 1e-5 is
# DEFAULT_EPS, and each applies its optional scale (operand 1) and shift (operand 2) itself.

def _layernorm_jax(jnp, lax, a, attrs):
    x = a[0]
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    y = (x - mean) / jnp.sqrt(var + float(attrs.get("eps", 1e-5)))
    if len(a) > 1:
        y = y * a[1]
    if len(a) > 2:
        y = y + a[2]
    return y


def _rmsnorm_jax(jnp, lax, a, attrs):
    x = a[0]
    y = x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + float(attrs.get("eps", 1e-5)))
    if len(a) > 1:
        y = y * a[1]
    if len(a) > 2:
        y = y + a[2]
    return y


# rmsnorm shards as layernorm does: the last axis needs replication, weight maps to it
LAYERNORM = OpDef("layernorm", "normalization", 1, 3, (("eps", DEFAULT_EPS),), _norm_infer("layernorm"),
                  _norm_flops(LAYERNORM_FLOPS_PER_ELEMENT), _layernorm_reference,
                  vjp=_norm_vjp("layernorm", centre=True), rule="normalization.layernorm", jax_form=_layernorm_jax,
                  statistics=(((PENDING_SUM,), (PENDING_SUM,)), ((PENDING_SUM, PENDING_SUM),)),
                  reduces_cotangents_by_dimension=True)
RMSNORM = OpDef("rmsnorm", "normalization", 1, 2, (("eps", DEFAULT_EPS),), _norm_infer("rmsnorm"),
                _norm_flops(RMSNORM_FLOPS_PER_ELEMENT), _rmsnorm_reference, vjp=_norm_vjp("rmsnorm", centre=False),
                rule="normalization.layernorm", jax_form=_rmsnorm_jax,
                statistics=(((PENDING_SUM,),), ((PENDING_SUM,),)), reduces_cotangents_by_dimension=True)
