"""Every catalogue op (:mod:`graphs.ops.registry`) in ``jax.numpy``, with its numpy ``reference``'s semantics.

:func:`jax_op` gives, per op name, a function ``(arrays, attrs) -> jax array`` taking the operands and the
op's canonical attributes exactly as the op's ``reference`` does (``graphs.specs.OpSpec.attrs_dict``). Each
computes in its operands' dtypes, so a model's ``f32`` tensors are ``float32`` on XLA and the bytes XLA moves
are those of the declared types (:func:`jnp_dtype` maps the declared names: ``bf16`` is JAX's ``bfloat16``,
where the numpy reference holds it as float32). Gradients come from ``jax.grad`` through these functions;
every catalogue op is differentiable where its ``vjp`` is (``relu``'s and ``maximum``'s sub-gradients at
kinks may differ from the reference's, which inputs drawn at random never hit).

A test runs every registered op against its reference on random inputs, so a new catalogue op without a
version here fails it. JAX is imported on first use (:func:`jax_op`), never by importing this module.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from planner.errors import InternalError

JaxOp = Callable[[list, Mapping[str, Any]], Any]

_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "i32": "int32", "i64": "int64", "bool": "bool"}


def jnp_dtype(name: str):
    """The JAX dtype of a declared dtype name (``f32`` -> ``float32``, ``bf16`` -> ``bfloat16``)."""
    import jax.numpy as jnp

    return jnp.dtype(_DTYPES[name])


def jax_op(name: str) -> JaxOp:
    """The ``jax.numpy`` implementation of catalogue op ``name``."""
    ops = _ops()
    if name not in ops:
        raise InternalError(f"op {name!r} of the catalogue has no jax.numpy implementation in "
                            "planner/engines/jax_ops.py: add one beside the others")
    return ops[name]


def implemented_ops() -> tuple[str, ...]:
    """The op names :func:`jax_op` knows, alphabetically."""
    return tuple(sorted(_ops()))


_TABLE: dict[str, JaxOp] = {}  # the registry, filled on first use (importing jax costs a second)


def _ops() -> Mapping[str, JaxOp]:
    if not _TABLE:
        _TABLE.update(_build())
    return _TABLE


def _build() -> dict[str, JaxOp]:
    import jax.numpy as jnp
    from jax import lax

    # -- pointwise: Python-float constants keep the operands' dtype (weak types) ----------------
    def gelu(a, attrs):
        x = a[0]
        return 0.5 * x * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))

    def sigmoid(a, attrs):  # the reference's stable form
        x = a[0]
        e = jnp.exp(-jnp.abs(x))
        return jnp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))

    def cast(a, attrs):
        return a[0].astype(jnp_dtype(attrs["dtype"]))

    # -- contractions ------------------------------------------------------------------------
    def matmul(a, attrs):
        x, y = a
        if attrs.get("transpose_a", False):
            x = jnp.swapaxes(x, -1, -2)
        if attrs.get("transpose_b", False):
            y = jnp.swapaxes(y, -1, -2)
        return jnp.matmul(x, y, precision=lax.Precision.HIGHEST)

    def einsum(a, attrs):
        return jnp.einsum(attrs["equation"].replace(" ", ""), *a, precision=lax.Precision.HIGHEST)

    # -- reductions (integer sums keep their declared type, as the graph declares it) ---------
    def reduction(fn):
        def run(a, attrs):
            x = a[0]
            kw = {"dtype": x.dtype} if fn is jnp.sum else {}
            return fn(x, axis=tuple(attrs["axes"]), keepdims=attrs.get("keepdims", False), **kw)

        return run

    # -- normalization -------------------------------------------------------------------------
    def softmax(a, attrs):
        x, axis = a[0], attrs.get("axis", -1)
        e = jnp.exp(x - jnp.max(x, axis=axis, keepdims=True))
        return e / jnp.sum(e, axis=axis, keepdims=True)

    def layernorm(a, attrs):
        x = a[0]
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
        y = (x - mean) / jnp.sqrt(var + float(attrs.get("eps", 1e-5)))
        return _affine(y, a[1:])

    def rmsnorm(a, attrs):
        x = a[0]
        y = x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + float(attrs.get("eps", 1e-5)))
        return _affine(y, a[1:])

    # -- shape ops -----------------------------------------------------------------------------
    def slice_(a, attrs):
        return a[0][tuple(slice(lo, hi) for lo, hi in zip(attrs["starts"], attrs["stops"]))]

    # -- gather, loss, conv --------------------------------------------------------------------
    def cross_entropy(a, attrs):
        logits, labels = a
        m = jnp.max(logits, axis=-1, keepdims=True)
        lse = jnp.log(jnp.sum(jnp.exp(logits - m), axis=-1)) + m[..., 0]
        picked = jnp.take_along_axis(logits, labels[..., None].astype(jnp.int32), axis=-1)[..., 0]
        return jnp.mean(lse - picked)

    def conv2d(a, attrs):
        (sh, sw), (ph, pw) = attrs["stride"], attrs["padding"]
        return lax.conv_general_dilated(a[0], a[1], window_strides=(sh, sw), padding=((ph, ph), (pw, pw)),
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"),
                                        precision=lax.Precision.HIGHEST)

    def identity(a, attrs):
        return a[0]

    return {
        "add": lambda a, attrs: jnp.add(a[0], a[1]),
        "cast": cast,
        "concat": lambda a, attrs: jnp.concatenate(a, axis=attrs.get("axis", 0)),
        "conv2d": conv2d,
        "cross_entropy": cross_entropy,
        "div": lambda a, attrs: jnp.divide(a[0], a[1]),
        "einsum": einsum,
        "exp": lambda a, attrs: jnp.exp(a[0]),
        "gather": lambda a, attrs: jnp.take(a[0], a[1], axis=0),
        "gelu": gelu,
        "layernorm": layernorm,
        "matmul": matmul,
        "max": reduction(jnp.max),
        "maximum": lambda a, attrs: jnp.maximum(a[0], a[1]),
        "mean": reduction(jnp.mean),
        "mul": lambda a, attrs: jnp.multiply(a[0], a[1]),
        "neg": lambda a, attrs: jnp.negative(a[0]),
        "propagation_barrier": identity,
        "relu": lambda a, attrs: jnp.maximum(a[0], jnp.zeros((), a[0].dtype)),
        "reshape": lambda a, attrs: jnp.reshape(a[0], tuple(attrs["shape"])),
        "rmsnorm": rmsnorm,
        "sharding_constraint": identity,
        "sigmoid": sigmoid,
        "slice": slice_,
        "softmax": softmax,
        "sub": lambda a, attrs: jnp.subtract(a[0], a[1]),
        "sum": reduction(jnp.sum),
        "tanh": lambda a, attrs: jnp.tanh(a[0]),
        "transpose": lambda a, attrs: jnp.transpose(a[0], tuple(attrs["perm"])),
    }


def _affine(y, weight_and_bias):
    """``y * weight + bias`` for the operands given (layernorm's and rmsnorm's optional scale and shift)."""
    if len(weight_and_bias) > 0:
        y = y * weight_and_bias[0]
    if len(weight_and_bias) > 1:
        y = y + weight_and_bias[1]
    return y
