"""JAX functions planned with ``--search propagate`` and compiled by JAX, whose Shardy propagation is the reference.

Run as a script (``python tests/frontends/shardy_suite.py ROOT DUMP_DIR [NAME ...]``, with
``XLA_FLAGS=--xla_force_host_platform_device_count=8 --xla_dump_to=DUMP_DIR --xla_dump_hlo_pass_re=shardy-xla``):
for every function of :func:`suite` (or those named) it compiles ``jax.jit(fn, in_shardings=...)`` (XLA dumps
Shardy's module after propagation, ``shardy/<module>/02.after_propagation.mlir``), traces the same function
with the frontend, plans it with ``search="propagate"``, and prints one JSON line: per function, the anchors
both sides have (each matmul, einsum, transpose, reshape, gather, concat, slice, reduction and elementwise op
of :data:`ANCHORS`, matched by kind and result shape in program order where both sides have as many of that
kind and shape, and the function's results) with the two shardings. Ops one side spells as several (softmax,
the norms, gelu) are compared where they meet the anchors around them.
:mod:`tests.frontends.test_shardy_suite` reads it.
"""

import glob
import json
import os
import re
import sys

try:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
except ImportError:  # imported for doctest collection where JAX is not installed; running it needs JAX
    jax = jnp = NamedSharding = P = None

#: mesh name -> (shape, axis names)
MESHES = {"1d": ((8,), ("d",)), "2d": ((2, 4), ("dp", "tp")), "3d": ((2, 2, 2), ("a", "b", "c"))}


def _ln(x, s, b):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * s + b


