"""The ``mlp`` builder: a chain of square matmuls with ReLU between, ending in a mean-of-squares loss."""

from __future__ import annotations

from graphs.graph_builder import GraphBuilder


def define(b: GraphBuilder, *, batch: int, hidden: int, layers: int, dtype: str = "f32") -> None:
    """``x [batch, hidden]`` through ``layers`` matmuls with ``layer{i}.w [hidden, hidden]``.

    ReLU follows every matmul but the last; the loss is ``mean(h * h)`` over all
    axes (a scalar). Ops: ``layer{i}.matmul``, ``layer{i}.relu``, ``loss.square``,
    ``loss.mean``; tensors ``x``, ``layer{i}.w``, ``layer{i}.h``, ``layer{i}.act``,
    ``loss.sq`` and ``loss``.
    """
    h = b.tensor("x", [batch, hidden], dtype)
    for i in range(layers):
        w = b.param(f"layer{i}.w", [hidden, hidden], dtype)
        h = b.op("matmul", [h, w], output=f"layer{i}.h", name=f"layer{i}.matmul")
        if i < layers - 1:
            h = b.op("relu", [h], output=f"layer{i}.act", name=f"layer{i}.relu")
    sq = b.op("mul", [h, h], output="loss.sq", name="loss.square")
    b.outputs(b.op("mean", [sq], output="loss", name="loss.mean"))
