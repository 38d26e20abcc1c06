"""Training steps of JAX losses, planned by ``--search propagate --training`` and compiled by XLA: the harness of
:mod:`tests.frontends.test_training_suite`.

Each loss is traced by the frontend with its trained arguments as parameters and planned for training; XLA
compiles ``jax.value_and_grad`` of the same loss with respect to the same arguments (a training step: the loss
whole and each gradient in its parameter's layout, as the plan delivers them), with the same argument shardings
(JAX 0.10.2 on 8 host CPU devices, run in a subprocess that sets the device count). What is compared is the bytes
per device each collective kind moves (:func:`tests.frontends.shardy_suite.collective_bytes`), the plan's forward,
backward and gradient reductions against every collective of XLA's program; and, per trained parameter, the
device groups of the AllReduces that complete its gradient, in order, on both sides.

    python tests/frontends/training_suite.py ROOT [NAMES...]   # prints one JSON line
"""

import json
import os
import sys

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shardy_suite import (arguments, collective_bytes, make_meshes, mesh_of, optax_ce_vp,  # noqa: E402
                          stopped_target)


def _ln(x, s):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * s


# a weight whose gradient sums over a batch on dp and a sequence on tp: XLA all-reduces over tp, then over dp
def seq_parallel_matmul(x, w):
    return jnp.sum(jnp.tanh(x @ w))


# the same with the batch on tp and the sequence on dp: over dp first (the sequence is the later dimension)
def seq_first_matmul(x, w):
    return jnp.sum(jnp.tanh(x @ w))


# a bias broadcast over a batch and a sequence: its gradient a reduce_sum over both, the sequence first
def bias_over_batch_and_sequence(x, b):
    return jnp.sum(jnp.tanh(x + b))


# an einsum whose input orders the sequence before the batch: the batch's axes first (the input's later one)
def einsum_sequence_major(x, w):
    return jnp.sum(jnp.tanh(jnp.einsum("sbh,hf->bsf", x, w)))


# a layer norm's scale and an RMS norm's on 2x2x2 with the sequence over two axes
def norm_scale(x, s):
    return jnp.sum(jnp.tanh(_ln(x, s)))


def rms_scale_3d(x, s):
    return jnp.sum(jnp.tanh(x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * s))


def seq_parallel_3d(x, w):
    return jnp.sum(jnp.tanh(x @ w))


# a sequence shifted by one position (a pad and a slice: a halo exchange) and a reversed one
def shifted_sequence(x, w):
    h = jnp.tanh(x @ w)
    return jnp.sum(jnp.tanh(jnp.pad(h, ((0, 0), (1, 0), (0, 0)))[:, :-1]) * h)


def reversed_sequence(x, w):
    h = jnp.tanh(x @ w)
    return jnp.sum(jnp.tanh(jnp.flip(h, axis=1)) * h)


# optax's cross-entropy on a vocabulary-parallel head (the Shardy suite's forward; its shift, a stopped maximum, is
# never differentiated), and a logsumexp's
optax_cross_entropy = optax_ce_vp


def logsumexp_head(x, w):
    return jnp.sum(jax.nn.logsumexp(x @ w, axis=-1))


# a Megatron MLP with data parallelism: the weights' gradients all-reduce over dp
def megatron_mlp(x, w1, w2):
    return jnp.sum(jnp.tanh(jax.nn.relu(x @ w1) @ w2))


# attention with head reshapes (Megatron: heads over tp), a pre-norm MLP block with a residual, an embedding lookup
# over a vocabulary-parallel table, a softmax-gated mixture of experts, an RMS-normed projection on 2x2x2, a log-softmax
# cross-entropy head, a data-parallel MLP on 8 devices, and a Megatron MLP with the sequence sharded too
def attention_heads(x, wq, wk, wv, wo):
    b, s, h = x.shape
    q = (x @ wq).reshape(b, s, 4, h // 4)
    k = (x @ wk).reshape(b, s, 4, h // 4)
    v = (x @ wv).reshape(b, s, 4, h // 4)
    a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 4.0, axis=-1)
    return jnp.sum(jnp.tanh(jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, s, h) @ wo))


def pre_norm_block(x, s, b, w1, w2):
    m = jnp.mean(x, axis=-1, keepdims=True)
    h = (x - m) * jax.lax.rsqrt(jnp.mean((x - m) ** 2, axis=-1, keepdims=True) + 1e-5) * s + b
    return jnp.sum((x + jax.nn.gelu(h @ w1) @ w2) ** 2)


def embedding_lookup(t, ids, w):
    return jnp.sum(jnp.tanh(jnp.take(t, ids, axis=0) @ w))


def gated_experts(x, wg, we):
    g = jax.nn.softmax(x @ wg, axis=-1)
    return jnp.sum(jnp.tanh(jnp.einsum("te,teh->th", g, jnp.einsum("td,edh->teh", x, we))))


def rms_projection_3d(x, s, w):
    return jnp.sum(jnp.tanh((x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * s) @ w))


def log_softmax_head(x, w, labels):
    logp = jax.nn.log_softmax(x @ w, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))


def data_parallel_mlp(x, w1, w2):
    return jnp.mean(jnp.tanh(x @ w1) @ w2)


def megatron_sequence(x, w1, w2):
    return jnp.sum(jnp.tanh(jax.nn.relu(x @ w1) @ w2))


