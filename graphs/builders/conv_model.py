"""The ``conv`` builder: a small classifier of stacked conv2d + ReLU, global mean pooling and a linear head.

- ``images [batch, in_channels, image, image]`` (input, NCHW);
- per layer ``i``: ``layer{i}.conv`` conv2d with ``layer{i}.w [channels, c_in, kernel, kernel]``,
  stride 1 and padding ``kernel // 2`` -> ``layer{i}.h``; ``layer{i}.relu`` -> ``layer{i}.act``;
- ``pool.mean`` over H and W -> ``pool.out [batch, channels]``;
- ``head.matmul`` with ``head.w [channels, classes]`` -> ``logits``;
- ``loss.cross_entropy`` against ``labels [batch] i32`` -> ``loss`` (the output).
"""

from __future__ import annotations

from graphs.graph_builder import GraphBuilder
from planner.errors import ModelError


def define(b: GraphBuilder, *, batch: int, channels: int, image: int, classes: int, layers: int,
           in_channels: int = 3, kernel: int = 3, dtype: str = "f32") -> None:
    """``layers`` conv layers of ``channels`` filters on ``image x image`` inputs, then ``classes`` logits."""
    if kernel > image:
        raise ModelError(f"kernel {kernel} is larger than the image size {image}")
    h = b.tensor("images", [batch, in_channels, image, image], dtype)
    c_in = in_channels
    for i in range(layers):
        w = b.param(f"layer{i}.w", [channels, c_in, kernel, kernel], dtype)
        h = b.op("conv2d", [h, w], output=f"layer{i}.h", name=f"layer{i}.conv", stride=1, padding=kernel // 2)
        h = b.op("relu", [h], output=f"layer{i}.act", name=f"layer{i}.relu")
        c_in = channels
    h = b.op("mean", [h], output="pool.out", name="pool.mean", axes=[2, 3])
    w = b.param("head.w", [c_in, classes], dtype)
    logits = b.op("matmul", [h, w], output="logits", name="head.matmul")
    labels = b.tensor("labels", [batch], "i32")
    b.outputs(b.op("cross_entropy", [logits, labels], output="loss", name="loss.cross_entropy"))
