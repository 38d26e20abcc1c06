"""The one registry of operators: name -> :class:`~graphs.ops.opdef.OpDef`, in alphabetical order.

Every op of the YAML format is registered here and only here: the collectives of
manual regions as :data:`graphs.ops.collectives.COLLECTIVES`, one per primitive of
the registry of collectives (:mod:`planner.collectives`) a region's body may apply,
the others by hand. Every op has an entry; none is deliberately left without one.

>>> get_op("relu").family
'pointwise'
>>> get_op("matmull")
Traceback (most recent call last):
...
planner.errors.ModelError: unknown op 'matmull'; did you mean matmul? (known ops: abs, add, all_gather, all_gather_invariant, all_to_all, argmax, argmin, axis_index, cast, ceil, comparison, concat, conv2d, cos, cross_entropy, cumsum, div, dynamic_slice, dynamic_update_slice, einsum, erf, erfc, exp, expm1, flip, floor, gather, gelu, iota, is_finite, layernorm, log, log1p, logical, logical_not, manual_enter, manual_exit, matmul, max, maximum, mean, min, minimum, mul, neg, pad, pbroadcast, pmax, pmean, pmin, pow, ppermute, propagation_barrier, pscatter, psum, psum_scatter, relu, rem, reshape, rmsnorm, roll, round, rsqrt, select, sharding_constraint, sigmoid, sign, sin, slice, softmax, sort, sqrt, stop_gradient, sub, sum, take_along_axis, tanh, top_k, transpose)
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from graphs.ops import annotation, collectives, conv, gather, loss, matmul, normalization, pointwise, reductions, shape_ops
from graphs.ops.opdef import OpDef
from planner.errors import ModelError, did_you_mean, quote

OPS: Mapping[str, OpDef] = MappingProxyType(dict(sorted({
    **collectives.COLLECTIVES,  # one per primitive of planner.collectives a manual region's body may apply
    "abs": pointwise.ABS,
    "add": pointwise.ADD,
    "argmax": reductions.ARGMAX,
    "argmin": reductions.ARGMIN,
    "cast": pointwise.CAST,
    "ceil": pointwise.CEIL,
    "comparison": pointwise.COMPARISON,
    "concat": shape_ops.CONCAT,
    "conv2d": conv.CONV2D,
    "cos": pointwise.COS,
    "cross_entropy": loss.CROSS_ENTROPY,
    "div": pointwise.DIV,
    "dynamic_slice": shape_ops.DYNAMIC_SLICE,
    "dynamic_update_slice": shape_ops.DYNAMIC_UPDATE_SLICE,
    "cumsum": reductions.CUMSUM,
    "einsum": matmul.EINSUM,
    "erf": pointwise.ERF,
    "erfc": pointwise.ERFC,
    "exp": pointwise.EXP,
    "expm1": pointwise.EXPM1,
    "flip": shape_ops.FLIP,
    "floor": pointwise.FLOOR,
    "gather": gather.GATHER,
    "gelu": pointwise.GELU,
    "iota": shape_ops.IOTA,
    "is_finite": pointwise.IS_FINITE,
    "layernorm": normalization.LAYERNORM,
    "log": pointwise.LOG,
    "log1p": pointwise.LOG1P,
    "logical": pointwise.LOGICAL_OP,
    "logical_not": pointwise.LOGICAL_NOT,
    "manual_enter": collectives.MANUAL_ENTER,
    "manual_exit": collectives.MANUAL_EXIT,
    "matmul": matmul.MATMUL,
    "max": reductions.MAX,
    "maximum": pointwise.MAXIMUM,
    "mean": reductions.MEAN,
    "min": reductions.MIN,
    "minimum": pointwise.MINIMUM,
    "mul": pointwise.MUL,
    "neg": pointwise.NEG,
    "pad": shape_ops.PAD,
    "pow": pointwise.POW,
    "propagation_barrier": annotation.PROPAGATION_BARRIER,
    "relu": pointwise.RELU,
    "reshape": shape_ops.RESHAPE,
    "roll": shape_ops.ROLL,
    "rem": pointwise.REM,
    "round": pointwise.ROUND,
    "rmsnorm": normalization.RMSNORM,
    "rsqrt": pointwise.RSQRT,
    "select": pointwise.SELECT,
    "sharding_constraint": annotation.SHARDING_CONSTRAINT,
    "sigmoid": pointwise.SIGMOID,
    "sign": pointwise.SIGN,
    "sin": pointwise.SIN,
    "slice": shape_ops.SLICE,
    "softmax": normalization.SOFTMAX,
    "sort": reductions.SORT,
    "sqrt": pointwise.SQRT,
    "stop_gradient": annotation.STOP_GRADIENT,
    "sub": pointwise.SUB,
    "sum": reductions.SUM,
    "take_along_axis": gather.TAKE_ALONG_AXIS,
    "tanh": pointwise.TANH,
    "top_k": reductions.TOP_K,
    "transpose": shape_ops.TRANSPOSE,
}.items())))


def op_names() -> tuple[str, ...]:
    """Every registered op name, alphabetically."""
    return tuple(OPS)


def get_op(name: str) -> OpDef:
    """The :class:`OpDef` called ``name``; an unknown name raises ModelError listing the known ops."""
    try:
        return OPS[name]
    except (KeyError, TypeError):
        raise ModelError(f"unknown op {quote(name)}{did_you_mean(name, OPS)} (known ops: {', '.join(OPS)})") from None
