"""Elementwise ops: unary (relu, gelu, tanh, exp, expm1, log, log1p, erf, erfc, sigmoid, neg, abs, sqrt, rsqrt,
sin, cos, sign, floor, ceil, round, cast), binary with broadcasting, ``comparison`` and ``is_finite`` (bool
results), ``logical`` and ``logical_not`` (of bool masks) and ``select`` (``jnp.where``).

FLOP convention: **1 FLOP per output element** for every op of this family (a cast
included; gelu's few extra multiplications are not counted separately).

Bytes accessed: the default (:func:`~graphs.ops.opdef.every_element_once`): every operand element
read once, every result element written once.

Binary ops (add, sub, mul, div, rem, maximum, minimum) broadcast the numpy way: shapes are
right-aligned and a dimension of size 1 (or a missing one) stretches to the
other's size. Both operands must have the same dtype (insert a ``cast``).
``comparison(a, b)`` with attribute ``direction`` (``eq``, ``ne``, ``lt``, ``le``, ``gt``, ``ge``: StableHLO's
comparison directions) broadcasts the same way and gives a bool array; ``select(pred, on_true, on_false)``
is ``jnp.where``: a bool ``pred`` and two operands of one dtype, all three broadcast together.
``logical(a, b)`` with attribute ``operation`` (``and``, ``or``, ``xor``) and ``logical_not(a)`` combine bool
masks (``&``, ``|``, ``^``, ``~`` of masks), broadcasting as the binary ops; they take no gradient.

VJPs: a broadcast operand's gradient is the cotangent summed over the dimensions
it was stretched along (:func:`unbroadcast`). Sub-gradients at kinks: ``relu`` has
gradient 0 at ``x == 0`` (and below); ``maximum`` (``minimum``) gives the cotangent to
the larger (smaller) operand and splits it equally on ties; ``abs`` gives ``+dy`` where ``x >= 0`` (0
included) and ``-dy`` below, as JAX does; ``sign``, ``floor``, ``ceil`` and ``round`` (half to even,
``jnp.round``) are piecewise constant: their gradient is zero, as JAX's. ``exp``, ``sigmoid``, ``tanh``, ``relu``,
``sqrt`` and ``rsqrt`` read only their result, ``add``, ``sub``, ``neg`` and ``cast`` only shapes. ``select`` gives
the cotangent to the operand each element was chosen from (zeros to the other); ``comparison``'s bool result and
``select``'s predicate take no gradient. A cast between float types passes the cotangent through; a cast to an
integer or bool type, or from one, has no gradient (its VJP raises ModelError).

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
from graphs.ops.opdef import REQUIRED, OpDef, check_wrt
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


def unbroadcast(g: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """``g`` summed over the dimensions along which ``shape`` was broadcast to ``g.shape``.

    Returns ``g`` itself when nothing is summed (callers copy if they need a fresh array).

    >>> unbroadcast(np.ones((2, 3, 4)), (3, 1)).tolist()
    [[8.0], [8.0], [8.0]]
    """
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + k for k, d in enumerate(shape) if d == 1 and g.shape[lead + k] != 1)
    if lead and len(axes) == lead and g.flags.c_contiguous:
        # only leading dimensions: one BLAS-free pass over rows of a 2-D view
        return g.reshape(-1, *shape).sum(axis=0) if shape else np.asarray(g.sum())
    return np.asarray(g.sum(axis=axes)).reshape(shape)


def _at_least_1d(*arrays):
    """``arrays`` (None stays None) with 0-d ones as shape ``(1,)`` views."""
    return [a if a is None or np.ndim(a) else np.asarray(a).reshape(1) for a in arrays]


def fresh(g: np.ndarray, dtype, *avoid) -> np.ndarray:
    """``g`` in ``dtype``, copied if it could alias one of ``avoid`` (a VJP returns fresh arrays)."""
    g = np.asarray(g)
    if g.dtype != dtype:
        return g.astype(dtype)
    if any(a is not None and np.may_share_memory(g, a) for a in avoid):
        return g.copy()
    return g


# -- unary -----------------------------------------------------------------------

#: What the planner knows of every unary op of this family: an elementwise op that passes shardings
#: through, and whose best layout is its operand's (the ILP folds its strategy into its producer's).
_UNARY_TRAITS = dict(rule="pointwise.elementwise", elementwise=True, passes_shardings=True, follows_operand=True)
#: Binary ops broadcast: their result need not follow either operand.
_BINARY_TRAITS = dict(rule="pointwise.elementwise", elementwise=True, passes_shardings=True,
                      reduces_cotangents_by_dimension=True)

def _unary(name: str, fn: Callable[[np.ndarray], np.ndarray], floats_only: bool, jax_form: Callable,
           vjp: Callable | None = None, reads_inputs: bool = True, reads_result: bool = False,
           shardy_rule: bool = True) -> OpDef:
    def infer(shapes, dtypes, attrs, names=None):
        if floats_only:
            need_float(name, dtypes[0], names)
        else:
            need_numeric(name, dtypes, names)
        return tuple(shapes[0]), dtypes[0]

    def reference(arrays, attrs):
        return fn(np.asarray(arrays[0]))

    return OpDef(name, "pointwise", 1, 1, (), infer, _elementwise_flops, reference, vjp=vjp,
                 vjp_reads_inputs=reads_inputs, vjp_reads_result=reads_result, **_UNARY_TRAITS, jax_form=jax_form,
                 shardy_rule=shardy_rule)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU with the tanh approximation: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""
    c = np.sqrt(2.0 / np.pi)
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    # computed in place below: this runs on every simulated device (out= keeps a 0-d input an array)
    inner = np.multiply(x, x, out=np.empty(x.shape, x.dtype))
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


def _unary_vjp(name: str, grad: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]):
    """A unary VJP from ``grad(x, result, cotangent) -> fresh gradient``."""

    def vjp(arrays, attrs, result, cotangent, wrt):
        check_wrt(name, arrays, wrt)
        cot = np.asarray(cotangent)
        x, r, c = _at_least_1d(arrays[0], result, cot)  # in-place ufuncs need arrays, not numpy scalars
        return tuple(fresh(np.asarray(grad(x, r, c)).reshape(cot.shape), cot.dtype, arrays[0], result, cot)
                     for _ in wrt)

    return vjp


def _gelu_grad(x, result, cot):
    """d/dx of :func:`gelu_tanh`: ``0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2)``, ``t = tanh(c (x + a x^3))``."""
    c, a = np.sqrt(2.0 / np.pi), 0.044715
    shape = np.shape(x)
    x, cot = np.asarray(x).reshape(-1), np.asarray(cot).reshape(-1)  # 1-D: in-place ops keep arrays
    x2 = np.multiply(x, x, dtype=np.result_type(x, cot, np.float32))
    t = x2 * a
    t += 1.0
    t *= x
    t *= c
    np.tanh(t, out=t)                 # t = tanh(u)
    x2 *= 3.0 * a
    x2 += 1.0
    x2 *= c                           # du/dx
    d = t * t
    np.subtract(1.0, d, out=d)        # 1 - t^2
    d *= x2
    d *= x
    t += 1.0
    d += t
    d *= 0.5
    d *= cot
    return d.reshape(shape)


def _sigmoid_grad(x, r, cot):
    g = np.subtract(1.0, r, dtype=np.result_type(r, cot))
    g *= r
    g *= cot
    return g


def _tanh_grad(x, r, cot):
    g = np.multiply(r, r, dtype=np.result_type(r, cot))
    np.subtract(1.0, g, out=g)
    g *= cot
    return g


# JAX forms: Python-float constants keep the operands' dtype (weak types). Each is self-contained (its
# parameters, builtins and what it imports itself): a generated module embeds its source (graphs.ops.opdef).

def _exp_jax(jnp, lax, a, attrs):
    return jnp.exp(a[0])


def _log_jax(jnp, lax, a, attrs):
    return jnp.log(a[0])


def _gelu_jax(jnp, lax, a, attrs):
    import math

    x = a[0]
    return 0.5 * x * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def _neg_jax(jnp, lax, a, attrs):
    return jnp.negative(a[0])


def _relu_jax(jnp, lax, a, attrs):
    return jnp.maximum(a[0], jnp.zeros((), a[0].dtype))


def _sigmoid_jax(jnp, lax, a, attrs):  # the reference's stable form
    x = a[0]
    e = jnp.exp(-jnp.abs(x))
    return jnp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _tanh_jax(jnp, lax, a, attrs):
    return jnp.tanh(a[0])


def _expm1_jax(jnp, lax, a, attrs):
    return jnp.expm1(a[0])


def _log1p_jax(jnp, lax, a, attrs):
    return jnp.log1p(a[0])


def _abs_jax(jnp, lax, a, attrs):
    return jnp.abs(a[0])


def _sqrt_jax(jnp, lax, a, attrs):
    return jnp.sqrt(a[0])


def _rsqrt_jax(jnp, lax, a, attrs):
    return lax.rsqrt(a[0])


def _erf_jax(jnp, lax, a, attrs):
    return lax.erf(a[0])


def _erfc_jax(jnp, lax, a, attrs):
    return lax.erfc(a[0])


def _sin_jax(jnp, lax, a, attrs):
    return jnp.sin(a[0])


def _cos_jax(jnp, lax, a, attrs):
    return jnp.cos(a[0])


def _sign_jax(jnp, lax, a, attrs):
    return jnp.sign(a[0])


def _floor_jax(jnp, lax, a, attrs):
    return jnp.floor(a[0])


def _ceil_jax(jnp, lax, a, attrs):
    return jnp.ceil(a[0])


def _round_jax(jnp, lax, a, attrs):
    return jnp.round(a[0])


def _zero_slope(name: str):
    """The VJP of a piecewise-constant op: zeros (JAX's gradient of sign, floor, ceil and round)."""
    return _unary_vjp(name, lambda x, r, c: np.zeros_like(c))


def _erf(x: np.ndarray) -> np.ndarray:
    import scipy.special  # here, not at import: scipy.special loads numpy.ma, which planning never needs

    return scipy.special.erf(x)


def _erfc(x: np.ndarray) -> np.ndarray:
    import scipy.special

    return scipy.special.erfc(x)


def _erf_slope(x: np.ndarray) -> np.ndarray:
    """d erf(x) / dx = 2 exp(-x^2) / sqrt(pi)."""
    return (2.0 / np.sqrt(np.pi)) * np.exp(-np.square(x))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.reciprocal(np.sqrt(x))


EXP = _unary("exp", np.exp, floats_only=True, jax_form=_exp_jax,
             vjp=_unary_vjp("exp", lambda x, r, c: c * r), reads_inputs=False, reads_result=True)
# d log(x) = dx / x
LOG = _unary("log", np.log, floats_only=True, jax_form=_log_jax, vjp=_unary_vjp("log", lambda x, r, c: c / x))
GELU = _unary("gelu", gelu_tanh, floats_only=True, jax_form=_gelu_jax, vjp=_unary_vjp("gelu", _gelu_grad))
NEG = _unary("neg", np.negative, floats_only=False, jax_form=_neg_jax,
             vjp=_unary_vjp("neg", lambda x, r, c: np.negative(c)), reads_inputs=False)
# relu's sub-gradient at 0 is 0: the mask is ``result > 0``, i.e. ``x > 0``
RELU = _unary("relu", lambda x: np.maximum(x, np.zeros((), x.dtype)), floats_only=False,
              jax_form=_relu_jax,
              vjp=_unary_vjp("relu", lambda x, r, c: np.multiply(c, r > 0, dtype=c.dtype)),
              reads_inputs=False, reads_result=True)
SIGMOID = _unary("sigmoid", _sigmoid, floats_only=True, jax_form=_sigmoid_jax,
                 vjp=_unary_vjp("sigmoid", _sigmoid_grad), reads_inputs=False, reads_result=True)
TANH = _unary("tanh", np.tanh, floats_only=True, jax_form=_tanh_jax,
              vjp=_unary_vjp("tanh", _tanh_grad), reads_inputs=False, reads_result=True)
# exp(x) - 1 and log(1 + x), exact near 0 (jax.nn.elu, softplus and log_sigmoid use them): d expm1 = dx (r + 1),
# d log1p = dx / (1 + x)
EXPM1 = _unary("expm1", np.expm1, floats_only=True, jax_form=_expm1_jax,
               vjp=_unary_vjp("expm1", lambda x, r, c: c * (r + 1.0)), reads_inputs=False, reads_result=True)
LOG1P = _unary("log1p", np.log1p, floats_only=True, jax_form=_log1p_jax,
               vjp=_unary_vjp("log1p", lambda x, r, c: c / (x + 1.0)))
# the error function and its complement (jax.nn.gelu's exact form reads erfc): d erf = dx 2 exp(-x^2) / sqrt(pi),
# d erfc = -d erf
ERF = _unary("erf", _erf, floats_only=True, jax_form=_erf_jax,
             vjp=_unary_vjp("erf", lambda x, r, c: c * _erf_slope(x).astype(c.dtype)), shardy_rule=False)
ERFC = _unary("erfc", _erfc, floats_only=True, jax_form=_erfc_jax,
              vjp=_unary_vjp("erfc", lambda x, r, c: c * -_erf_slope(x).astype(c.dtype)), shardy_rule=False)
# JAX's sub-gradient: +dy where x >= 0 (x = 0 included), -dy below
ABS = _unary("abs", np.abs, floats_only=False, jax_form=_abs_jax,
             vjp=_unary_vjp("abs", lambda x, r, c: np.where(x >= 0, c, np.negative(c))))
# d sin = dx cos(x), d cos = -dx sin(x) (rotary embeddings' angles computed in the graph)
SIN = _unary("sin", np.sin, floats_only=True, jax_form=_sin_jax, vjp=_unary_vjp("sin", lambda x, r, c: c * np.cos(x)))
COS = _unary("cos", np.cos, floats_only=True, jax_form=_cos_jax, vjp=_unary_vjp("cos", lambda x, r, c: -c * np.sin(x)))
# piecewise constant: quantisation's floor and round (half to even, as jnp.round and np.round), a sign
SIGN = _unary("sign", np.sign, floats_only=False, jax_form=_sign_jax, vjp=_zero_slope("sign"), reads_inputs=False)
FLOOR = _unary("floor", np.floor, floats_only=True, jax_form=_floor_jax, vjp=_zero_slope("floor"),
               reads_inputs=False)
CEIL = _unary("ceil", np.ceil, floats_only=True, jax_form=_ceil_jax, vjp=_zero_slope("ceil"), reads_inputs=False)
ROUND = _unary("round", np.round, floats_only=True, jax_form=_round_jax, vjp=_zero_slope("round"),
               reads_inputs=False)
# d sqrt(x) = dx / (2 sqrt(x)); d x^(-1/2) = -dx x^(-3/2) / 2 = -dx r^3 / 2
SQRT = _unary("sqrt", np.sqrt, floats_only=True, jax_form=_sqrt_jax,
              vjp=_unary_vjp("sqrt", lambda x, r, c: c * 0.5 / r), reads_inputs=False, reads_result=True)
RSQRT = _unary("rsqrt", _rsqrt, floats_only=True, jax_form=_rsqrt_jax,
               vjp=_unary_vjp("rsqrt", lambda x, r, c: c * -0.5 * r * r * r), reads_inputs=False, reads_result=True)


def _cast_infer(shapes, dtypes, attrs, names=None):
    return tuple(shapes[0]), check_dtype(attrs.get("dtype"))


def _cast_reference(arrays, attrs):
    x = np.asarray(arrays[0])
    target = attrs["dtype"]
    # float64 inputs stay float64 when cast to a float type, so references stay exact.
    if is_float(target) and x.dtype == np.float64:
        return x
    return x.astype(numpy_dtype(target))


def _cast_vjp(arrays, attrs, result, cotangent, wrt):
    target = attrs["dtype"]
    if wrt and not is_float(target):
        raise ModelError(f"cast to {target} has no gradient: integer and bool values are not differentiable")
    check_wrt("cast", arrays, wrt)
    cot = np.asarray(cotangent)
    return tuple(cot.copy() for _ in wrt)


def _cast_jax(jnp, lax, a, attrs):
    # graphs.dtypes.jax_dtype_name's table, written here so that the form is self-contained
    jax_names = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "i32": "int32", "i64": "int64",
                 "bool": "bool"}
    return a[0].astype(jnp.dtype(jax_names[attrs["dtype"]]))