# a GPT block: pre-norm attention with a fused QKV projection split in three, heads and the MLP over tp
def gpt_block(x, s1, b1, wqkv, wo, s2, b2, w1, w2):
    batch, seq, hidden = x.shape
    q, k, v = (t.reshape(batch, seq, 4, hidden // 4) for t in jnp.split((_ln(x, s1) + b1) @ wqkv, 3, axis=-1))
    a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 4.0, axis=-1)
    x = x + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(batch, seq, hidden) @ wo
    return jnp.sum(x + jax.nn.gelu((_ln(x, s2) + b2) @ w1) @ w2)


# tied input and output embeddings over a vocabulary on tp; three layers on 2x2x2; a table's rows over tp; a SwiGLU
# MLP; a regression whose input is over dp and tp; an MLP with biases; experts over tp with tokens over dp
def tied_embeddings(t, ids):
    return jnp.sum(jax.nn.logsumexp(jnp.take(t, ids, axis=0) @ t.T, axis=-1))


def three_layers_3d(x, w1, w2, w3):
    return jnp.sum(jnp.tanh(jnp.tanh(x @ w1) @ w2) @ w3)


def table_rows(t, ids, w):
    return jnp.sum(jnp.tanh(jnp.take(t, ids, axis=0) @ w))


def swiglu_mlp(x, wg, wu, wd):
    return jnp.sum((jax.nn.silu(x @ wg) * (x @ wu)) @ wd)


def regression(x, y, w):
    return jnp.mean((x @ w - y) ** 2)


def biased_mlp(x, w1, b1, w2, b2):
    return jnp.sum(jnp.tanh(jax.nn.relu(x @ w1 + b1) @ w2 + b2))


def expert_parallel(x, we):
    return jnp.sum(jnp.tanh(jnp.einsum("etd,edh->eth", x, we)))


# a jax.shard_map region (a Megatron MLP with its psum) inside the step, a sharding constraint (and the Shardy
# suite's stopped target)
def shard_map_mlp(x, w1, w2):
    def body(x, w1, w2):
        return jax.lax.psum(jnp.tanh(x @ w1) @ w2, "tp")

    region = jax.shard_map(body, mesh=mesh_of("2d"), in_specs=(P("dp"), P(None, "tp"), P("tp")), out_specs=P("dp"))
    return jnp.sum(jnp.tanh(region(x, w1, w2)))


def constrained_hidden(x, w1, w2):
    h = jax.lax.with_sharding_constraint(jnp.tanh(x @ w1), NamedSharding(mesh_of("2d"), P("dp", None)))
    return jnp.sum(h @ w2)


# an activation read by three column-parallel projections (q, k and v of an attention over tp)
def three_projections(x, w0, wq, wk, wv):
    h = jnp.tanh(x @ w0)
    return jnp.sum(jnp.tanh(h @ wq) * jnp.tanh(h @ wk) + jnp.tanh(h @ wv))


# one weight read by two matmuls over the batch (a tied projection): each one's gradient is pending over dp
def tied_weight(x1, x2, w):
    return jnp.sum(jnp.tanh(x1 @ w) * jnp.tanh(x2 @ w))


# an activation read by a column-parallel projection (its cotangent pending over tp) and a square (whole)
def projection_and_square(x, w0, wq):
    h = jnp.tanh(x @ w0)
    return jnp.sum(jnp.tanh(h @ wq)) + jnp.sum(h * h)


# q, k and v of 3-D attention-like projections on a 2x2x2 mesh: the activation's rows over a, features over b
def three_projections_3d(x, w0, wq, wk, wv):
    h = jnp.tanh(x @ w0)
    return jnp.sum(jnp.tanh(h @ wq) * jnp.tanh(h @ wk) - jnp.tanh(h @ wv))


# a SwiGLU MLP over dp and tp, one weight applied twice (shared layers), a pre-norm residual MLP, pre-norm attention
# with a residual, a label-smoothed cross-entropy, an embedding plus positions, a 1-D layer-normed MLP, a query and a
# fused key-value on 2x2x2, a gate and an up projection on 2x2x2, and two readers of a sequence-parallel input
def _ln_bias(x, s, b):
    return _ln(x, s) + b


def swiglu_over_dp_and_tp(x, wg, wu, wd):
    return jnp.sum(jnp.tanh((jax.nn.silu(x @ wg) * (x @ wu)) @ wd))


def shared_layers(x, w):
    return jnp.sum(jnp.tanh(jnp.tanh(x @ w) @ w))


def residual_block(x, s, b, w1, w2):
    return jnp.sum(jnp.tanh(x + jax.nn.gelu(_ln_bias(x, s, b) @ w1) @ w2))


def attention_residual(x, s, b, wq, wk, wv, wo):
    batch, seq, hidden = x.shape
    h = _ln_bias(x, s, b)
    q, k, v = ((h @ w).reshape(batch, seq, 4, hidden // 4) for w in (wq, wk, wv))
    a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) * 0.5, axis=-1)
    return jnp.sum((x + jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(batch, seq, hidden) @ wo) ** 2)


def smoothed_cross_entropy(x, w, labels):
    logp = jax.nn.log_softmax(x @ w, axis=-1)
    nll = -jnp.take_along_axis(logp, labels[:, None], axis=-1)[:, 0]
    return jnp.mean(0.9 * nll - 0.1 * jnp.mean(logp, axis=-1))


def embedding_with_positions(t, pos, ids, w):
    return jnp.sum(jnp.tanh((jnp.take(t, ids, axis=0) + pos) @ w))


def layer_normed_mlp_1d(x, w1, s, b, w2):
    return jnp.mean((_ln_bias(x @ w1, s, b) @ w2) ** 2)


def query_and_fused_key_value_3d(x, wq, wkv):
    return jnp.sum(jnp.tanh(x @ wq) * jnp.tanh(x @ wkv))


def gate_and_up_3d(x, wg, wu):
    return jnp.sum(jax.nn.gelu(x @ wg) * (x @ wu))


def two_readers_of_a_sequence(x, w1, w2):
    return jnp.sum(jnp.tanh(x @ w1) + jnp.tanh(x @ w2))


# FSDP and tensor parallelism together on 2x2x2, two residual MLP layers, multi-query attention (one key and value
# head), an RMS-normed gated MLP with a residual, a head tied to a vocabulary-parallel table, biases on both
# layers, a mean-pooled classifier over a sequence on tp, and queries against keys of the same rows on 2x2x2
def fsdp_and_tp_3d(x, w1, w2):
    return jnp.sum(jnp.tanh(jax.nn.gelu(x @ w1) @ w2))


def two_residual_layers(x, w1, w2, w3, w4):
    h = x + jnp.tanh(x @ w1) @ w2
    return jnp.sum(jnp.tanh(h + jnp.tanh(h @ w3) @ w4))


def multi_query_attention(x, wq, wk, wv):
    batch, seq, hidden = x.shape
    q = (x @ wq).reshape(batch, seq, 4, hidden // 4)
    a = jax.nn.softmax(jnp.einsum("bqhd,bkd->bhqk", q, x @ wk), axis=-1)
    return jnp.sum(jnp.einsum("bhqk,bkd->bqhd", a, x @ wv) ** 2)


def rms_gated_residual(x, s, wg, wu, wd):
    h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * s
    return jnp.sum((x + (jax.nn.silu(h @ wg) * (h @ wu)) @ wd) ** 2)


def head_tied_to_a_parallel_table(x, t, labels):
    logp = jax.nn.log_softmax(x @ t.T, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))


def biased_layers(x, w1, b1, w2, b2):
    return jnp.sum(jnp.tanh(jnp.tanh(x @ w1 + b1) @ w2 + b2))


def mean_pooled_classifier(x, w, c):
    return jnp.sum(jnp.tanh(jnp.mean(jnp.tanh(x @ w), axis=1) @ c))


def query_key_scores_3d(x, wq, wk):
    return jnp.sum(jax.nn.softmax((x @ wq) @ (x @ wk).T, axis=-1))


# a top-2 router beside experts over tp, a sequence-mean head, a layer norm on 2x2x2, a data-parallel MLP on 1-D,
# heads reshaped back before an out projection, a cosine loss, a row-wise dot with a target over dp and tp, a
# cross-entropy over a vocabulary on tp written with logsumexp
def top_two_router(x, wg, we):
    g = jax.nn.softmax(jax.lax.top_k(x @ wg, 2)[0], axis=-1)
    return jnp.sum(jnp.tanh(jnp.einsum("td,edh->teh", x, we)) * jnp.sum(g))


def sequence_mean_head(x, w, c):
    return jnp.sum(jnp.mean(jnp.tanh(x @ w), axis=1) @ c)


def layer_norm_projection_3d(x, s, b, w):
    return jnp.sum(jnp.tanh(_ln_bias(x, s, b) @ w))


def data_parallel_three_layers_1d(x, w1, w2, w3):
    return jnp.mean((jnp.tanh(jnp.tanh(x @ w1) @ w2) @ w3) ** 2)


def heads_then_out_projection(x, wq, wo):
    batch, seq, hidden = x.shape
    q = (x @ wq).reshape(batch, seq, 4, hidden // 4)
    return jnp.sum(jnp.tanh(q.reshape(batch, seq, hidden) @ wo))


def cosine_loss(x, w, y):
    h = x @ w
    return -jnp.mean(jnp.sum(h * jax.lax.rsqrt(jnp.sum(h * h, axis=-1, keepdims=True) + 1e-6) * y, axis=-1))


def rowwise_dot(a, w, b):
    return jnp.sum(jnp.sum(jnp.tanh(a @ w) * b, axis=-1) ** 2)


def logsumexp_cross_entropy(x, w, labels):
    logits = x @ w
    picked = jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)


# FSDP: the batch and both weights over all 8 devices
def fully_sharded_mlp(x, w1, w2):
    return jnp.sum(jnp.tanh(jax.nn.relu(x @ w1) @ w2))


# held-out losses of a later session, equal when first run: FSDP with tensor parallelism on 2x2x2, an attention block
# with heads and an out projection, an RMS norm into a SwiGLU on 1-D, a bias and gelu on 2x2x2
def fsdp_tp_mlp_3d(x, w1, w2):
    return jnp.mean(jax.nn.gelu(x @ w1) @ w2)


def attention_block_2d(x, wq, wk, wv, wo):
    B, S, H = x.shape
    q = (x @ wq).reshape(B, S, 4, H // 4)
    k = (x @ wk).reshape(B, S, 4, H // 4)
    v = (x @ wv).reshape(B, S, 4, H // 4)
    a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k), axis=-1)
    return jnp.sum(jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, S, H) @ wo)


def rms_swiglu_1d(x, g, wg, wu, wd):
    h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
    return jnp.sum(((jax.nn.silu(h @ wg) * (h @ wu)) @ wd) ** 2)


def bias_gelu_3d(x, w, b):
    return jnp.sum(jax.nn.gelu(x @ w + b))


# a weight holding the batch's axis on its columns (2x2x2) and an FSDP weight with tp free (2x4): the forward dots
# group the devices as XLA's partitioner does (the Shardy suite's rows_cols_same_axis and fsdp_weight_free_tp)
def grouped_dot_loss(x, w):
    return jnp.sum(jnp.tanh(x @ w) ** 2)


def fsdp_free_tp_loss(x, w):
    return jnp.mean((x @ w) ** 2)


# single positions, held-out: the first position pooled, the last of a 3-D mesh's sequence, one in the middle of tp
def cls_pool_loss(x, w):
    return jnp.sum(jnp.tanh(x[:, 0] @ w) ** 2)


def last_pos_3d_loss(x, w):
    return jnp.sum((x[:, -1] @ w) ** 2)


def mid_pos_loss(x, w):
    return jnp.sum(jnp.tanh(x[:, 5] @ w))


# held-out losses of this session, equal when first run: a biased MLP on 2x2x2, a layer norm into a head, causal
# attention, a mean-pooled embedding classifier, an RMS-normed residual on 1-D, an expert-parallel einsum
def ho_bias_mlp_3d(x, w1, b1, w2):
    return jnp.mean(jnp.tanh(x @ w1 + b1) @ w2)


def ho_ln_head_2d(x, g, w):
    m = x.mean(-1, keepdims=True)
    n = (x - m) * jax.lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * g
    return jnp.sum((n @ w) ** 2)


def ho_causal_attn(x, wq, wk, wv):
    B, S_, H = x.shape
    q = x @ wq
    k = x @ wk
    v = x @ wv
    s = jnp.einsum("bqd,bkd->bqk", q, k)
    mask = jnp.tril(jnp.ones((S_, S_), dtype=bool))
    a = jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)
    return jnp.sum(jnp.einsum("bqk,bkd->bqd", a, v) ** 2)


