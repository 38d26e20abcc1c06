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

import math
from typing import Sequence

import numpy as np

from graphs.ops.opdef import shape_stand_in
from graphs.ops.registry import get_op
from planner.errors import RuleError
from planner.rules.factors import OpShardingRule
from planner.simulation.local_ops import LocalContext, name_attrs, valid_mask, zero_padding


def local_vjp(op, rule: OpShardingRule, local_arrays: Sequence[np.ndarray | None], result: np.ndarray | None,
              cotangent: np.ndarray, ctx: LocalContext, wrt: Sequence[int], donate: bool = False) -> list[np.ndarray]:
    """The cotangent block of each operand in ``wrt`` on one device (see the module docstring).

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
        special = _SPECIAL.get(name)
        if special is not None:
            grads = special(attrs, arrays, cot, ctx, wrt)
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


def _mean(attrs, arrays, cot, ctx, wrt):
    shape = ctx.operands[0].global_shape
    axes = attrs.get("axes")
    axes = range(len(shape)) if axes is None else axes
    count = math.prod(shape[a] for a in axes)
    return get_op("sum").vjp(arrays, attrs, None, cot / count, wrt)


def _reshape(attrs, arrays, cot, ctx, wrt):
    return [cot.reshape(ctx.operands[0].local_shape)]


def _slice(attrs, arrays, cot, ctx, wrt):
    block = ctx.operands[0]
    out = np.zeros(block.local_shape, dtype=cot.dtype)
    index = []
    for d, (start, stop) in enumerate(zip(attrs["starts"], attrs["stops"])):
        whole = (start, stop) == (0, block.global_shape[d])
        index.append(slice(None) if whole else slice(start, stop))
    out[tuple(index)] = cot
    return [out]


def _gather(attrs, arrays, cot, ctx, wrt):
    if wrt != (0,):
        raise RuleError("gather: only the table (operand 0) has a cotangent; the indices are integers")
    table_block = ctx.operands[0]
    idx = np.asarray(arrays[1])
    v0, v1 = table_block.ranges[0]
    shifted = idx.astype(np.int64) - v0
    hit = (shifted >= 0) & (shifted < v1 - v0)
    grad = np.zeros(table_block.local_shape, dtype=cot.dtype)
    rows = cot.reshape((-1,) + cot.shape[idx.ndim:])
    np.add.at(grad, shifted[hit].reshape(-1), rows[hit.reshape(-1)])
    return [grad]


def _cross_entropy(attrs, arrays, cot, ctx, wrt):
    if wrt != (0,):
        raise RuleError("cross_entropy: only the logits (operand 0) have a cotangent; the labels are integers")
    logits, labels = np.asarray(arrays[0]), np.asarray(arrays[1])
    n_classes = ctx.operands[0].global_shape[-1]
    safe = np.clip(labels.astype(np.int64), 0, n_classes - 1)
    p = logits - np.max(logits, axis=-1, keepdims=True)
    np.exp(p, out=p)
    p /= np.sum(p, axis=-1, keepdims=True)
    np.put_along_axis(p, safe[..., None], np.take_along_axis(p, safe[..., None], axis=-1) - 1.0, axis=-1)
    weight = valid_mask(ctx.operands[1]) * (np.asarray(cot, dtype=p.dtype) / math.prod(ctx.operands[1].global_shape))
    p *= weight[..., None]
    return [p]


def local_vjp_inputs(name: str, wrt, n: int) -> tuple[int, ...]:
    """The operands :func:`local_vjp` reads for the cotangents of ``wrt`` (the others need only their shapes)."""
    if name in _LOCAL_READS:
        return _LOCAL_READS[name]
    return get_op(name).vjp_inputs(tuple(wrt), n)


# the local special cases that read operands the catalogue VJP would not: the indices of a
# gather (to scatter into this device's rows), the logits and labels of a cross_entropy
_LOCAL_READS = {"gather": (1,), "cross_entropy": (0, 1)}

_SPECIAL = {
    "cross_entropy": _cross_entropy,
    "gather": _gather,
    "mean": _mean,
    "reshape": _reshape,
    "slice": _slice,
}