CAST = OpDef("cast", "pointwise", 1, 1, (("dtype", REQUIRED),), _cast_infer, _elementwise_flops, _cast_reference,
             vjp=_cast_vjp, vjp_reads_inputs=False, **_UNARY_TRAITS, jax_form=_cast_jax, keeps_pending=True)


# -- binary ----------------------------------------------------------------------

def _binary(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], jax_form: Callable,
            floats_only: bool = False, vjp: Callable | None = None, reads_inputs: bool = True,
            multilinear: bool = False, keeps_pending: bool = False) -> OpDef:
    """A broadcasting binary op; ``jax_form`` is its ``jax.numpy`` form."""

    def infer(shapes, dtypes, attrs, names=None):
        dtype = same_dtype(name, dtypes, names)
        if floats_only:
            need_float(name, dtype, names)
        else:
            need_numeric(name, dtypes, names)
        return broadcast_shapes(shapes, name, names), dtype

    def reference(arrays, attrs):
        return fn(np.asarray(arrays[0]), np.asarray(arrays[1]))

    return OpDef(name, "pointwise", 2, 2, (), infer, _elementwise_flops, reference, vjp=vjp,
                 vjp_reads_inputs=reads_inputs, multilinear=multilinear, **_BINARY_TRAITS, jax_form=jax_form,
                 keeps_pending=keeps_pending)