def ho_embed_pool_cls(t, ids, w):
    e = jnp.take(t, ids, axis=0)
    return jnp.sum(jnp.tanh(e.mean(1) @ w))


def ho_rms_residual_1d(x, g, w):
    h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
    return jnp.sum((x + h @ w) ** 2)


def ho_expert_einsum(x, we):
    return jnp.sum(jnp.tanh(jnp.einsum("etd,edf->etf", x, we)))


def ho11_mlp_1d_mean(x, w1, w2):
    return jnp.mean(jnp.tanh(x @ w1) @ w2)


def ho11_megatron_mlp_2d(x, w1, w2):
    return jnp.sum(jax.nn.gelu(x @ w1) @ w2)


def ho11_onehot_ce(x, w, onehot):
    logits = x @ w
    return -jnp.mean(jnp.sum(onehot * jax.nn.log_softmax(logits, axis=-1), axis=-1))


def ho11_layernorm_mlp_3d(x, g, w):
    m = x.mean(-1, keepdims=True)
    n = (x - m) * jax.lax.rsqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * g
    return jnp.sum(jnp.tanh(n @ w))


def ho11_attn_heads(x, wq, wk, wv):
    B, S_, H = x.shape
    q = (x @ wq).reshape(B, S_, 4, H // 4)
    k = (x @ wk).reshape(B, S_, 4, H // 4)
    v = (x @ wv).reshape(B, S_, 4, H // 4)
    a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k), axis=-1)
    return jnp.sum(jnp.einsum("bhqk,bkhd->bqhd", a, v) ** 2)


def ho11_fsdp_mlp(x, w1, w2):
    return jnp.sum(jax.nn.relu(x @ w1) @ w2)


# a third held-out batch, written before its first run and run once as written
def ho21_roll_seq_loss(x, w):
    h = jnp.tanh(x @ w)
    return jnp.sum(h * jnp.roll(h, -1, axis=1))


def ho21_swiglu_loss(x, wg, wu, wd):
    return jnp.mean((jax.nn.silu(x @ wg) * (x @ wu)) @ wd)


def ho21_rms_proj_loss(x, g, w):
    n = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
    return jnp.sum((n @ w) ** 2)


def ho21_bias_gelu_loss(x, w, b):
    return jnp.sum(jax.nn.gelu(x @ w + b))


def ho21_two_layer_3d(x, w1, w2):
    return jnp.sum(jnp.tanh(jnp.tanh(x @ w1) @ w2))


def ho21_softmax_ce_dp(x, w, y):
    lp = jax.nn.log_softmax(x @ w, axis=-1)
    return -jnp.mean(jnp.sum(y * lp, axis=-1))


# a fourth held-out batch, written before its first run and run once as written
def ho24_megatron_block_loss(x, w1, w2):
    return jnp.mean((jax.nn.gelu(x @ w1) @ w2) ** 2)


def ho24_layernorm_mlp_loss(x, s, w):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    h = (x - m) * jax.lax.rsqrt(v + 1e-5) * s
    return jnp.sum(jnp.tanh(h @ w))


def ho24_attention_proj_loss(x, wq, wk, wo):
    q, k = x @ wq, x @ wk
    a = jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", q, k) / 4.0, axis=-1)
    return jnp.mean(jnp.einsum("bqk,bkd->bqd", a, x) @ wo)


def ho24_fsdp_linear_loss(x, w):
    return jnp.sum(jax.nn.relu(x @ w))


def ho24_embedding_head_loss(table, ids, w):
    return jnp.mean(jnp.take(table, ids, axis=0) @ w)


def ho24_expert_loss_3d(x, w):
    return jnp.sum(jnp.einsum("etd,edf->etf", x, w) ** 2)

# a fifth held-out batch, written before its first run and run once as written (after the propagate search's
# one-operand contraction rule changed, which the cross-attention's forward relies on)
def ho25_cross_attention_loss(x, mem, wq):
    q = x @ wq
    s = jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", q, mem) / 4.0, axis=-1)
    return jnp.mean(jnp.einsum("bqk,bkd->bqd", s, mem) ** 2)


def ho25_softcap_loss(x, w):
    return jnp.mean((30.0 * jnp.tanh((x @ w) / 30.0)) ** 2)


def ho25_gated_residual_loss_3d(x, wg, wv):
    return jnp.sum(x + jax.nn.sigmoid(x @ wg) * (x @ wv))


def ho25_rms_mlp_loss(x, g, w1, w2):
    h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
    return jnp.mean(jax.nn.relu(h @ w1) @ w2)


def ho25_vmap_matmul_loss_3d(x, w):
    return jnp.sum(jnp.tanh(jax.vmap(lambda a, b: a @ b)(x, w)))


def ho25_masked_pool_loss(x, m, w):
    pooled = jnp.sum(x * m[..., None], axis=1) / (jnp.sum(m, axis=1)[:, None] + 1.0)
    return jnp.mean((pooled @ w) ** 2)


# a sixth held-out batch, written before its first run and run once as written
def ho27_merge_heads_loss(o, wo):
    b, s, h, d = o.shape
    return jnp.mean((o.reshape(b, s, h * d) @ wo) ** 2)


def ho27_two_sided_loss_3d(x, w):
    return jnp.sum(jnp.tanh(x @ w))


def ho27_concat_weights_loss(x, w1, w2):
    return jnp.mean(jax.nn.relu(x @ jnp.concatenate([w1, w2], axis=1)))


def ho27_leaky_mlp_loss(x, w1, w2):
    h = x @ w1
    return jnp.sum((jnp.where(h > 0, h, 0.1 * h) @ w2) ** 2)


def ho27_three_matmul_loss_1d(x, a, b, c):
    return jnp.mean(((x @ a) @ b) @ c)


def ho27_layernorm_affine_loss(x, g, b, w):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    return jnp.mean(((x - m) * jax.lax.rsqrt(v + 1e-5) * g + b) @ w)


# an eighth held-out batch, written before its first run and run once as written: a SwiGLU MLP, attention trained
# through its queries, keys and values, an RMS norm into an MLP, an embedding into logits, an FSDP MLP on 1-D, a
# biased GELU, a residual on 2x2x2, a cross entropy over a split vocabulary
def ho31_swiglu_loss(x, w1, w3, w2):
    return jnp.mean(((jax.nn.silu(x @ w1) * (x @ w3)) @ w2) ** 2)


def ho31_attention_loss(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 4.0
    return jnp.mean(jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v))


def ho31_rms_mlp_loss(x, g, w):
    h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
    return jnp.sum(jnp.tanh(h @ w))


def ho31_embed_logits_loss(table, ids, w):
    return jnp.mean(jnp.take(table, ids, axis=0) @ w)


def ho31_fsdp_loss_1d(x, w1, w2):
    return jnp.mean(jax.nn.relu(x @ w1) @ w2)


def ho31_bias_gelu_loss(x, w, b):
    return jnp.mean(jax.nn.gelu(x @ w + b))


def ho31_residual_loss_3d(x, w):
    return jnp.mean((x + x @ w) ** 2)


def ho31_cross_entropy_loss(h, w, labels):
    logp = jax.nn.log_softmax(h @ w, axis=-1)
    return -jnp.mean(jnp.sum(jax.nn.one_hot(labels, 64) * logp, axis=-1))


# ninth held-out training batch: dynamic slices and updates (a KV cache's write into scores, a layer picked from a
# stack, a window of rows, a write into a cache split over its positions), written before its first run
def ho38_kv_write_loss(cache, new, q, pos):
    k = jax.lax.dynamic_update_slice(cache, jnp.tanh(new), (0, pos, 0))
    return jnp.mean(jnp.einsum("bqd,bkd->bqk", q, k) ** 2)


def ho38_layer_pick_loss(x, stack, i):
    return jnp.mean(jnp.tanh(x @ stack[i]))


def ho38_window_rows_loss(x, w, pos):
    h = jnp.tanh(x @ w)
    return jnp.mean(jax.lax.dynamic_slice_in_dim(h, pos, 4, axis=0) ** 2)


def ho38_kv_seq_split_loss(cache, new, pos):
    return jnp.mean(jnp.sin(jax.lax.dynamic_update_slice(cache, new, (0, pos, 0))))



def suite() -> dict:
    """name -> (loss, mesh, [(shape, PartitionSpec) per argument], the trained arguments' positions); an
    ``(shape, "i32")`` shape is int32."""
    return {
        "seq_parallel_matmul": (seq_parallel_matmul, "2d", [((4, 16, 32), P("dp", "tp")), ((32, 32), P())], (1,)),
        "seq_first_matmul": (seq_first_matmul, "2d", [((4, 16, 32), P("tp", "dp")), ((32, 32), P())], (1,)),
        "bias_over_batch_and_sequence": (bias_over_batch_and_sequence, "2d",
                                         [((4, 16, 32), P("dp", "tp")), ((32,), P())], (1,)),
        "einsum_sequence_major": (einsum_sequence_major, "2d", [((16, 4, 32), P("dp", "tp")), ((32, 32), P())],
                                  (1,)),
        "norm_scale": (norm_scale, "2d", [((4, 16, 32), P("dp", "tp")), ((32,), P())], (1,)),
        "rms_scale_3d": (rms_scale_3d, "3d", [((4, 16, 32), P("a", ("b", "c"))), ((32,), P())], (1,)),
        "seq_parallel_3d": (seq_parallel_3d, "3d", [((4, 16, 32), P(("b", "c"), "a")), ((32, 32), P())], (1,)),
        "shifted_sequence": (shifted_sequence, "2d", [((4, 16, 32), P("dp", "tp")), ((32, 32), P())], (1,)),
        "reversed_sequence": (reversed_sequence, "2d", [((4, 16, 32), P("dp", "tp")), ((32, 32), P())], (1,)),
        "optax_cross_entropy": (optax_cross_entropy, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                            (((16,), "i32"), P("dp"))], (1,)),
        "logsumexp_head": (logsumexp_head, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))], (1,)),
        "megatron_mlp": (megatron_mlp, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                              ((64, 32), P("tp"))], (1, 2)),
        "attention_heads": (attention_heads, "2d", [((2, 8, 16), P("dp")), ((16, 16), P(None, "tp")),
                                                    ((16, 16), P(None, "tp")), ((16, 16), P(None, "tp")),
                                                    ((16, 16), P("tp"))], (1, 2, 3, 4)),
        "pre_norm_block": (pre_norm_block, "2d", [((4, 8, 32), P("dp")), ((32,), P()), ((32,), P()),
                                                  ((32, 64), P(None, "tp")), ((64, 32), P("tp"))], (1, 2, 3, 4)),
        "embedding_lookup": (embedding_lookup, "2d", [((64, 32), P(None, "tp")), (((16,), "i32"), P("dp")),
                                                      ((32, 16), P("tp"))], (0, 2)),
        "gated_experts": (gated_experts, "2d", [((16, 8), P("dp")), ((8, 4), P()), ((4, 8, 6), P("tp"))], (1, 2)),
        "rms_projection_3d": (rms_projection_3d, "3d", [((4, 8, 16), P("a", "b")), ((16,), P()),
                                                        ((16, 32), P(None, "c"))], (1, 2)),
        "log_softmax_head": (log_softmax_head, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                      (((16,), "i32"), P("dp"))], (1,)),
        "data_parallel_mlp": (data_parallel_mlp, "1d", [((16, 32), P("d")), ((32, 64), P()), ((64, 32), P())],
                              (1, 2)),
        "megatron_sequence": (megatron_sequence, "2d", [((4, 8, 32), P("dp", "tp")), ((32, 64), P(None, "tp")),
                                                        ((64, 32), P("tp"))], (1, 2)),
        "gpt_block": (gpt_block, "2d", [((2, 8, 16), P("dp")), ((16,), P()), ((16,), P()), ((16, 48), P(None, "tp")),
                                        ((16, 16), P("tp")), ((16,), P()), ((16,), P()), ((16, 32), P(None, "tp")),
                                        ((32, 16), P("tp"))], (1, 2, 3, 4, 5, 6, 7, 8)),
        "tied_embeddings": (tied_embeddings, "2d", [((64, 16), P("tp")), (((16,), "i32"), P("dp"))], (0,)),
        "three_layers_3d": (three_layers_3d, "3d", [((16, 16), P("a")), ((16, 32), P(None, "b")),
                                                    ((32, 16), P("b", "c")), ((16, 8), P("c"))], (1, 2, 3)),
        "table_rows": (table_rows, "2d", [((64, 32), P("tp")), (((16,), "i32"), P("dp")), ((32, 16), P())], (0, 2)),
        "swiglu_mlp": (swiglu_mlp, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((32, 64), P(None, "tp")),
                                          ((64, 32), P("tp"))], (1, 2, 3)),
        "regression": (regression, "2d", [((16, 32), P("dp", "tp")), ((16, 8), P("dp")), ((32, 8), P("tp"))], (2,)),
        "biased_mlp": (biased_mlp, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64,), P("tp")),
                                          ((64, 32), P("tp")), ((32,), P())], (1, 2, 3, 4)),
        "expert_parallel": (expert_parallel, "2d", [((4, 8, 16), P("tp", "dp")), ((4, 16, 8), P("tp"))], (1,)),
        "shard_map_mlp": (shard_map_mlp, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64, 32), P("tp"))],
                          (1, 2)),
        "stopped_target": (stopped_target, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                  ((32, 64), P(None, "tp"))], (1,)),
        "constrained_hidden": (constrained_hidden, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                          ((64, 8), P())], (1, 2)),
        "three_projections": (three_projections, "2d", [((16, 32), P("dp")), ((32, 32), P()),
                                                        ((32, 64), P(None, "tp")), ((32, 64), P(None, "tp")),
                                                        ((32, 64), P(None, "tp"))], (1, 2, 3, 4)),
        "tied_weight": (tied_weight, "2d", [((16, 32), P("dp")), ((16, 32), P("dp")), ((32, 32), P())], (2,)),
        "projection_and_square": (projection_and_square, "2d", [((16, 32), P("dp")), ((32, 32), P()),
                                                                ((32, 64), P(None, "tp"))], (1, 2)),
        "three_projections_3d": (three_projections_3d, "3d", [((16, 32), P("a")), ((32, 32), P()),
                                                              ((32, 64), P(None, ("b", "c"))),
                                                              ((32, 64), P(None, ("b", "c"))),
                                                              ((32, 64), P(None, "c"))], (1, 2, 3, 4)),
        "swiglu_over_dp_and_tp": (swiglu_over_dp_and_tp, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                                ((32, 64), P(None, "tp")), ((64, 32), P("tp"))],
                                  (1, 2, 3)),
        "shared_layers": (shared_layers, "2d", [((16, 32), P("dp")), ((32, 32), P(None, "tp"))], (1,)),
        "residual_block": (residual_block, "2d", [((4, 8, 32), P("dp")), ((32,), P()), ((32,), P()),
                                                  ((32, 64), P(None, "tp")), ((64, 32), P("tp"))], (1, 2, 3, 4)),
        "attention_residual": (attention_residual, "2d", [((2, 8, 16), P("dp")), ((16,), P()), ((16,), P()),
                                                          ((16, 16), P(None, "tp")), ((16, 16), P(None, "tp")),
                                                          ((16, 16), P(None, "tp")), ((16, 16), P("tp"))],
                               (1, 2, 3, 4, 5, 6)),
        "smoothed_cross_entropy": (smoothed_cross_entropy, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                                  (((16,), "i32"), P("dp"))], (1,)),
        "embedding_with_positions": (embedding_with_positions, "2d", [((64, 32), P("tp")), ((8, 32), P()),
                                                                      (((4, 8), "i32"), P("dp")), ((32, 16), P())],
                                     (0, 1, 3)),
        "layer_normed_mlp_1d": (layer_normed_mlp_1d, "1d", [((16, 32), P("d")), ((32, 64), P()), ((64,), P()),
                                                            ((64,), P()), ((64, 16), P())], (1, 2, 3, 4)),
        "query_and_fused_key_value_3d": (query_and_fused_key_value_3d, "3d",
                                         [((16, 32), P("a")), ((32, 64), P(None, ("b", "c"))),
                                          ((32, 64), P(None, "b"))], (1, 2)),
        "gate_and_up_3d": (gate_and_up_3d, "3d", [((4, 8, 32), P("a", "b")), ((32, 64), P(None, "c")),
                                                  ((32, 64), P(None, "c"))], (1, 2)),
        "two_readers_of_a_sequence": (two_readers_of_a_sequence, "2d", [((4, 16, 32), P("dp", "tp")),
                                                                        ((32, 32), P()), ((32, 32), P())], (1, 2)),
        "fsdp_and_tp_3d": (fsdp_and_tp_3d, "3d", [((16, 32), P(("a", "b"))), ((32, 64), P("a", "c")),
                                                  ((64, 32), P("c", "a"))], (1, 2)),
        "two_residual_layers": (two_residual_layers, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                            ((64, 32), P("tp")), ((32, 64), P(None, "tp")),
                                                            ((64, 32), P("tp"))], (1, 2, 3, 4)),
        "multi_query_attention": (multi_query_attention, "2d", [((2, 8, 16), P("dp")), ((16, 16), P(None, "tp")),
                                                                ((16, 4), P()), ((16, 4), P())], (1, 2, 3)),
        "rms_gated_residual": (rms_gated_residual, "2d", [((4, 8, 32), P("dp")), ((32,), P()),
                                                          ((32, 64), P(None, "tp")), ((32, 64), P(None, "tp")),
                                                          ((64, 32), P("tp"))], (1, 2, 3, 4)),
        "head_tied_to_a_parallel_table": (head_tied_to_a_parallel_table, "2d",
                                          [((16, 32), P("dp")), ((64, 32), P("tp")), (((16,), "i32"), P("dp"))],
                                          (1,)),
        "biased_layers": (biased_layers, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64,), P("tp")),
                                                ((64, 32), P("tp")), ((32,), P())], (1, 2, 3, 4)),
        "mean_pooled_classifier": (mean_pooled_classifier, "2d", [((4, 8, 32), P("dp", "tp")), ((32, 32), P()),
                                                                  ((32, 8), P())], (1, 2)),
        "query_key_scores_3d": (query_key_scores_3d, "3d", [((16, 32), P("a")), ((32, 16), P(None, "b")),
                                                            ((32, 16), P(None, "b"))], (1, 2)),
        "top_two_router": (top_two_router, "2d", [((16, 8), P("dp")), ((8, 4), P()), ((4, 8, 6), P("tp"))], (1, 2)),
        "sequence_mean_head": (sequence_mean_head, "2d", [((4, 8, 32), P("dp", "tp")), ((32, 32), P()),
                                                          ((32, 8), P())], (1, 2)),
        "layer_norm_projection_3d": (layer_norm_projection_3d, "3d", [((4, 8, 32), P("a", "b")), ((32,), P()),
                                                                      ((32,), P()), ((32, 16), P(None, "c"))],
                                     (1, 2, 3)),
        "data_parallel_three_layers_1d": (data_parallel_three_layers_1d, "1d",
                                          [((16, 32), P("d")), ((32, 32), P()), ((32, 32), P()), ((32, 8), P())],
                                          (1, 2, 3)),
        "heads_then_out_projection": (heads_then_out_projection, "2d", [((2, 8, 16), P("dp")),
                                                                        ((16, 16), P(None, "tp")),
                                                                        ((16, 16), P("tp"))], (1, 2)),
        "cosine_loss": (cosine_loss, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((16, 64), P("dp"))],
                        (1,)),
        "rowwise_dot": (rowwise_dot, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                            ((16, 64), P("dp", "tp"))], (1,)),
        "logsumexp_cross_entropy": (logsumexp_cross_entropy, "2d", [((16, 32), P("dp")), ((32, 128), P(None, "tp")),
                                                                    (((16,), "i32"), P("dp"))], (1,)),
        "fully_sharded_mlp": (fully_sharded_mlp, "2d", [((16, 32), P(("dp", "tp"))), ((32, 64), P(("dp", "tp"))),
                                                        ((64, 32), P(None, ("dp", "tp")))], (1, 2)),
        "fsdp_tp_mlp_3d": (fsdp_tp_mlp_3d, "3d", [((16, 32), P("a")), ((32, 64), P("b", "c")),
                                                  ((64, 32), P("c", "b"))], (1, 2)),
        "attention_block_2d": (attention_block_2d, "2d", [((2, 8, 16), P("dp")), ((16, 16), P(None, "tp")),
                                                          ((16, 16), P(None, "tp")), ((16, 16), P(None, "tp")),
                                                          ((16, 16), P("tp"))], (1, 2, 3, 4)),
        "rms_swiglu_1d": (rms_swiglu_1d, "1d", [((16, 32), P("d")), ((32,), P()), ((32, 64), P(None, "d")),
                                                ((32, 64), P(None, "d")), ((64, 32), P("d"))], (1, 2, 3, 4)),
        "grouped_dot_loss": (grouped_dot_loss, "3d", [((16, 32), P("a")), ((32, 16), P(None, "a"))], (1,)),
        "fsdp_free_tp_loss": (fsdp_free_tp_loss, "2d", [((16, 32), P("dp")), ((32, 64), P("dp"))], (1,)),
        "cls_pool_loss": (cls_pool_loss, "2d", [((8, 4, 32), P("dp", "tp")), ((32, 16), P())], (0, 1)),
        "last_pos_3d_loss": (last_pos_3d_loss, "3d", [((8, 8, 16), P("a", "b")), ((16, 8), P(None, "c"))],
                             (0, 1)),
        "mid_pos_loss": (mid_pos_loss, "2d", [((16, 8, 32), P("dp", "tp")), ((32, 16), P())], (1,)),
        "mid_pos_trained_loss": (mid_pos_loss, "2d", [((16, 8, 32), P("dp", "tp")), ((32, 16), P())], (0, 1)),
        "ho_bias_mlp_3d": (ho_bias_mlp_3d, "3d", [
            ((16, 32), P(("a", "b"))),
            ((32, 64), P(None, "c")),
            ((64,), P("c")),
            ((64, 16), P("c"))],
            (1, 2, 3)),
        "ho_ln_head_2d": (ho_ln_head_2d, "2d", [((16, 32), P("dp")), ((32,), P()), ((32, 64), P(None, "tp"))], (1, 2)),
        "ho_causal_attn": (ho_causal_attn, "2d", [
            ((2, 8, 16), P("dp")),
            ((16, 16), P(None, "tp")),
            ((16, 16), P(None, "tp")),
            ((16, 16), P(None, "tp"))],
            (1, 2, 3)),
        "ho_embed_pool_cls": (ho_embed_pool_cls, "2d", [
            ((64, 32), P(None, "tp")),
            (((4, 8), "i32"), P("dp")),
            ((32, 8), P())],
            (0, 2)),
        "ho_rms_residual_1d": (ho_rms_residual_1d, "1d", [
            ((16, 32), P("d")),
            ((32,), P()),
            ((32, 32), P(None, "d"))],
            (1, 2)),
        "ho_expert_einsum": (ho_expert_einsum, "2d", [((4, 8, 16), P("tp")), ((4, 16, 16), P("tp"))], (1,)),
        "ho11_mlp_1d_mean": (ho11_mlp_1d_mean, "1d", [((16, 32), P("d")), ((32, 32), P()), ((32, 8), P())], (1, 2)),
        "ho11_megatron_mlp_2d": (ho11_megatron_mlp_2d, "2d", [
            ((16, 32), P("dp")),
            ((32, 64), P(None, "tp")),
            ((64, 32), P("tp"))],
            (1, 2)),
        "ho11_onehot_ce": (ho11_onehot_ce, "2d", [
            ((16, 32), P("dp")),
            ((32, 64), P(None, "tp")),
            ((16, 64), P("dp"))],
            (1,)),
        "ho11_layernorm_mlp_3d": (ho11_layernorm_mlp_3d, "3d", [
            ((16, 32), P(("a", "b"))),
            ((32,), P()),
            ((32, 64), P(None, "c"))],
            (1, 2)),
        "ho11_attn_heads": (ho11_attn_heads, "2d", [
            ((2, 8, 16), P("dp")),
            ((16, 16), P(None, "tp")),
            ((16, 16), P(None, "tp")),
            ((16, 16), P(None, "tp"))],
            (1, 2, 3)),
        "ho11_fsdp_mlp": (ho11_fsdp_mlp, "2d", [
            ((16, 32), P(("dp", "tp"))),
            ((32, 64), P("dp")),
            ((64, 32), P(None, "dp"))],
            (1, 2)),
        "ho21_roll_seq_loss": (ho21_roll_seq_loss, "2d", [
            ((4, 16, 8), P("dp", "tp")),
            ((8, 6), P())],
            (1,)),
        "ho21_swiglu_loss": (ho21_swiglu_loss, "2d", [
            ((16, 32), P("dp")),
            ((32, 64), P(None, "tp")),
            ((32, 64), P(None, "tp")),
            ((64, 32), P("tp"))],
            (1, 2, 3)),
        "ho21_rms_proj_loss": (ho21_rms_proj_loss, "2d", [
            ((16, 32), P("dp")),
            ((32,), P()),
            ((32, 16), P(None, "tp"))],
            (1, 2)),
        "ho21_bias_gelu_loss": (ho21_bias_gelu_loss, "2d", [
            ((16, 32), P("dp")),
            ((32, 64), P(None, "tp")),
            ((64,), P("tp"))],
            (1, 2)),
        "ho21_two_layer_3d": (ho21_two_layer_3d, "3d", [
            ((16, 32), P("a")),
            ((32, 32), P(None, ("b", "c"))),
            ((32, 16), P(("b", "c")))],
            (1, 2)),
        "ho21_softmax_ce_dp": (ho21_softmax_ce_dp, "1d", [
            ((16, 32), P("d")),
            ((32, 10), P()),
            ((16, 10), P("d"))],
            (1,)),
        "ho24_megatron_block_loss": (ho24_megatron_block_loss, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                                      ((64, 32), P("tp"))], (1, 2)),
        "ho24_layernorm_mlp_loss": (ho24_layernorm_mlp_loss, "2d", [((4, 8, 32), P("dp")), ((32,), P()),
                                                                    ((32, 16), P(None, "tp"))], (1, 2)),
        "ho24_attention_proj_loss": (ho24_attention_proj_loss, "2d", [((2, 8, 16), P("dp")), ((16, 16), P(None, "tp")),
                                                                      ((16, 16), P(None, "tp")), ((16, 8), P())],
                                     (1, 2, 3)),
        "ho24_fsdp_linear_loss": (ho24_fsdp_linear_loss, "2d", [((16, 32), P("dp")), ((32, 64), P("dp", "tp"))], (1,)),
        "ho24_embedding_head_loss": (ho24_embedding_head_loss, "2d", [((64, 16), P("tp")), (((8,), "i32"), P("dp")),
                                                                      ((16, 8), P())], (0, 2)),
        "ho24_expert_loss_3d": (ho24_expert_loss_3d, "3d", [((4, 8, 16), P("a", "b")), ((4, 16, 8), P("a", None, "c"))],
                                (1,)),
        "ho25_cross_attention_loss": (ho25_cross_attention_loss, "2d", [((2, 8, 16), P("dp")),
                                                                        ((2, 12, 16), P("dp")),
                                                                        ((16, 16), P(None, "tp"))], (2,)),
        "ho25_softcap_loss": (ho25_softcap_loss, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))], (1,)),
        "ho25_gated_residual_loss_3d": (ho25_gated_residual_loss_3d, "3d", [((8, 16), P(("a", "b"))),
                                                                            ((16, 16), P(None, "c")),
                                                                            ((16, 16), P(None, "c"))], (1, 2)),
        "ho25_rms_mlp_loss": (ho25_rms_mlp_loss, "2d", [((16, 32), P("dp")), ((32,), P()), ((32, 64), P(None, "tp")),
                                                        ((64, 32), P("tp"))], (1, 2, 3)),
        "ho25_vmap_matmul_loss_3d": (ho25_vmap_matmul_loss_3d, "3d", [((4, 8, 16), P("a", "b")),
                                                                      ((4, 16, 8), P("a", None, "c"))], (1,)),
        "ho25_masked_pool_loss": (ho25_masked_pool_loss, "2d", [((4, 16, 32), P("dp", "tp")),
                                                                ((4, 16), P("dp", "tp")), ((32, 8), P())], (0, 2)),
        "ho27_merge_heads_loss": (ho27_merge_heads_loss, "2d", [((2, 8, 4, 16), P("dp", None, "tp")),
                                                                ((64, 32), P("tp"))], (1,)),
        "ho27_two_sided_loss_3d": (ho27_two_sided_loss_3d, "3d", [((16, 32), P(None, "a")), ((32, 16), P("b"))], (1,)),
        "ho27_concat_weights_loss": (ho27_concat_weights_loss, "2d", [((16, 32), P("dp")), ((32, 16), P(None, "tp")),
                                                                      ((32, 16), P(None, "tp"))], (1, 2)),
        "ho27_leaky_mlp_loss": (ho27_leaky_mlp_loss, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                            ((64, 32), P("tp"))], (1, 2)),
        "ho27_three_matmul_loss_1d": (ho27_three_matmul_loss_1d, "1d", [((16, 32), P()), ((32, 64), P(None, "d")),
                                                                        ((64, 32), P("d")), ((32, 64), P(None, "d"))],
                                      (1, 2, 3)),
        "ho27_layernorm_affine_loss": (ho27_layernorm_affine_loss, "2d", [((4, 16, 32), P("dp", "tp")), ((32,), P()),
                                                                          ((32,), P()), ((32, 8), P())], (1, 2, 3)),
        "ho31_swiglu_loss": (ho31_swiglu_loss, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                      ((32, 64), P(None, "tp")), ((64, 32), P("tp"))], (1, 2, 3)),
        "ho31_attention_loss": (ho31_attention_loss, "2d", [((2, 4, 8, 16), P("dp", "tp")),
                                                            ((2, 4, 8, 16), P("dp", "tp")),
                                                            ((2, 4, 8, 16), P("dp", "tp"))], (0, 1, 2)),
        "ho31_rms_mlp_loss": (ho31_rms_mlp_loss, "2d", [((4, 8, 32), P("dp", None, "tp")), ((32,), P()),
                                                        ((32, 16), P("tp"))], (1, 2)),
        "ho31_embed_logits_loss": (ho31_embed_logits_loss, "2d", [((64, 16), P("tp")), (((8,), "i32"), P("dp")),
                                                                  ((16, 64), P(None, "tp"))], (0, 2)),
        "ho31_fsdp_loss_1d": (ho31_fsdp_loss_1d, "1d", [((16, 32), P("d")), ((32, 64), P("d")),
                                                        ((64, 32), P(None, "d"))], (1, 2)),
        "ho31_bias_gelu_loss": (ho31_bias_gelu_loss, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                            ((64,), P("tp"))], (1, 2)),
        "ho31_residual_loss_3d": (ho31_residual_loss_3d, "3d", [((8, 16), P("a")), ((16, 16), P(None, "b"))], (1,)),
        "ho31_cross_entropy_loss": (ho31_cross_entropy_loss, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                                    (((16,), "i32"), P("dp"))], (1,)),
        "ho38_kv_write_loss": (ho38_kv_write_loss, "2d", [((2, 16, 32), P("dp", None, "tp")),
                                                          ((2, 1, 32), P("dp", None, "tp")),
                                                          ((2, 4, 32), P("dp", None, "tp")), (((), "i32"), P())], (0, 1)),
        "ho38_layer_pick_loss": (ho38_layer_pick_loss, "2d", [((16, 32), P("dp")), ((4, 32, 16), P(None, None, "tp")),
                                                              (((), "i32"), P())], (1,)),
        "ho38_window_rows_loss": (ho38_window_rows_loss, "2d", [((16, 32), P("dp")), ((32, 16), P(None, "tp")),
                                                                (((), "i32"), P())], (1,)),
        "ho38_kv_seq_split_loss": (ho38_kv_seq_split_loss, "2d", [((2, 16, 32), P("dp", "tp", None)),
                                                                  ((2, 1, 32), P("dp", None, None)), (((), "i32"), P())],
                                   (0, 1)),
        "bias_gelu_3d": (bias_gelu_3d, "3d", [((16, 32), P(("a", "b"))), ((32, 64), P(None, "c")), ((64,), P("c"))],
                         (1, 2)),
    }


