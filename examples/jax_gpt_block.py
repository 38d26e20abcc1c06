"""A GPT-style transformer block in plain ``jax.numpy``, to trace, plan, export and run.

Pre-layernorm attention with softmax and an MLP with gelu, residuals around both; written the way
a JAX user writes it (no shardplan imports). It is the integration point of issue 14: trace it
with ``shardplan import-jax examples/jax_gpt_block.py:gpt_block`` (the example arguments come
from ``gpt_block_example_args``, the trained weights from ``gpt_block_params``), or in Python::

    from planner.frontends.jax import trace, shardings_for
    from examples.jax_gpt_block import gpt_block, example_args
    graph = trace(gpt_block, *example_args(), mesh={"dp": 2, "tp": 4}, params=["params"])

and hand the plan's shardings back to ``jax.jit`` with ``shardings_for(plan, gpt_block, *args)``.
``shardplan run --engine jax`` runs the YAML this writes on XLA.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np

BATCH, SEQ, HIDDEN, HEADS, FFN = 8, 16, 64, 4, 256


def layer_norm(x, scale, bias, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * scale + bias


def attention(params, h):
    b, s, d = h.shape
    hd = d // HEADS

    def heads(t):
        return t.reshape(b, s, HEADS, hd).transpose(0, 2, 1, 3)

    q, k, v = heads(h @ params["wq"]), heads(h @ params["wk"]), heads(h @ params["wv"])
    scores = jnp.einsum("bnqd,bnkd->bnqk", q, k) * (1.0 / math.sqrt(hd))
    probs = jax.nn.softmax(scores, axis=-1)
    ctx = jnp.einsum("bnqk,bnkd->bnqd", probs, v).transpose(0, 2, 1, 3).reshape(b, s, d)
    return ctx @ params["wo"]


def gpt_block(params, x):
    x = x + attention(params, layer_norm(x, params["ln1_scale"], params["ln1_bias"]))
    h = layer_norm(x, params["ln2_scale"], params["ln2_bias"])
    return x + jax.nn.gelu(h @ params["w1"]) @ params["w2"]


def example_args(seed: int = 0):
    """``(params, x)`` with random weights (LeCun scale) and activations, float32."""
    rng = np.random.default_rng(seed)
    shapes = {"ln1_scale": (HIDDEN,), "ln1_bias": (HIDDEN,), "wq": (HIDDEN, HIDDEN), "wk": (HIDDEN, HIDDEN),
              "wv": (HIDDEN, HIDDEN), "wo": (HIDDEN, HIDDEN), "ln2_scale": (HIDDEN,), "ln2_bias": (HIDDEN,),
              "w1": (HIDDEN, FFN), "w2": (FFN, HIDDEN)}
    params = {k: (rng.standard_normal(s) / math.sqrt(s[0] if len(s) == 2 else 1)).astype(np.float32)
              for k, s in shapes.items()}
    x = rng.standard_normal((BATCH, SEQ, HIDDEN)).astype(np.float32)
    return params, x


#: What ``shardplan import-jax`` reads: the example arguments and which of them are trained weights.
gpt_block_example_args = example_args()
gpt_block_params = ["params"]
