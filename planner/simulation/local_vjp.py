"""Local VJPs: one device's part of an op's backward, the transpose of :mod:`.local_ops`.

:func:`local_vjp` takes the same op, rule and :class:`~planner.simulation.local_ops.LocalContext`
as :func:`~planner.simulation.local_ops.local_compute`, the device's operand blocks
(as the forward read them), its result block, and the cotangent of its result
block, and returns the cotangent block of each operand in ``wrt``.

Because a local instance is the catalogue op on local blocks (plus a few index
shifts), its VJP is the catalogue VJP (:attr:`graphs.ops.opdef.OpDef.vjp`) on the
same blocks, with the same special cases as the forward:

- padding: operand and cotangent padding is zeroed first and the operand
  cotangents' padding is zeroed after, so nothing leaks from padding into valid
  elements (a division by padded zeros is confined to padding);
- a result that was a partial sum (a sharded ``REDUCTION`` factor) gets the whole
  cotangent on every device — the transpose of the psum is the pbroadcast — and
  the local VJP then gives each device its own operands' cotangents exactly;
- an operand the op did not vary over on some axis (it was replicated while the op
  was sharded there) gets a *partial* cotangent on each device: the pending sum of
  :func:`planner.training.gradients.operand_gradient`, summed by the backward
  redistribution (the psum that transposes that pbroadcast);
- ``mean`` and ``cross_entropy`` divide by the *global* count, ``gather`` scatters
  into the table rows this device holds, ``slice`` pads into the whole dims it
  cut, ``reshape`` reshapes back.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from graphs.ops.opdef import shape_stand_in
from graphs.ops.registry import get_op
from planner.errors import RuleError
from planner.rules.factors import OpShardingRule
from planner.simulation.local_ops import LocalContext, name_attrs, zero_padding


def local_vjp(op, rule: OpShardingRule, local_arrays: Sequence[np.ndarray | None], result: np.ndarray | None,
              cotangent: np.ndarray, ctx: LocalContext, wrt: Sequence[int], donate: bool = False) -> list[np.ndarray]:
    """The cotangent block of each operand in ``wrt`` on one device (see the module docstring).

    It is the op's own local VJP where its definition gives one
    (:attr:`graphs.ops.opdef.OpDef.local_vjp`), else its catalogue VJP on the blocks.
    ``donate``: the caller owns ``cotangent`` and is done with it; an op with an in-place
    VJP (:attr:`graphs.ops.opdef.OpDef.vjp_in_place`) writes its result there.
    """
    name, attrs = name_attrs(op)
    opdef = get_op(name)
    attrs = opdef.canonical([b.global_shape for b in ctx.operands], opdef.with_defaults(attrs))
    cot = zero_padding(cotangent, ctx.result)
    arrays = [shape_stand_in(b.local_shape, cot.dtype) if a is None else zero_padding(a, b)
              for a, b in zip(local_arrays, ctx.operands)]
    wrt = tuple(wrt)
    with np.errstate(all="ignore"):
        if opdef.local_vjp is not None:
            grads = opdef.local_vjp(arrays, attrs, cot, ctx, wrt)
        else:
            in_place = opdef.vjp_in_place if donate and len(wrt) == 1 else None
            grads = (in_place or opdef.vjp)(arrays, attrs, result, cot, wrt)
    out = []
    for k, g in zip(wrt, grads):
        g = np.asarray(g)
        block = ctx.operands[k]
        if g.shape != block.local_shape:
            raise RuleError(f"{name}: the local cotangent of operand {k} has shape {g.shape} but its sharding "
                            f"gives {block.local_shape}")
        out.append(zero_padding(g, block))
    return out


def local_vjp_inputs(name: str, wrt, n: int) -> tuple[int, ...]:
    """The operands :func:`local_vjp` reads for the cotangents of ``wrt`` (the others need only their shapes):
    those its definition's local VJP declares (:attr:`graphs.ops.opdef.OpDef.local_vjp_reads`: a gather's
    indices), else those of the catalogue VJP."""
    opdef = get_op(name)
    if opdef.local_vjp_reads is not None:
        return opdef.local_vjp_reads
    return opdef.vjp_inputs(tuple(wrt), n)
