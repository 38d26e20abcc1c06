"""The ``gpt`` builder: a decoder-only language model with a cross-entropy loss.

Tensors and ops (besides the transformer blocks ``layer{i}.*`` of
:mod:`graphs.builders.transformer_model`):

- ``tokens [batch, seq] i32`` and ``labels [batch, seq] i32`` (inputs);
- ``embed.lookup`` gathers rows of ``embed.table [vocab, hidden]`` -> ``embed.tok``;
  ``embed.add_pos`` adds ``embed.pos [seq, hidden]`` (broadcast over the batch) -> ``embed.out``;
- ``final.ln`` layernorm (``final.ln.scale``, ``final.ln.bias``) -> ``final.ln_out``;
- ``lm_head.matmul`` with ``lm_head.w [hidden, vocab]`` (not tied to the table) -> ``logits``;
- ``loss.cross_entropy`` -> ``loss`` (scalar f32, the output).

Parameter count: ``vocab·hidden + seq·hidden + layers·(4·hidden² + 2·hidden·ffn + 4·hidden)
+ 2·hidden + hidden·vocab``.
"""

from __future__ import annotations

from graphs.builders.transformer_model import block, check_heads, layernorm
from graphs.graph_builder import GraphBuilder


def param_count(*, layers: int, hidden: int, seq: int, vocab: int, ffn: int | None = None, **_: int) -> int:
    """The parameter count of :func:`define`'s model, by the formula above."""
    ffn = ffn or 4 * hidden
    return vocab * hidden + seq * hidden + layers * (4 * hidden**2 + 2 * hidden * ffn + 4 * hidden) \
        + 2 * hidden + hidden * vocab


def define(b: GraphBuilder, *, layers: int, hidden: int, heads: int, seq: int, batch: int, vocab: int,
           ffn: int | None = None, dtype: str = "f32") -> None:
    """Token ids through embeddings, ``layers`` blocks, a final layernorm and the LM head to a loss."""
    check_heads(hidden, heads)
    tokens = b.tensor("tokens", [batch, seq], "i32")
    labels = b.tensor("labels", [batch, seq], "i32")
    table = b.param("embed.table", [vocab, hidden], dtype)
    h = b.op("gather", [table, tokens], output="embed.tok", name="embed.lookup")
    pos = b.param("embed.pos", [seq, hidden], dtype)
    h = b.op("add", [h, pos], output="embed.out", name="embed.add_pos")
    for i in range(layers):
        h = block(b, f"layer{i}", h, batch=batch, seq=seq, hidden=hidden, heads=heads, ffn=ffn or 4 * hidden,
                  dtype=dtype)
    h = layernorm(b, "final.ln", h, hidden, dtype)
    w = b.param("lm_head.w", [hidden, vocab], dtype)
    logits = b.op("matmul", [h, w], output="logits", name="lm_head.matmul")
    b.outputs(b.op("cross_entropy", [logits, labels], output="loss", name="loss.cross_entropy"))
