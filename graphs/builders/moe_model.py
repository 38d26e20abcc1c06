"""The ``moe`` builder: one GShard-style mixture-of-experts layer on ``x [tokens, hidden]``.

Routing is data-dependent (top-k), which the op set does not express, so the
**dispatch mask** ``dispatch.mask [tokens, experts, capacity]`` is an input: 1 where
token ``t`` goes to slot ``c`` of expert ``e``, else 0. The rest is GShard's dense form:

- gating: ``gate.matmul`` with ``gate.w [hidden, experts]`` -> ``gate.logits``;
  ``gate.softmax`` -> ``gate.probs [tokens, experts]``;
- combine weights: ``gate.expand`` reshapes the probabilities to ``[tokens, experts, 1]``
  (-> ``gate.probs3``) and ``combine.scale`` multiplies them into the mask -> ``combine.weights``;
- dispatch: ``dispatch.einsum`` ``tec,th->ech`` (mask, x) -> ``expert.in [experts, capacity, hidden]``;
- experts: ``expert.up`` ``ech,ehf->ecf`` with ``expert.w1 [experts, hidden, ffn]`` -> ``expert.h``;
  ``expert.gelu`` -> ``expert.act``; ``expert.down`` ``ecf,efh->ech`` with
  ``expert.w2 [experts, ffn, hidden]`` -> ``expert.out``;
- combine: ``combine.einsum`` ``tec,ech->th`` (weights, expert outputs) -> ``y [tokens, hidden]`` (the output).

Expert parallelism shards the ``e`` dimension of ``expert.w1``/``expert.w2``; the
dispatch and combine einsums then become the all-to-alls of GShard.
"""

from __future__ import annotations

from graphs.graph_builder import GraphBuilder


def define(b: GraphBuilder, *, tokens: int, hidden: int, experts: int, capacity: int, ffn: int | None = None,
           dtype: str = "f32") -> None:
    """One MoE layer; ``ffn`` (each expert's inner size) defaults to ``4·hidden``."""
    ffn = ffn or 4 * hidden
    x = b.tensor("x", [tokens, hidden], dtype)
    gw = b.param("gate.w", [hidden, experts], dtype)
    logits = b.op("matmul", [x, gw], output="gate.logits", name="gate.matmul")
    probs = b.op("softmax", [logits], output="gate.probs", name="gate.softmax", axis=-1)
    mask = b.tensor("dispatch.mask", [tokens, experts, capacity], dtype)
    probs3 = b.op("reshape", [probs], output="gate.probs3", name="gate.expand", shape=[tokens, experts, 1])
    weights = b.op("mul", [mask, probs3], output="combine.weights", name="combine.scale")
    h = b.op("einsum", [mask, x], output="expert.in", name="dispatch.einsum", equation="tec,th->ech")
    w1 = b.param("expert.w1", [experts, hidden, ffn], dtype)
    h = b.op("einsum", [h, w1], output="expert.h", name="expert.up", equation="ech,ehf->ecf")
    h = b.op("gelu", [h], output="expert.act", name="expert.gelu")
    w2 = b.param("expert.w2", [experts, ffn, hidden], dtype)
    h = b.op("einsum", [h, w2], output="expert.out", name="expert.down", equation="ecf,efh->ech")
    b.outputs(b.op("einsum", [weights, h], output="y", name="combine.einsum", equation="tec,ech->th"))
