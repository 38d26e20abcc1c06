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

>>> LAYERNORM.infer([(2, 8), (8,), (8,)], ["f32"] * 3, {})
((2, 8), 'f32')
>>> SOFTMAX.flops([(2, 8)], (2, 8), {})
80
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from graphs.ops.common import Shape, need_float, need_rank, normalize_axis, numel, operand, same_dtype
from graphs.ops.opdef import OpDef
from planner.errors import ModelError

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


SOFTMAX = OpDef("softmax", "normalization", 1, 1, (("axis", -1),), _softmax_infer, _softmax_flops,
                _softmax_reference, _softmax_canonical)


# -- layernorm / rmsnorm -----------------------------------------------------------

def _norm_infer(op: str):
    def infer(shapes, dtypes, attrs, names=None):
        need_rank(op, shapes, names, 0, 1)
        dtype = same_dtype(op, dtypes, names)
        need_float(op, dtype, names)
        eps = attrs.get("eps", DEFAULT_EPS)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
            raise ModelError(f"{op} attribute eps must be a non-negative number, got {eps!r}")
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


LAYERNORM = OpDef("layernorm", "normalization", 1, 3, (("eps", DEFAULT_EPS),), _norm_infer("layernorm"),
                  _norm_flops(LAYERNORM_FLOPS_PER_ELEMENT), _layernorm_reference)
RMSNORM = OpDef("rmsnorm", "normalization", 1, 2, (("eps", DEFAULT_EPS),), _norm_infer("rmsnorm"),
                _norm_flops(RMSNORM_FLOPS_PER_ELEMENT), _rmsnorm_reference)
