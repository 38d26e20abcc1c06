"""JAX functions written as a JAX user writes them, for ``benchmarks/xla_check.py --jax``: each is traced with
``shardplan import-jax`` on a ``dp=2, tp=4`` mesh, planned and run on XLA like a config.

``FUNCTION_example_args`` and ``FUNCTION_params`` are what ``import-jax`` reads by default.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np


def _f32(*shape):
    return jax.ShapeDtypeStruct(shape, np.float32)


def mlp(params, x):
    """Three dense layers with gelu and relu, summed into a scalar loss."""
    h = jax.nn.gelu(x @ params["w1"] + params["b1"])
    h = jax.nn.relu(h @ params["w2"])
    return jnp.mean((h @ params["w3"]) ** 2)


mlp_example_args = ({"w1": _f32(128, 512), "b1": _f32(512), "w2": _f32(512, 512), "w3": _f32(512, 128)},
                    _f32(64, 128))
mlp_params = ["params"]


def attention(params, x):
    """Multi-head self-attention with head reshapes, softmax and an output projection."""
    b, s, d = x.shape
    heads = 8
    hd = d // heads

    def split(t):
        return t.reshape(b, s, heads, hd).transpose(0, 2, 1, 3)

    q, k, v = split(x @ params["wq"]), split(x @ params["wk"]), split(x @ params["wv"])
    probs = jax.nn.softmax(jnp.einsum("bnqd,bnkd->bnqk", q, k) * (1.0 / math.sqrt(hd)), axis=-1)
    ctx = jnp.einsum("bnqk,bnkd->bnqd", probs, v).transpose(0, 2, 1, 3).reshape(b, s, d)
    return ctx @ params["wo"]


attention_example_args = ({"wq": _f32(256, 256), "wk": _f32(256, 256), "wv": _f32(256, 256), "wo": _f32(256, 256)},
                          _f32(8, 64, 256))
attention_params = ["params"]


def embedding(params, tokens):
    """An embedding gather, a layer norm and a tied-shape head: logits."""
    h = jnp.take(params["table"], tokens, axis=0)
    mean = jnp.mean(h, axis=-1, keepdims=True)
    var = jnp.mean((h - mean) ** 2, axis=-1, keepdims=True)
    h = (h - mean) * jax.lax.rsqrt(var + 1e-5)
    return h @ params["head"]


embedding_example_args = ({"table": _f32(4096, 256), "head": _f32(256, 4096)},
                          jax.ShapeDtypeStruct((8, 128), np.int32))
embedding_params = ["params"]

FUNCTIONS = ("mlp", "attention", "embedding")
