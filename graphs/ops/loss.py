"""``cross_entropy``: mean softmax cross-entropy of logits against integer labels.

Inputs ``[logits (..., V) float, labels (...) i32/i64]`` where ``labels.shape`` is
``logits.shape[:-1]``; the result is a scalar ``f32``: the mean over every label
position of ``logsumexp(logits) - logits[label]``.

FLOP convention: **4 per logits element** (max, subtract, exp, sum) plus **2 per
label position** (log and subtract) plus the mean's 1 per label position.

Bytes accessed: the default (:func:`~graphs.ops.opdef.every_element_once`): every operand element
read once, every result element written once.

VJP: ``d loss / d logits = (softmax(logits) - onehot(labels)) / positions`` times the
(scalar) cotangent; the labels have no gradient.

>>> CROSS_ENTROPY.infer([(8, 16, 100), (8, 16)], ["f32", "i32"], {})
((), 'f32')
>>> CROSS_ENTROPY.flops([(2, 10), (2,)], (), {})
86
"""

from __future__ import annotations

import math

import numpy as np

from graphs.ops.common import need_float, need_int, need_rank, numel, operand
from graphs.ops.opdef import OpDef, check_wrt
from planner.errors import ModelError, RuleError

FLOPS_PER_LOGIT = 4
FLOPS_PER_LABEL = 3


def _ce_infer(shapes, dtypes, attrs, names=None):
    need_rank("cross_entropy", shapes, names, 0, 1, "logits")
    need_float("cross_entropy", dtypes[0], names, 0)
    need_int("cross_entropy", dtypes[1], names, 1, "labels")
    if tuple(shapes[1]) != tuple(shapes[0][:-1]):
        raise ModelError(
            f"cross_entropy labels {operand(names, shapes, 1)} must have the shape of logits "
            f"{operand(names, shapes, 0)} without its last (class) dimension"
        )
    return (), "f32"


def _ce_flops(in_shapes, out_shape, attrs):
    return FLOPS_PER_LOGIT * numel(in_shapes[0]) + FLOPS_PER_LABEL * numel(in_shapes[1])


def _ce_reference(arrays, attrs):
    logits, labels = np.asarray(arrays[0]), np.asarray(arrays[1])
    if labels.size and (labels.min() < 0 or labels.max() >= logits.shape[-1]):
        raise ModelError(f"cross_entropy's labels hold {labels.min()} to {labels.max()} with the data drawn for the "
                         f"model's inputs, outside the classes [0, {logits.shape[-1]:,}); a label must name a class: "
                         "feed the labels from an input (drawn inside that range) or bound what computes them")
    m = np.max(logits, axis=-1, keepdims=True)
    lse = np.log(np.sum(np.exp(logits - m), axis=-1)) + m[..., 0]
    picked = np.take_along_axis(logits, labels[..., None].astype(np.int64), axis=-1)[..., 0]
    return np.asarray(np.mean(lse - picked))


def _ce_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("cross_entropy", arrays, wrt, ("logits", "labels"))
    logits, labels, cot = np.asarray(arrays[0]), np.asarray(arrays[1]), np.asarray(cotangent)
    out = []
    for _ in wrt:
        p = np.subtract(logits, np.max(logits, axis=-1, keepdims=True), dtype=np.result_type(logits, cot))
        np.exp(p, out=p)
        p /= np.sum(p, axis=-1, keepdims=True)
        rows = p.reshape(-1, p.shape[-1])
        rows[np.arange(rows.shape[0]), labels.reshape(-1)] -= 1.0
        p *= cot / max(labels.size, 1)
        out.append(np.asarray(p, dtype=cot.dtype))
    return tuple(out)


def _ce_jax(jnp, lax, a, attrs):
    logits, labels = a
    m = jnp.max(logits, axis=-1, keepdims=True)
    lse = jnp.log(jnp.sum(jnp.exp(logits - m), axis=-1)) + m[..., 0]
    picked = jnp.take_along_axis(logits, labels[..., None].astype(jnp.int32), axis=-1)[..., 0]
    return jnp.mean(lse - picked)


def _ce_jax_local(jnp, lax, a, attrs, ctx):
    """A device's sum of its valid positions' losses over the *global* number of positions (``ctx.valid``: a block
    of labels that pads its dimensions holds positions past their end)."""
    import math

    logits, labels = a
    m = jnp.max(logits, axis=-1, keepdims=True)
    lse = jnp.log(jnp.sum(jnp.exp(logits - m), axis=-1)) + m[..., 0]
    picked = jnp.take_along_axis(logits, labels[..., None].astype(jnp.int32), axis=-1)[..., 0]
    losses = lse - picked
    valid = ctx.valid(1)
    if valid is not None:
        losses = jnp.where(valid, losses, jnp.zeros((), losses.dtype))
    return jnp.sum(losses) / math.prod(ctx.global_shapes[1])


def _safe_labels(labels: np.ndarray, ctx) -> np.ndarray:
    """The labels as int64 clipped into the class range (padding may hold anything)."""
    n_classes = ctx.operands[0].global_shape[-1]
    return np.clip(labels.astype(np.int64), 0, n_classes - 1)


def _ce_local_reference(arrays, attrs, ctx, rule):
    """A device's sum of the losses of its valid label positions divided by the *global* number of positions:
    with the label dimensions sharded, a partial sum of the mean."""
    logits, labels = np.asarray(arrays[0]), np.asarray(arrays[1])
    safe = _safe_labels(labels, ctx)
    m = np.max(logits, axis=-1, keepdims=True)
    lse = np.log(np.sum(np.exp(logits - m), axis=-1)) + m[..., 0]
    picked = np.take_along_axis(logits, safe[..., None], axis=-1)[..., 0]
    losses = np.where(ctx.operands[1].valid_mask(), lse - picked, 0.0)
    return np.asarray(np.sum(losses) / math.prod(ctx.operands[1].global_shape))


def _ce_local_vjp(arrays, attrs, cotangent, ctx, wrt):
    if wrt != (0,):
        raise RuleError("cross_entropy: only the logits (operand 0) have a cotangent; the labels are integers")
    logits, labels = np.asarray(arrays[0]), np.asarray(arrays[1])
    safe = _safe_labels(labels, ctx)
    p = logits - np.max(logits, axis=-1, keepdims=True)
    np.exp(p, out=p)
    p /= np.sum(p, axis=-1, keepdims=True)
    np.put_along_axis(p, safe[..., None], np.take_along_axis(p, safe[..., None], axis=-1) - 1.0, axis=-1)
    weight = ctx.operands[1].valid_mask() * (np.asarray(cotangent, dtype=p.dtype)
                                             / math.prod(ctx.operands[1].global_shape))
    p *= weight[..., None]
    return [p]


CROSS_ENTROPY = OpDef("cross_entropy", "loss", 2, 2, (), _ce_infer, _ce_flops, _ce_reference, vjp=_ce_vjp,
                      rule="loss.cross_entropy", indexes=((1, 0, -1),), jax_form=_ce_jax,
                      local_reference=_ce_local_reference, local_vjp=_ce_local_vjp, local_vjp_reads=(0, 1),
                      jax_local_form=_ce_jax_local)
