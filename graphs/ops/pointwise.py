"""Elementwise ops: unary (relu, gelu, tanh, exp, sigmoid, neg, cast) and binary with broadcasting.

FLOP convention: **1 FLOP per output element** for every op of this family (a cast
included; gelu's few extra multiplications are not counted separately).

Binary ops (add, sub, mul, div, maximum) broadcast the numpy way: shapes are
right-aligned and a dimension of size 1 (or a missing one) stretches to the
other's size. Both operands must have the same dtype (insert a ``cast``).

>>> broadcast_shapes([(64, 64), (64,)])
(64, 64)
>>> ADD.infer([(2, 1, 8), (3, 1)], ["f32", "f32"], {})
((2, 3, 8), 'f32')
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from graphs.dtypes import check_dtype, is_float, numpy_dtype
from graphs.ops.common import Shape, need_float, need_numeric, numel, operand, same_dtype
from graphs.ops.opdef import REQUIRED, OpDef
from planner.errors import ModelError


def broadcast_shapes(shapes: Sequence[Shape], op: str = "broadcast", names: Sequence[str] | None = None) -> Shape:
    """The numpy broadcast of ``shapes``; ModelError naming the operands if impossible."""
    rank = max(len(s) for s in shapes)
    out = []
    for k in range(-rank, 0):
        size = 1
        for i, s in enumerate(shapes):
            d = s[k] if -k <= len(s) else 1
            if d == 1:
                continue
            if size not in (1, d):
                first = next(j for j, t in enumerate(shapes) if -k <= len(t) and t[k] == size)
                raise ModelError(
                    f"{op} cannot broadcast {operand(names, shapes, first)} with {operand(names, shapes, i)}: "
                    f"dimension {k} is {size} in one and {d} in the other (sizes must match or be 1)"
                )
            size = d
        out.append(size)
    return tuple(out)


def _elementwise_flops(in_shapes, out_shape, attrs) -> int:
    return numel(out_shape)


# -- unary -----------------------------------------------------------------------

def _unary(name: str, fn: Callable[[np.ndarray], np.ndarray], floats_only: bool) -> OpDef:
    def infer(shapes, dtypes, attrs, names=None):
        if floats_only:
            need_float(name, dtypes[0], names)
        else:
            need_numeric(name, dtypes, names)
        return tuple(shapes[0]), dtypes[0]

    def reference(arrays, attrs):
        return fn(np.asarray(arrays[0]))

    return OpDef(name, "pointwise", 1, 1, (), infer, _elementwise_flops, reference)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU with the tanh approximation: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    c = np.sqrt(2.0 / np.pi)
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    inner = x * x  # computed in place below: this runs on every simulated device
    inner *= 0.044715
    inner += 1.0
    inner *= x
    inner *= c
    np.tanh(inner, out=inner)
    inner += 1.0
    inner *= x
    inner *= 0.5
    return inner


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


EXP = _unary("exp", np.exp, floats_only=True)
GELU = _unary("gelu", gelu_tanh, floats_only=True)
NEG = _unary("neg", np.negative, floats_only=False)
RELU = _unary("relu", lambda x: np.maximum(x, np.zeros((), x.dtype)), floats_only=False)
SIGMOID = _unary("sigmoid", _sigmoid, floats_only=True)
TANH = _unary("tanh", np.tanh, floats_only=True)


def _cast_infer(shapes, dtypes, attrs, names=None):
    return tuple(shapes[0]), check_dtype(attrs.get("dtype"))


def _cast_reference(arrays, attrs):
    x = np.asarray(arrays[0])
    target = attrs["dtype"]
    # float64 inputs stay float64 when cast to a float type, so references stay exact.
    if is_float(target) and x.dtype == np.float64:
        return x
    return x.astype(numpy_dtype(target))


CAST = OpDef("cast", "pointwise", 1, 1, (("dtype", REQUIRED),), _cast_infer, _elementwise_flops, _cast_reference)


# -- binary ----------------------------------------------------------------------

def _binary(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], floats_only: bool = False) -> OpDef:
    def infer(shapes, dtypes, attrs, names=None):
        dtype = same_dtype(name, dtypes, names)
        if floats_only:
            need_float(name, dtype, names)
        else:
            need_numeric(name, dtypes, names)
        return broadcast_shapes(shapes, name, names), dtype

    def reference(arrays, attrs):
        return fn(np.asarray(arrays[0]), np.asarray(arrays[1]))

    return OpDef(name, "pointwise", 2, 2, (), infer, _elementwise_flops, reference)


ADD = _binary("add", np.add)
DIV = _binary("div", np.divide, floats_only=True)
MAXIMUM = _binary("maximum", np.maximum)
MUL = _binary("mul", np.multiply)
SUB = _binary("sub", np.subtract)