def _binary_vjp(name: str, grad: Callable[[int, np.ndarray, np.ndarray, np.ndarray], np.ndarray]):
    """A binary VJP from ``grad(i, x0, x1, cotangent)``, the broadcast gradient of operand ``i``."""

    def vjp(arrays, attrs, result, cotangent, wrt):
        check_wrt(name, arrays, wrt)
        cot = np.asarray(cotangent)
        x0, x1, c = _at_least_1d(arrays[0], arrays[1], cot) if cot.ndim == 0 else (arrays[0], arrays[1], cot)
        out = []
        for i in wrt:
            g = unbroadcast(np.asarray(grad(i, x0, x1, c)).reshape(np.shape(c)), np.shape(arrays[i]))
            out.append(fresh(g, cot.dtype, arrays[0], arrays[1], cot, *out))
        return tuple(out)

    return vjp


def _div_grad(i, x0, x1, cot):
    if i == 0:
        return cot / x1
    g = cot * x0
    g /= x1
    g /= x1
    np.negative(g, out=g)
    return g


def _pow_grad(i, x0, x1, cot):
    # JAX's pow rules for a float exponent: d/dx = y * x ** (y - 1); d/dy = log(x) * x ** y, with log(1) where x
    # is 0 (so a zero base gives a zero exponent gradient, as JAX's _replace_zero)
    if i == 0:
        return cot * (x1 * np.power(x0, x1 - 1))
    return cot * (np.log(np.where(x0 == 0, np.ones((), np.asarray(x0).dtype), x0)) * np.power(x0, x1))