def _rms(x, w):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def mlp_megatron(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def mlp_data_parallel(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


def mlp_fsdp(x, w1, w2):
    return jax.nn.gelu(x @ w1) @ w2


def matmul_chain(x, a, b, c):
    return ((x @ a) @ b) @ c


def bias_gelu(x, w, b):
    return jax.nn.gelu(x @ w + b)


def contracting_sharded(x, w):
    return x @ w


def transpose_b(x, w):
    return jnp.einsum("bk,nk->bn", x, w)


def attention(x, wq, wk, wv, wo):
    b, s, h = x.shape
    n = 4

    def heads(t):
        return t.reshape(b, s, n, h // n).transpose(0, 2, 1, 3)

    q, k, v = heads(x @ wq), heads(x @ wk), heads(x @ wv)
    p = jax.nn.softmax(jnp.einsum("bnqd,bnkd->bnqk", q, k) * (1.0 / (h // n) ** 0.5), axis=-1)
    ctx = jnp.einsum("bnqk,bnkd->bnqd", p, v).transpose(0, 2, 1, 3).reshape(b, s, h)
    return ctx @ wo


def softmax_rows(x):
    return jax.nn.softmax(x, axis=-1)


def softmax_sharded_axis(x):
    return jax.nn.softmax(x, axis=-1)


def layernorm_block(x, s, b, w):
    return _ln(x, s, b) @ w


def rmsnorm_block(x, g, w):
    return _rms(x, g) @ w


def concat_features(x, y, w):
    return jnp.concatenate([x, y], axis=1) @ w


def slice_rows(x, w):
    return x[:8] @ w


def embedding(table, ids, w):
    return jnp.take(table, ids, axis=0) @ w


def moe_dispatch(mask, x, w1, w2):
    e = jnp.einsum("tec,th->ech", mask, x)
    h = jax.nn.relu(jnp.einsum("ech,ehf->ecf", e, w1))
    y = jnp.einsum("ecf,efh->ech", h, w2)
    return jnp.einsum("tec,ech->th", mask, y)


def constrained_mlp(x, w1, w2):
    h = jax.lax.with_sharding_constraint(jax.nn.relu(x @ w1), NamedSharding(_MESH["2d"], P("dp", None)))
    return h @ w2


def mesh3d_mlp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def transposes(x):
    return jnp.tanh(x.T).T * 2.0


def row_sums(x, w):
    return jnp.sum(x @ w, axis=1)


def centred(x, w):
    h = x @ w
    return h - jnp.mean(h, axis=0, keepdims=True)


def broadcast_bias(x, b):
    return jnp.exp(jnp.tanh(x + b))


def batched_scores(q, k):
    return jnp.einsum("bnqd,bnkd->bnqk", q, k)


def merge_heads(x, w):
    b, n, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, n * d) @ w


def split_heads(x, w):
    h = x @ w
    b, s, f = h.shape
    return h.reshape(b, s, 4, f // 4)


def residual(x, w1, w2):
    return x + jax.nn.relu(x @ w1) @ w2


def two_layers_norm(x, w1, s, b, w2):
    return _ln(jax.nn.relu(x @ w1), s, b) @ w2


def lm_head(table, ids, head):
    return jnp.take(table, ids, axis=0) @ head


def max_rows(x, w):
    return jnp.max(x @ w, axis=-1)


def scores_3d(q, k):
    return jax.nn.softmax(jnp.einsum("bnqd,bnkd->bnqk", q, k), axis=-1)


def glu(x, wa, wb, wo):
    return (jax.nn.sigmoid(x @ wa) * (x @ wb)) @ wo


def reshard_then_matmul(x, w):
    h = jax.lax.with_sharding_constraint(x, NamedSharding(_MESH["1d"], P(None, "d")))
    return h @ w


def sliced_features(x, w):
    return x[:, 16:] @ w


_MESH: dict = {}  # filled by run(): making a mesh needs the 8 devices, importing this module does not

def concat_sharded_axis(x, y):
    return jnp.tanh(jnp.concatenate([x, y], axis=1))


def slice_sharded_axis(x):
    return jnp.tanh(x[:, :16])


def layernorm_sharded_hidden(x, s, b):
    return _ln(x, s, b)


def max_sharded_axis(x):
    return jnp.max(jnp.tanh(x), axis=-1)


def vocab_parallel_gather(table, ids):
    return jnp.tanh(jnp.take(table, ids, axis=0))


def contracting_conflict(x, w):
    return jax.lax.with_sharding_constraint(x @ w, NamedSharding(_MESH["2d"], P(None, "tp")))


def mesh3d_wide(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def attention_3d(x, wq, wk):
    b, s, h = x.shape
    q = (x @ wq).reshape(b, s, 4, h // 4).transpose(0, 2, 1, 3)
    k = (x @ wk).reshape(b, s, 4, h // 4).transpose(0, 2, 1, 3)
    return jax.nn.softmax(jnp.einsum("bnqd,bnkd->bnqk", q, k), axis=-1)


def reshape_split_sharded(x):
    return jnp.tanh(x.reshape(4, 4, 32))


def batch_conflict(x, w):
    return x @ w


def megatron_1d(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


def mesh3d_data_parallel(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def constrained_agreeing(x, w1, w2):
    # the constraint asks for what propagation gives the value anyway: it pins, it does not move
    h = jax.lax.with_sharding_constraint(jnp.tanh(x @ w1), NamedSharding(_MESH["2d"], P("dp", "tp")))
    return h @ w2


def moe_experts(mask, x, w1, w2):
    e = jnp.einsum("tec,th->ech", mask, x)
    h = jnp.tanh(jnp.einsum("ech,ehf->ecf", e, w1))
    return jnp.einsum("ecf,efh->ech", h, w2)


def attention_1d(x, wq, wk, wv, wo):
    return attention(x, wq, wk, wv, wo)


def norm_mlp_3d(x, s, b, w1, w2):
    return jax.nn.relu(_ln(x, s, b) @ w1) @ w2


def rmsnorm_1d(x, g, w):
    return _rms(x, g) @ w


def concat_rows(x, y, w):
    return jnp.concatenate([x, y], axis=0) @ w


def gather_rows_3d(table, ids, w):
    return jnp.take(table, ids, axis=0) @ w


def moe_token_sharded(mask, x, w1):
    return jnp.tanh(jnp.einsum("ech,ehf->ecf", jnp.einsum("tec,th->ech", mask, x), w1))


# -- more functions of the same kinds, first written as held-out programs: MLPs, norms and softmax written out,
# reductions, transposes, head splits and merges, gathers, concat/slice, MoE einsums, constraints, 1-D to 3-D


def mlp3(x, a, b, c):
    return jnp.tanh(jax.nn.relu(x @ a) @ b) @ c


def gelu_mlp_1d(x, w1, w2):
    return jax.nn.gelu(x @ w1) @ w2


def attn_rows(x, wq, wk):
    q = x @ wq
    k = x @ wk
    return jax.nn.softmax(q @ k.T, axis=-1)


def ln_then_mm(x, s, b, w):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (((x - m) / jnp.sqrt(v + 1e-5)) * s + b) @ w


def rms_3d(x, g, w):
    return (x / jnp.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g) @ w


def sum_cols(x, w):
    return jnp.sum(x @ w, axis=0)


def mean_rows(x, w):
    return jnp.mean(jnp.tanh(x @ w), axis=1)


def transpose_mm(x, w):
    return (x.T @ w)


def einsum_bmm(a, b):
    return jnp.einsum("bij,bjk->bik", a, b)


def residual2(x, w1, w2):
    return x + jnp.tanh(x @ w1) @ w2


def bias_relu(x, w, b):
    return jax.nn.relu(x @ w + b)


def split_merge(x, w):
    b, s, hdim = x.shape
    y = (x @ w).reshape(b, s, 4, hdim // 4)
    return jnp.tanh(y).reshape(b, s, hdim)


def take_sum(table, ids):
    return jnp.sum(jnp.take(table, ids, axis=0), axis=-1)


def concat_mm(x, y, w):
    return jnp.concatenate([x, y], axis=-1) @ w


def slice_mm(x, w):
    return x[:, :16] @ w


def moe2(mask, x, w1, w2):
    d = jnp.einsum("tec,th->ech", mask, x)
    h = jax.nn.relu(jnp.einsum("ech,ehf->ecf", d, w1))
    return jnp.einsum("ecf,efh->ech", h, w2)


def fsdp3d(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


def two_matmul_sum(x, w1, w2):
    return x @ w1 + x @ w2


def scale(x, w):
    return (x @ w) * 0.5


def exp_norm(x):
    return jnp.exp(x) / jnp.sum(jnp.exp(x), axis=0, keepdims=True)


def max_cols(x, w):
    return jnp.max(x @ w, axis=0)


def square_mm(x, w):
    return (x * x) @ w


def dp_tp_chain(x, w1, w2, w3):
    return jnp.tanh(jnp.tanh(x @ w1) @ w2) @ w3


def vocab_head(x, head):
    return jax.nn.softmax(x @ head, axis=-1)


def outer_batch(a, b):
    return jnp.einsum("bi,bj->bij", a, b)


def sub_mean(x):
    return x - jnp.mean(x, axis=0, keepdims=True)


def attn_1d_heads(x, wq, wk):
    b, s, h = x.shape
    q = (x @ wq).reshape(b, s, 2, h // 2)
    k = (x @ wk).reshape(b, s, 2, h // 2)
    return jnp.einsum("bqhd,bkhd->bhqk", q, k)


def reshape_flat(x, w):
    return x.reshape(-1, x.shape[-1]) @ w


def constraint_mid(x, w1, w2):
    h = jax.lax.with_sharding_constraint(jnp.tanh(x @ w1), NamedSharding(_MESH["2d"], P("dp", None)))
    return h @ w2


def sum_sharded_then_mm(x, w):
    return jnp.sum(x, axis=0, keepdims=True) @ w


def mean_sharded_dim(x, w):
    return jnp.mean(x @ w, axis=-1)


def vocab_gather_3d(table, ids):
    return jnp.take(table, ids, axis=0) * 2.0


def transpose_then_mm(x, w):
    return jnp.tanh(x).T @ w


def mm_transpose(x, w):
    return (x @ w).T


def three_axes_matmul(x, w):
    return x @ w


def heads_transpose(x, w):
    b, s, h = x.shape
    return (x @ w).reshape(b, s, 4, h // 4).transpose(0, 2, 1, 3)


def merge_transpose(x, w):
    b, n, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, n * d) @ w


def bias_add_1d(x, b):
    return x + b


def outer_sum(a, b):
    return a[:, None] + b[None, :]


def scale_shift(x, s, b):
    return x * s + b


def two_dots_shared(x, w1, w2):
    return (x @ w1) * (x @ w2)


def dp_matmul_reduce(x, w):
    return jnp.sum(x @ w)


def tp_mlp_residual(x, w1, w2):
    return x + jax.nn.gelu(x @ w1) @ w2


def fsdp_2d(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


def seq_parallel(x, w):
    return jnp.tanh(x) @ w


def expert_einsum(x, w):
    return jnp.einsum("ecd,edf->ecf", x, w)


def batched_3d(a, b):
    return jnp.einsum("bij,bjk->bik", a, b)


def contract_3d(x, w):
    return jnp.einsum("bsh,hf->bsf", x, w)


def rowwise_max_sub(x):
    return x - jnp.max(x, axis=-1, keepdims=True)


def constraint_open(x, w):
    h = jax.lax.with_sharding_constraint(x @ w, NamedSharding(_MESH["2d"], P(None, "tp")))
    return jnp.tanh(h)


def chain_1d(x, a, b):
    return jnp.tanh(jnp.tanh(x @ a) @ b)


def wide_3d(x, w):
    return jax.nn.relu(x @ w)


def emb_sum(table, ids, w):
    return jnp.sum(jnp.take(table, ids, axis=0), axis=0) @ w


def log_softmax_rows(x):
    return jax.nn.log_softmax(x, axis=-1)


def lm_logprobs(x, w):
    return jax.nn.log_softmax(x @ w, axis=-1)


def logprob_sum(x, w, c):
    return jnp.sum(jax.nn.log_softmax(x @ w, axis=-1) * c, axis=-1)


# results that a JAX array cannot hold as computed: Shardy delivers each in the whole axes that divide it
def shift_left(x):
    return jnp.tanh(x[:, 1:])


def shift_right(x):
    return x[:, :-1] * 2.0


def shifted_product(x, y):
    return jnp.sum(x[:, :-1] * y[:, 1:], axis=-1)


def inner_window(x):
    return jnp.exp(x[:, 2:30])


def split_rows_2d(x):
    return jnp.tanh(x.reshape(4, 4, 32))


def uneven_rows_3d(x):
    return jnp.tanh(x[4:])


def split_and_scale(x):
    return jnp.tanh(x.reshape(4, 4, 32)), x * 2.0


def split_merge_back(x):
    return jnp.tanh(x.reshape(4, 4, 32)).reshape(16, 32)


# reductions over several sharded dimensions: XLA all-reduces one reduced dimension at a time, the last first
def loss_sum_2d(x, w):
    return jnp.sum(jnp.tanh(x @ w))


def mean_all_3d(x):
    return jnp.mean(x)


def max_all_2d(x):
    return jnp.max(x)


def sum_two_of_three(x):
    return jnp.sum(x, axis=(0, 2))


def xent_vocab_parallel(x, w, y):
    return -jnp.sum(jax.nn.log_softmax(x @ w, axis=-1) * y)


# first written as held-out programs of this session: an LLM block's usual pieces (SwiGLU, multi-head attention,
# rotary halves, pooling, MSE), losses with abs and sqrt, stack and tile
def swiglu(x, wg, wu, wd):
    return (jax.nn.silu(x @ wg) * (x @ wu)) @ wd


def mha_2d(x, wq, wk, wv, wo):
    b, s, d = x.shape
    h = 4
    q = (x @ wq).reshape(b, s, h, d // h)
    k = (x @ wk).reshape(b, s, h, d // h)
    v = (x @ wv).reshape(b, s, h, d // h)
    a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 4.0, axis=-1)
    o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(b, s, d)
    return o @ wo


def ln_res(x, w, g, b):
    h = x + jnp.tanh(x @ w)
    m = h.mean(-1, keepdims=True)
    v = ((h - m) ** 2).mean(-1, keepdims=True)
    return (h - m) / jnp.sqrt(v + 1e-5) * g + b


def gather_emb_mm(t, ids, w):
    return jnp.take(t, ids, axis=0) @ w


def moe_gate(x, wg, we):
    g = jax.nn.softmax(x @ wg, axis=-1)
    e = jnp.einsum("td,edf->tef", x, we)
    return jnp.einsum("te,tef->tf", g, e)


def concat_heads(a, b, w):
    return jnp.concatenate([a, b], axis=-1) @ w


def split_half(x, w):
    h = x @ w
    a, b = h[:, :32], h[:, 32:]
    return a * jax.nn.sigmoid(b)


def bmm3d(a, b):
    return jnp.einsum("bij,bjk->bik", a, b)


def transpose_mm2(x, w):
    return (x.T @ w).T


def rms_mm_3d(x, g, w):
    r = x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g
    return r @ w


def constrained_chain(x, w1, w2):
    h = jax.lax.with_sharding_constraint(x @ w1, NamedSharding(_MESH["2d"], P("dp", None)))
    return h @ w2


def mean_pool(x, w):
    return jnp.mean(x, axis=1) @ w


def max_pool(x):
    return jnp.max(x, axis=1)


def scale_softmax(x):
    return jax.nn.softmax(x * 0.125, axis=-1)


def resid_gelu_3d(x, w1, w2):
    return x + jax.nn.gelu(x @ w1) @ w2


def outer3(a, b):
    return a[:, None] * b[None, :]


def neg_exp_sum(x):
    return jnp.sum(jnp.exp(-x), axis=0)


def two_heads(x, w1, w2):
    return x @ w1, x @ w2


def dp_mse(x, w, y):
    return jnp.mean((x @ w - y) ** 2)


def einsum_proj(x, w):
    return jnp.einsum("bsd,df->bsf", x, w)


def abs_mean(x):
    return jnp.mean(jnp.abs(x))


def square_norm(x):
    return jnp.sqrt(jnp.sum(x * x, axis=-1))


def stack2(a, b):
    return jnp.stack([a, b], axis=0)


def tile_rows(x):
    return jnp.tile(x, (2, 1))


def rotary(x, c, s):
    x1, x2 = x[..., :16], x[..., 16:]
    return jnp.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)


def flatten_bs(x, w):
    return x.reshape(-1, 32) @ w


def clip(x):
    return jnp.clip(x, -1.0, 1.0)


def head_merge_4d(x, w):
    b, h, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * d) @ w


def bias3d(x, w, b):
    return x @ w + b


def expand_dims_mul(x, y):
    return x[:, :, None] * y[:, None, :]


def sum_keep(x):
    return x / jnp.sum(x, axis=-1, keepdims=True)


def swap_axes(x, w):
    return jnp.swapaxes(x, 0, 1) @ w


def silu_mm(x, w):
    return jax.nn.silu(x) @ w


# comparisons and jnp.where (select): leaky relu, a masked fill, a hinge loss, jax.grad's relu backward
def leaky_mm(x, w):
    return jax.nn.leaky_relu(x @ w, 0.1)


def where_bcast(x, b):
    return jnp.where(x > b, x, b)


def relu_grad(x):
    return jax.grad(lambda z: jnp.sum(jax.nn.relu(z)))(x)


def mask_select(x, m):
    return jnp.where(m > 0, x, -1e9)


def hinge(x, w, y):
    return jnp.mean(jnp.maximum(0.0, 1.0 - (x @ w) * y))


def where_3d(x, w):
    h = x @ w
    return jnp.where(h > 0, h, jnp.exp(h) - 1.0)


def cmp_cast(x):
    return jnp.sum((x > 0).astype(jnp.float32), axis=1)


# jax.nn.logsumexp (its guarded max, is_finite and select read op by op; the shift's stop_gradient kept)
def lse_rows(x, w):
    return jax.nn.logsumexp(x @ w, axis=-1)


def lse_loss(x, w, y):
    return jnp.mean(jax.nn.logsumexp(x @ w, axis=-1) - jnp.sum((x @ w) * y, axis=-1))


def lse_keep(x):
    return x - jax.nn.logsumexp(x, axis=-1, keepdims=True)


def lse_1d(x):
    return jax.nn.logsumexp(x, axis=0)


# gathers, MoE dispatch and combine, constraints on 2x2x2, full attention, grouped-query scores
def emb_lookup_3d(t, ids):
    return jnp.take(t, ids, axis=0)


def emb_then_ln(t, ids, g):
    e = t[ids]
    m = e.mean(-1, keepdims=True)
    v = ((e - m) ** 2).mean(-1, keepdims=True)
    return (e - m) * jax.lax.rsqrt(v + 1e-5) * g


def tied_head(t, ids):
    e = jnp.take(t, ids, axis=0)
    return e @ t.T


def moe_top1(x, wg, we):
    g = jax.nn.softmax(x @ wg, axis=-1)
    h = jnp.einsum("td,edh->teh", x, we)
    return jnp.sum(g[:, :, None] * h, axis=1)


def moe_dispatch_combine(d, x, w1, w2):
    xe = jnp.einsum("tec,td->ecd", d, x)
    h = jax.nn.relu(jnp.einsum("ecd,edf->ecf", xe, w1))
    ye = jnp.einsum("ecf,efd->ecd", h, w2)
    return jnp.einsum("tec,ecd->td", d, ye)


def constraint_3d(x, w):
    h = x @ w
    h = jax.lax.with_sharding_constraint(h, NamedSharding(_MESH["3d"], P(("a", "b"), "c")))
    return jnp.tanh(h)


def attn_3d_full(x, wq, wk, wv):
    q = x @ wq
    k = x @ wk
    v = x @ wv
    s = jnp.einsum("bqd,bkd->bqk", q, k) / 8.0
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def gqa(q, k):
    q = q.reshape(2, 8, 2, 2, 8)
    return jnp.einsum("bsghd,btgd->bghst", q, k)


# iota (jax.nn.one_hot, a jnp.tril causal mask), jnp.pad, log_sigmoid (log1p), jax.grad of relu
def one_hot_dispatch(ids, x):
    return jnp.einsum("te,td->ed", jax.nn.one_hot(ids, 4), x)


def causal_mask(s):
    m = jnp.tril(jnp.ones((16, 16), bool))
    return jnp.where(m, s, -1e9)


def pad_seq(x):
    return jnp.pad(x, ((0, 0), (1, 0)))


def log_sigmoid_loss(x, w):
    return -jnp.mean(jax.nn.log_sigmoid(x @ w))


def where_relu_grad(x):
    return jax.grad(lambda z: jnp.sum(jax.nn.relu(z)))(x)


# constraints that move a value between layouts, first written as held-out programs: XLA's own reshards (axes
# swapped, merged, split and rotated between dimensions, to and from partial replication, on 1-D to 3-D meshes)
def constraint_open_dim(x, w):
    h = jax.lax.with_sharding_constraint(x @ w, NamedSharding(_MESH["2d"], P("dp", P.UNCONSTRAINED)))
    return h * 2.0


def swap_constraint(x):
    return jax.lax.with_sharding_constraint(x * 2.0, NamedSharding(_MESH["2d"], P("tp", "dp"))) + 1.0


def double_constraint(x):
    a = jax.lax.with_sharding_constraint(x, NamedSharding(_MESH["2d"], P("dp", "tp")))
    b = jax.lax.with_sharding_constraint(a * 2.0, NamedSharding(_MESH["2d"], P("tp", "dp")))
    return b + 1.0


def merge_axes_rows(x):
    return jax.lax.with_sharding_constraint(jnp.tanh(x), NamedSharding(_MESH["2d"], P(("dp", "tp"), None))) * 3.0


def split_axes_cols(x):
    return jax.lax.with_sharding_constraint(jnp.tanh(x), NamedSharding(_MESH["2d"], P("dp", "tp"))) * 3.0


def rotate_3d(x):
    return jax.lax.with_sharding_constraint(jnp.tanh(x), NamedSharding(_MESH["3d"], P(("b", "c"), "a"))) - 1.0


def cycle_3d(x, w):
    h = jax.lax.with_sharding_constraint(x @ w, NamedSharding(_MESH["3d"], P("c", ("a", "b"))))
    return jnp.tanh(h)


def to_partial(x):
    return jax.lax.with_sharding_constraint(jnp.exp(x), NamedSharding(_MESH["2d"], P(None, "tp"))) + x.sum()


def seq_to_heads(x):
    # sequence-parallel [b, s/tp, h] to head-parallel [b, s, h/tp] (Megatron's sequence -> tensor transition)
    return jax.lax.with_sharding_constraint(jnp.tanh(x), NamedSharding(_MESH["2d"], P("dp", None, "tp"))) * 2.0


def transpose_constraint(x):
    return jax.lax.with_sharding_constraint(jnp.tanh(x).T, NamedSharding(_MESH["2d"], P("dp", "tp"))) * 2.0


def fsdp_gather(x, w):
    w2 = jax.lax.with_sharding_constraint(w, NamedSharding(_MESH["2d"], P(None, "tp")))
    return x @ w2


def regroup_1d(x):
    return jax.lax.with_sharding_constraint(jnp.tanh(x), NamedSharding(_MESH["1d"], P(None, "d"))) + 1.0


def minor_major_3d(x):
    return jax.lax.with_sharding_constraint(jnp.tanh(x), NamedSharding(_MESH["3d"], P(("c", "b", "a"), None))) * 2.0


# argmax and argmin: a top-1 router's expert choice, accuracy against labels, over sharded and unsharded axes
def argmax_route(x, wg):
    return jnp.argmax(x @ wg, axis=-1)


def top1_dispatch(x, wg, we):
    logits = x @ wg
    probs = jax.nn.softmax(logits, axis=-1)
    choice = jax.nn.one_hot(jnp.argmax(logits, axis=-1), 4, dtype=x.dtype)
    gate = jnp.sum(probs * choice, axis=-1, keepdims=True)
    h = jnp.einsum("td,edh->teh", x, we)
    return gate * jnp.einsum("te,teh->th", choice, h)


def argmax_sharded(x):
    return jnp.argmax(x, axis=1)


def argmin_rows(x, w):
    return jnp.argmin(x @ w, axis=0)


def accuracy(logits, labels):
    return jnp.mean((jnp.argmax(logits, axis=-1) == labels).astype(jnp.float32))


def argmax_3d(x):
    return jnp.argmax(jnp.tanh(x), axis=-1)


# cumsum (a running sum, GShard's capacity positions) along sharded and unsharded axes: XLA gathers a sharded one
def cumsum_sharded(x):
    return jnp.cumsum(jnp.tanh(x), axis=1)


def cumsum_free(x):
    return jnp.cumsum(x, axis=1) * 2.0


def capacity_positions(x, wg):
    # GShard: each token's position in its expert's buffer, the running count of earlier tokens sent there
    mask = jax.nn.one_hot(jnp.argmax(x @ wg, axis=-1), 4, dtype=x.dtype)
    return (jnp.cumsum(mask, axis=0) - 1.0) * mask


def reverse_scan_3d(x):
    return jax.lax.cumsum(jnp.exp(x), axis=2, reverse=True)


def cumsum_mm(x, w):
    return jnp.cumsum(x @ w, axis=0)


# dots contracting several sharded dimensions (XLA completes one contracting dimension at a time, the last of its
# dimension numbers first), and layer norms whose variance reduces a mean of its own
def dot_sum(x, y):
    return jnp.einsum("ij,ij->", x, y)


def dot_sum_swapped(x, y):
    return jnp.einsum("ba,ab->", x, y)


def batch_inner(x, y):
    return jnp.einsum("bij,bij->b", x, y)


def two_contract(x, y):
    return jnp.einsum("aij,ijb->ab", x, y)


def frobenius(x, y):
    return jnp.sum(x * y)


def dot_3d(x, y):
    return jnp.einsum("ijk,ijk->", x, y)


def ln_var_form(x):
    m = x.mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)


def ln_mean_twice(x, g):
    var = ((x - x.mean(-1, keepdims=True)) ** 2).mean(-1, keepdims=True)
    return (x - x.mean(-1, keepdims=True)) / jnp.sqrt(var + 1e-6) * g


# lax.top_k: a top-2 router's gates and experts; XLA gathers the operand of its TopK whole
def top2_gates(x, wg):
    gates, experts = jax.lax.top_k(x @ wg, 2)
    return jax.nn.softmax(gates, axis=-1), experts


def top2_dispatch(x, wg, we):
    gates, experts = jax.lax.top_k(x @ wg, 2)
    combine = jnp.einsum("tk,tke->te", jax.nn.softmax(gates, axis=-1), jax.nn.one_hot(experts, 4, dtype=x.dtype))
    return jnp.einsum("te,td,edh->th", combine, x, we)


def top_k_3d(x):
    return jax.lax.top_k(jnp.tanh(x), 3)[0]


def top_k_rows(x):
    return jax.lax.top_k(x, 2, axis=0)[1]


# jnp.split (a JAX 0.10 primitive, a slice per piece): SwiGLU and GLU halves, a fused qkv projection's thirds
def swiglu_split(x, w, wo):
    a, b = jnp.split(x @ w, 2, axis=-1)
    return (jax.nn.silu(a) * b) @ wo


def qkv_split(x, wqkv):
    q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
    s = jnp.einsum("bqd,bkd->bqk", q, k)
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def glu_nn(x, w):
    return jax.nn.glu(x @ w, axis=-1)


def split_rows(x):
    a, b = jnp.split(jnp.tanh(x), 2, axis=0)
    return a * b


def split_uneven(x):
    a, b, c = jnp.split(x, [4, 12], axis=1)
    return jnp.sum(a) + jnp.sum(b * 2.0) + jnp.sum(c)


# the error function (jax.nn.gelu's exact form reads erfc): a CHLO op Shardy has no rule for, so nothing propagates
# through it
def gelu_exact_mlp(x, w1, w2):
    return jax.nn.gelu(x @ w1, approximate=False) @ w2


def erf_3d(x):
    return jax.scipy.special.erf(x) * 0.5


# held-out programs of this session's second batch: a causal mask under an Auto mesh, RMS norm into a split SwiGLU, a
# top-2 MoE with capacity positions, embeddings, losses and norms on 1-D to 3-D meshes
def mlp_bias_3d(x, w1, b1, w2):
    return jax.nn.relu(x @ w1 + b1) @ w2


def causal_attn(x, wq, wk, wv):
    q = (x @ wq).reshape(2, 8, 4, 8)
    k = (x @ wk).reshape(2, 8, 4, 8)
    v = (x @ wv).reshape(2, 8, 4, 8)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(8.0)
    mask = jnp.tril(jnp.ones((8, 8), bool))
    p = jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(2, 8, 32)


def rms_swiglu(x, g, w, wo):
    h = x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * g
    a, b = jnp.split(h @ w, 2, axis=-1)
    return (jax.nn.silu(a) * b) @ wo


def emb_pos_ln(t, ids, pos):
    e = jnp.take(t, ids, axis=0) + pos
    m = e.mean(-1, keepdims=True)
    c = e - m
    return c * jax.lax.rsqrt((c * c).mean(-1, keepdims=True) + 1e-5)


def moe_capacity(x, wg, we):
    logits = x @ wg
    gates, experts = jax.lax.top_k(logits, 2)
    mask = jax.nn.one_hot(experts[:, 0], 4, dtype=x.dtype)
    pos = jnp.cumsum(mask, axis=0) * mask
    keep = (pos <= 8.0).astype(x.dtype) * mask
    h = jnp.einsum("td,edh->teh", x, we)
    return jnp.einsum("te,teh->th", keep * jax.nn.softmax(gates, -1)[:, :1], h)


def heads_concat_proj(a, b, w):
    return jnp.concatenate([a, b], axis=-1) @ w


def first_half_mm(x, w):
    return x[:, :16] @ w


def heads_constraint(x, w):
    h = (x @ w).reshape(16, 4, 16)
    h = jax.lax.with_sharding_constraint(h, NamedSharding(_MESH["2d"], P("dp", "tp", None)))
    return jnp.tanh(h)


def emb_2d_ids(t, ids):
    return jnp.take(t, ids, axis=0).sum(axis=1)


def ce_one_hot(logits, labels):
    lp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.sum(jax.nn.one_hot(labels, 64) * lp, axis=-1))


def seq_attn_1d(x, wq, wk):
    s = jnp.einsum("bqd,bkd->bqk", x @ wq, x @ wk)
    return jax.nn.softmax(s, axis=-1).sum(axis=-1)


def qkv_3d(x, w):
    q, k, v = jnp.split(x @ w, 3, axis=-1)
    return q * k + v


def res_ln_3d(x, w, g, b):
    h = x + jnp.tanh(x @ w)
    m = h.mean(-1, keepdims=True)
    v = ((h - m) ** 2).mean(-1, keepdims=True)
    return (h - m) * jax.lax.rsqrt(v + 1e-5) * g + b


def heads_softmax_pool(x):
    return jax.nn.softmax(x, axis=1).mean(axis=2)


# jnp.take_along_axis: a cross-entropy's pick of each label's log-probability, along sharded and unsharded axes
def tal_vocab(x, idx):
    return jnp.take_along_axis(x, idx, axis=1)


def tal_rows(x, idx):
    return jnp.take_along_axis(jnp.tanh(x), idx, axis=1)


def tal_idx_sharded(x, idx):
    return jnp.take_along_axis(x + 1.0, idx, axis=1)


def tal_axis0(x, idx):
    return jnp.take_along_axis(x, idx, axis=0)


def ce_take(logits, labels):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))


def ce_take_lm(x, w, labels):
    logp = jax.nn.log_softmax(x @ w, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1)[..., 0])


def tal_3d(x, idx):
    return jnp.take_along_axis(x * 2.0, idx, axis=2)


# lax.pow (x ** 0.5, x ** 2.0, 2.0 ** x, x ** y): elementwise, Shardy's pointwise rule
def pow_half(x, w):
    return jnp.abs(x @ w) ** 0.5


def pow_var(x):
    return jnp.mean((x - x.mean(-1, keepdims=True)) ** 2.0, axis=-1)


def pow_arrays(x, y):
    return jnp.abs(x) ** y


def pow_base(x, w):
    return 2.0 ** jnp.tanh(x @ w)


def pow_3d(x):
    return jnp.sum(jnp.abs(x) ** 1.5, axis=1)


# lax.sort (jnp.sort, jnp.argsort): XLA moves a sharded sorted axis off by an AllToAll and back; a 1-D sort (no other
# dimension, so Shardy relates no factor along it) is gathered
def sort_free(x):
    return jnp.sort(x, axis=1) * 2.0


def sort_sharded(x):
    return jnp.sort(jnp.tanh(x), axis=1)


def argsort_sharded(x):
    return jnp.argsort(x, axis=1)


def argsort_rows(x, w):
    return jnp.argsort(x @ w, axis=0)


def sort_3d(x):
    return jnp.sort(x * 3.0, axis=2)


def sorted_dispatch(x, experts):
    order = jnp.argsort(experts)
    return jnp.take(x, order, axis=0) * 2.0


def argsort_1d(e):
    return jnp.argsort(e * 2.0)


def sort_2d_tp(e):
    return jnp.sort(e * 2.0, axis=1)


# jnp.pad by zeros along a sharded dimension: XLA's halo exchange (a slice of the pad, a shift, is one)
def pad_seq_sharded(x):
    return jnp.tanh(jnp.pad(x, ((0, 0), (4, 4))))


def shift_right_pad(x):
    return jnp.pad(x, ((0, 0), (1, 0)))[:, :-1] * 2.0


def pad_rows_sharded(x, w):
    return jnp.pad(x @ w, ((2, 2), (0, 0)))


# jnp.take along another axis (x[:, idx]): whole slices of a table; along a sharded axis XLA's masked gather
# and AllReduce
def take_cols_free(x, idx):
    return jnp.take(x, idx, axis=1) * 2.0


def take_cols_sharded(x, idx):
    return jnp.take(x, idx, axis=1) * 3.0


def index_cols(x, idx):
    return x[:, idx] * 2.0


def take_cols_3d(x, idx):
    return jnp.take(x, idx, axis=1) * 2.0


def take_cols_idx_sharded(x, idx):
    return jnp.take(x, idx, axis=1) * 4.0


# jnp.flip (lax.rev): along sharded dimensions each block goes to the device holding its mirror, one
# CollectivePermute, as XLA
def flip_sharded(x):
    return jnp.flip(x, axis=1) * 2.0


def flip_free(x):
    return jnp.flip(jnp.tanh(x), axis=1)


def flip_two(x):
    return jnp.flip(x, axis=(0, 1)) * 2.0


def flip_rows_3d(x):
    return jnp.flip(x, axis=0) * 2.0


def reverse_scan(x, w):
    return jnp.flip(jnp.cumsum(jnp.flip(x @ w, axis=0), axis=0), axis=0)


# jax.lax.stop_gradient: optax's cross-entropy shifted by its stopped max (vocabulary parallel), a stopped target,
# stopped statistics on 1-D and 3-D meshes
def optax_ce_vp(x, w, labels):
    logits = x @ w
    logits = logits - jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
    picked = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    return jnp.mean(jnp.log(jnp.sum(jnp.exp(logits), axis=-1)) - picked)


def optax_ce_logits(logits, labels):
    logits = logits - jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
    picked = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    return jnp.log(jnp.sum(jnp.exp(logits), axis=-1)) - picked


def stopped_target(x, w, w2):
    return jnp.sum((jnp.tanh(x @ w) - jax.lax.stop_gradient(jnp.tanh(x @ w2))) ** 2)


def stopped_center_3d(x):
    return x - jax.lax.stop_gradient(jnp.mean(x, axis=-1, keepdims=True))


def stopped_max_1d(x):
    return jnp.exp(x - jax.lax.stop_gradient(jnp.max(x, axis=0)))


# written as held-out programs of this session: grouped-query attention, rotary halves, a residual layer norm on
# 2x2x2, a top-2 router, a masked mean, concatenated heads, a sliced projection, exact GELU, a scaled embedding,
# column softmax, a variance, a max minus min, batched matmul on 2x2x2, an MoE dispatch and combine
def gqa_scores(q, k):
    B, S, H, D = q.shape
    k2 = jnp.repeat(k, 2, axis=2)
    return jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k2), axis=-1)


def rotary_halves(x, c, s):
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def residual_ln_3d(x, w, g):
    h = x @ w
    m = h.mean(-1, keepdims=True)
    v = ((h - m) ** 2).mean(-1, keepdims=True)
    return x + (h - m) * jax.lax.rsqrt(v + 1e-6) * g


def top2_router_gates(x, wg):
    v, i = jax.lax.top_k(x @ wg, 2)
    return jax.nn.softmax(v, axis=-1)


def masked_mean(x, m):
    return jnp.sum(x * m[..., None], axis=1) / jnp.sum(m, axis=1, keepdims=True)


def concat_heads_mm(a, b, w):
    return jnp.concatenate([a, b], axis=-1) @ w


def sliced_projection(x, w):
    return (x @ w)[:, :, 8:24]


def exact_gelu_mlp(x, w1, w2):
    return jax.nn.gelu(x @ w1, approximate=False) @ w2


def scaled_embedding(t, ids):
    return jnp.take(t, ids, axis=0) * jnp.sqrt(32.0)


def softmax_columns(x):
    return jax.nn.softmax(x, axis=0)


def variance_3d(x):
    return jnp.var(x, axis=-1)


def max_minus_min(x):
    return jnp.max(x, axis=-1) - jnp.min(x, axis=-1)


def bmm_3d(a, b):
    return jnp.einsum("bij,bjk->bik", a, b)


def dispatch_combine(x, d):
    e = jnp.einsum("tec,td->ecd", d, x)
    return jnp.einsum("tec,ecd->td", d, jnp.tanh(e))


# jax.shard_map regions (manual computations): a Megatron MLP with its psum, a ring permute, a psum_scatter
def shard_map_megatron(x, w1, w2):
    def body(x, w1, w2):
        return jax.lax.psum(jnp.tanh(x @ w1) @ w2, "tp")

    return jax.shard_map(body, mesh=_MESH["2d"], in_specs=(P("dp"), P(None, "tp"), P("tp")),
                         out_specs=P("dp"))(x, w1, w2)


def shard_map_ring(x, w):
    def body(x, w):
        return jax.lax.ppermute(x, "d", [(i, (i + 1) % 8) for i in range(8)]) @ w

    return jax.shard_map(body, mesh=_MESH["1d"], in_specs=(P("d"), P()), out_specs=P("d"))(x, w)


def shard_map_psum_scatter(x, w):
    def body(x, w):
        return jax.lax.psum_scatter(x @ w, "tp", scatter_dimension=0, tiled=True)

    return jax.shard_map(body, mesh=_MESH["2d"], in_specs=(P(None, "tp"), P("tp")), out_specs=P("tp"))(x, w)


# queries against keys of the same rows on 2x2x2: the result's rows and columns both want a
def queries_times_keys_3d(x, wq, wk):
    return (x @ wq) @ (x @ wk).T


# the same with no free axis (2-D; b and c both on the keys), another free axis, a Gram matrix and swapped axes on
# 2x2x2
def queries_times_keys_2d(x, wq, wk):
    return (x @ wq) @ (x @ wk).T


def queries_times_keys_3d_c(x, wq, wk):
    return (x @ wq) @ (x @ wk).T


def queries_times_keys_3d_bc(x, wq, wk):
    return (x @ wq) @ (x @ wk).T


def gram_3d(x):
    return x @ x.T


def swapped_axes_matmul_3d(a, b):
    return a @ b


# dots whose operands hold the same mesh axis on dimensions the result keeps (XLA groups the devices by the result's
# axis and first moves the other operand onto the axes free in each group): rows against columns with two free axes,
# the right-hand side first, a merged row axis, an axis pair, batched, a contracting split beside, too few free
# devices, none free; and with the axis on the contracting dimension (XLA keeps it split inside each group)
def rows_cols_same_axis(x, w):
    return x @ w


def rhs_axis_wins(x, w):
    return x @ w


def merged_rows_axis(x, w):
    return x @ w


def axis_pair_cols(x, w):
    return x @ w


def batched_cols_conflict(x, y):
    return jnp.einsum("bij,bjk->bik", x, y)


def batched_sharded_conflict(x, y):
    return jnp.einsum("bij,bjk->bik", x, y)


def conflict_contracting_split(x, w):
    return x @ w


def conflict_too_few_free(x, w):
    return x @ w


def conflict_1d(x, w):
    return x @ w


def conflict_on_contracting(x, w):
    return x @ w


# the grouping axis on a contracting dimension: kept split on the free axes and all-reduced (2x4, 2x2x2 with the
# result's columns on b, the left operand's), or gathered there where that moves fewer bytes, or with the other
# operand's contraction on another axis
def fsdp_weight_free_tp(x, w):
    return x @ w


def contracting_conflict_cols_b(x, w):
    return x @ w


def lhs_contracting_conflict(x, w):
    return x @ w


def contracting_gathered(x, w):
    return x @ w


def contracting_gathered_2d(x, w):
    return x @ w


def contracting_beside_other_split(x, w):
    return x @ w


# a cross-entropy as JAX's tutorials write it, each row's label picked by logp[jnp.arange(n), labels]
def ce_arange_pick(h, w, labels):
    lp = jax.nn.log_softmax(h @ w, axis=-1)
    return -jnp.mean(lp[jnp.arange(16), labels])


# a gated MLP and attention heads on 2x2x2, an RMS norm then a projection on 1-D, softmax over rows on 2x2x2,
# concatenated rows, a slice then a matmul, an embedding then a layer norm, an expert combine, a constraint then a
# projection, a residual stack
def gated_mlp_3d(x, wg, wu, wd):
    return (jax.nn.silu(x @ wg) * (x @ wu)) @ wd


def attention_heads_3d(x, wq, wk, wv):
    B, S, H = x.shape
    q = (x @ wq).reshape(B, S, 4, H // 4)
    k = (x @ wk).reshape(B, S, 4, H // 4)
    v = (x @ wv).reshape(B, S, 4, H // 4)
    a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k), axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, S, H)


def rms_then_proj_1d(x, s, w):
    return (x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * s) @ w


def softmax_rows_3d(x):
    return jax.nn.softmax(x, axis=-1)


def concat_features(a, b, w):
    return jnp.tanh(jnp.concatenate([a, b], axis=0)) @ w


def slice_then_matmul(x, w):
    return x[:, 4:12] @ w


def embed_then_norm(t, ids, s):
    e = jnp.take(t, ids, axis=0)
    m = e.mean(-1, keepdims=True)
    return (e - m) * jax.lax.rsqrt(((e - m) ** 2).mean(-1, keepdims=True) + 1e-5) * s


def expert_combine(x, wg, we):
    g = jax.nn.softmax(x @ wg, axis=-1)
    return jnp.einsum("te,teh->th", g, jnp.einsum("td,edh->teh", x, we))


def constraint_then_proj(x, w1, w2):
    h = jax.lax.with_sharding_constraint(jnp.tanh(x @ w1), NamedSharding(_MESH["2d"], P(None, "tp")))
    return h @ w2


def residual_stack(x, w1, w2):
    h = x + jnp.tanh(x @ w1)
    return h + jnp.tanh(h @ w2)


# held-out programs of this session's third batch: FSDP with tensor parallelism on 2x2x2, attention with heads and an
# out projection, sequence-sharded scores, norms, a vocabulary-parallel loss, concat and slices, gathers, MoE
# dispatch, constraints, grouped-query scores, an outer product whose operands conflict
def mlp_fsdp_tp_3d(x, w1, w2):
    return jax.nn.gelu(x @ w1) @ w2


def attn_heads_out_2d(x, wq, wk, wv, wo):
    B, S_, H = x.shape
    q = (x @ wq).reshape(B, S_, 4, H // 4)
    k = (x @ wk).reshape(B, S_, 4, H // 4)
    v = (x @ wv).reshape(B, S_, 4, H // 4)
    a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 4.0, axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, S_, H) @ wo


def attn_seq_sharded(x, wq, wk):
    q = x @ wq
    k = x @ wk
    return jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", q, k), axis=-1)


def ln_mlp_1d(x, s, b, w):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return jax.nn.relu(((x - m) * jax.lax.rsqrt(v + 1e-5) * s + b) @ w)


def ce_vocab_3d(h, w, labels):
    lp = jax.nn.log_softmax(h @ w, axis=-1)
    return -jnp.mean(jnp.take_along_axis(lp, labels[:, None], axis=-1))


def concat_then_mm(a, b, w):
    return jnp.concatenate([a, b], axis=1) @ w


def mid_slice_2d(x):
    return x[:, 8:24] * 2.0


def take_table_cols(t, ids):
    return jnp.take(t, ids, axis=0).sum(axis=1)


def moe_dispatch_einsum(x, mask, we):
    e = jnp.einsum("tec,th->ech", mask, x)
    return jnp.einsum("ech,ehf->ecf", e, we)


def constraint_move(x, w):
    h = jax.lax.with_sharding_constraint(x @ w, NamedSharding(_MESH["2d"], P("tp", "dp")))
    return jnp.tanh(h)


def rms_3d_hidden_c(x, g):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g


def megatron_1d_pair(x, w1, w2):
    return jnp.tanh(x @ w1) @ w2


def seq_mean_mm(x, w):
    return x.mean(axis=1) @ w


def bmm_batch_a_contract_b(x, y):
    return jnp.einsum("bij,bjk->bik", x, y)


def merge_heads_3d(x, w):
    B, S_, N, D = x.shape
    return x.reshape(B, S_, N * D) @ w


def transpose_mm_3d(x, w):
    return x.T @ w


def merged_rows_conflict(x, w):
    return x @ w


def residual_ln_2d(x, w, s):
    h = x + x @ w
    m = h.mean(-1, keepdims=True)
    return (h - m) * jax.lax.rsqrt(((h - m) ** 2).mean(-1, keepdims=True) + 1e-5) * s


def masked_softmax_3d(x, mask):
    return jax.nn.softmax(jnp.where(mask > 0, x, -1e9), axis=-1)


def gqa_2d(q, k):
    B, S_, H, D = q.shape
    qg = q.reshape(B, S_, 2, H // 2, D)
    return jnp.einsum("bqgjd,bkgd->bgjqk", qg, k)


def emb_pos_ln_3d(t, ids, pos, s):
    e = jnp.take(t, ids, axis=0) + pos
    m = e.mean(-1, keepdims=True)
    return (e - m) * jax.lax.rsqrt(((e - m) ** 2).mean(-1, keepdims=True) + 1e-5) * s


def max_pool_seq(x):
    return jnp.max(x, axis=1)


def batch_conflict_einsum(x, y):
    return jnp.einsum("bsh,bhk->bsk", x, y)


def outer_conflict(a, b):
    return a[:, None] * b[None, :]


def two_layer_3d(x, w1, w2, w3):
    return jnp.tanh(jnp.tanh(x @ w1) @ w2) @ w3


def swiglu_2d(x, wg, wu, wd):
    return (jax.nn.silu(x @ wg) * (x @ wu)) @ wd


# held-out programs of this session's fourth batch, all equal when first run: heads split before a softmax, a residual
# layer norm, a top-1 MoE gate, gathers, softmax over a parallel vocabulary, constraints on attention and in a chain,
# concat then a norm, slices, a three-operand einsum, flattening, masks, positions, a batch-last dot_general, a cross-
# entropy by logsumexp
def heads_split_3d(x, w):
    B, S_, H = x.shape
    return jax.nn.softmax((x @ w).reshape(B, S_, 4, 8), axis=-1)


def ln_residual_3d(x, w, g, b):
    h = x + jnp.tanh(x @ w)
    m = h.mean(-1, keepdims=True)
    v = ((h - m) ** 2).mean(-1, keepdims=True)
    return (h - m) * jax.lax.rsqrt(v + 1e-5) * g + b


def moe_top1_gate(x, wg, we):
    logits = x @ wg
    gate = jax.nn.softmax(logits, axis=-1)
    idx = jnp.argmax(gate, axis=-1)
    onehot = jax.nn.one_hot(idx, 4)
    return jnp.einsum("te,th,ehf->tf", onehot * gate, x, we)


def gather_ids_sharded_2d(t, ids):
    return jnp.take(t, ids, axis=0) @ t.T


def softmax_vocab_2d(h, w):
    return jax.nn.softmax(h @ w, axis=-1)


def attention_constraint(x, wq, wk):
    q = jax.lax.with_sharding_constraint(x @ wq, NamedSharding(_MESH["2d"], P("dp", None)))
    k = x @ wk
    return q @ k.T


def concat_rows_then_norm(a, b):
    c = jnp.concatenate([a, b], axis=0)
    return c / jnp.sqrt(jnp.sum(c * c, axis=-1, keepdims=True))


def slice_cols_sharded_3d(x, w):
    return x[:, :16] @ w


def einsum_three_operands(a, b, c):
    return jnp.einsum("ij,jk,kl->il", a, b, c)


def reshape_flatten_sharded_3d(x, w):
    return x.reshape(-1, x.shape[-1]) @ w


def mean_then_broadcast_mul(x):
    return x * x.mean(axis=0, keepdims=True)


def relu_mlp_1d_fsdp(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def scores_mask_softmax(q, k):
    s = q @ k.T
    mask = jnp.tril(jnp.ones((16, 16), bool))
    return jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)


def weighted_sum_rows(x, w):
    return jnp.sum(x * w[:, None], axis=0)


def two_constraints_chain(x, w):
    h = jax.lax.with_sharding_constraint(x @ w, NamedSharding(_MESH["3d"], P("a", "b")))
    h = jax.lax.with_sharding_constraint(jnp.tanh(h), NamedSharding(_MESH["3d"], P("b", "a")))
    return h * 2.0


def embed_sum_positions(t, ids, pos):
    return jnp.take(t, ids, axis=0) + pos[None]


def swap_then_mm(x, w):
    return jnp.swapaxes(x, 0, 1) @ w


def dot_general_batch_last(a, b):
    return jnp.einsum("ijb,jkb->ikb", a, b)


def max_minus_mean(x):
    return jnp.max(x, axis=-1) - jnp.mean(x, axis=-1)


def xent_logits_rows(h, w, y):
    logits = h @ w
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - jnp.sum(logits * y, axis=-1))


def gated_residual_1d(x, w):
    return x + jax.nn.sigmoid(x @ w) * x


# held-out programs of this session's fifth batch, all equal when first run: heads split, transposed and merged on
# 2x2x2, reshapes of sharded rows, flattening, an MoE capacity einsum, norms over two sharded axes, a cumulative sum,
# a broadcast product summed, three-way concat, a merged-axes constraint, argmax then a lookup, two residual paths
def split_heads_merge_3d(x, wq, wo):
    B, S_, H = x.shape
    q = (x @ wq).reshape(B, S_, 8, H // 8).transpose(0, 2, 1, 3)
    s = jax.nn.softmax(q @ q.transpose(0, 1, 3, 2), axis=-1)
    o = (s @ q).transpose(0, 2, 1, 3).reshape(B, S_, H)
    return o @ wo


def reshape_rows_8_to_2x4(x, w):
    return (x.reshape(2, 4, 32) @ w).sum(axis=1)


def flatten_batch_seq_1d(x, w):
    return (x.reshape(-1, 16) @ w).reshape(4, 8, 8)


def moe_capacity_einsum_3d(x, d, we):
    e = jnp.einsum("gsec,gsm->egcm", d, x)
    return jnp.einsum("egcm,emh->egch", e, we)


def norm_over_two_axes(x):
    m = x.mean(axis=(1, 2), keepdims=True)
    return x - m


def scan_free_cumsum_mm(x, w):
    return jnp.cumsum(x, axis=0) @ w


def ln_no_affine_3d(x):
    m = x.mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)


def expand_then_sum(x, w):
    return jnp.sum(x[:, :, None] * w[None, :, :], axis=1)


def split_rows_merge_cols(x):
    return x.reshape(4, 4, 8, 4).transpose(0, 2, 1, 3).reshape(32, 16)


def concat_three_sharded(a, b, c):
    return jnp.concatenate([a, b, c], axis=-1) * 2.0


def heads_last_dim_3d(x, w):
    return (x @ w).reshape(16, 4, 8).sum(-1)


def constraint_sub_axis(x, w):
    h = x @ w
    return jax.lax.with_sharding_constraint(h, NamedSharding(_MESH["2d"], P(("dp", "tp"))))


def argmax_then_take(x, t):
    i = jnp.argmax(x, axis=-1)
    return jnp.take(t, i, axis=0)


def residual_two_paths_3d(x, w1, w2):
    return x + jnp.tanh(x @ w1) @ w2 + jax.nn.relu(x @ w1) @ w2


# jax.shard_map regions of this session's sixth batch, all equal when first run: an all_gather into a matmul, a pmean
# loss, an all_to_all, a region then global code, a psum over two axes, a ppermute on 2x2x2, a psum_scatter along
# columns, a region manual over one axis
def sm_all_gather_mm(x, w):
    def body(x, w):
        return jax.lax.all_gather(x, "tp", axis=1, tiled=True) @ w

    return jax.shard_map(body, mesh=_MESH["2d"], in_specs=(P("dp", "tp"), P()), out_specs=P("dp", "tp"))(x, w)


def sm_pmean_loss(x, w):
    def body(x, w):
        return jax.lax.pmean(jnp.sum((x @ w) ** 2, keepdims=True), "d")

    return jax.shard_map(body, mesh=_MESH["1d"], in_specs=(P("d"), P()), out_specs=P())(x, w)


def sm_all_to_all(x):
    def body(x):
        return jax.lax.all_to_all(x, "tp", split_axis=1, concat_axis=0, tiled=True)

    return jax.shard_map(body, mesh=_MESH["2d"], in_specs=P("tp"), out_specs=P(None, "tp"))(x)


def sm_then_global(x, w1, w2):
    def body(x, w1):
        return jnp.tanh(x @ w1)

    h = jax.shard_map(body, mesh=_MESH["2d"], in_specs=(P("dp"), P(None, "tp")), out_specs=P("dp", "tp"))(x, w1)
    return h @ w2


def sm_psum_two_axes(x, w):
    def body(x, w):
        return jax.lax.psum(x @ w, ("b", "c"))

    return jax.shard_map(body, mesh=_MESH["3d"], in_specs=(P("a", ("b", "c")), P(("b", "c"))), out_specs=P("a"))(x, w)


def sm_ring_shift_3d(x):
    def body(x):
        return jax.lax.ppermute(x, "b", [(0, 1), (1, 0)]) * 2.0

    return jax.shard_map(body, mesh=_MESH["3d"], in_specs=P("a", "b"), out_specs=P("a", "b"))(x)


def sm_reduce_scatter_rows(x, w):
    def body(x, w):
        return jax.lax.psum_scatter(x @ w, "d", scatter_dimension=1, tiled=True)

    return jax.shard_map(body, mesh=_MESH["1d"], in_specs=(P(None, "d"), P("d")), out_specs=P(None, "d"))(x, w)


def sm_partial_auto(x, w):
    def body(x, w):
        return jax.lax.psum(x @ w, "tp")

    return jax.shard_map(body, mesh=_MESH["2d"], in_specs=(P(None, "tp"), P("tp")), out_specs=P(),
                         axis_names={"tp"})(x, w)


# single positions (x[:, 0], x[:, -1], x[3]), written as held-out programs: Shardy shards the size-1 dimension; XLA
# moves the position to the first device along its axes and replicates it by an AllReduce
def pos_first(x, w):
    return x[:, 0] @ w


def pos_last_3d(x):
    return jnp.tanh(x[:, -1])


def pos_row(x):
    return jnp.tanh(x[3])


def pos_col_sharded(x):
    return x[:, 5] * 2.0


def pos_cls_token(x, w):
    h = jnp.tanh(x @ w)
    return h[:, 0, :]


def pos_last_2d(x):
    return jnp.tanh(x[:, -1])


def pos_mid_holder(x):
    return jnp.tanh(x[:, 5])


def pos_two_axes_3d(x):
    return jnp.tanh(x[:, 6, :])


def pos_1d(x, w):
    return x[-1] @ w


def pos_then_mm_2d(x, w):
    return jnp.tanh(x[:, -1] @ w)


def pos_sum_after(x):
    return jnp.sum(x[:, 2] * 3.0, axis=0)


def pos_last_token_logits(h, w):
    return jax.nn.log_softmax(h[:, -1, :] @ w, axis=-1)


# single positions and short windows first written where the plan and Shardy differed (two cut dimensions too: the
# shardings agree, XLA's bytes differ, BYTES_DIFFER in test_shardy_suite.py)
def pos_two_cuts(x):
    return x[1, 2] * 2.0


def win3_of_8(x):
    return jnp.tanh(x[:, 1:4])


def win3_mid(x):
    return jnp.tanh(x[:, 2:5]) * 2.0


def win2_late(x):
    return jnp.tanh(x[:, 5:7])


# held-out: one position through pointwise ops and a dot (x[:, 2:3], x[:, -1:]), in block 0, on two axes, and the tail
# of a 1-D split: Shardy keeps the axes on the size-1 dimension, XLA drops the halo permutes that only serve blocks
# past the window
def pos_one_in_block0(x):
    return jnp.tanh(x[:, 1])


def keep_then_mm(x, w):
    return jnp.tanh(x[:, 2:3]) @ w


def pos_6_3d(x):
    return x[:, 6] * 2.0


def tail_rows_1d(x):
    return jnp.tanh(x[4:])


def pos_last_keep_3d(x):
    return jnp.tanh(x[:, -1:, :])


def pos_keepdims(x):
    return jnp.tanh(x[:, 3:4]) * 2.0


# held-out batch of this session, run once as written: a GELU MLP on 2x2x2, causal attention scores, a residual layer
# norm, concatenated heads, a column tail slice into a dot, a row gather, an expert combine, a constraint in a chain,
# an RMS norm on 1-D, softmax over rows on 2x2x2, max minus mean, a transposed dot, SwiGLU on 2x2x2, embeddings plus
# positions, a cumulative sum
def ho15_mlp_gelu_3d(x, w1, w2):
    return jax.nn.gelu(x @ w1) @ w2


def ho15_attn_causal(x, wq, wk):
    B, S_, H = x.shape
    q = (x @ wq).reshape(B, S_, 4, H // 4)
    k = (x @ wk).reshape(B, S_, 4, H // 4)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k)
    mask = jnp.tril(jnp.ones((S_, S_), dtype=bool))
    return jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)


def ho15_layernorm_residual(x, w, g):
    h = x @ w
    m = h.mean(-1, keepdims=True)
    v = ((h - m) ** 2).mean(-1, keepdims=True)
    return x + (h - m) * jax.lax.rsqrt(v + 1e-5) * g


def ho15_concat_heads(a, b):
    return jnp.tanh(jnp.concatenate([a, b], axis=-1))


def ho15_slice_tail_cols(x, w):
    return x[:, 8:] @ w


def ho15_gather_rows(t, ids):
    return jnp.take(t, ids, axis=0) * 2.0


def ho15_moe_combine(x, gate, we):
    h = jnp.einsum("td,edf->tef", x, we)
    return jnp.einsum("tef,te->tf", h, jax.nn.softmax(gate, axis=-1))


def ho15_constraint_chain(x, w1, w2):
    h = jax.lax.with_sharding_constraint(x @ w1, NamedSharding(_MESH["2d"], P("dp", None)))
    return jnp.tanh(h) @ w2


def ho15_rms_1d(x, w):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) @ w


def ho15_softmax_cols_3d(x):
    return jax.nn.softmax(x, axis=0)


def ho15_reduce_max_mean(x):
    return jnp.max(x, axis=1) - jnp.mean(x, axis=1)


def ho15_transpose_mm(x, w):
    return (x.T @ w).T


def ho15_swiglu_3d(x, wg, wu, wd):
    return (jax.nn.silu(x @ wg) * (x @ wu)) @ wd


def ho15_embed_pos(t, ids, pos):
    return jnp.take(t, ids, axis=0) + pos


def ho15_cumsum_rows(x):
    return jnp.cumsum(x, axis=1)


# held-out batch of this session, written before their first run and run once as written: a biased MLP on 1-D, attention
# with head reshapes and an output projection, layer norm over a hidden split on 3-D, softmax with a temperature, a
# concat along the batch, a head slice into a dot, a gather into a dot, an expert dispatch, a constraint to replicated,
# RMS norm into a dot on 3-D, a residual of two layers on 1-D, mean pooling over a sharded sequence, attention scores on
# 3-D, a fused QKV split
def ho16_mlp_bias_1d(x, w1, b1, w2):
    return jax.nn.relu(x @ w1 + b1) @ w2


def ho16_attn_heads_out(x, wq, wk, wv, wo):
    B, T, H = x.shape
    q = (x @ wq).reshape(B, T, 4, H // 4)
    k = (x @ wk).reshape(B, T, 4, H // 4)
    v = (x @ wv).reshape(B, T, 4, H // 4)
    a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) * 0.5, axis=-1)
    return jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, T, H) @ wo


def ho16_layernorm_3d(x, g):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g


def ho16_softmax_temperature(x):
    return jax.nn.softmax(x / 0.7, axis=-1)


def ho16_concat_batch(a, b, w):
    return jnp.concatenate([a, b], axis=0) @ w


def ho16_slice_head(x, w):
    return x[:, :16] @ w


def ho16_gather_then_mm(t, ids, w):
    return jnp.take(t, ids, axis=0) @ w


def ho16_moe_dispatch(x, mask, we):
    d = jnp.einsum("td,te->etd", x, mask)
    return jnp.einsum("etd,edf->etf", d, we)


def ho16_constraint_replicate(x, w):
    h = jax.lax.with_sharding_constraint(x @ w, NamedSharding(_MESH["2d"], P()))
    return jnp.tanh(h)


def ho16_rmsnorm_mlp_3d(x, g, w):
    return (x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g) @ w


def ho16_residual_two_layers_1d(x, w1, w2):
    return x + jnp.tanh(x @ w1) @ w2


def ho16_mean_pool_seq(x, w):
    return jnp.mean(x, axis=1) @ w


def ho16_scores_mask_3d(q, k):
    return jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", q, k), axis=-1)


def ho16_split_qkv(x, w):
    q, k, v = jnp.split(x @ w, 3, axis=-1)
    return q * k + v


# a second held-out batch of this session, written before their first run and run once as written: masked attention
# scores, an MLP with a dropout-like mask, a tied embedding head, grouped-query scores (keys repeated over heads), a
# padded sequence, a concat of three into a dot, a top-1 gate (argmax, one-hot, softmax), a post-norm residual on 2x2x2,
# a swap of axes then a merge into a dot, a vector norm on 2x2x2
def ho17_masked_scores(q, k, m):
    s = jnp.einsum("bqd,bkd->bqk", q, k)
    return jax.nn.softmax(jnp.where(m > 0.5, s, -1e9), axis=-1)


def ho17_dropout_mask_mlp(x, w1, keep, w2):
    return (jax.nn.relu(x @ w1) * keep) @ w2


def ho17_tied_head(t, ids):
    e = jnp.take(t, ids, axis=0)
    return e @ t.T


def ho17_gqa_scores(q, k):
    kk = jnp.repeat(k, 2, axis=2)
    return jnp.einsum("bqhd,bkhd->bhqk", q, kk)


def ho17_pad_seq(x):
    return jnp.tanh(jnp.pad(x, ((0, 0), (0, 8))))


def ho17_concat_three(a, b, c, w):
    return jnp.concatenate([a, b, c], axis=-1) @ w


def ho17_top1_gate(x, wg):
    g = x @ wg
    return jax.nn.one_hot(jnp.argmax(g, axis=-1), 4) * jax.nn.softmax(g, axis=-1)


def ho17_post_ln_residual_3d(x, w, g):
    h = x + jnp.tanh(x @ w)
    m = h.mean(-1, keepdims=True)
    v = ((h - m) ** 2).mean(-1, keepdims=True)
    return (h - m) * jax.lax.rsqrt(v + 1e-5) * g


def ho17_swap_then_mm(x, w):
    return jnp.swapaxes(x, 0, 1).reshape(8, 64) @ w


def ho17_sum_sq_norm(x):
    return x / jnp.sqrt(jnp.sum(x * x, axis=-1, keepdims=True))


# jnp.roll by a constant (two slices and a concatenate, read as one roll): XLA's one or two CollectivePermutes of the
# pieces the rotation brings each block, on 2x4 and 2x2x2
def roll_left_block(x):
    return jnp.roll(x, -8, axis=1) * 2.0


def roll_right_one(x):
    return jnp.roll(x, 1, axis=1) * 2.0


def roll_two_pieces(x):
    return jnp.roll(x, -12, axis=1) * 2.0


def roll_rows_3d(x):
    return jnp.tanh(jnp.roll(x, -5, axis=0))


def roll_free_dim(x):
    return jnp.roll(x, 3, axis=1) * 2.0


def roll_both(x):
    return jnp.roll(x, (2, 3), axis=(0, 1)) * 2.0


def roll_then_mm(x, w):
    return jnp.roll(x, -3, axis=1) @ w


# held-out programs of this session's batch, written before their first run and run once as written (all equal in
# shardings; the rotation's bytes differed, which the roll above fixed): an RMS norm into a fused QKV on 2x2x2, an MoE
# dispatch and expert einsum, softmax over a parallel vocabulary, a rotation written as a concatenate of slices, rows
# gathered from a column-sharded table, a constraint mid-MLP, a layer norm on 1-D, attention with an output
# projection, mean pooling, a transposed dot on 2x2x2, a residual GELU with a sharded bias, an argmax over a parallel
# vocabulary
def ho18_rms_qkv_3d(x, g, w):
    h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
    q, k, v = jnp.split(h @ w, 3, axis=-1)
    return q * k + v


def ho18_moe_dispatch(x, route, we):
    d = jnp.einsum("te,td->etd", route, x)
    return jnp.einsum("etd,edf->etf", d, we)


def ho18_vocab_softmax_sum(h, w):
    return jnp.sum(jax.nn.softmax(h @ w, axis=-1) * 2.0, axis=0)


def ho18_slice_concat(x):
    return jnp.concatenate([x[:, 8:], x[:, :8]], axis=1) * 3.0


def ho18_gather_rows(t, ids):
    return jnp.tanh(jnp.take(t, ids, axis=0))


def ho18_constraint_mid_mlp(x, w1, w2):
    h = jax.lax.with_sharding_constraint(jax.nn.relu(x @ w1), NamedSharding(_MESH["2d"], P(None, "tp")))
    return h @ w2


def ho18_layernorm_1d(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-5) * g + b


def ho18_attn_out_proj(x, wq, wk, wv, wo):
    B, T, H = x.shape
    q = (x @ wq).reshape(B, T, 4, H // 4)
    k = (x @ wk).reshape(B, T, 4, H // 4)
    v = (x @ wv).reshape(B, T, 4, H // 4)
    a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k), axis=-1)
    o = jnp.einsum("bhqk,bkhd->bqhd", a, v).reshape(B, T, H)
    return o @ wo


def ho18_mean_pool(x, w):
    return jnp.mean(x, axis=1) @ w


def ho18_transpose_mm_3d(x, w):
    return x.T @ w


def ho18_residual_gelu_bias(x, w, b):
    return x + jax.nn.gelu(x @ w + b)


def ho18_argmax_vocab(h, w):
    return jnp.argmax(h @ w, axis=-1)


# held-out programs of a second batch this session, written before their first run and run once as written, all equal:
# a SwiGLU on 2x2x2, causal attention with a tril mask, logsumexp over sharded columns, a stack of two, heads split
# then transposed and summed, a clipped where on 2x2x2, a per-row bias on 2x2x2, a sum then an outer scale, an MLP on
# 1-D, min and max over columns, a middle slice into a dot, a cumsum over sharded columns
def ho20_swiglu_3d(x, wg, wu, wd):
    return (jax.nn.silu(x @ wg) * (x @ wu)) @ wd


def ho20_causal_attn(q, k, v):
    s = jnp.einsum("bqd,bkd->bqk", q, k) / 4.0
    T = s.shape[-1]
    m = jnp.tril(jnp.ones((T, T), dtype=bool))
    a = jax.nn.softmax(jnp.where(m, s, -1e9), axis=-1)
    return jnp.einsum("bqk,bkd->bqd", a, v)


def ho20_logsumexp_rows(x):
    return jax.nn.logsumexp(x, axis=-1)


def ho20_stack_pair(a, b):
    return jnp.stack([a, b], axis=0).sum(axis=0) * 2.0


def ho20_expand_heads(x, w):
    h = (x @ w).reshape(4, 8, 2, 16)
    return jnp.transpose(h, (0, 2, 1, 3)).sum(-1)


def ho20_where_clip(x):
    return jnp.where(x > 0.0, jnp.minimum(x, 1.0), 0.1 * x)


def ho20_bias_rows_3d(x, b, w):
    return jnp.tanh(x + b[:, None]) @ w


def ho20_sum_then_outer(x, w):
    s = jnp.sum(x, axis=0)
    return s[:, None] * w


def ho20_two_matmul_chain_1d(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def ho20_min_reduce(x):
    return jnp.min(x, axis=1) + jnp.max(x, axis=1)


def ho20_slice_middle_mm(x, w):
    return x[:, 4:12] @ w


def ho20_cumsum_cols(x):
    return jnp.cumsum(x, axis=1) * 0.5


# held-out programs of a third batch this session, written before their first run and run once as written, all equal:
# a dot of 12 rows on tp, an einsum contracting two dimensions, heads merged on 2x2x2 into a dot, a split of a sharded
# dimension on 2x2x2, columns taken by an index, rows concatenated into a dot, a pad in front of sharded columns, a
# variance over rows, a residual of two dots on 2x2x2, a batched dot over heads, softmax over rows then a sum, a
# transpose constrained then a dot
def ho22_uneven_rows_mm(x, w):
    return jnp.tanh(x @ w)


def ho22_einsum_two_contract(a, b):
    return jnp.einsum("bij,ijk->bk", a, b)


def ho22_merge_heads_3d(x, w):
    B, T, H, D = x.shape
    return x.reshape(B, T, H * D) @ w


def ho22_split_last_3d(x):
    return jnp.tanh(x.reshape(16, 4, 8)).sum(axis=1)


def ho22_take_cols(x, idx):
    return jnp.take(x, idx, axis=1) * 2.0


def ho22_concat_rows_mm(a, b, w):
    return jnp.concatenate([a, b], axis=0) @ w


def ho22_pad_front(x):
    return jnp.pad(x, ((0, 0), (4, 0))) * 2.0


def ho22_var_cols(x):
    return jnp.var(x, axis=0)


def ho22_residual_two_mm_3d(x, w1, w2):
    return x + jnp.tanh(x @ w1) @ w2


def ho22_batch_matmul_heads(a, b):
    return jnp.einsum("bhqd,bhdk->bhqk", a, b)


def ho22_softmax_then_sum_rows(x):
    return jnp.sum(jax.nn.softmax(x, axis=0), axis=1)


def ho22_constraint_transpose(x, w):
    h = jax.lax.with_sharding_constraint(x.T, NamedSharding(_MESH["2d"], P("tp", "dp")))
    return h @ w


# slices cutting two dimensions: a slice per dimension in order, each window sharded as Shardy shards it (a single
# position too, past its size), positions squeezed replicated in place by one AllReduce over both dimensions' axes
def cut_pos_both_dims(x):
    return x[1:2, 2:3] * 2.0


def cut_far_positions(x):
    return x[3:4, 5:6] * 2.0


def cut_two_windows(x):
    return x[1:3, 2:6] * 2.0


def cut_pos_rows_moved(x):
    return x[2:3, 1:2] * 2.0


def cut_positions_3d(x):
    return x[5:6, 3:4] * 2.0


def cut_window_and_position_3d(x):
    return x[2:6, 6:7] * 2.0


def cut_first_row_last_col(x):
    return x[0:1, 7:8] * 2.0


# held-out programs of a fourth batch this session, written before their first run and run once as written, all equal:
# top-2 gates of a router, an expert's capacity positions by cumsum, an expert FFN over experts on tp, rotary halves,
# an RMS norm into a parallel vocabulary's log-softmax, a mean minus a max over a sequence on 2x2x2, a KV cache
# concatenated along the sequence, a tanh-GELU MLP on 1-D
def ho23_top2_gates(x, wg):
    v, i = jax.lax.top_k(x @ wg, 2)
    return jax.nn.softmax(v, axis=-1)


def ho23_capacity_positions(x, wg):
    e = jax.nn.one_hot(jnp.argmax(x @ wg, axis=-1), 4)
    return jnp.cumsum(e, axis=0) * e


def ho23_expert_ffn(x, w1, w2):
    h = jax.nn.relu(jnp.einsum("etd,edf->etf", x, w1))
    return jnp.einsum("etf,efd->etd", h, w2)


def ho23_rope_halves(x):
    x1, x2 = x[..., :8], x[..., 8:]
    return jnp.concatenate([-x2, x1], axis=-1) * 0.5 + x


def ho23_norm_then_vocab(x, g, w):
    n = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
    return jax.nn.log_softmax(n @ w, axis=-1)


def ho23_seq_mean_3d(x):
    return jnp.mean(x, axis=1) - jnp.max(x, axis=1)


def ho23_kv_cache_concat(k_old, k_new):
    return jnp.concatenate([k_old, k_new], axis=1) * 1.0


def ho23_gelu_approx_mlp_1d(x, w1, w2):
    return jax.nn.gelu(x @ w1, approximate=True) @ w2


# held-out programs of a fifth batch, written before their first run and run once as written, all equal:
# grouped-query attention scores, a SwiGLU with its down projection on 1-D, an affine layer norm on 2x2x2, causal
# attention with a tril mask, tied embedding logits, a top-1 dispatch, mean pooling into a classifier, a batched
# outer product, a transpose into a dot on 2x2x2, two head groups concatenated into a dot, an RMS norm written by
# hand over sharded columns, a residual MLP on 2x2x2
def ho24_gqa_scores(q, k):
    b, s, h, d = q.shape
    q = q.reshape(b, s, 2, h // 2, d)
    return jnp.einsum("bsgkd,btgd->bgkst", q, k)


def ho24_swiglu_down_1d(x, w1, w3, w2):
    return (jax.nn.silu(x @ w1) * (x @ w3)) @ w2


def ho24_layernorm_affine_3d(x, s, b):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * s + b


def ho24_causal_attention(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 4.0
    n = q.shape[2]
    mask = jnp.tril(jnp.ones((n, n), dtype=bool))
    s = jnp.where(mask, s, -1e9)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def ho24_tied_logits(ids, table):
    h = jnp.take(table, ids, axis=0)
    return h @ table.T


def ho24_top1_dispatch(x, wg):
    logits = x @ wg
    e = jnp.argmax(logits, axis=-1)
    mask = jax.nn.one_hot(e, wg.shape[1])
    return jnp.einsum("te,td->etd", mask, x)


def ho24_pool_classify(x, w):
    return jnp.mean(x, axis=1) @ w


def ho24_batched_outer(a, b):
    return jnp.einsum("bi,bj->bij", a, b)


def ho24_transpose_3d_mm(x, w):
    return jnp.transpose(x, (1, 0, 2)) @ w


def ho24_concat_heads_mm(a, b, w):
    return jnp.concatenate([a, b], axis=-1) @ w


def ho24_rms_by_hand_tp(x):
    return x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True) / x.shape[-1] + 1e-6)


def ho24_residual_mlp_3d(x, w1, w2):
    return x + jnp.tanh(x @ w1) @ w2

# held-out programs of a sixth batch, written before their first run and run once as written: cross-attention over a
# memory of another length, scores under a sliding-window mask of iotas, rotary pairs interleaved by a reshape, soft-
# capped logits over a parallel vocabulary, a sigmoid-gated residual on 2x2x2, QK-normalised scores, a sum of a
# sequence and its shift, a mean over heads, a masked mean pool, a vmapped matmul on 2x2x2, a two-tower dot product, an
# MLP with a masked hidden layer. All equal but the cross-attention, whose bytes differed (the propagate search
# gathered the one operand that shards the contraction where XLA all-reduces): now equal too
def ho25_cross_attention(x, mem, wq):
    q = x @ wq
    s = jax.nn.softmax(jnp.einsum("bqd,bkd->bqk", q, mem) / 4.0, axis=-1)
    return jnp.einsum("bqk,bkd->bqd", s, mem)


def ho25_sliding_window_scores(q, k):
    s = jnp.einsum("bqd,bkd->bqk", q, k)
    i = jnp.arange(q.shape[1])[:, None]
    j = jnp.arange(k.shape[1])[None, :]
    return jnp.where(jnp.abs(i - j) <= 2, s, -1e9)


def ho25_interleaved_rope(x):
    b, s, d = x.shape
    y = x.reshape(b, s, d // 2, 2)
    r = jnp.stack([-y[..., 1], y[..., 0]], axis=-1)
    return r.reshape(b, s, d) + x


def ho25_logit_softcap(x, w):
    return 30.0 * jnp.tanh((x @ w) / 30.0)


def ho25_sigmoid_gated_residual_3d(x, wg, wv):
    return x + jax.nn.sigmoid(x @ wg) * (x @ wv)


def ho25_qk_norm_scores(q, k):
    qn = q * jax.lax.rsqrt(jnp.mean(q * q, axis=-1, keepdims=True) + 1e-6)
    kn = k * jax.lax.rsqrt(jnp.mean(k * k, axis=-1, keepdims=True) + 1e-6)
    return jnp.einsum("bqhd,bkhd->bhqk", qn, kn)


def ho25_shifted_sum_seq(x):
    return x[:, 1:] + x[:, :-1]


def ho25_head_mean(x):
    b, s, d = x.shape
    return jnp.mean(x.reshape(b, s, 4, d // 4), axis=2)


def ho25_masked_mean_pool(x, m):
    return jnp.sum(x * m[..., None], axis=1) / (jnp.sum(m, axis=1)[:, None] + 1.0)


def ho25_vmap_matmul_3d(x, w):
    return jax.vmap(lambda a, b: a @ b)(x, w)


def ho25_two_tower_dot(a, b, wa, wb):
    return jnp.sum((a @ wa) * (b @ wb), axis=-1)


def ho25_mlp_masked_hidden(x, w1, m, w2):
    return (jax.nn.relu(x @ w1) * m) @ w2


# a contraction only one operand shards, over whole device groups: XLA all-reduces partial products where the result
# is smaller than that operand (each counted over the groups, the axes an operand shares with the result), and gathers
# the operand where the result is as large or larger. On either side of the boundary: scores against keys fewer than,
# as many as and more than the features (1-D; batched on 2x2x2), a weight sharded on its rows under activations whose
# rows lie on the other axis, and activations whose columns are split under a replicated weight
def one_sided_fewer_keys(q, k):
    return jnp.einsum("...qd,...kd->...qk", q, k)


def one_sided_as_many_keys(q, k):
    return jnp.einsum("...qd,...kd->...qk", q, k)


def one_sided_more_keys(q, k):
    return jnp.einsum("...qd,...kd->...qk", q, k)


def one_sided_fewer_keys_3d(q, k):
    return jnp.einsum("...qd,...kd->...qk", q, k)


def one_sided_as_many_keys_3d(q, k):
    return jnp.einsum("...qd,...kd->...qk", q, k)


def one_sided_weight_small(x, w):
    return x @ w


def one_sided_weight_equal(x, w):
    return x @ w


def one_sided_weight_large(x, w):
    return x @ w


def one_sided_columns_small(x, w):
    return x @ w


def one_sided_columns_large(x, w):
    return x @ w

# held-out programs of a seventh batch, written before their first run and run once as written: a dot whose two
# operands split the contraction on different axes, a batched contraction on 2x2x2, a dot whose result wants the
# contracting axis, a matrix-vector product, scores against more keys than features, a weighted sum over heads, an
# outer product summed, rows and columns split on one axis of 1-D, a layer norm into a parallel vocabulary on 2x2x2,
# a gather into a row-parallel dot, a sum over two of three split dimensions, an FSDP weight on 2x2x2. All equal but
# the two-sided dot, whose bytes differed (the propagate search kept the contraction split where XLA gathers both
# operands): now equal too
def ho26_two_sided_diff_axes(x, w):
    return x @ w


def ho26_batched_contract_3d(a, b):
    return jnp.einsum("bij,bjk->bik", a, b)


def ho26_result_wants_contraction(x, w):
    return jnp.tanh(x @ w)


def ho26_matvec(x, v):
    return x @ v


def ho26_scores_more_keys(q, k):
    return jnp.einsum("bqd,bkd->bqk", q, k)


def ho26_weighted_sum_heads(p, v):
    return jnp.einsum("bhqk,bhkd->bqhd", p, v)


def ho26_outer_then_sum(a, b):
    return jnp.sum(a[:, None] * b[None, :], axis=0)


def ho26_rows_cols_one_axis_1d(x, w):
    return x @ w


def ho26_layernorm_then_vocab_3d(x, w):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    return ((x - m) * jax.lax.rsqrt(v + 1e-5)) @ w


def ho26_gather_then_mm(table, ids, w):
    return jnp.take(table, ids, axis=0) @ w


def ho26_reduce_two_axes_3d(x):
    return jnp.sum(x, axis=(0, 2))


def ho26_fsdp_weight_3d(x, w):
    return jax.nn.relu(x @ w)


# held-out programs of an eighth batch, written before their first run and run once as written, all equal: heads
# merged into a row-parallel dot, heads split on 2x2x2, a transpose then a sum, a maximum over two of three split
# dimensions, softmax over a split dimension on 2x2x2, two column-parallel weights concatenated into a dot, a
# vocabulary-parallel embedding, a dot then a transpose on 2x2x2, a batch mean into a dot, a leaky ReLU into a dot,
# three dots on 1-D, a layer norm of a split sequence
def ho27_merge_heads_dot(o, wo):
    b, s, h, d = o.shape
    return o.reshape(b, s, h * d) @ wo


def ho27_split_heads_3d(x):
    b, s, e = x.shape
    return jnp.tanh(x.reshape(b, s, 4, e // 4))


def ho27_transpose_then_reduce(x):
    return jnp.sum(x.T, axis=0)


def ho27_max_two_axes_3d(x):
    return jnp.max(x, axis=(1, 2))


def ho27_softmax_sharded_3d(x):
    return jax.nn.softmax(x, axis=-1)


def ho27_concat_weights_dot(x, w1, w2):
    return x @ jnp.concatenate([w1, w2], axis=1)


def ho27_embedding_vocab_rows(table, ids):
    return jnp.take(table, ids, axis=0)


def ho27_dot_then_transpose_3d(x, w):
    return (x @ w).T


def ho27_mean_batch_then_dot(x, w):
    return jnp.mean(x, axis=0) @ w


def ho27_leaky_then_dot(x, w):
    return jnp.where(x > 0, x, 0.1 * x) @ w


def ho27_three_matmuls_1d(x, a, b, c):
    return ((x @ a) @ b) @ c


def ho27_layernorm_seq_split(x, g, b):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b


# held-out programs of a ninth batch, written before their first run and run once as written: einsums contracting
# two dimensions (2x4, 2x2x2), heads into an output projection, a concatenate along a split sequence on 2x2x2, a
# slice of heads, a gather from a table split on both dimensions by indices split on dp, a transpose then a sum on
# 2x2x2, batch and sequence merged into a dot, a bias then a scale, row norms on 2x2x2, a minimum over a split
# sequence, swapped axes into a dot. All equal but the gather's bytes (see BYTES_DIFFER)
def ho28_two_contractions(x, w):
    return jnp.einsum("bsd,sdf->bf", x, w)


def ho28_two_contractions_3d(x, w):
    return jnp.einsum("bhd,hde->be", x, w)


def ho28_heads_out_proj(o, w):
    return jnp.einsum("bshd,hde->bse", o, w)


def ho28_concat_seq_3d(a, b):
    return jnp.tanh(jnp.concatenate([a, b], axis=1))


def ho28_slice_heads(x):
    return x[:, :, :2] * 2.0


def ho28_gather_sharded_both(table, ids):
    return jnp.take(table, ids, axis=0) * 2.0


def ho28_transpose_sum_3d(x):
    return jnp.sum(jnp.transpose(x, (2, 0, 1)), axis=1)


def ho28_merge_batch_seq(x, w):
    b, s, d = x.shape
    return x.reshape(b * s, d) @ w


def ho28_bias_and_scale(x, w, b, g):
    return (x @ w + b) * g


def ho28_square_norm_rows(x):
    return jnp.sqrt(jnp.sum(x * x, axis=-1))


def ho28_min_over_seq(x):
    return jnp.min(x, axis=1)


def ho28_swap_then_dot(x, w):
    return jnp.swapaxes(x, 1, 2) @ w


# held-out programs of a tenth batch, written before their first run and run once as written, all equal:
# grouped-query scores on 2x2x2, tied logits on 2x2x2, a pad into a dot, a roll along a split sequence on 2x2x2, an
# argmax over split features, a merge of split dimensions, a residual MLP then centring on 1-D, experts' einsum on
# 2x2x2, scores plus a bias, a weighted mean of split columns, two head groups concatenated into a dot on 2x2x2, a
# scan over split rows into a dot
def ho29_gqa_3d(q, k):
    b, s, h, d = q.shape
    q = q.reshape(b, s, 2, h // 2, d)
    return jnp.einsum("bsgkd,btgd->bgkst", q, k)


def ho29_tied_logits_3d(ids, table):
    return jnp.take(table, ids, axis=0) @ table.T


def ho29_pad_then_dot(x, w):
    return jnp.pad(x, ((0, 0), (0, 8))) @ w


def ho29_roll_seq_3d(x):
    return jnp.roll(x, 1, axis=1) - x


def ho29_argmax_heads(x):
    return jnp.argmax(x, axis=-1)


def ho29_merge_sharded_dims(x):
    b, s, d = x.shape
    return jnp.tanh(x.reshape(b * s, d))


def ho29_mlp_residual_ln_1d(x, w1, w2):
    h = x + jax.nn.relu(x @ w1) @ w2
    m = jnp.mean(h, axis=-1, keepdims=True)
    return h - m


def ho29_expert_einsum_3d(x, w):
    return jnp.einsum("etd,edf->etf", x, w)


def ho29_scores_bias(q, k, bias):
    return jnp.einsum("bqd,bkd->bqk", q, k) + bias


def ho29_weighted_mean_cols(x, w):
    return jnp.sum(x * w, axis=-1) / jnp.sum(w)


def ho29_two_heads_concat_dot_3d(a, b, w):
    return jnp.concatenate([a, b], axis=-1) @ w


def ho29_cumsum_then_dot(x, w):
    return jnp.cumsum(x, axis=0) @ w


# held-out programs of an eleventh batch, written before their first run and run once as written, all equal:
# a dot constrained onto a reduce-scatter layout, a three-operand einsum, a batched dot on 2x2x2, two contractions
# split alike, a one-sided dot grouped on 2x2x2, rows and columns split on 2x2x2, a batched outer product on 2x2x2, a
# vector-matrix product on 1-D, a Gram matrix, attention values on 2x2x2, a dot constrained onto split columns, a
# batched contraction on 2x2x2
def ho30_reduce_scatter_pattern(x, w):
    return jax.lax.with_sharding_constraint(x @ w, NamedSharding(_MESH["2d"], P("tp", None)))


def ho30_three_operand_einsum(a, b, c):
    return jnp.einsum("ij,jk,kl->il", a, b, c)


def ho30_broadcast_batch_dot(x, w):
    return jnp.einsum("bsd,df->bsf", x, w)


def ho30_contract_two_split_same(x, w):
    return jnp.einsum("bsd,sdf->bf", x, w)


def ho30_dot_one_sided_grouped_3d(x, w):
    return x @ w


def ho30_dot_row_col_3d(x, w):
    return x @ w


def ho30_outer_batch_3d(a, b):
    return jnp.einsum("bi,bj->bij", a, b)


def ho30_vec_mat_1d(v, w):
    return v @ w


def ho30_gram_matrix(x):
    return x.T @ x


def ho30_attention_values_3d(p, v):
    return jnp.einsum("bhqk,bhkd->bhqd", p, v)


def ho30_dot_split_result_cols(x, w):
    return jax.lax.with_sharding_constraint(x @ w, NamedSharding(_MESH["2d"], P(None, "tp")))


def ho30_mixed_contract_3d(x, w):
    return jnp.einsum("bij,jk->bik", x, w)


# held-out programs of a twelfth batch, written before their first run and run once as written, all equal:
# a SwiGLU MLP, grouped-query attention scores, a layer norm into a projection on 2x2x2, a log-sum-exp over a split
# vocabulary, a scaled residual, a mean pool into a head, a weight gradient's dot, a biased GELU on 1-D, a cumulative
# sum over a split sequence, a concatenation into a projection, a masked softmax, an attention output projection
def ho31_swiglu_mlp(x, w1, w3, w2):
    return (jax.nn.silu(x @ w1) * (x @ w3)) @ w2


def ho31_gqa_scores(q, k):
    k = jnp.repeat(k, 4, axis=1)
    return jnp.einsum("bhqd,bhkd->bhqk", q, k)


def ho31_layernorm_proj_3d(x, w):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return ((x - mu) * jax.lax.rsqrt(var + 1e-5)) @ w


def ho31_logsumexp_vocab(logits):
    return jax.nn.logsumexp(logits, axis=-1)


def ho31_residual_scaled(x, w):
    return x + 0.5 * (x @ w)


def ho31_mean_pool_head(x, w):
    return jnp.mean(x, axis=1) @ w


def ho31_weight_grad_shape(x, y):
    return x.T @ y


def ho31_bias_gelu_1d(x, w, b):
    return jax.nn.gelu(x @ w + b)


def ho31_cumsum_rows(x):
    return jnp.cumsum(x, axis=1)


def ho31_concat_then_proj(a, b, w):
    return jnp.concatenate([a, b], axis=1) @ w


def ho31_masked_softmax(s, mask):
    return jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)


def ho31_heads_out_proj(o, w):
    return jnp.einsum("bshd,hdf->bsf", o, w)


# held-out programs of a thirteenth batch, written before their first run and run once as written, all equal:
# heads split out of a 2x2x2-split hidden, padded rows, reversed columns, an argmax over a split vocabulary,
# take_along_axis over split columns, rows centred on a sub-axis pair, an FSDP MLP on 1-D, full attention, a squeeze
# then an expand, a maximum over the batch, an RMS norm's scale on split features, gathered rows into a dot
def ho32_reshape_heads_3d(x):
    return jnp.transpose(x.reshape(4, 8, 4, 8), (0, 2, 1, 3)) * 2.0


def ho32_pad_rows(x):
    return jnp.pad(x, ((1, 1), (0, 0))) + 1.0


def ho32_reverse_cols(x):
    return x[:, ::-1] * 3.0


def ho32_argmax_vocab(logits):
    return jnp.argmax(logits, axis=-1)


def ho32_take_along_rows(x, idx):
    return jnp.take_along_axis(x, idx, axis=1)


def ho32_center_rows_3d(x):
    return x - jnp.sum(x, axis=1, keepdims=True)


def ho32_fsdp_mlp_1d(x, w1, w2):
    return jax.nn.relu(x @ w1) @ w2


def ho32_attention_full(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 4.0
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def ho32_squeeze_expand(x):
    return (jnp.squeeze(x, 1) * 2.0)[:, None, :]


def ho32_max_over_batch(x):
    return jnp.max(x, axis=0)


def ho32_rms_norm_scale(x, g):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g


def ho32_gather_rows_then_dot(table, ids, w):
    return jnp.take(table, ids, axis=0) @ w


# held-out jax.shard_map regions of a fourteenth batch, written before their first run and run once as written: a
# softmax by hand (pmax and psum), a gathered sequence into a column-parallel dot, rows reduce-scattered, two regions
# with a reshard between them, a permute over one axis of 2x2x2, a minimum over columns (pmin). The first run refused
# pmax and pmin (no op in the catalogue); with them added (planner.collectives' registry), all equal
def ho33_sm_stable_softmax(x):
    def body(x):
        m = jax.lax.pmax(jnp.max(x, axis=1, keepdims=True), "tp")
        e = jnp.exp(x - m)
        return e / jax.lax.psum(jnp.sum(e, axis=1, keepdims=True), "tp")

    return jax.shard_map(body, mesh=_MESH["2d"], in_specs=P("dp", "tp"), out_specs=P("dp", "tp"))(x)


def ho33_sm_gather_seq_dot(x, w):
    def body(x, w):
        return jax.lax.all_gather(x, "tp", axis=1, tiled=True) @ w

    return jax.shard_map(body, mesh=_MESH["2d"], in_specs=(P("dp", "tp"), P(None, "tp")),
                         out_specs=P("dp", None, "tp"))(x, w)


def ho33_sm_scatter_rows(g):
    def body(g):
        return jax.lax.psum_scatter(g, "dp", scatter_dimension=0, tiled=True)

    return jax.shard_map(body, mesh=_MESH["2d"], in_specs=P(None, "tp"), out_specs=P("dp", "tp"))(g)


def ho33_sm_two_regions(x):
    y = jax.shard_map(lambda u: u * 2.0, mesh=_MESH["2d"], in_specs=P("dp"), out_specs=P("dp"))(x)
    return jax.shard_map(lambda v: jax.lax.psum(jnp.sum(v, axis=1), "tp"), mesh=_MESH["2d"],
                         in_specs=P(None, "tp"), out_specs=P())(y)


def ho33_sm_permute_a_3d(x):
    def body(x):
        return jax.lax.ppermute(x, "a", [(0, 1), (1, 0)]) + x

    return jax.shard_map(body, mesh=_MESH["3d"], in_specs=P("a", "b"), out_specs=P("a", "b"))(x)


def ho33_sm_pmin_cols(x):
    def body(x):
        return jax.lax.pmin(x, "tp")

    return jax.shard_map(body, mesh=_MESH["2d"], in_specs=P("dp", "tp"), out_specs=P("dp", None))(x)


# held-out programs of a fifteenth batch, written before their first run and run once as written: JAX primitives
# of real models. Rotary angles computed in the function (sin, cos), a clip into a dot, a signed square root, a
# softplus mean, row norms, a floor quantisation into a dot, a log-sigmoid loss, a variance over the batch, an
# ellipsis einsum, a bfloat16 matmul, a round to halves. The first run refused sin/cos, sign, floor and round (no op
# in the catalogue); with them added, all equal. (A KV-cache update by lax.dynamic_update_slice, the batch's twelfth,
# is still refused by name and is not in the suite.)
def ho34_rotary_in_graph(x):
    freq = 1.0 / (100.0 ** (jnp.arange(16, dtype=jnp.float32) / 16.0))
    pos = jnp.arange(16, dtype=jnp.float32)[:, None] * freq[None, :]
    c, s = jnp.cos(pos), jnp.sin(pos)
    x1, x2 = x[..., :16], x[..., 16:]
    return jnp.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)


def ho34_clip_then_dot(x, w):
    return jnp.clip(x, -1.0, 1.0) @ w


def ho34_signed_sqrt(x):
    return jnp.sign(x) * jnp.sqrt(jnp.abs(x))


def ho34_softplus_mean(x):
    return jnp.mean(jax.nn.softplus(x), axis=-1)


def ho34_row_norms(x):
    return jnp.linalg.norm(x, axis=-1)


def ho34_floor_quantise(x, w):
    return (jnp.floor(x * 4.0) / 4.0) @ w


def ho34_log_sigmoid_loss(x):
    return -jnp.mean(jax.nn.log_sigmoid(x))


def ho34_var_over_batch(x):
    return jnp.var(x, axis=0)


def ho34_ellipsis_einsum(x, w):
    return jnp.einsum("...d,df->...f", x, w)


def ho34_bf16_matmul(x, w):
    return (x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16)).astype(jnp.float32)


def ho34_round_half(x):
    return jnp.round(x * 2.0) / 2.0


# held-out programs of a sixteenth batch, written before their first run and run once as written, all equal:
# a constraint between layers, shard_alike of a product and an argument, a nested jit's out_shardings, jax.grad of an
# MLP and of a cross entropy traced as programs, a constraint with an unconstrained dimension, value_and_grad on 1-D,
# a constraint on a transpose
def ho35_constraint_between_layers(x, w1, w2):
    h = jax.lax.with_sharding_constraint(x @ w1, NamedSharding(_MESH["2d"], P("dp", "tp")))
    return jax.nn.relu(h) @ w2


def ho35_shard_alike_pair(x, w, y):
    from jax.experimental.shard_alike import shard_alike
    a, b = shard_alike(x @ w, y)
    return a + b


def ho35_nested_jit_out_sharding(x, w):
    inner = jax.jit(lambda u: u * 2.0, out_shardings=NamedSharding(_MESH["2d"], P(None, "tp")))
    return inner(x) @ w


def ho35_grad_of_mlp(w, x):
    return jax.grad(lambda w, x: jnp.mean(jnp.tanh(x @ w)))(w, x)


def ho35_grad_of_cross_entropy(w, h, y):
    def loss(w):
        logp = jax.nn.log_softmax(h @ w, axis=-1)
        return -jnp.mean(jnp.sum(y * logp, axis=-1))
    return jax.grad(loss)(w)


def ho35_constraint_unconstrained_dim(x, w):
    h = jax.lax.with_sharding_constraint(x @ w, NamedSharding(_MESH["2d"], P(P.UNCONSTRAINED, "tp")))
    return jnp.tanh(h)


def ho35_value_and_grad(w, x):
    loss, g = jax.value_and_grad(lambda w: jnp.sum((x @ w) ** 2))(w)
    return loss, g


def ho35_constraint_on_transpose(x):
    return jax.lax.with_sharding_constraint(x.T, NamedSharding(_MESH["2d"], P("tp", None))) * 2.0


# Seventeenth held-out batch: lax.dynamic_update_slice (a KV cache's new entry at a computed or
# constant position, rows of a 1-D-split matrix, a block of a 2x2x2-split tensor), written before its first run
def ho36_kv_traced_pos(cache, new, pos):
    return jax.lax.dynamic_update_slice(cache, new, (0, pos, 0))


def ho36_kv_seq_split(cache, new, pos):
    return jax.lax.dynamic_update_slice(cache, new, (0, pos, 0)) * 2.0


def ho36_kv_constant_pos(cache, new):
    return jax.lax.dynamic_update_slice(cache, new, (0, 3, 0))


def ho36_kv_then_scores(cache, new, q, pos):
    k = jax.lax.dynamic_update_slice(cache, new, (0, pos, 0))
    return jnp.einsum("bqd,bkd->bqk", q, k)


def ho36_update_from_dot(cache, x, w, pos):
    return jax.lax.dynamic_update_slice(cache, jnp.tanh(x @ w), (pos, 0))


def ho36_rows_1d(x, rows, pos):
    return jnp.exp(jax.lax.dynamic_update_slice(x, rows, (pos, 0)))


def ho36_3d_block(x, u, pos):
    return jax.lax.dynamic_update_slice(x, u, (0, pos, 0)) + 1.0


def ho36_update_split_on_cut(x, u, pos):
    return jax.lax.dynamic_update_slice(x, u, (0, pos, 0))


# Eighteenth held-out batch: lax.dynamic_slice (a row read at a computed position, x[i], windows of rows and of a
# sequence, a layer's weight picked from a stack, a window into a dot, a constant window, columns on 1-D, a middle
# index on 2x2x2), written before its first run
def ho37_row_at_pos(x, pos):
    return x[pos] * 2.0


def ho37_window_rows(x, pos):
    return jnp.tanh(jax.lax.dynamic_slice(x, (pos, 0), (4, 32)))


def ho37_seq_window(cache, pos):
    return jnp.sin(jax.lax.dynamic_slice_in_dim(cache, pos, 2, axis=1))


def ho37_layer_weight(x, w, i):
    return jnp.tanh(x @ w[i])


def ho37_window_then_dot(x, w, pos):
    return jax.lax.dynamic_slice(x, (pos, 0), (8, 32)) @ w


def ho37_constant_window(x):
    return jnp.exp(jax.lax.dynamic_slice(x, (2, 0), (4, 32)))


def ho37_col_window_1d(x, pos):
    return jnp.exp(jax.lax.dynamic_slice(x, (0, pos), (8, 4)))


def ho37_middle_index_3d(x, pos):
    return x[:, pos, :] + 1.0


# Nineteenth held-out batch: masks combined by &, |, ^ and ~ (a causal mask and key padding, two windows of
# values, a negated mask into a dot, an exclusive or on 2x2x2, a masked mean on 1-D, a padding mask into attention
# scores), written before its first run
def ho39_causal_and_padding(s, valid):
    causal = jnp.tril(jnp.ones(s.shape[-2:], dtype=bool))
    keep = causal[None] & (valid[:, None, :] > 0)
    return jax.nn.softmax(jnp.where(keep, s, -1e9), axis=-1)


def ho39_or_of_windows(x):
    near = jnp.abs(x) < 0.5
    far = jnp.abs(x) > 2.0
    return jnp.where(near | far, 0.0, x) @ jnp.ones((32, 8))


def ho39_not_mask_dot(x, w):
    return jnp.where(~(x > 0), 0.0, x) @ w


def ho39_xor_mask_3d(a, b):
    return jnp.where((a > 0) ^ (b > 0), a, b) + 1.0


def ho39_masked_mean_1d(x, m):
    keep = (m > 0) & jnp.isfinite(x)
    return jnp.sum(jnp.where(keep, x, 0.0), axis=0) / jnp.maximum(jnp.sum(keep, axis=0), 1)


def ho39_mask_into_scores(q, k, valid):
    s = jnp.einsum("bqd,bkd->bqk", q, k)
    keep = (valid[:, None, :] > 0) & ~(s < -100.0)
    return jnp.where(keep, s, -1e9)



def suite() -> dict:
    """name -> (function, mesh, [(shape, PartitionSpec) per argument]); an ``(shape, "i32")`` shape is int32."""
    return {
        "mlp_megatron": (mlp_megatron, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64, 32), P("tp"))]),
        "mlp_data_parallel": (mlp_data_parallel, "1d", [((16, 32), P("d")), ((32, 64), P()), ((64, 32), P())]),
        "mlp_fsdp": (mlp_fsdp, "1d", [((16, 32), P("d")), ((32, 64), P("d")), ((64, 32), P("d"))]),
        "matmul_chain": (matmul_chain, "2d", [((16, 32), P("dp")), ((32, 32), P(None, "tp")), ((32, 32), P()),
                                              ((32, 32), P("tp"))]),
        "bias_gelu": (bias_gelu, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64,), P("tp"))]),
        "contracting_sharded": (contracting_sharded, "1d", [((16, 32), P(None, "d")), ((32, 16), P("d"))]),
        "transpose_b": (transpose_b, "2d", [((16, 32), P("dp")), ((64, 32), P("tp"))]),
        "attention": (attention, "2d", [((2, 8, 32), P("dp")), ((32, 32), P(None, "tp")), ((32, 32), P(None, "tp")),
                                        ((32, 32), P(None, "tp")), ((32, 32), P("tp"))]),
        "softmax_rows": (softmax_rows, "1d", [((16, 32), P("d"))]),
        "softmax_sharded_axis": (softmax_sharded_axis, "1d", [((16, 32), P(None, "d"))]),
        "layernorm_block": (layernorm_block, "2d", [((16, 32), P("dp")), ((32,), P()), ((32,), P()),
                                                    ((32, 64), P(None, "tp"))]),
        "rmsnorm_block": (rmsnorm_block, "2d", [((16, 32), P("dp")), ((32,), P()), ((32, 64), P(None, "tp"))]),
        "concat_features": (concat_features, "2d", [((16, 16), P("dp")), ((16, 16), P("dp")),
                                                    ((32, 64), P(None, "tp"))]),
        "slice_rows": (slice_rows, "2d", [((16, 32), P(None, "tp")), ((32, 64), P("tp"))]),
        "embedding": (embedding, "2d", [((64, 32), P(None, "tp")), (((8, 4), "i32"), P("dp")), ((32, 16), P("tp"))]),
        "moe_dispatch": (moe_dispatch, "2d", [((16, 4, 8), P()), ((16, 32), P("dp")), ((4, 32, 64), P("tp")),
                                              ((4, 64, 32), P("tp"))]),
        "constrained_mlp": (constrained_mlp, "2d", [((16, 32), P(None, "tp")), ((32, 64), P(None, "tp")),
                                                    ((64, 32), P("tp"))]),
        "mesh3d_mlp": (mesh3d_mlp, "3d", [((16, 32), P(("a", "b"))), ((32, 64), P(None, "c")), ((64, 32), P("c"))]),
        "transposes": (transposes, "2d", [((16, 32), P("dp", "tp"))]),
        "row_sums": (row_sums, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "centred": (centred, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "broadcast_bias": (broadcast_bias, "2d", [((16, 32), P("dp", "tp")), ((32,), P())]),
        "batched_scores": (batched_scores, "2d", [((2, 4, 8, 16), P("dp", "tp")), ((2, 4, 8, 16), P("dp", "tp"))]),
        "merge_heads": (merge_heads, "2d", [((2, 4, 8, 8), P("dp", "tp")), ((32, 32), P())]),
        "split_heads": (split_heads, "2d", [((2, 8, 32), P("dp")), ((32, 32), P(None, "tp"))]),
        "residual": (residual, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64, 32), P("tp"))]),
        "two_layers_norm": (two_layers_norm, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64,), P()),
                                                    ((64,), P()), ((64, 32), P())]),
        "lm_head": (lm_head, "2d", [((64, 32), P()), (((8, 4), "i32"), P("dp")), ((32, 64), P(None, "tp"))]),
        "max_rows": (max_rows, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "scores_3d": (scores_3d, "3d", [((2, 4, 8, 16), P("a", "b")), ((2, 4, 8, 16), P("a", "b"))]),
        "glu": (glu, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((32, 64), P(None, "tp")),
                            ((64, 32), P("tp"))]),
        "reshard_then_matmul": (reshard_then_matmul, "1d", [((16, 32), P("d")), ((32, 16), P())]),
        "sliced_features": (sliced_features, "2d", [((16, 32), P("dp")), ((16, 64), P(None, "tp"))]),
        "concat_sharded_axis": (concat_sharded_axis, "1d", [((16, 16), P(None, "d")), ((16, 16), P(None, "d"))]),
        "slice_sharded_axis": (slice_sharded_axis, "1d", [((16, 32), P(None, "d"))]),
        "layernorm_sharded_hidden": (layernorm_sharded_hidden, "2d", [((16, 32), P("dp", "tp")), ((32,), P()),
                                                                      ((32,), P())]),
        "max_sharded_axis": (max_sharded_axis, "1d", [((16, 32), P(None, "d"))]),
        "vocab_parallel_gather": (vocab_parallel_gather, "2d", [((64, 32), P("tp")), (((8, 4), "i32"), P("dp"))]),
        "contracting_conflict": (contracting_conflict, "2d", [((16, 32), P(None, "tp")), ((32, 64), P("tp"))]),
        "mesh3d_wide": (mesh3d_wide, "3d", [((16, 32), P("a")), ((32, 64), P(None, ("b", "c"))),
                                            ((64, 32), P(("b", "c")))]),
        "attention_3d": (attention_3d, "3d", [((2, 8, 32), P("a")), ((32, 32), P(None, "c")),
                                              ((32, 32), P(None, "c"))]),
        "reshape_split_sharded": (reshape_split_sharded, "1d", [((16, 32), P("d"))]),
        "megatron_1d": (megatron_1d, "1d", [((16, 32), P()), ((32, 64), P(None, "d")), ((64, 32), P("d"))]),
        "mesh3d_data_parallel": (mesh3d_data_parallel, "3d", [((16, 32), P(("a", "b", "c"))), ((32, 64), P()),
                                                              ((64, 32), P())]),
        "constrained_agreeing": (constrained_agreeing, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                              ((64, 32), P("tp"))]),
        "moe_experts": (moe_experts, "1d", [((16, 8, 4), P()), ((16, 32), P()), ((8, 32, 64), P("d")),
                                            ((8, 64, 32), P("d"))]),
        "attention_1d": (attention_1d, "1d", [((2, 8, 32), P()), ((32, 32), P(None, "d")),
                                              ((32, 32), P(None, "d")), ((32, 32), P(None, "d")),
                                              ((32, 32), P("d"))]),
        "norm_mlp_3d": (norm_mlp_3d, "3d", [((16, 32), P(("a", "b"))), ((32,), P()), ((32,), P()),
                                            ((32, 64), P(None, "c")), ((64, 32), P("c"))]),
        "rmsnorm_1d": (rmsnorm_1d, "1d", [((16, 32), P("d")), ((32,), P()), ((32, 64), P())]),
        "concat_rows": (concat_rows, "2d", [((8, 32), P("dp")), ((8, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "gather_rows_3d": (gather_rows_3d, "3d", [((64, 32), P()), (((8, 4), "i32"), P("a")),
                                                  ((32, 16), P(None, ("b", "c")))]),
        "moe_token_sharded": (moe_token_sharded, "2d", [((16, 4, 8), P("dp")), ((16, 32), P("dp")),
                                                        ((4, 32, 64), P("tp"))]),
        "batch_conflict": (batch_conflict, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "dp"))]),
        "queries_times_keys_3d": (queries_times_keys_3d, "3d", [((16, 32), P("a")), ((32, 16), P(None, "b")),
                                                                ((32, 16), P(None, "b"))]),
        "queries_times_keys_2d": (queries_times_keys_2d, "2d", [((16, 32), P("dp")), ((32, 16), P(None, "tp")),
                                                                ((32, 16), P(None, "tp"))]),
        "queries_times_keys_3d_c": (queries_times_keys_3d_c, "3d", [((16, 32), P("a")), ((32, 16), P(None, "c")),
                                                                    ((32, 16), P(None, "c"))]),
        "queries_times_keys_3d_bc": (queries_times_keys_3d_bc, "3d", [((16, 32), P("a")),
                                                                      ((32, 16), P(None, ("b", "c"))),
                                                                      ((32, 16), P(None, ("b", "c")))]),
        "gram_3d": (gram_3d, "3d", [((16, 32), P("a", "b"))]),
        "swapped_axes_matmul_3d": (swapped_axes_matmul_3d, "3d", [((16, 32), P("a", "b")), ((32, 16), P("b", "a"))]),
        "rows_cols_same_axis": (rows_cols_same_axis, "3d", [((16, 32), P("a")), ((32, 16), P(None, "a"))]),
        "rhs_axis_wins": (rhs_axis_wins, "3d", [((16, 32), P("b")), ((32, 16), P(None, "b"))]),
        "merged_rows_axis": (merged_rows_axis, "3d", [((16, 32), P(("a", "b"))), ((32, 16), P(None, "a"))]),
        "axis_pair_cols": (axis_pair_cols, "3d", [((16, 32), P("a")), ((32, 16), P(None, ("a", "b")))]),
        "batched_cols_conflict": (batched_cols_conflict, "3d", [((4, 16, 32), P(None, "a")),
                                                                ((4, 32, 16), P(None, None, "a"))]),
        "batched_sharded_conflict": (batched_sharded_conflict, "3d", [((4, 16, 32), P("b", "a")),
                                                                      ((4, 32, 16), P("b", None, "a"))]),
        "conflict_contracting_split": (conflict_contracting_split, "3d", [((16, 32), P("a")),
                                                                          ((32, 16), P("b", "a"))]),
        "conflict_too_few_free": (conflict_too_few_free, "2d", [((16, 32), P("tp")), ((32, 64), P(None, "tp"))]),
        "conflict_1d": (conflict_1d, "1d", [((16, 32), P("d")), ((32, 64), P(None, "d"))]),
        "conflict_on_contracting": (conflict_on_contracting, "3d", [((16, 32), P("a")), ((32, 16), P("a"))]),
        "fsdp_weight_free_tp": (fsdp_weight_free_tp, "2d", [((16, 32), P("dp")), ((32, 64), P("dp"))]),
        "ce_arange_pick": (ce_arange_pick, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                  (((16,), "i32"), P("dp"))]),
        "contracting_conflict_cols_b": (contracting_conflict_cols_b, "3d", [((16, 32), P("a")),
                                                                            ((32, 16), P("a", "b"))]),
        "lhs_contracting_conflict": (lhs_contracting_conflict, "3d", [((16, 32), P(None, "a")),
                                                                      ((32, 16), P(None, "a"))]),
        "contracting_gathered": (contracting_gathered, "3d", [((64, 32), P("a")), ((32, 8), P("a"))]),
        "contracting_gathered_2d": (contracting_gathered_2d, "2d", [((64, 32), P("dp")), ((32, 8), P("dp"))]),
        "contracting_beside_other_split": (contracting_beside_other_split, "3d", [((64, 32), P("a", "c")),
                                                                                  ((32, 8), P("a"))]),
        "gated_mlp_3d": (gated_mlp_3d, "3d", [((16, 32), P(("a", "b"))), ((32, 64), P(None, "c")),
                                              ((32, 64), P(None, "c")), ((64, 32), P("c"))]),
        "attention_heads_3d": (attention_heads_3d, "3d", [((2, 8, 16), P("a")), ((16, 16), P(None, ("b", "c"))),
                                                          ((16, 16), P(None, ("b", "c"))),
                                                          ((16, 16), P(None, ("b", "c")))]),
        "rms_then_proj_1d": (rms_then_proj_1d, "1d", [((16, 32), P("d")), ((32,), P()), ((32, 64), P())]),
        "softmax_rows_3d": (softmax_rows_3d, "3d", [((8, 16, 32), P("a", "b", "c"))]),
        "concat_features": (concat_features, "2d", [((8, 32), P("dp")), ((8, 32), P("dp")), ((32, 16), P(None, "tp"))]),
        "slice_then_matmul": (slice_then_matmul, "2d", [((16, 16), P("dp", "tp")), ((8, 32), P())]),
        "embed_then_norm": (embed_then_norm, "2d", [((64, 32), P("tp")), (((4, 8), "i32"), P("dp")), ((32,), P())]),
        "expert_combine": (expert_combine, "2d", [((16, 8), P("dp")), ((8, 4), P()), ((4, 8, 6), P("tp"))]),
        "constraint_then_proj": (constraint_then_proj, "2d", [((16, 32), P("dp")), ((32, 64), P()),
                                                              ((64, 16), P("tp"))]),
        "residual_stack": (residual_stack, "2d", [((16, 32), P("dp", "tp")), ((32, 32), P()), ((32, 32), P())]),
        "mlp3": (mlp3, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64, 64), P("tp")), ((64, 32), P())]),
        "gelu_mlp_1d": (gelu_mlp_1d, "1d", [((16, 32), P()), ((32, 64), P(None, "d")), ((64, 32), P("d"))]),
        "attn_rows": (attn_rows, "1d", [((16, 32), P("d")), ((32, 32), P()), ((32, 32), P())]),
        "ln_then_mm": (ln_then_mm, "2d", [((16, 32), P("dp")), ((32,), P()), ((32,), P()), ((32, 64), P(None, "tp"))]),
        "rms_3d": (rms_3d, "3d", [((16, 32), P("a")), ((32,), P()), ((32, 64), P(None, ("b", "c")))]),
        "sum_cols": (sum_cols, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "mean_rows": (mean_rows, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "transpose_mm": (transpose_mm, "1d", [((32, 16), P(None, "d")), ((32, 8), P())]),
        "einsum_bmm": (einsum_bmm, "2d", [((4, 8, 16), P("dp", None, "tp")), ((4, 16, 8), P("dp", "tp", None))]),
        "residual2": (residual2, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64, 32), P("tp"))]),
        "bias_relu": (bias_relu, "1d", [((16, 32), P()), ((32, 64), P(None, "d")), ((64,), P("d"))]),
        "split_merge": (split_merge, "2d", [((2, 8, 32), P("dp")), ((32, 32), P(None, "tp"))]),
        "take_sum": (take_sum, "1d", [((64, 16), P()), (((8,), "i32"), P())]),
        "concat_mm": (concat_mm, "2d", [((16, 16), P("dp")), ((16, 16), P("dp")), ((32, 64), P(None, "tp"))]),
        "slice_mm": (slice_mm, "2d", [((16, 32), P("dp")), ((16, 64), P(None, "tp"))]),
        "moe2": (moe2, "2d", [((16, 4, 2), P()), ((16, 8), P("dp")), ((4, 8, 16), P("tp")), ((4, 16, 8), P("tp"))]),
        "fsdp3d": (fsdp3d, "3d", [((16, 32), P(("a", "b"))), ((32, 64), P("c")), ((64, 32), P(None, "c"))]),
        "two_matmul_sum": (two_matmul_sum, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                  ((32, 64), P(None, "tp"))]),
        "scale": (scale, "1d", [((16, 32), P("d")), ((32, 32), P())]),
        "max_cols": (max_cols, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "square_mm": (square_mm, "2d", [((16, 32), P("dp", "tp")), ((32, 64), P("tp"))]),
        "dp_tp_chain": (dp_tp_chain, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64, 64), P("tp")),
                                            ((64, 32), P(None, "tp"))]),
        "vocab_head": (vocab_head, "2d", [((16, 32), P("dp")), ((32, 128), P(None, "tp"))]),
        "outer_batch": (outer_batch, "2d", [((8, 16), P("dp")), ((8, 16), P(None, "tp"))]),
        "sub_mean": (sub_mean, "1d", [((16, 32), P(None, "d"))]),
        "attn_1d_heads": (attn_1d_heads, "1d", [((2, 8, 32), P()), ((32, 32), P(None, "d")), ((32, 32), P(None, "d"))]),
        "reshape_flat": (reshape_flat, "2d", [((2, 8, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "constraint_mid": (constraint_mid, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64, 32), P("tp"))]),
        "sum_sharded_then_mm": (sum_sharded_then_mm, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "mean_sharded_dim": (mean_sharded_dim, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "vocab_gather_3d": (vocab_gather_3d, "3d", [((64, 16), P(("a", "b"))), (((8,), "i32"), P())]),
        "transpose_then_mm": (transpose_then_mm, "1d", [((32, 16), P("d")), ((32, 8), P())]),
        "mm_transpose": (mm_transpose, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "three_axes_matmul": (three_axes_matmul, "3d", [((16, 32), P("a", "b")), ((32, 64), P("b", "c"))]),
        "heads_transpose": (heads_transpose, "2d", [((2, 8, 32), P("dp")), ((32, 32), P(None, "tp"))]),
        "merge_transpose": (merge_transpose, "2d", [((2, 4, 8, 8), P("dp", "tp")), ((32, 32), P())]),
        "bias_add_1d": (bias_add_1d, "1d", [((16, 32), P(None, "d")), ((32,), P())]),
        "outer_sum": (outer_sum, "2d", [((16,), P("dp")), ((32,), P("tp"))]),
        "scale_shift": (scale_shift, "2d", [((16, 32), P("dp", "tp")), ((32,), P()), ((32,), P())]),
        "two_dots_shared": (two_dots_shared, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((32, 64), P())]),
        "dp_matmul_reduce": (dp_matmul_reduce, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "tp_mlp_residual": (tp_mlp_residual, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                    ((64, 32), P("tp"))]),
        "fsdp_2d": (fsdp_2d, "2d", [((16, 32), P(("dp", "tp"))), ((32, 64), P(("dp", "tp"))),
                                    ((64, 32), P(("dp", "tp")))]),
        "seq_parallel": (seq_parallel, "2d", [((2, 16, 32), P("dp", "tp")), ((32, 64), P(None, "tp"))]),
        "expert_einsum": (expert_einsum, "2d", [((4, 8, 16), P("tp", "dp")), ((4, 16, 32), P("tp"))]),
        "batched_3d": (batched_3d, "3d", [((4, 8, 16), P("a", None, "b")), ((4, 16, 8), P("a", "b", "c"))]),
        "contract_3d": (contract_3d, "3d", [((2, 8, 32), P("a", "b")), ((32, 16), P(None, "c"))]),
        "rowwise_max_sub": (rowwise_max_sub, "1d", [((16, 32), P("d"))]),
        "constraint_open": (constraint_open, "2d", [((16, 32), P("dp")), ((32, 64), P())]),
        "chain_1d": (chain_1d, "1d", [((16, 32), P("d")), ((32, 32), P(None, "d")), ((32, 32), P())]),
        "wide_3d": (wide_3d, "3d", [((16, 32), P(("a", "b"))), ((32, 64), P(None, "c"))]),
        "emb_sum": (emb_sum, "2d", [((64, 16), P(None, "tp")), (((8,), "i32"), P()), ((16, 32), P("tp"))]),
        "log_softmax_rows": (log_softmax_rows, "1d", [((16, 32), P("d"))]),
        "lm_logprobs": (lm_logprobs, "1d", [((16, 32), P()), ((32, 64), P(None, "d"))]),
        "logprob_sum": (logprob_sum, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((16, 64), P("dp"))]),
        "shift_left": (shift_left, "1d", [((16, 32), P(None, "d"))]),
        "shift_right": (shift_right, "1d", [((16, 32), P(None, "d"))]),
        "shifted_product": (shifted_product, "2d", [((16, 32), P("dp", "tp")), ((16, 32), P("dp", "tp"))]),
        "inner_window": (inner_window, "1d", [((16, 32), P(None, "d"))]),
        "split_rows_2d": (split_rows_2d, "2d", [((16, 32), P(("dp", "tp")))]),
        "uneven_rows_3d": (uneven_rows_3d, "3d", [((16, 32), P(("a", "b", "c")))]),
        "split_and_scale": (split_and_scale, "1d", [((16, 32), P("d"))]),
        "split_merge_back": (split_merge_back, "1d", [((16, 32), P("d"))]),
        "loss_sum_2d": (loss_sum_2d, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "mean_all_3d": (mean_all_3d, "3d", [((4, 8, 16), P("a", "b", "c"))]),
        "max_all_2d": (max_all_2d, "2d", [((16, 32), P("dp", "tp"))]),
        "sum_two_of_three": (sum_two_of_three, "3d", [((4, 8, 16), P("a", "b", "c"))]),
        "xent_vocab_parallel": (xent_vocab_parallel, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                            ((16, 64), P("dp"))]),
        "swiglu": (swiglu, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((32, 64), P(None, "tp")),
                                  ((64, 32), P("tp"))]),
        "mha_2d": (mha_2d, "2d", [((2, 8, 32), P("dp")), ((32, 32), P(None, "tp")), ((32, 32), P(None, "tp")),
                                  ((32, 32), P(None, "tp")), ((32, 32), P("tp"))]),
        "ln_res": (ln_res, "2d", [((16, 32), P("dp")), ((32, 32), P()), ((32,), P()), ((32,), P())]),
        "gather_emb_mm": (gather_emb_mm, "2d", [((64, 32), P(None, "tp")), (((16,), "i32"), P("dp")),
                                                ((32, 16), P("tp"))]),
        "moe_gate": (moe_gate, "2d", [((16, 32), P("dp")), ((32, 4), P()), ((4, 32, 16), P("tp"))]),
        "concat_heads": (concat_heads, "1d", [((16, 16), P("d")), ((16, 16), P("d")), ((32, 8), P())]),
        "split_half": (split_half, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "bmm3d": (bmm3d, "3d", [((4, 8, 16), P("a", "b")), ((4, 16, 8), P("a", None, "c"))]),
        "transpose_mm2": (transpose_mm2, "1d", [((16, 32), P("d")), ((16, 8), P("d"))]),
        "rms_mm_3d": (rms_mm_3d, "3d", [((16, 32), P("a")), ((32,), P()), ((32, 64), P(None, ("b", "c")))]),
        "constrained_chain": (constrained_chain, "2d", [((16, 32), P(None, "tp")), ((32, 64), P("tp")),
                                                        ((64, 32), P())]),
        "mean_pool": (mean_pool, "2d", [((4, 8, 32), P("dp", "tp")), ((32, 16), P())]),
        "max_pool": (max_pool, "1d", [((4, 8, 32), P(None, "d"))]),
        "scale_softmax": (scale_softmax, "2d", [((16, 32), P("dp", "tp"))]),
        "resid_gelu_3d": (resid_gelu_3d, "3d", [((16, 32), P(("a", "b"))), ((32, 64), P(None, "c")),
                                                ((64, 32), P("c"))]),
        "outer3": (outer3, "2d", [((16,), P("tp")), ((32,), P("dp"))]),
        "neg_exp_sum": (neg_exp_sum, "1d", [((16, 32), P("d"))]),
        "two_heads": (two_heads, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((32, 16), P())]),
        "dp_mse": (dp_mse, "2d", [((16, 32), P("dp")), ((32, 8), P()), ((16, 8), P("dp"))]),
        "einsum_proj": (einsum_proj, "3d", [((2, 8, 32), P("a", "b")), ((32, 16), P(None, "c"))]),
        "abs_mean": (abs_mean, "2d", [((16, 32), P("dp", "tp"))]),
        "square_norm": (square_norm, "2d", [((16, 32), P("dp", "tp"))]),
        "stack2": (stack2, "1d", [((16, 32), P("d")), ((16, 32), P("d"))]),
        "tile_rows": (tile_rows, "1d", [((16, 32), P(None, "d"))]),
        "rotary": (rotary, "2d", [((16, 32), P("dp")), ((16, 16), P("dp")), ((16, 16), P("dp"))]),
        "flatten_bs": (flatten_bs, "2d", [((2, 8, 32), P("dp", "tp")), ((32, 16), P())]),
        "clip": (clip, "1d", [((16, 32), P("d"))]),
        "head_merge_4d": (head_merge_4d, "2d", [((2, 4, 8, 8), P("dp", "tp")), ((32, 16), P())]),
        "bias3d": (bias3d, "3d", [((16, 32), P("a")), ((32, 64), P(None, ("b", "c"))), ((64,), P(("b", "c")))]),
        "expand_dims_mul": (expand_dims_mul, "2d", [((8, 16), P("dp")), ((8, 16), P("dp", "tp"))]),
        "sum_keep": (sum_keep, "2d", [((16, 32), P("dp", "tp"))]),
        "swap_axes": (swap_axes, "2d", [((8, 2, 32), P("dp")), ((32, 16), P(None, "tp"))]),
        "silu_mm": (silu_mm, "1d", [((16, 32), P("d")), ((32, 16), P())]),
        "leaky_mm": (leaky_mm, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "where_bcast": (where_bcast, "2d", [((16, 32), P("dp", "tp")), ((32,), P("tp"))]),
        "relu_grad": (relu_grad, "1d", [((16, 32), P("d"))]),
        "mask_select": (mask_select, "2d", [((16, 32), P("dp")), ((16, 32), P(None, "tp"))]),
        "hinge": (hinge, "2d", [((16, 32), P("dp")), ((32, 8), P(None, "tp")), ((16, 8), P("dp"))]),
        "where_3d": (where_3d, "3d", [((16, 32), P(("a", "b"))), ((32, 64), P(None, "c"))]),
        "cmp_cast": (cmp_cast, "1d", [((16, 32), P(None, "d"))]),
        "lse_rows": (lse_rows, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "lse_loss": (lse_loss, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((16, 64), P("dp"))]),
        "lse_keep": (lse_keep, "2d", [((16, 32), P("dp", "tp"))]),
        "lse_1d": (lse_1d, "1d", [((16, 32), P("d"))]),
        "optax_ce_vp": (optax_ce_vp, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), (((16,), "i32"), P("dp"))]),
        "optax_ce_logits": (optax_ce_logits, "2d", [((16, 32), P("dp", "tp")), (((16,), "i32"), P("dp"))]),
        "stopped_target": (stopped_target, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((32, 64), P("tp"))]),
        "stopped_center_3d": (stopped_center_3d, "3d", [((8, 8, 16), P("a", "b", "c"))]),
        "stopped_max_1d": (stopped_max_1d, "1d", [((16, 32), P("d"))]),
        "gqa_scores": (gqa_scores, "2d", [((2, 8, 4, 8), P("dp", None, "tp")), ((2, 8, 2, 8), P("dp", None, None))]),
        "rotary_halves": (rotary_halves, "2d", [((2, 8, 16), P("dp", "tp")), ((8, 8), P()), ((8, 8), P())]),
        "residual_ln_3d": (residual_ln_3d, "3d", [((8, 16), P(("a", "b"))), ((16, 16), P(None, "c")),
                                                        ((16,), P())]),
        "top2_router_gates": (top2_router_gates, "2d", [((16, 32), P("dp")), ((32, 8), P(None, "tp"))]),
        "masked_mean": (masked_mean, "2d", [((4, 16, 32), P("dp", "tp")), ((4, 16), P("dp", "tp"))]),
        "concat_heads_mm": (concat_heads_mm, "2d", [((16, 16), P("dp", "tp")), ((16, 16), P("dp", "tp")),
                                                    ((32, 8), P())]),
        "sliced_projection": (sliced_projection, "2d", [((2, 8, 16), P("dp")), ((16, 32), P(None, "tp"))]),
        "exact_gelu_mlp": (exact_gelu_mlp, "1d", [((16, 32), P("d")), ((32, 64), P()), ((64, 32), P())]),
        "scaled_embedding": (scaled_embedding, "2d", [((64, 32), P(None, "tp")), (((4, 8), "i32"), P("dp"))]),
        "softmax_columns": (softmax_columns, "2d", [((16, 32), P("dp", "tp"))]),
        "variance_3d": (variance_3d, "3d", [((4, 8, 16), P("a", "b", "c"))]),
        "max_minus_min": (max_minus_min, "2d", [((16, 32), P("dp", "tp"))]),
        "bmm_3d": (bmm_3d, "3d", [((4, 8, 16), P("a", "b")), ((4, 16, 8), P("a", None, "c"))]),
        "dispatch_combine": (dispatch_combine, "2d", [((16, 8), P("dp")), ((16, 4, 4), P("dp", "tp"))]),
        "shard_map_megatron": (shard_map_megatron, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                          ((64, 32), P("tp"))]),
        "shard_map_ring": (shard_map_ring, "1d", [((16, 32), P("d")), ((32, 8), P())]),
        "shard_map_psum_scatter": (shard_map_psum_scatter, "2d", [((16, 32), P(None, "tp")), ((32, 8), P("tp"))]),
        "emb_lookup_3d": (emb_lookup_3d, "3d", [((64, 32), P(None, ("b", "c"))), (((4, 8), "i32"), P("a"))]),
        "emb_then_ln": (emb_then_ln, "2d", [((64, 32), P("tp")), (((8,), "i32"), P("dp")), ((32,), P())]),
        "tied_head": (tied_head, "2d", [((64, 32), P("tp")), (((8,), "i32"), P("dp"))]),
        "moe_top1": (moe_top1, "2d", [((16, 32), P("dp")), ((32, 4), P()), ((4, 32, 16), P("tp"))]),
        "moe_dispatch_combine": (moe_dispatch_combine, "2d", [((16, 4, 4), P("dp")), ((16, 32), P("dp")),
                                                              ((4, 32, 64), P("tp")), ((4, 64, 32), P("tp"))]),
        "constraint_3d": (constraint_3d, "3d", [((16, 32), P("a")), ((32, 64), P(None, "c"))]),
        "attn_3d_full": (attn_3d_full, "3d", [((2, 8, 32), P("a", "b")), ((32, 32), P(None, "c")),
                                              ((32, 32), P(None, "c")), ((32, 32), P(None, "c"))]),
        "gqa": (gqa, "2d", [((2, 8, 32), P("dp", None, "tp")), ((2, 8, 2, 8), P("dp"))]),
        "one_hot_dispatch": (one_hot_dispatch, "2d", [(((16,), "i32"), P("dp")), ((16, 32), P("dp", "tp"))]),
        "causal_mask": (causal_mask, "1d", [((16, 16), P("d"))]),
        "pad_seq": (pad_seq, "1d", [((16, 32), P("d"))]),
        "log_sigmoid_loss": (log_sigmoid_loss, "2d", [((16, 32), P("dp")), ((32, 8), P(None, "tp"))]),
        "where_relu_grad": (where_relu_grad, "1d", [((16, 32), P("d"))]),
        "constraint_open_dim": (constraint_open_dim, "2d", [((16, 32), P(None, "tp")), ((32, 64), P(None, "tp"))]),
        "swap_constraint": (swap_constraint, "2d", [((16, 32), P("dp", "tp"))]),
        "double_constraint": (double_constraint, "2d", [((16, 32), P())]),
        "merge_axes_rows": (merge_axes_rows, "2d", [((16, 32), P("dp", "tp"))]),
        "split_axes_cols": (split_axes_cols, "2d", [((16, 32), P(None, ("dp", "tp")))]),
        "rotate_3d": (rotate_3d, "3d", [((16, 32), P("a", ("b", "c")))]),
        "cycle_3d": (cycle_3d, "3d", [((16, 32), P("a", "b")), ((32, 64), P(None, "c"))]),
        "to_partial": (to_partial, "2d", [((16, 32), P("dp", "tp"))]),
        "seq_to_heads": (seq_to_heads, "2d", [((2, 16, 32), P("dp", "tp"))]),
        "transpose_constraint": (transpose_constraint, "2d", [((32, 16), P("dp", "tp"))]),
        "fsdp_gather": (fsdp_gather, "2d", [((16, 32), P("dp")), ((32, 64), P("dp", "tp"))]),
        "regroup_1d": (regroup_1d, "1d", [((16, 32), P("d"))]),
        "minor_major_3d": (minor_major_3d, "3d", [((16, 32), P(("a", "b"), "c"))]),
        "argmax_route": (argmax_route, "2d", [((16, 32), P("dp")), ((32, 4), P())]),
        "top1_dispatch": (top1_dispatch, "2d", [((16, 32), P("dp")), ((32, 4), P()), ((4, 32, 16), P("tp"))]),
        "argmax_sharded": (argmax_sharded, "2d", [((16, 32), P("dp", "tp"))]),
        "argmin_rows": (argmin_rows, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "accuracy": (accuracy, "2d", [((16, 32), P("dp")), (((16,), "i32"), P("dp"))]),
        "argmax_3d": (argmax_3d, "3d", [((4, 8, 16), P("a", ("b", "c")))]),
        "cumsum_sharded": (cumsum_sharded, "2d", [((16, 32), P("dp", "tp"))]),
        "cumsum_free": (cumsum_free, "2d", [((16, 32), P("dp"))]),
        "capacity_positions": (capacity_positions, "2d", [((16, 32), P("dp")), ((32, 4), P())]),
        "reverse_scan_3d": (reverse_scan_3d, "3d", [((4, 8, 16), P("a", None, ("b", "c")))]),
        "dot_sum": (dot_sum, "2d", [((16, 32), P("dp", "tp")), ((16, 32), P("dp", "tp"))]),
        "dot_sum_swapped": (dot_sum_swapped, "2d", [((16, 32), P("dp", "tp")), ((32, 16), P("tp", "dp"))]),
        "batch_inner": (batch_inner, "2d", [((4, 16, 32), P(None, "dp", "tp")), ((4, 16, 32), P(None, "dp", "tp"))]),
        "two_contract": (two_contract, "2d", [((8, 16, 32), P(None, "dp", "tp")), ((16, 32, 8), P("dp", "tp", None))]),
        "frobenius": (frobenius, "2d", [((16, 32), P("tp", "dp")), ((16, 32), P("tp", "dp"))]),
        "dot_3d": (dot_3d, "3d", [((4, 8, 16), P("c", "a", "b")), ((4, 8, 16), P("c", "a", "b"))]),
        "ln_var_form": (ln_var_form, "2d", [((16, 32), P("dp", "tp"))]),
        "ln_mean_twice": (ln_mean_twice, "2d", [((16, 32), P("dp", "tp")), ((32,), P("tp"))]),
        "top2_gates": (top2_gates, "2d", [((16, 32), P("dp")), ((32, 8), P())]),
        "top2_dispatch": (top2_dispatch, "2d", [((16, 32), P("dp")), ((32, 4), P()), ((4, 32, 16), P("tp"))]),
        "top_k_3d": (top_k_3d, "3d", [((4, 8, 16), P("a", ("b", "c")))]),
        "top_k_rows": (top_k_rows, "2d", [((16, 32), P(None, "tp"))]),
        "swiglu_split": (swiglu_split, "2d", [((16, 32), P("dp")), ((32, 128), P(None, "tp")), ((64, 32), P("tp"))]),
        "mlp_fsdp_tp_3d": (mlp_fsdp_tp_3d, "3d", [((16, 32), P("a")), ((32, 64), P("b", "c")),
                                                  ((64, 32), P("c", "b"))]),
        "attn_heads_out_2d": (attn_heads_out_2d, "2d", [((2, 8, 16), P("dp")), ((16, 16), P(None, "tp")),
                                                        ((16, 16), P(None, "tp")), ((16, 16), P(None, "tp")),
                                                        ((16, 16), P("tp"))]),
        "attn_seq_sharded": (attn_seq_sharded, "2d", [((2, 8, 16), P("dp", "tp")), ((16, 16), P()), ((16, 16), P())]),
        "ln_mlp_1d": (ln_mlp_1d, "1d", [((16, 32), P("d")), ((32,), P()), ((32,), P()), ((32, 64), P(None, "d"))]),
        "ce_vocab_3d": (ce_vocab_3d, "3d", [((16, 32), P("a")), ((32, 64), P(None, ("b", "c"))),
                                            (((16,), "i32"), P("a"))]),
        "concat_then_mm": (concat_then_mm, "2d", [((16, 16), P("dp", "tp")), ((16, 16), P("dp", "tp")),
                                                  ((32, 8), P())]),
        "mid_slice_2d": (mid_slice_2d, "2d", [((16, 32), P("dp", "tp"))]),
        "take_table_cols": (take_table_cols, "2d", [((64, 32), P(None, "tp")), (((8, 4), "i32"), P("dp"))]),
        "moe_dispatch_einsum": (moe_dispatch_einsum, "2d", [((16, 32), P("dp")), ((16, 4, 8), P("dp")),
                                                            ((4, 32, 64), P("tp"))]),
        "constraint_move": (constraint_move, "2d", [((16, 32), P("dp")), ((32, 16), P(None, "tp"))]),
        "rms_3d_hidden_c": (rms_3d_hidden_c, "3d", [((4, 8, 32), P("a", "b", "c")), ((32,), P("c"))]),
        "megatron_1d_pair": (megatron_1d_pair, "1d", [((16, 32), P()), ((32, 64), P(None, "d")), ((64, 32), P("d"))]),
        "seq_mean_mm": (seq_mean_mm, "2d", [((4, 16, 32), P("dp", "tp")), ((32, 16), P())]),
        "bmm_batch_a_contract_b": (bmm_batch_a_contract_b, "3d", [((4, 8, 16), P("a", None, "b")),
                                                                  ((4, 16, 8), P("a", "b"))]),
        "merge_heads_3d": (merge_heads_3d, "3d", [((2, 8, 4, 8), P("a", None, "b", "c")), ((32, 16), P())]),
        "transpose_mm_3d": (transpose_mm_3d, "3d", [((32, 16), P("a", "b")), ((32, 8), P("a"))]),
        "merged_rows_conflict": (merged_rows_conflict, "2d", [((16, 32), P(("dp", "tp"))), ((32, 16), P(None, "tp"))]),
        "residual_ln_2d": (residual_ln_2d, "2d", [((16, 32), P("dp", "tp")), ((32, 32), P()), ((32,), P("tp"))]),
        "masked_softmax_3d": (masked_softmax_3d, "3d", [((4, 8, 16), P("a", "b")), (((4, 8, 16), "i32"), P("a"))]),
        "gqa_2d": (gqa_2d, "2d", [((2, 8, 4, 8), P("dp", None, "tp")), ((2, 8, 2, 8), P("dp"))]),
        "emb_pos_ln_3d": (emb_pos_ln_3d, "3d", [((64, 32), P(None, "c")), (((4, 8), "i32"), P("a", "b")),
                                                ((8, 32), P()), ((32,), P())]),
        "max_pool_seq": (max_pool_seq, "2d", [((4, 16, 32), P("dp", "tp"))]),
        "batch_conflict_einsum": (batch_conflict_einsum, "3d", [((4, 8, 16), P("a")), ((4, 16, 8), P("b"))]),
        "outer_conflict": (outer_conflict, "2d", [((16,), P("dp")), ((32,), P("dp"))]),
        "two_layer_3d": (two_layer_3d, "3d", [((16, 32), P(("a", "b"))), ((32, 32), P(None, "c")),
                                              ((32, 32), P("c")), ((32, 16), P())]),
        "swiglu_2d": (swiglu_2d, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((32, 64), P(None, "tp")),
                                        ((64, 32), P("tp"))]),
        "heads_split_3d": (heads_split_3d, "3d", [((2, 8, 16), P("a", "b")), ((16, 32), P(None, "c"))]),
        "ln_residual_3d": (ln_residual_3d, "3d", [((16, 32), P(("a", "b"), "c")), ((32, 32), P()), ((32,), P()),
                                                  ((32,), P())]),
        "moe_top1_gate": (moe_top1_gate, "2d", [((16, 32), P("dp")), ((32, 4), P()), ((4, 32, 16), P("tp"))]),
        "gather_ids_sharded_2d": (gather_ids_sharded_2d, "2d", [((64, 32), P("tp")), (((16,), "i32"), P("dp"))]),
        "softmax_vocab_2d": (softmax_vocab_2d, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "attention_constraint": (attention_constraint, "2d", [((16, 32), P("dp", "tp")), ((32, 16), P()),
                                                              ((32, 16), P())]),
        "concat_rows_then_norm": (concat_rows_then_norm, "2d", [((8, 32), P("dp", "tp")), ((8, 32), P("dp", "tp"))]),
        "slice_cols_sharded_3d": (slice_cols_sharded_3d, "3d", [((16, 32), P("a", ("b", "c"))), ((16, 8), P())]),
        "einsum_three_operands": (einsum_three_operands, "2d", [((16, 32), P("dp")), ((32, 16), P(None, "tp")),
                                                                ((16, 8), P())]),
        "reshape_flatten_sharded_3d": (reshape_flatten_sharded_3d, "3d", [((4, 8, 16), P("a", "b", "c")),
                                                                          ((16, 8), P())]),
        "mean_then_broadcast_mul": (mean_then_broadcast_mul, "2d", [((16, 32), P("dp", "tp"))]),
        "relu_mlp_1d_fsdp": (relu_mlp_1d_fsdp, "1d", [((16, 32), P("d")), ((32, 64), P(None, "d")),
                                                      ((64, 32), P("d"))]),
        "scores_mask_softmax": (scores_mask_softmax, "2d", [((16, 32), P("dp", "tp")), ((16, 32), P("dp", "tp"))]),
        "weighted_sum_rows": (weighted_sum_rows, "2d", [((16, 32), P("dp", "tp")), ((16,), P("dp"))]),
        "two_constraints_chain": (two_constraints_chain, "3d", [((16, 32), P("a")), ((32, 16), P())]),
        "embed_sum_positions": (embed_sum_positions, "3d", [((64, 16), P(None, "a")),
                                                            (((4, 8), "i32"), P("b", "c")), ((8, 16), P())]),
        "swap_then_mm": (swap_then_mm, "2d", [((8, 4, 16), P("dp", "tp")), ((16, 8), P())]),
        "dot_general_batch_last": (dot_general_batch_last, "3d", [((8, 16, 4), P("a", None, "b")),
                                                                  ((16, 8, 4), P(None, "c", "b"))]),
        "max_minus_mean": (max_minus_mean, "3d", [((8, 16), P("a", ("b", "c")))]),
        "xent_logits_rows": (xent_logits_rows, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                      ((16, 64), P("dp", "tp"))]),
        "gated_residual_1d": (gated_residual_1d, "1d", [((16, 32), P("d")), ((32, 32), P())]),
        "split_heads_merge_3d": (split_heads_merge_3d, "3d", [((2, 8, 32), P("a", None, "b")),
                                                              ((32, 32), P(None, "c")), ((32, 32), P("c"))]),
        "reshape_rows_8_to_2x4": (reshape_rows_8_to_2x4, "2d", [((8, 32), P("tp")), ((32, 16), P(None, "dp"))]),
        "flatten_batch_seq_1d": (flatten_batch_seq_1d, "1d", [((4, 8, 16), P(None, "d")), ((16, 8), P())]),
        "moe_capacity_einsum_3d": (moe_capacity_einsum_3d, "3d", [((2, 8, 16), P("a")), ((2, 8, 4, 2), P("a")),
                                                                  ((4, 16, 32), P("b", None, "c"))]),
        "norm_over_two_axes": (norm_over_two_axes, "3d", [((4, 8, 16), P("a", "b", "c"))]),
        "scan_free_cumsum_mm": (scan_free_cumsum_mm, "2d", [((16, 32), P(None, "tp")), ((32, 16), P("tp"))]),
        "ln_no_affine_3d": (ln_no_affine_3d, "3d", [((2, 8, 32), P("a", "b", "c"))]),
        "expand_then_sum": (expand_then_sum, "2d", [((16, 32), P("dp", "tp")), ((32, 8), P("tp"))]),
        "split_rows_merge_cols": (split_rows_merge_cols, "2d", [((16, 32), P("dp", "tp"))]),
        "concat_three_sharded": (concat_three_sharded, "3d", [((8, 16), P("a", "b")), ((8, 16), P("a", "b")),
                                                              ((8, 16), P("a", "b"))]),
        "heads_last_dim_3d": (heads_last_dim_3d, "3d", [((16, 32), P("a")), ((32, 32), P(None, ("b", "c")))]),
        "constraint_sub_axis": (constraint_sub_axis, "2d", [((16, 32), P("dp")), ((32, 16), P(None, "tp"))]),
        "argmax_then_take": (argmax_then_take, "2d", [((16, 8), P("dp", "tp")), ((8, 32), P(None, "tp"))]),
        "residual_two_paths_3d": (residual_two_paths_3d, "3d", [((16, 32), P(("a", "b"))),
                                                                ((32, 64), P(None, "c")), ((64, 32), P("c"))]),
        "sm_all_gather_mm": (sm_all_gather_mm, "2d", [((16, 32), P("dp", "tp")), ((32, 8), P())]),
        "sm_pmean_loss": (sm_pmean_loss, "1d", [((16, 32), P("d")), ((32, 8), P())]),
        "sm_all_to_all": (sm_all_to_all, "2d", [((16, 32), P("tp"))]),
        "sm_then_global": (sm_then_global, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64, 16), P())]),
        "sm_psum_two_axes": (sm_psum_two_axes, "3d", [((16, 32), P("a", ("b", "c"))), ((32, 8), P(("b", "c")))]),
        "sm_ring_shift_3d": (sm_ring_shift_3d, "3d", [((16, 32), P("a", "b"))]),
        "sm_reduce_scatter_rows": (sm_reduce_scatter_rows, "1d", [((16, 32), P(None, "d")), ((32, 64), P("d"))]),
        "sm_partial_auto": (sm_partial_auto, "2d", [((16, 32), P("dp", "tp")), ((32, 8), P("tp"))]),
        "qkv_split": (qkv_split, "2d", [((2, 8, 32), P("dp")), ((32, 96), P())]),
        "glu_nn": (glu_nn, "2d", [((16, 32), P("dp")), ((32, 64), P())]),
        "split_rows": (split_rows, "2d", [((16, 32), P("dp", "tp"))]),
        "split_uneven": (split_uneven, "1d", [((16, 32), P("d"))]),
        "gelu_exact_mlp": (gelu_exact_mlp, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")), ((64, 32), P("tp"))]),
        "erf_3d": (erf_3d, "3d", [((4, 8, 16), P("a", "b", "c"))]),
        "mlp_bias_3d": (mlp_bias_3d, "3d", [((16, 32), P(("a", "b"))), ((32, 64), P(None, "c")), ((64,), P("c")),
                                            ((64, 32), P("c"))]),
        "causal_attn": (causal_attn, "2d", [((2, 8, 32), P("dp")), ((32, 32), P(None, "tp")),
                                            ((32, 32), P(None, "tp")), ((32, 32), P(None, "tp"))]),
        "rms_swiglu": (rms_swiglu, "2d", [((16, 32), P("dp")), ((32,), P()), ((32, 128), P(None, "tp")),
                                          ((64, 32), P("tp"))]),
        "emb_pos_ln": (emb_pos_ln, "2d", [((64, 32), P("tp")), (((16,), "i32"), P("dp")), ((16, 32), P())]),
        "moe_capacity": (moe_capacity, "2d", [((16, 32), P("dp")), ((32, 4), P()), ((4, 32, 16), P("tp"))]),
        "heads_concat_proj": (heads_concat_proj, "2d", [((16, 16), P("dp")), ((16, 16), P("dp")),
                                                        ((32, 64), P(None, "tp"))]),
        "first_half_mm": (first_half_mm, "2d", [((16, 32), P("dp", "tp")), ((16, 8), P())]),
        "heads_constraint": (heads_constraint, "2d", [((16, 32), P("dp")), ((32, 64), P())]),
        "emb_2d_ids": (emb_2d_ids, "2d", [((64, 32), P(None, "tp")), (((8, 4), "i32"), P("dp"))]),
        "ce_one_hot": (ce_one_hot, "2d", [((16, 64), P("dp", "tp")), (((16,), "i32"), P("dp"))]),
        "seq_attn_1d": (seq_attn_1d, "1d", [((2, 16, 32), P(None, "d")), ((32, 32), P()), ((32, 32), P())]),
        "qkv_3d": (qkv_3d, "3d", [((16, 32), P("a")), ((32, 96), P(None, ("b", "c")))]),
        "res_ln_3d": (res_ln_3d, "3d", [((16, 32), P(("a", "b"))), ((32, 32), P(None, "c")), ((32,), P()),
                                        ((32,), P())]),
        "heads_softmax_pool": (heads_softmax_pool, "2d", [((4, 8, 16), P("dp", "tp"))]),
        "tal_vocab": (tal_vocab, "2d", [((16, 32), P("dp", "tp")), (((16, 1), "i32"), P("dp"))]),
        "tal_rows": (tal_rows, "2d", [((16, 32), P("dp")), (((16, 3), "i32"), P("dp"))]),
        "tal_idx_sharded": (tal_idx_sharded, "2d", [((16, 32), P()), (((16, 8), "i32"), P(None, "tp"))]),
        "tal_axis0": (tal_axis0, "2d", [((16, 32), P("dp", "tp")), (((1, 32), "i32"), P(None, "tp"))]),
        "ce_take": (ce_take, "2d", [((16, 32), P("dp", "tp")), (((16,), "i32"), P("dp"))]),
        "ce_take_lm": (ce_take_lm, "2d", [((2, 8, 16), P("dp")), ((16, 32), P(None, "tp")),
                                          (((2, 8), "i32"), P("dp"))]),
        "tal_3d": (tal_3d, "3d", [((4, 8, 16), P("a", None, ("b", "c"))), (((4, 8, 2), "i32"), P("a"))]),
        "pow_half": (pow_half, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "pow_var": (pow_var, "2d", [((16, 32), P("dp", "tp"))]),
        "pow_arrays": (pow_arrays, "2d", [((16, 32), P("dp")), ((16, 32), P(None, "tp"))]),
        "pow_base": (pow_base, "1d", [((16, 32), P("d")), ((32, 16), P())]),
        "pow_3d": (pow_3d, "3d", [((4, 8, 16), P("a", "b", "c"))]),
        "sort_free": (sort_free, "2d", [((16, 32), P("dp"))]),
        "sort_sharded": (sort_sharded, "2d", [((16, 32), P("dp", "tp"))]),
        "argsort_sharded": (argsort_sharded, "2d", [((16, 32), P("dp", "tp"))]),
        "argsort_rows": (argsort_rows, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "sort_3d": (sort_3d, "3d", [((4, 8, 16), P("a", "b", "c"))]),
        "sorted_dispatch": (sorted_dispatch, "1d", [((16, 32), P()), (((16,), "i32"), P("d"))]),
        "argsort_1d": (argsort_1d, "1d", [((16,), P("d"))]),
        "sort_2d_tp": (sort_2d_tp, "2d", [((2, 32), P(None, "tp"))]),
        "pad_seq_sharded": (pad_seq_sharded, "2d", [((16, 32), P("dp", "tp"))]),
        "shift_right_pad": (shift_right_pad, "2d", [((16, 32), P("dp", "tp"))]),
        "take_cols_free": (take_cols_free, "2d", [((16, 32), P("dp")), (((8,), "i32"), P())]),
        "take_cols_sharded": (take_cols_sharded, "2d", [((16, 32), P("dp", "tp")), (((8,), "i32"), P())]),
        "index_cols": (index_cols, "2d", [((16, 32), P("dp", "tp")), (((8,), "i32"), P())]),
        "take_cols_3d": (take_cols_3d, "2d", [((4, 16, 32), P("dp", None, "tp")), (((8,), "i32"), P())]),
        "take_cols_idx_sharded": (take_cols_idx_sharded, "2d", [((16, 32), P("dp")), (((8,), "i32"), P("tp"))]),
        "flip_sharded": (flip_sharded, "2d", [((16, 32), P("dp", "tp"))]),
        "flip_free": (flip_free, "2d", [((16, 32), P("dp"))]),
        "flip_two": (flip_two, "2d", [((16, 32), P("dp", "tp"))]),
        "flip_rows_3d": (flip_rows_3d, "3d", [((8, 8, 16), P(("a", "b"), "c"))]),
        "reverse_scan": (reverse_scan, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "pad_rows_sharded": (pad_rows_sharded, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "cumsum_mm": (cumsum_mm, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "pos_first": (pos_first, "2d", [((8, 4, 32), P("dp", "tp")), ((32, 16), P())]),
        "pos_last_3d": (pos_last_3d, "3d", [((8, 8, 16), P("a", "b", "c"))]),
        "pos_row": (pos_row, "2d", [((16, 32), P("dp", "tp"))]),
        "pos_col_sharded": (pos_col_sharded, "2d", [((16, 32), P("dp", "tp"))]),
        "pos_cls_token": (pos_cls_token, "2d", [((4, 8, 32), P("dp", "tp")), ((32, 64), P())]),
        "pos_last_2d": (pos_last_2d, "2d", [((16, 8, 32), P("dp", "tp"))]),
        "pos_mid_holder": (pos_mid_holder, "2d", [((16, 8, 32), P("dp", "tp"))]),
        "pos_two_axes_3d": (pos_two_axes_3d, "3d", [((4, 8, 16), P("a", ("b", "c")))]),
        "pos_1d": (pos_1d, "1d", [((16, 32), P("d")), ((32, 8), P(None, "d"))]),
        "pos_then_mm_2d": (pos_then_mm_2d, "2d", [((8, 16, 32), P(None, "tp")), ((32, 16), P(None, "dp"))]),
        "pos_sum_after": (pos_sum_after, "2d", [((16, 8, 32), P("dp", "tp", None))]),
        "pos_last_token_logits": (pos_last_token_logits, "2d", [((4, 8, 32), P("dp", "tp")),
                                                                ((32, 64), P(None, "tp"))]),
        "pos_one_in_block0": (pos_one_in_block0, "2d", [((16, 8, 32), P("dp", "tp"))]),
        "keep_then_mm": (keep_then_mm, "2d", [((16, 8, 32), P("dp", "tp")), ((32, 16), P())]),
        "pos_6_3d": (pos_6_3d, "3d", [((8, 8, 16), P("a", ("b", "c")))]),
        "tail_rows_1d": (tail_rows_1d, "1d", [((16, 32), P("d"))]),
        "pos_last_keep_3d": (pos_last_keep_3d, "3d", [((8, 8, 16), P("a", "b", "c"))]),
        "pos_keepdims": (pos_keepdims, "2d", [((16, 8, 32), P("dp", "tp"))]),
        "ho15_mlp_gelu_3d": (ho15_mlp_gelu_3d, "3d", [((16, 32), P(("a", "b"))), ((32, 64), P(None, "c")),
                                                      ((64, 32), P("c"))]),
        "ho15_attn_causal": (ho15_attn_causal, "2d", [((2, 8, 16), P("dp")), ((16, 16), P(None, "tp")),
                                                      ((16, 16), P(None, "tp"))]),
        "ho15_layernorm_residual": (ho15_layernorm_residual, "2d", [((16, 32), P("dp")), ((32, 32), P(None, "tp")),
                                                                    ((32,), P())]),
        "ho15_concat_heads": (ho15_concat_heads, "2d", [((16, 16), P("dp", "tp")), ((16, 16), P("dp", "tp"))]),
        "ho15_slice_tail_cols": (ho15_slice_tail_cols, "2d", [((16, 32), P("dp", "tp")), ((24, 8), P())]),
        "ho15_gather_rows": (ho15_gather_rows, "2d", [((64, 32), P("dp", "tp")), (((16,), "i32"), P())]),
        "ho15_moe_combine": (ho15_moe_combine, "2d", [((16, 32), P("dp")), ((16, 4), P("dp")), ((4, 32, 16), P("tp"))]),
        "ho15_constraint_chain": (ho15_constraint_chain, "2d", [((16, 32), P(None, "tp")), ((32, 64), P()),
                                                                ((64, 16), P("tp"))]),
        "ho15_rms_1d": (ho15_rms_1d, "1d", [((16, 32), P(None, "d")), ((32, 16), P("d"))]),
        "ho15_softmax_cols_3d": (ho15_softmax_cols_3d, "3d", [((16, 32), P("a", ("b", "c")))]),
        "ho15_reduce_max_mean": (ho15_reduce_max_mean, "2d", [((16, 32), P("dp", "tp"))]),
        "ho15_transpose_mm": (ho15_transpose_mm, "2d", [((32, 16), P("tp", "dp")), ((32, 8), P("tp"))]),
        "ho15_swiglu_3d": (ho15_swiglu_3d, "3d", [((16, 32), P("a")), ((32, 64), P(None, ("b", "c"))),
                                                  ((32, 64), P(None, ("b", "c"))), ((64, 32), P(("b", "c")))]),
        "ho15_embed_pos": (ho15_embed_pos, "2d", [((64, 32), P(None, "tp")), (((4, 8), "i32"), P("dp")),
                                                  ((8, 32), P())]),
        "ho15_cumsum_rows": (ho15_cumsum_rows, "2d", [((16, 32), P("dp", "tp"))]),
        "pos_two_cuts": (pos_two_cuts, "2d", [((4, 8, 32), P("dp", "tp"))]),
        "ho23_top2_gates": (ho23_top2_gates, "2d", [((16, 32), P("dp")), ((32, 8), P(None, "tp"))]),
        "ho23_capacity_positions": (ho23_capacity_positions, "2d", [((16, 32), P("dp")), ((32, 4), P())]),
        "ho23_expert_ffn": (ho23_expert_ffn, "2d", [((4, 8, 16), P("tp")), ((4, 16, 32), P("tp")),
                                                    ((4, 32, 16), P("tp"))]),
        "ho23_rope_halves": (ho23_rope_halves, "2d", [((2, 8, 16), P("dp", "tp"))]),
        "ho23_norm_then_vocab": (ho23_norm_then_vocab, "2d", [((16, 32), P("dp")), ((32,), P()),
                                                              ((32, 64), P(None, "tp"))]),
        "ho23_seq_mean_3d": (ho23_seq_mean_3d, "3d", [((4, 16, 8), P("a", ("b", "c")))]),
        "ho23_kv_cache_concat": (ho23_kv_cache_concat, "2d", [((2, 8, 16), P("dp", None, "tp")),
                                                              ((2, 8, 16), P("dp", None, "tp"))]),
        "ho23_gelu_approx_mlp_1d": (ho23_gelu_approx_mlp_1d, "1d", [((16, 32), P("d")), ((32, 64), P()),
                                                                    ((64, 32), P())]),
        "ho24_gqa_scores": (ho24_gqa_scores, "2d", [((2, 8, 8, 16), P("dp", None, "tp")), ((2, 8, 2, 16), P("dp"))]),
        "ho24_swiglu_down_1d": (ho24_swiglu_down_1d, "1d", [((16, 32), P()), ((32, 64), P(None, "d")),
                                                          ((32, 64), P(None, "d")), ((64, 32), P("d"))]),
        "ho24_layernorm_affine_3d": (ho24_layernorm_affine_3d, "3d", [((4, 8, 16), P("a", "b")), ((16,), P()),
                                                                    ((16,), P())]),
        "ho24_causal_attention": (ho24_causal_attention, "2d", [((2, 4, 8, 16), P("dp", "tp")),
                                                              ((2, 4, 8, 16), P("dp", "tp")),
                                                              ((2, 4, 8, 16), P("dp", "tp"))]),
        "ho24_tied_logits": (ho24_tied_logits, "2d", [(((4, 8), "i32"), P()), ((64, 16), P("tp"))]),
        "ho24_top1_dispatch": (ho24_top1_dispatch, "2d", [((16, 32), P("dp")), ((32, 4), P())]),
        "ho24_pool_classify": (ho24_pool_classify, "2d", [((4, 16, 32), P("dp", "tp")), ((32, 8), P())]),
        "ho24_batched_outer": (ho24_batched_outer, "2d", [((8, 16), P("dp", "tp")), ((8, 16), P("dp"))]),
        "ho24_transpose_3d_mm": (ho24_transpose_3d_mm, "3d", [((4, 8, 16), P("a", "b")), ((16, 8), P(None, "c"))]),
        "ho24_concat_heads_mm": (ho24_concat_heads_mm, "2d", [((16, 16), P("dp", "tp")), ((16, 16), P("dp", "tp")),
                                                            ((32, 8), P())]),
        "ho24_rms_by_hand_tp": (ho24_rms_by_hand_tp, "2d", [((16, 32), P("dp", "tp"))]),
        "ho24_residual_mlp_3d": (ho24_residual_mlp_3d, "3d", [((8, 16), P(("a", "b"))), ((16, 32), P(None, "c")),
                                                            ((32, 16), P("c"))]),
        "ho25_cross_attention": (ho25_cross_attention, "2d", [((2, 8, 16), P("dp")), ((2, 12, 16), P("dp")),
                                                              ((16, 16), P(None, "tp"))]),
        "ho25_sliding_window_scores": (ho25_sliding_window_scores, "2d", [((2, 8, 16), P("dp")),
                                                                          ((2, 8, 16), P("dp", "tp"))]),
        "ho25_interleaved_rope": (ho25_interleaved_rope, "2d", [((2, 8, 16), P("dp", "tp"))]),
        "ho25_logit_softcap": (ho25_logit_softcap, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "ho25_sigmoid_gated_residual_3d": (ho25_sigmoid_gated_residual_3d, "3d", [((8, 16), P(("a", "b"))),
                                                                                  ((16, 16), P(None, "c")),
                                                                                  ((16, 16), P(None, "c"))]),
        "ho25_qk_norm_scores": (ho25_qk_norm_scores, "2d", [((2, 8, 4, 16), P("dp", None, "tp")),
                                                            ((2, 8, 4, 16), P("dp", None, "tp"))]),
        "ho25_shifted_sum_seq": (ho25_shifted_sum_seq, "2d", [((4, 16, 8), P("dp", "tp"))]),
        "ho25_head_mean": (ho25_head_mean, "2d", [((4, 8, 32), P("dp", None, "tp"))]),
        "ho25_masked_mean_pool": (ho25_masked_mean_pool, "2d", [((4, 16, 32), P("dp", "tp")),
                                                                ((4, 16), P("dp", "tp"))]),
        "ho25_vmap_matmul_3d": (ho25_vmap_matmul_3d, "3d", [((4, 8, 16), P("a", "b")),
                                                            ((4, 16, 8), P("a", None, "c"))]),
        "ho25_two_tower_dot": (ho25_two_tower_dot, "2d", [((16, 32), P("dp")), ((16, 32), P("dp")),
                                                          ((32, 16), P(None, "tp")), ((32, 16), P(None, "tp"))]),
        "ho25_mlp_masked_hidden": (ho25_mlp_masked_hidden, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                                  ((16, 64), P("dp", "tp")), ((64, 32), P("tp"))]),
        "one_sided_fewer_keys": (one_sided_fewer_keys, "1d", [((8, 16), P(None, "d")), ((12, 16), P())]),
        "one_sided_as_many_keys": (one_sided_as_many_keys, "1d", [((8, 16), P(None, "d")), ((16, 16), P())]),
        "one_sided_more_keys": (one_sided_more_keys, "1d", [((8, 16), P(None, "d")), ((24, 16), P())]),
        "one_sided_fewer_keys_3d": (one_sided_fewer_keys_3d, "3d", [((4, 8, 16), P("a", None, ("b", "c"))),
                                                             ((4, 12, 16), P("a"))]),
        "one_sided_as_many_keys_3d": (one_sided_as_many_keys_3d, "3d", [((4, 8, 16), P("a", None, ("b", "c"))),
                                                               ((4, 16, 16), P("a"))]),
        "one_sided_weight_small": (one_sided_weight_small, "2d", [((16, 32), P("dp")), ((32, 8), P("tp"))]),
        "one_sided_weight_equal": (one_sided_weight_equal, "2d", [((64, 32), P("dp")), ((32, 16), P("tp"))]),
        "one_sided_weight_large": (one_sided_weight_large, "2d", [((128, 32), P("dp")), ((32, 16), P("tp"))]),
        "one_sided_columns_small": (one_sided_columns_small, "2d", [((16, 32), P("tp", "dp")), ((32, 8), P())]),
        "one_sided_columns_large": (one_sided_columns_large, "2d", [((16, 32), P("tp", "dp")), ((32, 64), P())]),
        "ho26_two_sided_diff_axes": (ho26_two_sided_diff_axes, "2d", [((16, 32), P(None, "dp")), ((32, 16), P("tp"))]),
        "ho26_batched_contract_3d": (ho26_batched_contract_3d, "3d", [((4, 8, 16), P("a", None, "b")),
                                                                      ((4, 16, 8), P("a", "c"))]),
        "ho26_result_wants_contraction": (ho26_result_wants_contraction, "2d", [((16, 32), P("dp", "tp")),
                                                                                ((32, 16), P())]),
        "ho26_matvec": (ho26_matvec, "2d", [((16, 32), P("dp", "tp")), ((32,), P())]),
        "ho26_scores_more_keys": (ho26_scores_more_keys, "2d", [((2, 8, 16), P("dp", None, "tp")),
                                                                ((2, 32, 16), P("dp"))]),
        "ho26_weighted_sum_heads": (ho26_weighted_sum_heads, "2d", [((2, 4, 8, 8), P("dp", "tp")),
                                                                    ((2, 4, 8, 16), P("dp", "tp"))]),
        "ho26_outer_then_sum": (ho26_outer_then_sum, "2d", [((16,), P("dp")), ((32,), P("tp"))]),
        "ho26_rows_cols_one_axis_1d": (ho26_rows_cols_one_axis_1d, "1d", [((16, 32), P("d")),
                                                                          ((32, 64), P(None, "d"))]),
        "ho26_layernorm_then_vocab_3d": (ho26_layernorm_then_vocab_3d, "3d", [((8, 16), P("a")),
                                                                              ((16, 64), P(None, ("b", "c")))]),
        "ho26_gather_then_mm": (ho26_gather_then_mm, "2d", [((64, 16), P(None, "tp")), (((8,), "i32"), P("dp")),
                                                            ((16, 8), P("tp"))]),
        "ho26_reduce_two_axes_3d": (ho26_reduce_two_axes_3d, "3d", [((4, 8, 16), P("a", "b", "c"))]),
        "ho26_fsdp_weight_3d": (ho26_fsdp_weight_3d, "3d", [((16, 32), P(("a", "b"))), ((32, 8), P("c"))]),
        "ho27_merge_heads_dot": (ho27_merge_heads_dot, "2d", [((2, 8, 4, 16), P("dp", None, "tp")),
                                                              ((64, 32), P("tp"))]),
        "ho27_split_heads_3d": (ho27_split_heads_3d, "3d", [((4, 8, 32), P("a", None, ("b", "c")))]),
        "ho27_transpose_then_reduce": (ho27_transpose_then_reduce, "2d", [((16, 32), P("dp", "tp"))]),
        "ho27_max_two_axes_3d": (ho27_max_two_axes_3d, "3d", [((4, 8, 16), P("a", "b", "c"))]),
        "ho27_softmax_sharded_3d": (ho27_softmax_sharded_3d, "3d", [((4, 8, 16), P("a", "b", "c"))]),
        "ho27_concat_weights_dot": (ho27_concat_weights_dot, "2d", [((16, 32), P("dp")), ((32, 16), P(None, "tp")),
                                                                    ((32, 16), P(None, "tp"))]),
        "ho27_embedding_vocab_rows": (ho27_embedding_vocab_rows, "2d", [((64, 16), P("tp")),
                                                                        (((8, 4), "i32"), P("dp"))]),
        "ho27_dot_then_transpose_3d": (ho27_dot_then_transpose_3d, "3d", [((16, 32), P("a")),
                                                                          ((32, 8), P(None, ("b", "c")))]),
        "ho27_mean_batch_then_dot": (ho27_mean_batch_then_dot, "2d", [((16, 32), P("dp", "tp")), ((32, 8), P("tp"))]),
        "ho27_leaky_then_dot": (ho27_leaky_then_dot, "2d", [((16, 32), P("dp", "tp")), ((32, 8), P())]),
        "ho27_three_matmuls_1d": (ho27_three_matmuls_1d, "1d", [((16, 32), P()), ((32, 64), P(None, "d")),
                                                                ((64, 32), P("d")), ((32, 64), P(None, "d"))]),
        "ho27_layernorm_seq_split": (ho27_layernorm_seq_split, "2d", [((4, 16, 32), P("dp", "tp")), ((32,), P()),
                                                                      ((32,), P())]),
        "ho28_two_contractions": (ho28_two_contractions, "2d", [((4, 8, 16), P("dp", "tp")), ((8, 16, 32), P("tp"))]),
        "ho28_two_contractions_3d": (ho28_two_contractions_3d, "3d", [((8, 4, 16), P("a", "b", "c")),
                                                                      ((4, 16, 8), P("b", "c"))]),
        "ho28_heads_out_proj": (ho28_heads_out_proj, "2d", [((2, 8, 4, 16), P("dp", None, "tp")),
                                                            ((4, 16, 32), P("tp"))]),
        "ho28_concat_seq_3d": (ho28_concat_seq_3d, "3d", [((4, 8, 16), P("a", "b", "c")),
                                                          ((4, 8, 16), P("a", "b", "c"))]),
        "ho28_slice_heads": (ho28_slice_heads, "2d", [((2, 8, 4, 16), P("dp", None, "tp"))]),
        "ho28_gather_sharded_both": (ho28_gather_sharded_both, "2d", [((64, 16), P("tp", "dp")),
                                                                      (((8,), "i32"), P("dp"))]),
        "ho28_transpose_sum_3d": (ho28_transpose_sum_3d, "3d", [((4, 8, 16), P("a", "b", "c"))]),
        "ho28_merge_batch_seq": (ho28_merge_batch_seq, "2d", [((4, 8, 16), P("dp", "tp")), ((16, 8), P())]),
        "ho28_bias_and_scale": (ho28_bias_and_scale, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                            ((64,), P("tp")), ((64,), P())]),
        "ho28_square_norm_rows": (ho28_square_norm_rows, "3d", [((8, 16), P(("a", "b"), "c"))]),
        "ho28_min_over_seq": (ho28_min_over_seq, "2d", [((4, 16, 8), P("dp", "tp"))]),
        "ho28_swap_then_dot": (ho28_swap_then_dot, "2d", [((4, 16, 8), P("dp", "tp")), ((16, 4), P())]),
        "ho29_gqa_3d": (ho29_gqa_3d, "3d", [((2, 8, 8, 16), P("a", None, ("b", "c"))), ((2, 8, 2, 16), P("a"))]),
        "ho29_tied_logits_3d": (ho29_tied_logits_3d, "3d", [(((4, 8), "i32"), P("a")), ((64, 16), P(("b", "c")))]),
        "ho29_pad_then_dot": (ho29_pad_then_dot, "2d", [((16, 24), P("dp")), ((32, 8), P())]),
        "ho29_roll_seq_3d": (ho29_roll_seq_3d, "3d", [((4, 16, 8), P("a", ("b", "c")))]),
        "ho29_argmax_heads": (ho29_argmax_heads, "2d", [((4, 8, 16), P("dp", None, "tp"))]),
        "ho29_merge_sharded_dims": (ho29_merge_sharded_dims, "2d", [((4, 8, 16), P("dp", "tp"))]),
        "ho29_mlp_residual_ln_1d": (ho29_mlp_residual_ln_1d, "1d", [((16, 32), P("d")), ((32, 64), P(None, "d")),
                                                                    ((64, 32), P("d"))]),
        "ho29_expert_einsum_3d": (ho29_expert_einsum_3d, "3d", [((4, 8, 16), P("a", ("b", "c"))),
                                                                ((4, 16, 8), P("a", None, "c"))]),
        "ho29_scores_bias": (ho29_scores_bias, "2d", [((2, 8, 16), P("dp")), ((2, 8, 16), P("dp")),
                                                      ((2, 8, 8), P("dp", None, "tp"))]),
        "ho29_weighted_mean_cols": (ho29_weighted_mean_cols, "2d", [((16, 32), P("dp", "tp")), ((32,), P("tp"))]),
        "ho29_two_heads_concat_dot_3d": (ho29_two_heads_concat_dot_3d, "3d", [((16, 16), P("a", "b")),
                                                                              ((16, 16), P("a", "b")),
                                                                              ((32, 8), P(None, "c"))]),
        "ho29_cumsum_then_dot": (ho29_cumsum_then_dot, "2d", [((16, 32), P("dp", "tp")), ((32, 8), P("tp"))]),
        "ho30_reduce_scatter_pattern": (ho30_reduce_scatter_pattern, "2d", [((16, 32), P(None, "tp")),
                                                                            ((32, 8), P("tp"))]),
        "ho30_three_operand_einsum": (ho30_three_operand_einsum, "2d", [((16, 32), P("dp")), ((32, 16), P(None, "tp")),
                                                                        ((16, 8), P("tp"))]),
        "ho30_broadcast_batch_dot": (ho30_broadcast_batch_dot, "3d", [((4, 8, 16), P("a", "b")),
                                                                      ((16, 32), P(None, "c"))]),
        "ho30_contract_two_split_same": (ho30_contract_two_split_same, "2d", [((4, 8, 16), P("dp", "tp")),
                                                                              ((8, 16, 4), P("tp"))]),
        "ho30_dot_one_sided_grouped_3d": (ho30_dot_one_sided_grouped_3d, "3d", [((16, 32), P("a", "b")),
                                                                                ((32, 8), P())]),
        "ho30_dot_row_col_3d": (ho30_dot_row_col_3d, "3d", [((16, 32), P("a", "b")), ((32, 8), P("b", "c"))]),
        "ho30_outer_batch_3d": (ho30_outer_batch_3d, "3d", [((8, 16), P("a", "b")), ((8, 16), P("a", "c"))]),
        "ho30_vec_mat_1d": (ho30_vec_mat_1d, "1d", [((32,), P("d")), ((32, 16), P())]),
        "ho30_gram_matrix": (ho30_gram_matrix, "2d", [((32, 16), P("dp", "tp"))]),
        "ho30_attention_values_3d": (ho30_attention_values_3d, "3d", [((2, 4, 8, 8), P("a", "b", None, "c")),
                                                                      ((2, 4, 8, 16), P("a", "b"))]),
        "ho30_dot_split_result_cols": (ho30_dot_split_result_cols, "2d", [((16, 32), P("dp", "tp")), ((32, 8), P())]),
        "ho30_mixed_contract_3d": (ho30_mixed_contract_3d, "3d", [((4, 8, 16), P("a", None, "b")),
                                                                  ((16, 8), P("c"))]),
        "ho31_swiglu_mlp": (ho31_swiglu_mlp, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                    ((32, 64), P(None, "tp")), ((64, 32), P("tp"))]),
        "ho31_gqa_scores": (ho31_gqa_scores, "2d", [((2, 8, 16, 8), P("dp", "tp")), ((2, 2, 16, 8), P("dp"))]),
        "ho31_layernorm_proj_3d": (ho31_layernorm_proj_3d, "3d", [((4, 8, 16), P("a", "b")), ((16, 32), P(None, "c"))]),
        "ho31_logsumexp_vocab": (ho31_logsumexp_vocab, "2d", [((16, 64), P("dp", "tp"))]),
        "ho31_residual_scaled": (ho31_residual_scaled, "2d", [((16, 32), P("dp", "tp")), ((32, 32), P("tp"))]),
        "ho31_mean_pool_head": (ho31_mean_pool_head, "2d", [((4, 16, 32), P("dp", "tp")), ((32, 10), P())]),
        "ho31_weight_grad_shape": (ho31_weight_grad_shape, "2d", [((16, 32), P("dp")), ((16, 8), P("dp"))]),
        "ho31_bias_gelu_1d": (ho31_bias_gelu_1d, "1d", [((16, 32), P("d")), ((32, 64), P()), ((64,), P())]),
        "ho31_cumsum_rows": (ho31_cumsum_rows, "2d", [((4, 16), P("dp", "tp"))]),
        "ho31_concat_then_proj": (ho31_concat_then_proj, "2d", [((8, 16), P("dp", "tp")), ((8, 16), P("dp", "tp")),
                                                                ((32, 8), P())]),
        "ho31_masked_softmax": (ho31_masked_softmax, "2d", [((2, 4, 8, 8), P("dp", "tp")), ((8, 8), P())]),
        "ho31_heads_out_proj": (ho31_heads_out_proj, "2d", [((2, 8, 4, 16), P("dp", None, "tp")),
                                                            ((4, 16, 32), P("tp"))]),
        "ho32_reshape_heads_3d": (ho32_reshape_heads_3d, "3d", [((4, 8, 32), P("a", "b", "c"))]),
        "ho32_pad_rows": (ho32_pad_rows, "2d", [((16, 8), P("dp", "tp"))]),
        "ho32_reverse_cols": (ho32_reverse_cols, "2d", [((8, 16), P("dp", "tp"))]),
        "ho32_argmax_vocab": (ho32_argmax_vocab, "2d", [((16, 64), P("dp", "tp"))]),
        "ho32_take_along_rows": (ho32_take_along_rows, "2d", [((8, 16), P("dp", "tp")), (((8, 2), "i32"), P("dp"))]),
        "ho32_center_rows_3d": (ho32_center_rows_3d, "3d", [((8, 16), P("a", ("b", "c")))]),
        "ho32_fsdp_mlp_1d": (ho32_fsdp_mlp_1d, "1d", [((16, 32), P("d")), ((32, 64), P("d")),
                                                      ((64, 32), P(None, "d"))]),
        "ho32_attention_full": (ho32_attention_full, "2d", [((2, 4, 8, 16), P("dp", "tp")),
                                                            ((2, 4, 8, 16), P("dp", "tp")),
                                                            ((2, 4, 8, 16), P("dp", "tp"))]),
        "ho32_squeeze_expand": (ho32_squeeze_expand, "2d", [((16, 1, 8), P("dp"))]),
        "ho32_max_over_batch": (ho32_max_over_batch, "2d", [((16, 32), P("dp", "tp"))]),
        "ho32_rms_norm_scale": (ho32_rms_norm_scale, "2d", [((4, 8, 32), P("dp", None, "tp")), ((32,), P("tp"))]),
        "ho32_gather_rows_then_dot": (ho32_gather_rows_then_dot, "2d", [((64, 16), P("tp")), (((8,), "i32"), P("dp")),
                                                                        ((16, 32), P(None, "tp"))]),
        "ho33_sm_stable_softmax": (ho33_sm_stable_softmax, "2d", [((8, 16), P("dp", "tp"))]),
        "ho33_sm_gather_seq_dot": (ho33_sm_gather_seq_dot, "2d", [((4, 16, 32), P("dp", "tp")),
                                                                  ((32, 16), P(None, "tp"))]),
        "ho33_sm_scatter_rows": (ho33_sm_scatter_rows, "2d", [((16, 32), P(None, "tp"))]),
        "ho33_sm_two_regions": (ho33_sm_two_regions, "2d", [((8, 16), P("dp"))]),
        "ho33_sm_permute_a_3d": (ho33_sm_permute_a_3d, "3d", [((8, 16), P("a", "b"))]),
        "ho33_sm_pmin_cols": (ho33_sm_pmin_cols, "2d", [((8, 16), P("dp", "tp"))]),
        "ho34_rotary_in_graph": (ho34_rotary_in_graph, "2d", [((4, 16, 32), P("dp", "tp"))]),
        "ho34_clip_then_dot": (ho34_clip_then_dot, "2d", [((16, 32), P("dp")), ((32, 16), P(None, "tp"))]),
        "ho34_signed_sqrt": (ho34_signed_sqrt, "2d", [((16, 32), P("dp", "tp"))]),
        "ho34_softplus_mean": (ho34_softplus_mean, "2d", [((16, 32), P("dp", "tp"))]),
        "ho34_row_norms": (ho34_row_norms, "2d", [((16, 32), P("dp", "tp"))]),
        "ho34_floor_quantise": (ho34_floor_quantise, "2d", [((16, 32), P("dp")), ((32, 8), P())]),
        "ho34_log_sigmoid_loss": (ho34_log_sigmoid_loss, "2d", [((16, 32), P("dp", "tp"))]),
        "ho34_var_over_batch": (ho34_var_over_batch, "2d", [((16, 32), P("dp", "tp"))]),
        "ho34_ellipsis_einsum": (ho34_ellipsis_einsum, "2d", [((2, 8, 32), P("dp")), ((32, 16), P(None, "tp"))]),
        "ho34_bf16_matmul": (ho34_bf16_matmul, "2d", [((16, 32), P("dp")), ((32, 16), P(None, "tp"))]),
        "ho34_round_half": (ho34_round_half, "1d", [((16, 32), P("d"))]),
        "ho35_constraint_between_layers": (ho35_constraint_between_layers, "2d", [((16, 32), P("dp")),
                                                                                  ((32, 64), P()), ((64, 16), P())]),
        "ho35_shard_alike_pair": (ho35_shard_alike_pair, "2d", [((16, 32), P("dp")), ((32, 16), P(None, "tp")),
                                                                ((16, 16), P())]),
        "ho35_nested_jit_out_sharding": (ho35_nested_jit_out_sharding, "2d", [((16, 32), P("dp")), ((32, 8), P())]),
        "ho35_grad_of_mlp": (ho35_grad_of_mlp, "2d", [((32, 16), P(None, "tp")), ((8, 32), P("dp"))]),
        "ho35_grad_of_cross_entropy": (ho35_grad_of_cross_entropy, "2d", [((16, 64), P(None, "tp")), ((8, 16), P("dp")),
                                                                          ((8, 64), P("dp"))]),
        "ho35_constraint_unconstrained_dim": (ho35_constraint_unconstrained_dim, "2d", [((16, 32), P("dp")),
                                                                                        ((32, 16), P())]),
        "ho35_value_and_grad": (ho35_value_and_grad, "1d", [((32, 16), P()), ((16, 32), P("d"))]),
        "ho35_constraint_on_transpose": (ho35_constraint_on_transpose, "2d", [((16, 32), P("dp", "tp"))]),
        "ho36_kv_traced_pos": (ho36_kv_traced_pos, "2d", [((2, 16, 32), P("dp", None, "tp")),
                                                          ((2, 1, 32), P("dp", None, "tp")), (((), "i32"), P())]),
        "ho36_kv_seq_split": (ho36_kv_seq_split, "2d", [((2, 16, 32), P("dp", "tp", None)),
                                                        ((2, 1, 32), P("dp", None, None)), (((), "i32"), P())]),
        "ho36_kv_constant_pos": (ho36_kv_constant_pos, "2d", [((2, 16, 32), P("dp", None, "tp")),
                                                              ((2, 1, 32), P("dp", None, "tp"))]),
        "ho36_kv_then_scores": (ho36_kv_then_scores, "2d", [((2, 16, 32), P("dp", "tp", None)),
                                                            ((2, 1, 32), P("dp", None, None)),
                                                            ((2, 4, 32), P("dp", None, None)), (((), "i32"), P())]),
        "ho36_update_from_dot": (ho36_update_from_dot, "2d", [((16, 32), P(None, "tp")), ((4, 8), P()),
                                                              ((8, 32), P(None, "tp")), (((), "i32"), P())]),
        "ho36_rows_1d": (ho36_rows_1d, "1d", [((16, 32), P("d")), ((4, 32), P()), (((), "i32"), P())]),
        "ho36_3d_block": (ho36_3d_block, "3d", [((8, 16, 8), P("a", "b", "c")), ((8, 2, 8), P("a", None, "c")),
                                                (((), "i32"), P())]),
        "ho36_update_split_on_cut": (ho36_update_split_on_cut, "2d", [((2, 16, 32), P("dp", None, None)),
                                                                      ((2, 4, 32), P("dp", "tp", None)),
                                                                      (((), "i32"), P())]),
        "ho37_row_at_pos": (ho37_row_at_pos, "2d", [((16, 32), P("dp", "tp")), (((), "i32"), P())]),
        "ho37_window_rows": (ho37_window_rows, "2d", [((16, 32), P("dp", "tp")), (((), "i32"), P())]),
        "ho37_seq_window": (ho37_seq_window, "2d", [((2, 16, 32), P("dp", "tp", None)), (((), "i32"), P())]),
        "ho37_layer_weight": (ho37_layer_weight, "2d", [((8, 32), P("dp")), ((4, 32, 16), P(None, None, "tp")),
                                                        (((), "i32"), P())]),
        "ho37_window_then_dot": (ho37_window_then_dot, "2d", [((16, 32), P("dp")), ((32, 8), P(None, "tp")),
                                                              (((), "i32"), P())]),
        "ho37_constant_window": (ho37_constant_window, "2d", [((16, 32), P("dp", "tp"))]),
        "ho37_col_window_1d": (ho37_col_window_1d, "1d", [((8, 32), P(None, "d")), (((), "i32"), P())]),
        "ho37_middle_index_3d": (ho37_middle_index_3d, "3d", [((8, 16, 8), P("a", "b", "c")), (((), "i32"), P())]),
        "ho39_causal_and_padding": (ho39_causal_and_padding, "2d", [((2, 8, 8), P("dp", "tp")), ((2, 8), P("dp"))]),
        "ho39_or_of_windows": (ho39_or_of_windows, "2d", [((16, 32), P("dp", "tp"))]),
        "ho39_not_mask_dot": (ho39_not_mask_dot, "2d", [((16, 32), P("dp")), ((32, 16), P(None, "tp"))]),
        "ho39_xor_mask_3d": (ho39_xor_mask_3d, "3d", [((8, 16), P("a", ("b", "c"))), ((8, 16), P("a"))]),
        "ho39_masked_mean_1d": (ho39_masked_mean_1d, "1d", [((16, 32), P("d")), ((16, 32), P("d"))]),
        "ho39_mask_into_scores": (ho39_mask_into_scores, "2d", [((2, 8, 16), P("dp")), ((2, 8, 16), P("dp", "tp")),
                                                                ((2, 8), P("dp"))]),
        "win3_of_8": (win3_of_8, "2d", [((16, 8, 32), P("dp", "tp"))]),
        "win3_mid": (win3_mid, "2d", [((16, 8, 32), P("dp", "tp"))]),
        "win2_late": (win2_late, "2d", [((16, 8, 32), P("dp", "tp"))]),
        "ho16_mlp_bias_1d": (ho16_mlp_bias_1d, "1d", [((16, 32), P()), ((32, 64), P(None, "d")), ((64,), P("d")),
                                                      ((64, 32), P("d"))]),
        "ho16_attn_heads_out": (ho16_attn_heads_out, "2d", [((2, 8, 16), P("dp")), ((16, 16), P(None, "tp")),
                                                            ((16, 16), P(None, "tp")), ((16, 16), P(None, "tp")),
                                                            ((16, 16), P("tp"))]),
        "ho16_layernorm_3d": (ho16_layernorm_3d, "3d", [((16, 32), P("a", "c")), ((32,), P("c"))]),
        "ho16_softmax_temperature": (ho16_softmax_temperature, "2d", [((16, 32), P("dp", "tp"))]),
        "ho16_concat_batch": (ho16_concat_batch, "2d", [((8, 32), P("dp")), ((8, 32), P("dp")), ((32, 16), P())]),
        "ho16_slice_head": (ho16_slice_head, "2d", [((16, 32), P(None, "tp")), ((16, 8), P())]),
        "ho16_gather_then_mm": (ho16_gather_then_mm, "2d", [((64, 32), P(None, "tp")), (((16,), "i32"), P("dp")),
                                                            ((32, 16), P("tp"))]),
        "ho16_moe_dispatch": (ho16_moe_dispatch, "2d", [((16, 32), P("dp")), ((16, 4), P("dp")),
                                                        ((4, 32, 32), P("tp"))]),
        "ho16_constraint_replicate": (ho16_constraint_replicate, "2d", [((16, 32), P("dp")),
                                                                        ((32, 16), P(None, "tp"))]),
        "ho16_rmsnorm_mlp_3d": (ho16_rmsnorm_mlp_3d, "3d", [((16, 32), P(("a", "b"))), ((32,), P()),
                                                            ((32, 64), P(None, "c"))]),
        "ho16_residual_two_layers_1d": (ho16_residual_two_layers_1d, "1d", [((16, 32), P("d")), ((32, 32), P()),
                                                                            ((32, 32), P())]),
        "ho16_mean_pool_seq": (ho16_mean_pool_seq, "2d", [((4, 8, 32), P("dp", "tp")), ((32, 16), P())]),
        "ho16_scores_mask_3d": (ho16_scores_mask_3d, "3d", [((2, 8, 16), P("a", "b")), ((2, 8, 16), P("a"))]),
        "ho16_split_qkv": (ho16_split_qkv, "2d", [((16, 32), P("dp")), ((32, 96), P(None, "tp"))]),
        "ho17_masked_scores": (ho17_masked_scores, "2d", [((2, 8, 16), P("dp")), ((2, 8, 16), P("dp")),
                                                          ((2, 8, 8), P("dp"))]),
        "ho17_dropout_mask_mlp": (ho17_dropout_mask_mlp, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp")),
                                                                ((16, 64), P("dp", "tp")), ((64, 32), P("tp"))]),
        "ho17_tied_head": (ho17_tied_head, "2d", [((64, 32), P("tp")), (((16,), "i32"), P("dp"))]),
        "ho17_gqa_scores": (ho17_gqa_scores, "2d", [((2, 8, 4, 8), P("dp", None, "tp")), ((2, 8, 2, 8), P("dp"))]),
        "ho17_pad_seq": (ho17_pad_seq, "2d", [((16, 24), P("dp", "tp"))]),
        "ho17_concat_three": (ho17_concat_three, "2d", [((16, 8), P("dp")), ((16, 8), P("dp")),
                                                        ((16, 16), P("dp")), ((32, 16), P(None, "tp"))]),
        "ho17_top1_gate": (ho17_top1_gate, "2d", [((16, 32), P("dp")), ((32, 4), P())]),
        "ho17_post_ln_residual_3d": (ho17_post_ln_residual_3d, "3d", [((16, 32), P(("a", "b"))),
                                                                      ((32, 32), P(None, "c")), ((32,), P())]),
        "ho17_swap_then_mm": (ho17_swap_then_mm, "2d", [((4, 8, 16), P("dp", "tp")), ((64, 16), P())]),
        "ho17_sum_sq_norm": (ho17_sum_sq_norm, "3d", [((16, 32), P("a", ("b", "c")))]),
        "roll_left_block": (roll_left_block, "2d", [((16, 32), P("dp", "tp"))]),
        "roll_right_one": (roll_right_one, "2d", [((16, 32), P("dp", "tp"))]),
        "roll_two_pieces": (roll_two_pieces, "2d", [((16, 32), P("dp", "tp"))]),
        "roll_rows_3d": (roll_rows_3d, "3d", [((16, 8), P(("a", "b", "c")))]),
        "roll_free_dim": (roll_free_dim, "2d", [((16, 32), P("dp"))]),
        "roll_both": (roll_both, "2d", [((16, 32), P("dp", "tp"))]),
        "roll_then_mm": (roll_then_mm, "2d", [((16, 32), P("dp", "tp")), ((32, 8), P())]),
        "ho18_rms_qkv_3d": (ho18_rms_qkv_3d, "3d", [((16, 32), P(("a", "b"))), ((32,), P()), ((32, 96), P(None, "c"))]),
        "ho18_moe_dispatch": (ho18_moe_dispatch, "2d", [((16, 32), P("dp")), ((16, 4), P("dp")),
                                                        ((4, 32, 16), P("tp"))]),
        "ho18_vocab_softmax_sum": (ho18_vocab_softmax_sum, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "ho18_slice_concat": (ho18_slice_concat, "2d", [((16, 32), P("dp", "tp"))]),
        "ho18_gather_rows": (ho18_gather_rows, "2d", [((64, 32), P(None, "tp")), (((16,), "i32"), P("dp"))]),
        "ho18_constraint_mid_mlp": (ho18_constraint_mid_mlp, "2d", [((16, 32), P("dp")), ((32, 64), P()),
                                                                    ((64, 32), P())]),
        "ho18_layernorm_1d": (ho18_layernorm_1d, "1d", [((16, 32), P("d")), ((32,), P()), ((32,), P())]),
        "ho18_attn_out_proj": (ho18_attn_out_proj, "2d", [((2, 8, 32), P("dp")), ((32, 32), P(None, "tp")),
                                                          ((32, 32), P(None, "tp")), ((32, 32), P(None, "tp")),
                                                          ((32, 32), P("tp"))]),
        "ho18_mean_pool": (ho18_mean_pool, "2d", [((4, 16, 32), P("dp", "tp")), ((32, 16), P())]),
        "ho18_transpose_mm_3d": (ho18_transpose_mm_3d, "3d", [((32, 16), P("a", ("b", "c"))), ((32, 24), P("a"))]),
        "ho18_residual_gelu_bias": (ho18_residual_gelu_bias, "2d", [((16, 32), P("dp")), ((32, 32), P(None, "tp")),
                                                                    ((32,), P("tp"))]),
        "ho18_argmax_vocab": (ho18_argmax_vocab, "2d", [((16, 32), P("dp")), ((32, 64), P(None, "tp"))]),
        "ho20_swiglu_3d": (ho20_swiglu_3d, "3d", [((16, 32), P("a")), ((32, 64), P(None, ("b", "c"))),
                                                  ((32, 64), P(None, ("b", "c"))), ((64, 32), P(("b", "c")))]),
        "ho20_causal_attn": (ho20_causal_attn, "2d", [((4, 16, 8), P("dp", "tp")), ((4, 16, 8), P("dp")),
                                                      ((4, 16, 8), P("dp"))]),
        "ho20_logsumexp_rows": (ho20_logsumexp_rows, "2d", [((16, 32), P("dp", "tp"))]),
        "ho20_stack_pair": (ho20_stack_pair, "2d", [((16, 32), P("dp", "tp")), ((16, 32), P("dp"))]),
        "ho20_expand_heads": (ho20_expand_heads, "2d", [((32, 16), P("dp")), ((16, 32), P(None, "tp"))]),
        "ho20_where_clip": (ho20_where_clip, "3d", [((16, 32), P("a", ("b", "c")))]),
        "ho20_bias_rows_3d": (ho20_bias_rows_3d, "3d", [((16, 32), P(("a", "b"))), ((16,), P("c")), ((32, 8), P())]),
        "ho20_sum_then_outer": (ho20_sum_then_outer, "2d", [((16, 32), P("dp", "tp")), ((32, 8), P())]),
        "ho20_two_matmul_chain_1d": (ho20_two_matmul_chain_1d, "1d", [((16, 32), P()), ((32, 64), P(None, "d")),
                                                                      ((64, 16), P("d"))]),
        "ho20_min_reduce": (ho20_min_reduce, "2d", [((16, 32), P("dp", "tp"))]),
        "ho20_slice_middle_mm": (ho20_slice_middle_mm, "2d", [((16, 16), P("dp", "tp")), ((8, 8), P())]),
        "ho20_cumsum_cols": (ho20_cumsum_cols, "2d", [((16, 32), P("dp", "tp"))]),
        "ho22_uneven_rows_mm": (ho22_uneven_rows_mm, "2d", [((12, 32), P("tp")), ((32, 16), P(None, "dp"))]),
        "ho22_einsum_two_contract": (ho22_einsum_two_contract, "2d", [((4, 8, 16), P("dp", "tp")),
                                                                      ((8, 16, 8), P("tp"))]),
        "ho22_merge_heads_3d": (ho22_merge_heads_3d, "3d", [((2, 8, 4, 8), P("a", "b", "c")), ((32, 16), P())]),
        "ho22_split_last_3d": (ho22_split_last_3d, "3d", [((16, 32), P("a", ("b", "c")))]),
        "ho22_take_cols": (ho22_take_cols, "2d", [((16, 32), P("dp", "tp")), (((8,), "i32"), P())]),
        "ho22_concat_rows_mm": (ho22_concat_rows_mm, "2d", [((8, 16), P("dp")), ((8, 16), P("dp")),
                                                            ((16, 32), P(None, "tp"))]),
        "ho22_pad_front": (ho22_pad_front, "2d", [((16, 28), P("dp", "tp"))]),
        "ho22_var_cols": (ho22_var_cols, "2d", [((16, 32), P("dp", "tp"))]),
        "ho22_residual_two_mm_3d": (ho22_residual_two_mm_3d, "3d", [((16, 32), P("a")),
                                                                    ((32, 64), P(None, ("b", "c"))),
                                                                    ((64, 32), P(("b", "c")))]),
        "ho22_batch_matmul_heads": (ho22_batch_matmul_heads, "2d", [((2, 4, 8, 8), P("dp", "tp")),
                                                                    ((2, 4, 8, 8), P("dp", "tp"))]),
        "ho22_softmax_then_sum_rows": (ho22_softmax_then_sum_rows, "2d", [((16, 32), P("dp", "tp"))]),
        "ho22_constraint_transpose": (ho22_constraint_transpose, "2d", [((16, 32), P("dp", "tp")), ((16, 8), P())]),
        "cut_pos_both_dims": (cut_pos_both_dims, "2d", [((4, 8, 32), P("dp", "tp"))]),
        "cut_far_positions": (cut_far_positions, "2d", [((4, 8, 32), P("dp", "tp"))]),
        "cut_two_windows": (cut_two_windows, "2d", [((4, 8, 32), P("dp", "tp"))]),
        "cut_pos_rows_moved": (cut_pos_rows_moved, "2d", [((4, 8, 32), P("dp", "tp"))]),
        "cut_positions_3d": (cut_positions_3d, "3d", [((8, 8, 16), P("a", ("b", "c")))]),
        "cut_window_and_position_3d": (cut_window_and_position_3d, "3d", [((8, 8, 16), P(("a", "b"), "c"))]),
        "cut_first_row_last_col": (cut_first_row_last_col, "2d", [((4, 8, 32), P("dp", "tp"))]),
    }

#: our op kinds -> the StableHLO ops they are, for matching anchors
ANCHORS = {"matmul": "dot", "einsum": "dot", "transpose": "transpose", "reshape": "reshape", "gather": "gather",
           "concat": "concatenate", "slice": "slice", "sum": "reduce", "max": "reduce", "add": "add",
           "sub": "subtract", "mul": "multiply", "div": "divide", "tanh": "tanh", "exp": "exponential",
           "relu": "maximum", "maximum": "maximum", "min": "reduce", "minimum": "minimum",
           "sigmoid": "logistic", "neg": "negate", "comparison": "compare", "select": "select", "abs": "abs",
           "sqrt": "sqrt", "rsqrt": "rsqrt"}
_HLO = {"dot": "dot", "dot_general": "dot", **{k: k for k in ("transpose", "reshape", "gather", "concatenate", "slice",
                                                              "reduce", "add", "subtract", "multiply", "divide",
                                                              "tanh", "exponential", "maximum", "minimum",
                                                              "logistic", "negate", "compare", "select", "abs",
                                                              "sqrt", "rsqrt")}}


def _norm(dims: str) -> str:
    """A dimension list without open marks and priorities (Shardy prints results closed)."""
    dims = re.sub(r"p\d+", "", dims)
    dims = re.sub(r",\s*\?", "", dims).replace("{?}", "{}")
    return dims


def _shape(text: str) -> tuple:
    inner = text[len("tensor<"):-1]
    return tuple(int(d) for d in inner.split("x")[:-1]) if "x" in inner else ()


def _replicated(type_text: str) -> str:
    return "[" + ", ".join("{}" for _ in _shape(type_text)) + "]"


def shardy_anchors(mlir: str):
    """``(kind, result shape, sharding)`` per anchor op of Shardy's propagated module, and its results' shardings
    (a value without ``sdy.sharding`` is replicated)."""
    found = []
    for line in mlir.splitlines():
        m = re.match(r"\s*%\S+ = stablehlo\.(\w+)", line)
        if not m or m.group(1) not in _HLO:
            continue
        s = re.search(r"sdy\.sharding = #sdy\.sharding_per_value<\[<@\w+, (\[[^\[\]]*\])>\]>", line)
        types = re.findall(r"tensor<[^>]*>", line)
        found.append((_HLO[m.group(1)], _shape(types[-1]), _norm(s.group(1)) if s else _replicated(types[-1])))
    head = re.search(r"func\.func @main\(.*?\) -> (.*) \{\n", mlir)
    outs = []
    if head:
        chunks = re.split(r"(?=tensor<)", head.group(1))[1:]
        for chunk in chunks:
            s = re.search(r"#sdy\.sharding<@\w+, (\[[^\[\]]*\])>", chunk)
            outs.append(_norm(s.group(1)) if s else _replicated(re.match(r"tensor<[^>]*>", chunk).group(0)))
    return found, outs


def _dims(s) -> str:
    return _norm("[" + ", ".join(str(d) for d in s.dims) + "]")


def our_anchors(p, graph):
    found = []
    for op in graph.ops:
        if op.op in ANCHORS:
            # the op's value as propagated (what Shardy's sdy.sharding on the op is), not the strategy it computes
            # in: a dot whose result is constrained onto the axis it contracts computes a pending sum, all-reduced
            # and sliced to its value's sharding, in XLA and in the plan alike (the collectives are compared)
            found.append((ANCHORS[op.op], tuple(graph.tensor(op.output).shape), _dims(p.tensor(op.output).sharding)))
    # a result as the plan delivers it (Shardy's function result: whole, even axes; outputs_layout even)
    return found, [_dims(p.program.outputs.get(o, p.tensor(o).sharding)) for o in graph.outputs]


def compare(ours, theirs):
    """Anchors matched by (kind, shape) in program order where both sides have as many; then the results."""
    rows = []
    for key in sorted({a[:2] for a in ours}, key=str):
        mine = [a[2] for a in ours if a[:2] == key]
        other = [a[2] for a in theirs if a[:2] == key]
        if len(mine) != len(other):
            continue
        for i, (a, b) in enumerate(zip(mine, other)):
            rows.append({"anchor": f"{key[0]}{list(key[1])}#{i}", "ours": a, "shardy": b})
    return rows


def collective_bytes(planned, compiled) -> dict:
    """Per collective kind (our names), the count and bytes per device of the plan's collectives and of XLA's.

    Compared by kind and total bytes per device, as benchmarks/xla_check.py does: XLA may combine several
    all-reduces (or all-gathers) into one, which changes the count and not the bytes."""
    out = {}
    for kind in sorted({c.kind for c in planned} | {c.our_kind for c in compiled}):
        ours = [c.bytes_per_device for c in planned if c.kind == kind]
        theirs = [c.bytes_per_device for c in compiled if c.our_kind == kind]
        out[kind] = {"plan": [len(ours), sum(ours)], "xla": [len(theirs), sum(theirs)]}
    return out


def make_meshes() -> None:
    """Fill :data:`_MESH` with the suite's meshes (on the 8 devices, Auto axes)."""
    _MESH.update({k: jax.make_mesh(shape, axes, axis_types=(jax.sharding.AxisType.Auto,) * len(axes))
                  for k, (shape, axes) in MESHES.items()})


def mesh_of(key: str):
    """The suite's mesh ``key`` (``"1d"``, ``"2d"``, ``"3d"``), once :func:`make_meshes` made them."""
    return _MESH[key]


def arguments(mesh_key: str, specs) -> tuple:
    r"""A case's mesh, its arguments as ``ShapeDtypeStruct``\ s (an ``(shape, "i32")`` shape is int32) and their
    ``NamedSharding``\ s."""
    mesh = mesh_of(mesh_key)
    args = [jax.ShapeDtypeStruct(s[0], jnp.int32) if isinstance(s[0], tuple)
            else jax.ShapeDtypeStruct(s, jnp.float32) for s, _ in specs]
    return mesh, args, [NamedSharding(mesh, spec) for _, spec in specs]


def run(root: str, dump: str, names) -> dict:
    sys.path.insert(0, root)
    from planner.api import plan
    from planner.engines.jax_run import planned_collectives
    from planner.engines.xla_hlo import collectives as xla_collectives
    from planner.frontends.jax import trace_function

    make_meshes()
    cases = suite()
    out, bytes_out = {}, {}
    for name in names or sorted(cases):
        fn, mesh_key, specs = cases[name]
        mesh, args, shardings = arguments(mesh_key, specs)
        compiled = jax.jit(fn, in_shardings=shardings).lower(*args).compile()
        [path] = glob.glob(os.path.join(dump, "shardy", f"module_*.jit_{name}", "02.after_propagation.mlir"))
        theirs, their_outs = shardy_anchors(open(path).read())
        try:
            traced = trace_function(fn, *args, mesh=mesh, shardings=shardings)
            p = plan(traced.graph, search="propagate")
        except Exception as e:  # recorded: a function the planner refuses is a difference, not a crash
            out[name] = [{"anchor": "plan", "ours": f"{type(e).__name__}: {' '.join(str(e).split())}",
                          "shardy": "compiles"}]
            continue
        ours, our_outs = our_anchors(p, traced.graph)
        rows = compare(ours, theirs)
        rows += [{"anchor": f"result#{i}", "ours": a, "shardy": b}
                 for i, (a, b) in enumerate(zip(our_outs, their_outs))]
        out[name] = rows
        bytes_out[name] = collective_bytes(planned_collectives(p), xla_collectives(compiled.as_text(), mesh.size))
    return {"shardings": out, "collectives": bytes_out}


if __name__ == "__main__":
    root, dump, *names = sys.argv[1:]
    print(json.dumps(run(root, dump, names)))