def run(root: str, names) -> dict:
    sys.path.insert(0, root)
    from planner.api import plan
    from planner.engines.jax_run import planned_collectives
    from planner.engines.xla_hlo import collectives as xla_collectives
    from planner.frontends.jax import trace_function

    make_meshes()
    cases = suite()
    out, groups = {}, {}
    for name in names or sorted(cases):
        fn, mesh_key, specs, trained = cases[name]
        mesh, args, shardings = arguments(mesh_key, specs)
        # the step returns the loss whole and each gradient in its parameter's layout (to update it in place)
        out_shardings = (NamedSharding(mesh, P()), tuple(shardings[i] for i in trained))
        compiled = jax.jit(jax.value_and_grad(fn, argnums=trained), in_shardings=shardings,
                           out_shardings=out_shardings).lower(*args).compile()
        names_ = fn.__code__.co_varnames[:fn.__code__.co_argcount]
        try:
            traced = trace_function(fn, *args, params=tuple(names_[i] for i in trained), mesh=mesh,
                                    shardings=shardings)
            p = plan(traced.graph, search="propagate", training=True)
        except Exception as e:  # recorded: a loss the planner refuses is a difference, not a crash
            out[name], groups[name] = {"plan": f"{type(e).__name__}: {' '.join(str(e).split())}"}, {}
            continue
        planned, theirs = planned_collectives(p), xla_collectives(compiled.as_text(), mesh.size)
        out[name] = collective_bytes(planned, theirs)
        groups[name] = {t: gradient_groups(t, specs[i][0], planned, theirs)
                        for t, i in zip((names_[i] for i in trained), trained)}
    return {"bytes": out, "groups": groups}


def gradient_groups(param: str, shape, planned, compiled) -> dict:
    """The device groups of each AllReduce that completes ``param``'s gradient, in order: the plan's gradient
    reductions of it, and XLA's all-reduces of an array of its shape (alone or combined with others)."""
    array = f"f32[{','.join(map(str, shape))}]"
    norm = lambda groups: sorted(sorted(g) for g in groups)  # noqa: E731
    return {"plan": [norm(c.replica_groups) for c in planned
                     if c.phase == "gradient" and c.tensor == param and c.kind == "AllReduce"],
            "xla": [norm(c.replica_groups) for c in compiled if c.kind == "all-reduce" and array in c.arrays]}


if __name__ == "__main__":
    root, *names = sys.argv[1:]
    print(json.dumps(run(root, names)))