def _maximum_grad(i, x0, x1, cot):
    # the larger operand gets the cotangent; ties split it equally
    a, b = (x0, x1) if i == 0 else (x1, x0)
    w = np.greater(a, b).astype(cot.dtype)
    w += 0.5 * np.equal(a, b)
    w *= cot
    return w


def _minimum_grad(i, x0, x1, cot):
    # the smaller operand gets the cotangent; ties split it equally
    return _maximum_grad(1 - i, x0, x1, cot)


def _rem_grad(i, x0, x1, cot):
    # JAX's rem rules: d/dx = 1; d/dy = -(x / y rounded toward zero)
    if i == 0:
        return np.array(cot, copy=True)
    return -cot * np.trunc(np.divide(x0, x1))


def _rem_jax(jnp, lax, a, attrs):
    return jnp.fmod(a[0], a[1])  # lax.rem, broadcast


def _add_jax(jnp, lax, a, attrs):
    return jnp.add(a[0], a[1])


def _div_jax(jnp, lax, a, attrs):
    return jnp.divide(a[0], a[1])


def _maximum_jax(jnp, lax, a, attrs):
    return jnp.maximum(a[0], a[1])


def _minimum_jax(jnp, lax, a, attrs):
    return jnp.minimum(a[0], a[1])


def _pow_jax(jnp, lax, a, attrs):
    return jnp.power(a[0], a[1])


