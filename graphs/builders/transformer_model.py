"""The ``transformer`` builder: pre-layernorm attention + MLP blocks on ``x [batch, seq, hidden]``.

One block, with prefix ``P = layer{i}`` (op names on the left, result tensors on the right):

- attention: ``P.attn.ln`` layernorm with ``P.attn.ln.scale``/``P.attn.ln.bias`` -> ``P.attn.ln_out``;
  ``P.attn.{q,k,v}_proj`` matmuls with ``P.attn.w{q,k,v} [hidden, hidden]`` -> ``P.attn.{q,k,v}``;
  ``P.attn.{q,k,v}_split`` reshape to ``[b, s, heads, hd]`` -> ``P.attn.{q,k,v}_heads``;
  ``P.attn.{q,k,v}_transpose`` to ``[b, heads, s, hd]`` -> ``P.attn.{q,k,v}_t``;
  ``P.attn.qk`` einsum ``bnqd,bnkd->bnqk`` -> ``P.attn.scores``; ``P.attn.scale`` mul by the
  const scalar ``P.attn.inv_sqrt_d`` (value ``1/sqrt(hd)``) -> ``P.attn.scores_scaled``;
  ``P.attn.softmax`` -> ``P.attn.probs``; ``P.attn.pv`` einsum ``bnqk,bnkd->bnqd`` -> ``P.attn.ctx_t``;
  ``P.attn.ctx_transpose`` -> ``P.attn.ctx_heads``; ``P.attn.ctx_merge`` reshape -> ``P.attn.ctx``;
  ``P.attn.o_proj`` matmul with ``P.attn.wo`` -> ``P.attn.out``; ``P.attn.residual`` add -> ``P.attn.res``.
- MLP: ``P.mlp.ln`` -> ``P.mlp.ln_out``; ``P.mlp.up`` matmul with ``P.mlp.w1 [hidden, ffn]`` ->
  ``P.mlp.h``; ``P.mlp.gelu`` -> ``P.mlp.act``; ``P.mlp.down`` matmul with ``P.mlp.w2 [ffn, hidden]`` ->
  ``P.mlp.out``; ``P.mlp.residual`` add -> ``P.out``.

Linear layers have no biases. Parameters per block: ``4·hidden² + 2·hidden·ffn + 4·hidden``.
"""

from __future__ import annotations

import math

from graphs.graph_builder import GraphBuilder
from planner.errors import ModelError


def check_heads(hidden: int, heads: int) -> int:
    """The head dimension ``hidden // heads``; ModelError unless heads divides hidden."""
    if hidden % heads:
        raise ModelError(f"hidden {hidden} must be divisible by heads {heads} (each head gets hidden/heads)")
    return hidden // heads


def layernorm(b: GraphBuilder, prefix: str, x: str, hidden: int, dtype: str = "f32", params: bool = True) -> str:
    """Layernorm op ``prefix`` with params ``prefix.scale``/``prefix.bias`` (unless ``params`` is
    false: a plain normalisation); returns ``prefix_out``."""
    if not params:
        return b.op("layernorm", [x], output=f"{prefix}_out", name=prefix)
    scale = b.param(f"{prefix}.scale", [hidden], dtype)
    bias = b.param(f"{prefix}.bias", [hidden], dtype)
    return b.op("layernorm", [x, scale, bias], output=f"{prefix}_out", name=prefix)


