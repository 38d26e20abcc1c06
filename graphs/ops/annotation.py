"""Annotation ops: identities that carry intent, about shardings (Shardy's ShardingConstraintOp and
PropagationBarrierOp) or about gradients (JAX's ``stop_gradient``).

Each takes one operand of any shape and dtype and returns it unchanged: no
computation (**0 FLOPs**, and 0 bytes accessed: no kernel), the reference returns its operand (not a copy, like
``cast`` on float64 and ``reshape``). Their sharding rule is
the elementwise pass-through of :mod:`planner.rules.pointwise`. They are a module of
their own because what they mean is not about values:

- ``sharding_constraint`` pins the sharding of *one use* of a tensor: its result is
  a new tensor whose ``out_sharding`` (required, :attr:`OpDef.requires_out_sharding`;
  a missing one is a ModelError saying what to add) every search keeps as a fixed
  result sharding, so only the readers of that result see the constraint, the
  producer of the operand and its other readers stay free. Recognise one with
  :func:`is_sharding_constraint` (or ``op.op == "sharding_constraint"``).
- ``propagation_barrier`` has the attribute ``allowed_direction``
  (:data:`BARRIER_DIRECTIONS`, default ``none``): the directions in which
  rule-based propagation (``--search propagate``) may pass shardings through it.
  bfs, ilp and explicit mode treat it as an identity op: they cost every choice.
  Read the direction with :func:`barrier_direction` and ask about one direction
  with :func:`barrier_allows`; both take an :class:`~graphs.specs.OpSpec` of a
  built graph (its attributes hold the default when the model gave none).

  The VJP of both passes the cotangent through (fresh, or in the cotangent's own buffer through
  ``vjp_in_place``).
- ``stop_gradient`` (``jax.lax.stop_gradient``) makes its result a constant to the backward
  (:attr:`~graphs.ops.opdef.OpDef.blocks_gradient`): no cotangent flows to its operand, so
  nothing is differentiated through it (its VJP, as JAX defines it, is zeros: a training step never
  runs it, :func:`graphs.gradients.requires_grad` leaves its result out). JAX lowers it to nothing (no HLO op),
  so Shardy sees its operand used directly: it passes shardings through, and a sum pending over mesh axes
  stays pending through it (``keeps_pending``: JAX's explicit mode types it so).

>>> SHARDING_CONSTRAINT.infer([(4, 8)], ["bf16"], {}), SHARDING_CONSTRAINT.flops([(4, 8)], (4, 8), {})
(((4, 8), 'bf16'), 0)
>>> PROPAGATION_BARRIER.with_defaults({})
{'allowed_direction': 'none'}
>>> PROPAGATION_BARRIER.infer([(4,)], ["f32"], {"allowed_direction": "forwards"})
Traceback (most recent call last):
...
planner.errors.ModelError: propagation_barrier's allowed_direction must be one of none, forward, backward, both; got 'forwards'; did you mean forward?
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphs.ops.opdef import OpDef, check_wrt, no_bytes_accessed
from planner.errors import ModelError, did_you_mean, quote

#: The values of ``propagation_barrier``'s ``allowed_direction``, the default first.
BARRIER_DIRECTIONS: tuple[str, ...] = ("none", "forward", "backward", "both")


def _identity_infer(shapes, dtypes, attrs, names=None):
    return tuple(shapes[0]), dtypes[0]


def _zero_flops(in_shapes, out_shape, attrs) -> int:
    return 0


def _identity_reference(arrays, attrs):
    return np.asarray(arrays[0])


def _identity_vjp(name: str):
    def vjp(arrays, attrs, result, cotangent, wrt):
        check_wrt(name, arrays, wrt)
        cot = np.asarray(cotangent)
        return tuple(cot.copy() for _ in wrt)

    def vjp_in_place(arrays, attrs, result, cotangent, wrt):
        check_wrt(name, arrays, wrt)
        return tuple(np.asarray(cotangent) for _ in wrt)

    return vjp, vjp_in_place


def _barrier_infer(shapes, dtypes, attrs, names=None):
    direction = attrs.get("allowed_direction", BARRIER_DIRECTIONS[0])
    if direction not in BARRIER_DIRECTIONS:
        hint = did_you_mean(direction, BARRIER_DIRECTIONS) if isinstance(direction, str) else ""
        raise ModelError(f"propagation_barrier's allowed_direction must be one of {', '.join(BARRIER_DIRECTIONS)}; "
                         f"got {quote(direction)}{hint}")
    return _identity_infer(shapes, dtypes, attrs, names)


_constraint_vjp, _constraint_vjp_in_place = _identity_vjp("sharding_constraint")
_barrier_vjp, _barrier_vjp_in_place = _identity_vjp("propagation_barrier")

def _identity_jax(jnp, lax, a, attrs):
    return a[0]


#: What the planner knows of both: identities that pass shardings through with the pointwise rule.
#: Neither is a follower (``follows_operand``): a constraint's result has the layout the user gave it,
#: and the ILP's shrinking hints leave a barrier's free.
_TRAITS = dict(rule="pointwise.elementwise", elementwise=True, passes_shardings=True, jax_form=_identity_jax)

SHARDING_CONSTRAINT = OpDef("sharding_constraint", "annotation", 1, 1, (), _identity_infer, _zero_flops,
                            _identity_reference, vjp=_constraint_vjp, vjp_reads_inputs=False,
                            vjp_in_place=_constraint_vjp_in_place, requires_out_sharding=True,
                            bytes_accessed=no_bytes_accessed, **_TRAITS)
PROPAGATION_BARRIER = OpDef("propagation_barrier", "annotation", 1, 1, (("allowed_direction", BARRIER_DIRECTIONS[0]),),
                            _barrier_infer, _zero_flops, _identity_reference, vjp=_barrier_vjp,
                            vjp_reads_inputs=False, vjp_in_place=_barrier_vjp_in_place,
                            bytes_accessed=no_bytes_accessed, **_TRAITS)


def _stop_gradient_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("stop_gradient", arrays, wrt)
    cot = np.asarray(cotangent)
    return tuple(np.zeros(cot.shape, cot.dtype) for _ in wrt)


def _stop_gradient_jax(jnp, lax, a, attrs):
    return lax.stop_gradient(a[0])


STOP_GRADIENT = OpDef("stop_gradient", "annotation", 1, 1, (), _identity_infer, _zero_flops, _identity_reference,
                      vjp=_stop_gradient_vjp, vjp_reads_inputs=False, blocks_gradient=True,
                      bytes_accessed=no_bytes_accessed, rule="pointwise.elementwise", elementwise=True,
                      passes_shardings=True, jax_form=_stop_gradient_jax, keeps_pending=True)


def is_sharding_constraint(op: Any) -> bool:
    """Whether ``op`` (an :class:`~graphs.specs.OpSpec` or an op name) is a ``sharding_constraint``."""
    return (op if isinstance(op, str) else op.op) == "sharding_constraint"


def barrier_direction(op: Any) -> str:
    """``propagation_barrier`` ``op``'s ``allowed_direction``: ``none``, ``forward``, ``backward`` or ``both``.

    ``op`` is an :class:`~graphs.specs.OpSpec`; any other op kind is a ModelError.

    >>> from graphs.specs import OpSpec
    >>> barrier_direction(OpSpec("b", "propagation_barrier", ["h"], "hb", {"allowed_direction": "forward"}))
    'forward'
    >>> barrier_direction(OpSpec("b", "propagation_barrier", ["h"], "hb"))
    'none'
    """
    if op.op != "propagation_barrier":
        raise ModelError(f"op {quote(op.name)} is a {op.op}, not a propagation_barrier; it has no allowed_direction")
    return op.attr("allowed_direction", BARRIER_DIRECTIONS[0])


def barrier_allows(op: Any, direction: str) -> bool:
    """Whether propagation may pass shardings through barrier ``op`` ``direction`` (``forward``: from
    operand to result; ``backward``: from result to operand).

    >>> from graphs.specs import OpSpec
    >>> b = OpSpec("b", "propagation_barrier", ["h"], "hb", {"allowed_direction": "backward"})
    >>> barrier_allows(b, "forward"), barrier_allows(b, "backward")
    (False, True)
    """
    if direction not in ("forward", "backward"):
        raise ModelError(f"a propagation direction is forward or backward, got {quote(direction)}")
    return barrier_direction(op) in (direction, "both")