def _mul_jax(jnp, lax, a, attrs):
    return jnp.multiply(a[0], a[1])


def _sub_jax(jnp, lax, a, attrs):
    return jnp.subtract(a[0], a[1])


ADD = _binary("add", np.add, _add_jax, vjp=_binary_vjp("add", lambda i, a, b, c: c), reads_inputs=False,
              keeps_pending=True)
DIV = _binary("div", np.divide, _div_jax, floats_only=True, vjp=_binary_vjp("div", _div_grad))
MAXIMUM = _binary("maximum", np.maximum, _maximum_jax, vjp=_binary_vjp("maximum", _maximum_grad))
MINIMUM = _binary("minimum", np.minimum, _minimum_jax, vjp=_binary_vjp("minimum", _minimum_grad))
POW = _binary("pow", np.power, _pow_jax, floats_only=True, vjp=_binary_vjp("pow", _pow_grad))
MUL = _binary("mul", np.multiply, _mul_jax, vjp=_binary_vjp("mul", lambda i, a, b, c: c * (b if i == 0 else a)),
              multilinear=True)
# the remainder of a division truncated toward zero, with the dividend's sign (StableHLO's rem, C's fmod; jnp.remainder
# and % adjust it to the divisor's sign with a select)
REM = _binary("rem", np.fmod, _rem_jax, vjp=_binary_vjp("rem", _rem_grad))
SUB = _binary("sub", np.subtract, _sub_jax,
              vjp=_binary_vjp("sub", lambda i, a, b, c: c if i == 0 else np.negative(c)), reads_inputs=False)


