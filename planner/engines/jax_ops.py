"""Every catalogue op (:mod:`graphs.ops.registry`) in ``jax.numpy``, with its numpy ``reference``'s semantics.

:func:`jax_op` gives, per op name, a function ``(arrays, attrs) -> jax array`` taking the operands and the
op's canonical attributes exactly as the op's ``reference`` does (``graphs.specs.OpSpec.attrs_dict``). The
form is the op's own (:attr:`graphs.ops.opdef.OpDef.jax_form`), given ``jax.numpy`` and ``jax.lax`` here so
that the catalogue never imports JAX. Each computes in its operands' dtypes, so a model's ``f32`` tensors are
``float32`` on XLA and the bytes XLA moves are those of the declared types (:func:`jnp_dtype` maps the
declared names: ``bf16`` is JAX's ``bfloat16``, where the numpy reference holds it as float32). Gradients
come from ``jax.grad`` through these functions; every catalogue op is differentiable where its ``vjp`` is
(``relu``'s and ``maximum``'s sub-gradients at kinks may differ from the reference's, which inputs drawn at
random never hit).

A test runs every registered op against its reference on random inputs, so a new catalogue op without a
JAX form (or a lowering in :mod:`planner.engines.jax_regions`) fails it. JAX is imported on first use
(:func:`jax_op`), never by importing this module.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from graphs.dtypes import jax_dtype_name
from graphs.ops.registry import OPS
from planner.errors import InternalError

JaxOp = Callable[[list, Mapping[str, Any]], Any]


def jnp_dtype(name: str):
    """The JAX dtype of a declared dtype name (``f32`` -> ``float32``, ``bf16`` -> ``bfloat16``)."""
    import jax.numpy as jnp

    return jnp.dtype(jax_dtype_name(name))


def jax_op(name: str) -> JaxOp:
    """The ``jax.numpy`` implementation of catalogue op ``name``."""
    opdef = OPS.get(name)
    if opdef is None or opdef.jax_form is None:
        raise InternalError(f"op {name!r} of the catalogue has no jax.numpy implementation: give its OpDef "
                            "a jax_form (graphs/ops)")
    import jax.numpy as jnp
    from jax import lax

    form = opdef.jax_form
    return lambda arrays, attrs: form(jnp, lax, arrays, attrs)


def implemented_ops() -> tuple[str, ...]:
    """The op names :func:`jax_op` knows, alphabetically."""
    return tuple(sorted(name for name, opdef in OPS.items() if opdef.jax_form is not None))