def attention(b: GraphBuilder, p: str, x: str, *, batch: int, seq: int, hidden: int, heads: int, dtype: str,
              norm_params: bool = True) -> str:
    """Multi-head self-attention with a residual; returns ``{p}.res``."""
    hd = check_heads(hidden, heads)
    h = layernorm(b, f"{p}.ln", x, hidden, dtype, norm_params)
    per_head = {}
    for n in ("q", "k", "v"):
        w = b.param(f"{p}.w{n}", [hidden, hidden], dtype)
        t = b.op("matmul", [h, w], output=f"{p}.{n}", name=f"{p}.{n}_proj")
        t = b.op("reshape", [t], output=f"{p}.{n}_heads", name=f"{p}.{n}_split", shape=[batch, seq, heads, hd])
        per_head[n] = b.op("transpose", [t], output=f"{p}.{n}_t", name=f"{p}.{n}_transpose", perm=[0, 2, 1, 3])
    s = b.op("einsum", [per_head["q"], per_head["k"]], output=f"{p}.scores", name=f"{p}.qk",
             equation="bnqd,bnkd->bnqk")
    c = b.const(f"{p}.inv_sqrt_d", [], value=1.0 / math.sqrt(hd), dtype=dtype)
    s = b.op("mul", [s, c], output=f"{p}.scores_scaled", name=f"{p}.scale")
    a = b.op("softmax", [s], output=f"{p}.probs", name=f"{p}.softmax", axis=-1)
    o = b.op("einsum", [a, per_head["v"]], output=f"{p}.ctx_t", name=f"{p}.pv", equation="bnqk,bnkd->bnqd")
    o = b.op("transpose", [o], output=f"{p}.ctx_heads", name=f"{p}.ctx_transpose", perm=[0, 2, 1, 3])
    o = b.op("reshape", [o], output=f"{p}.ctx", name=f"{p}.ctx_merge", shape=[batch, seq, hidden])
    wo = b.param(f"{p}.wo", [hidden, hidden], dtype)
    o = b.op("matmul", [o, wo], output=f"{p}.out", name=f"{p}.o_proj")
    return b.op("add", [x, o], output=f"{p}.res", name=f"{p}.residual")


def mlp_block(b: GraphBuilder, p: str, x: str, *, hidden: int, ffn: int, dtype: str, out: str,
              norm_params: bool = True) -> str:
    """Layernorm, ``w1``, gelu, ``w2`` and a residual; returns ``out``."""
    h = layernorm(b, f"{p}.ln", x, hidden, dtype, norm_params)
    w1 = b.param(f"{p}.w1", [hidden, ffn], dtype)
    h = b.op("matmul", [h, w1], output=f"{p}.h", name=f"{p}.up")
    h = b.op("gelu", [h], output=f"{p}.act", name=f"{p}.gelu")
    w2 = b.param(f"{p}.w2", [ffn, hidden], dtype)
    h = b.op("matmul", [h, w2], output=f"{p}.out", name=f"{p}.down")
    return b.op("add", [x, h], output=out, name=f"{p}.residual")


def block(b: GraphBuilder, prefix: str, x: str, *, batch: int, seq: int, hidden: int, heads: int, ffn: int,
          dtype: str = "f32", norm_params: bool = True) -> str:
    """One transformer block named ``prefix`` reading ``x``; returns ``{prefix}.out``."""
    h = attention(b, f"{prefix}.attn", x, batch=batch, seq=seq, hidden=hidden, heads=heads, dtype=dtype,
                  norm_params=norm_params)
    return mlp_block(b, f"{prefix}.mlp", h, hidden=hidden, ffn=ffn, dtype=dtype, out=f"{prefix}.out",
                     norm_params=norm_params)


def define(b: GraphBuilder, *, layers: int, hidden: int, heads: int, seq: int, batch: int, ffn: int | None = None,
           dtype: str = "f32", norm_params: bool = True) -> None:
    """``layers`` blocks on input ``x [batch, seq, hidden]``; ``ffn`` defaults to ``4·hidden``;
    ``norm_params: false`` gives layer norms without scale and bias.

    The output is the last block's result ``layer{layers-1}.out``.
    """
    check_heads(hidden, heads)
    h = b.tensor("x", [batch, seq, hidden], dtype)
    for i in range(layers):
        h = block(b, f"layer{i}", h, batch=batch, seq=seq, hidden=hidden, heads=heads, ffn=ffn or 4 * hidden,
                  dtype=dtype, norm_params=norm_params)
    b.outputs(h)