# -- comparison and select ---------------------------------------------------------------

#: StableHLO's comparison directions, each with its numpy function
COMPARISONS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
               "ge": np.greater_equal}


def _compare_infer(shapes, dtypes, attrs, names=None):
    direction = attrs.get("direction")
    if direction not in COMPARISONS:
        raise ModelError(f"comparison attribute direction must be one of {', '.join(COMPARISONS)}, got {direction!r}")
    same_dtype("comparison", dtypes, names)
    return broadcast_shapes(shapes, "comparison", names), "bool"


def _compare_reference(arrays, attrs):
    return COMPARISONS[attrs["direction"]](np.asarray(arrays[0]), np.asarray(arrays[1]))


def _no_gradient_vjp(name: str):
    def vjp(arrays, attrs, result, cotangent, wrt):
        if wrt:
            raise ModelError(f"{name} has no gradient: its result is bool")
        return ()

    return vjp


def _compare_jax(jnp, lax, a, attrs):
    import operator

    ops = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
           "ge": operator.ge}
    return ops[attrs["direction"]](a[0], a[1])


COMPARISON = OpDef("comparison", "pointwise", 2, 2, (("direction", REQUIRED),), _compare_infer, _elementwise_flops,
                _compare_reference, vjp=_no_gradient_vjp("comparison"), vjp_reads_inputs=False, **_BINARY_TRAITS,
                jax_form=_compare_jax)


def _select_infer(shapes, dtypes, attrs, names=None):
    if dtypes[0] != "bool":
        raise ModelError(f"select needs a bool predicate, but {operand(names, shapes, 0)} is {dtypes[0]}")
    dtype = same_dtype("select", dtypes[1:], names[1:] if names else None)
    return broadcast_shapes(shapes, "select", names), dtype


def _select_reference(arrays, attrs):
    return np.where(np.asarray(arrays[0]), np.asarray(arrays[1]), np.asarray(arrays[2]))


def _select_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("select", arrays, wrt, ("predicate", "on_true", "on_false"))
    cot = np.asarray(cotangent)
    pred = np.broadcast_to(np.asarray(arrays[0]), cot.shape)
    zero = np.zeros((), cot.dtype)
    out = []
    for i in wrt:
        g = np.where(pred, cot, zero) if i == 1 else np.where(pred, zero, cot)
        out.append(fresh(unbroadcast(g, np.shape(arrays[i])), cot.dtype, cot))
    return tuple(out)


def _select_jax(jnp, lax, a, attrs):
    return jnp.where(a[0], a[1], a[2])


SELECT = OpDef("select", "pointwise", 3, 3, (), _select_infer, _elementwise_flops, _select_reference,
               vjp=_select_vjp, **_BINARY_TRAITS, jax_form=_select_jax, sharded_alike=(0, 1, 2))


#: The operations of ``logical``: ``jnp.logical_and``, ``logical_or``, ``logical_xor`` (``&``, ``|``, ``^`` of masks).
LOGICAL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def _logical_infer(shapes, dtypes, attrs, names=None):
    operation = attrs.get("operation")
    if operation not in LOGICAL:
        raise ModelError(f"logical attribute operation must be one of {', '.join(LOGICAL)}, got {operation!r}")
    for i, dtype in enumerate(dtypes):
        if dtype != "bool":
            raise ModelError(f"logical {operation} needs bool operands (masks), but {operand(names, shapes, i)} is "
                             f"{dtype}")
    return broadcast_shapes(shapes, "logical", names), "bool"


def _logical_jax(jnp, lax, a, attrs):
    return {"and": jnp.logical_and, "or": jnp.logical_or, "xor": jnp.logical_xor}[attrs["operation"]](a[0], a[1])


# masks combined elementwise (a causal mask and a padding mask): a bool result, no gradient
LOGICAL_OP = OpDef("logical", "pointwise", 2, 2, (("operation", REQUIRED),), _logical_infer, _elementwise_flops,
                   lambda arrays, attrs: LOGICAL[attrs["operation"]](np.asarray(arrays[0]), np.asarray(arrays[1])),
                   vjp=_no_gradient_vjp("logical"), vjp_reads_inputs=False, **_BINARY_TRAITS, jax_form=_logical_jax)


def _logical_not_infer(shapes, dtypes, attrs, names=None):
    if dtypes[0] != "bool":
        raise ModelError(f"logical_not needs a bool operand (a mask), but {operand(names, shapes, 0)} is {dtypes[0]}")
    return tuple(shapes[0]), "bool"


def _logical_not_jax(jnp, lax, a, attrs):
    return jnp.logical_not(a[0])


LOGICAL_NOT = OpDef("logical_not", "pointwise", 1, 1, (), _logical_not_infer, _elementwise_flops,
                    lambda arrays, attrs: np.logical_not(np.asarray(arrays[0])), vjp=_no_gradient_vjp("logical_not"),
                    vjp_reads_inputs=False, **_UNARY_TRAITS, jax_form=_logical_not_jax)


def _is_finite_infer(shapes, dtypes, attrs, names=None):
    need_float("is_finite", dtypes[0], names)
    return tuple(shapes[0]), "bool"


def _is_finite_jax(jnp, lax, a, attrs):
    return jnp.isfinite(a[0])


# neither infinite nor NaN (jax.nn.logsumexp guards its shift with it): a bool result, no gradient
IS_FINITE = OpDef("is_finite", "pointwise", 1, 1, (), _is_finite_infer, _elementwise_flops,
                  lambda arrays, attrs: np.isfinite(np.asarray(arrays[0])), vjp=_no_gradient_vjp("is_finite"),
                  vjp_reads_inputs=False, **_UNARY_TRAITS, jax_form=_is_finite_jax)
