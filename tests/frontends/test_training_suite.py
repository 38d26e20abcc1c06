"""JAX losses traced by the frontend and planned with ``--search propagate --training`` move, kind by kind, the
bytes per device XLA's compiled ``jax.value_and_grad`` of the same loss moves (JAX 0.10.2 on 8 host CPU devices):
the forward, the backward and the gradient reductions, which XLA completes one reduced dimension at a time
(:meth:`planner.model.nodes.OpNode.cotangent_groups`). The losses and the harness are
:mod:`tests.frontends.training_suite`; XLA's collectives are read from its HLO at test time."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("training_suite.py")

#: Losses whose training plan moves XLA's bytes per kind.
AGREE = ("seq_parallel_matmul", "seq_first_matmul", "bias_over_batch_and_sequence", "einsum_sequence_major",
         "norm_scale", "rms_scale_3d", "seq_parallel_3d", "reversed_sequence", "optax_cross_entropy",
         "logsumexp_head", "megatron_mlp", "attention_heads", "pre_norm_block", "embedding_lookup", "gated_experts",
         "rms_projection_3d", "log_softmax_head", "data_parallel_mlp", "megatron_sequence", "tied_embeddings",
         "three_layers_3d", "table_rows", "swiglu_mlp", "regression", "biased_mlp", "expert_parallel",
         # FSDP over all 8 devices: XLA's partitioner completes each cotangent sharded onto the devices by an
         # AllReduce of the whole and a slice (CPU forms no reduce-scatter), as the xla policy's transposes do
         "fully_sharded_mlp",
         # a shard_map region inside the step, a stopped target, a sharding constraint on the hidden activation
         "shard_map_mlp", "stopped_target", "constrained_hidden",
         # several readers' pending cotangents of one value: XLA's partitioner all-reduces each dot's partial result
         # as it makes it, and the xla policy completes each reader's where it lies, before they are added
         "three_projections", "three_projections_3d", "tied_weight", "projection_and_square",
         # common blocks: gated and residual MLPs, attention with a residual, a weight applied twice, heads,
         # embeddings, norms on 1-D to 3-D meshes
         "swiglu_over_dp_and_tp", "shared_layers", "residual_block", "attention_residual", "smoothed_cross_entropy",
         "embedding_with_positions", "layer_normed_mlp_1d", "query_and_fused_key_value_3d", "gate_and_up_3d",
         "two_readers_of_a_sequence", "fsdp_and_tp_3d", "two_residual_layers", "multi_query_attention",
         "rms_gated_residual", "head_tied_to_a_parallel_table", "biased_layers", "mean_pooled_classifier",
         "sequence_mean_head", "layer_norm_projection_3d", "data_parallel_three_layers_1d", "heads_then_out_projection",
         "cosine_loss", "rowwise_dot", "logsumexp_cross_entropy",
         # queries against keys of the same rows on 2x2x2: XLA's dot partitioner groups the devices by the result's
         # a and permutes the keys' transpose onto c before gathering it there; backward, the transpose of both
         # (an AllReduce over c, the permute back), as the xla policy moves it
         "query_key_scores_3d",
         # held-out losses of a later session, equal when first run
         "fsdp_tp_mlp_3d", "attention_block_2d", "rms_swiglu_1d", "bias_gelu_3d",
         # single positions: the position moved to the first device along its axes (a CollectivePermute where
         # another holds it), all-reduced; backward (the first two train the sliced tensor), its cotangent padded
         # back by the permute's transpose
         "cls_pool_loss", "last_pos_3d_loss", "mid_pos_loss",
         # held-out losses of this session, equal when first run
         "ho_bias_mlp_3d", "ho_ln_head_2d", "ho_causal_attn", "ho_embed_pool_cls", "ho_rms_residual_1d",
         "ho_expert_einsum",
         # a second held-out batch, written before its first run and run once as written
         "ho11_mlp_1d_mean", "ho11_megatron_mlp_2d", "ho11_onehot_ce", "ho11_layernorm_mlp_3d", "ho11_attn_heads",
         # a third, likewise: a SwiGLU, an RMS norm into a projection, a bias and GELU, two layers on 2x2x2, a
         # softmax cross entropy on 1-D
         "ho21_swiglu_loss", "ho21_rms_proj_loss", "ho21_bias_gelu_loss", "ho21_two_layer_3d", "ho21_softmax_ce_dp",
         # a fourth held-out batch, written before its first run and run once as written, all equal: a Megatron
         # MLP, a layer norm into a projection, attention with an output projection, an FSDP weight on dp and tp,
         # an embedding into a head, experts' weights on 2x2x2
         "ho24_megatron_block_loss", "ho24_layernorm_mlp_loss", "ho24_attention_proj_loss", "ho24_fsdp_linear_loss",
         "ho24_embedding_head_loss", "ho24_expert_loss_3d",
         # a fifth, likewise, all equal: cross-attention over a memory of another length, soft-capped logits, a
         # sigmoid-gated residual on 2x2x2, an RMS norm into an MLP, a vmapped matmul on 2x2x2, a masked mean pool
         "ho25_cross_attention_loss", "ho25_softcap_loss", "ho25_gated_residual_loss_3d", "ho25_rms_mlp_loss",
         "ho25_vmap_matmul_loss_3d", "ho25_masked_pool_loss",
         # a sixth, likewise, all equal: heads merged into a row-parallel dot, a dot both operands split on the
         # contraction on 2x2x2, column-parallel weights concatenated, a leaky ReLU MLP, three dots on 1-D, an affine
         # layer norm of a split sequence into a projection
         "ho27_merge_heads_loss", "ho27_two_sided_loss_3d", "ho27_concat_weights_loss", "ho27_leaky_mlp_loss",
         "ho27_three_matmul_loss_1d", "ho27_layernorm_affine_loss",
         # an eighth, likewise, all equal but the FSDP MLP (in DIFFER): a SwiGLU MLP, attention trained through its
         # queries, keys and values, an RMS norm into an MLP, an embedding into logits, a biased GELU, a residual on
         # 2x2x2, a cross entropy over a split vocabulary
         "ho31_swiglu_loss", "ho31_attention_loss", "ho31_rms_mlp_loss", "ho31_embed_logits_loss",
         "ho31_bias_gelu_loss", "ho31_residual_loss_3d", "ho31_cross_entropy_loss",
         # a ninth, likewise, all equal but the write into a cache split over its positions (in DIFFER): a KV cache's
         # write into attention scores, a layer's weight picked from a stack at a computed index, a window of rows
         "ho38_kv_write_loss", "ho38_layer_pick_loss", "ho38_window_rows_loss")

#: Losses whose plan moves other bytes than XLA compiles, and how (plan vs XLA: count and bytes per device).
DIFFER = {
    # a sequence shifted by one position over tp: the forward halo exchange agrees (256 B); its backward is one
    # exchange the other way in the plan (256 B), where XLA runs JAX's transposes as written, a pad to 17 positions
    # (uneven over 4 devices: a CollectivePermute of 3 positions, 768 B) and then a slice (512 B)
    "shifted_sequence": "CollectivePermute 2 x 256 B vs 256 B + 768 B + 512 B",
    # a fused QKV projection split in three along its tp-sharded features: the forward agrees (the Shardy suite's
    # qkv functions too); backward, JAX transposes the split into one concatenate, which XLA runs as AllToAlls
    # (4, 576 B), where the plan pads each slice's cotangent back and sums them (AllGathers, 3 x 384 B)
    "gpt_block": "AllGather 1,152 B vs AllToAll 576 B (AllReduce 5,384 B and CollectivePermute 1,280 B agree)",
    # a top-2 router over logits whose rows are on dp: both gather the logits for top_k (128 B). Backward, the plan
    # takes the top values' cotangent back through the transpose of their slice onto dp, an AllGather (64 B), and
    # runs top_k's VJP replicated; XLA scatters it into the logits' cotangent where the rows lie, moving nothing
    "top_two_router": "AllGather 2 (192 B) vs 1 (128 B) (AllReduce 392 B agrees)",
    # dots that group the devices (the Shardy suite's rows_cols_same_axis, fsdp_weight_free_tp): their forward moves
    # agree; backward, XLA partitions the weight gradient's own dot (grouped by its operands' axes in turn), where the
    # plan takes the weight's cotangent back through the transposes of the forward moves
    "grouped_dot_loss": "AllGather 2,048 B vs 1,536 B, AllReduce 2,056 B vs 1,032 B, CollectivePermute 1,024 B vs "
                        "1,536 B",
    "fsdp_free_tp_loss": "AllGather 2,048 B vs none, AllReduce 5,128 B vs 7,176 B, CollectivePermute 4,096 B vs "
                         "6,144 B",
    # x[:, 5] of a sequence over tp, the sequence trained: forward both move the position to the first device (1024
    # B). Backward, its cotangent comes whole over tp (the projection's weight is replicated): XLA pads it where
    # the position lies, moving nothing, where the plan takes it to the first device's layout and permutes it back
    "mid_pos_trained_loss": "CollectivePermute 2 x 1,024 B vs 1 x 1,024 B (AllReduce 3,592 B agrees)",
    # held-out: FSDP weights (w1 rows, w2 columns on dp) under activations on dp and tp: as many bytes in all
    # (26,120 B), split otherwise. The plan gathers the hidden activation and leaves w2 where it lies, so w2's
    # gradient needs nothing and w1's is all-reduced over dp and tp (14,336 B); XLA gathers w2 again for the
    # backward and partitions the gradients' own dots (a [64, 32] over dp, a [64, 16] over tp)
    "ho11_fsdp_mlp": "AllGather 7,680 B vs 11,776 B, AllReduce 18,440 B vs 14,344 B",
    # held-out, third batch: a sequence against itself rolled by one over tp. Forward both move each block's first
    # position to the previous block (48 B). Backward, the plan rolls the cotangent back (one permute, 48 B); XLA
    # runs JAX's transpose as written, the concatenate's split (the last position's piece to block 0, a permute)
    # and each piece's zero pad (a halo permute, and the one-position piece replicated in place by an AllReduce)
    "ho21_roll_seq_loss": "CollectivePermute 2 x 48 B vs 3 x 48 B, AllReduce 512 B vs 584 B",
    # held-out, eighth batch: an FSDP MLP on 1-D (w1's rows and w2's columns on d, x's rows on d), ho11_fsdp_mlp's
    # class. As many bytes in all (32,312 B), split otherwise: both gather w1 (7,168 B) and the hidden activation
    # (3,584 B) forward. Backward, the plan all-reduces the hidden activation's cotangent (7,168 B) and w1's gradient
    # (14,336 B); XLA gathers w2 again (7,168 B), partitions the gradients' own dots and all-reduces w2's gradient
    # (14,336 B)
    "ho31_fsdp_loss_1d": "AllGather 2 (10,752 B) vs 3 (17,920 B), AllReduce 21,560 B vs 14,392 B",
    # held-out, ninth batch: a dynamic_update_slice into a cache split over its positions (tp), the new entry whole
    # there. Forward both write locally (0 B). Backward, the plan takes each device's part of the window from its
    # block of the cotangent and sums the new entry's cotangent over tp (an AllReduce of its f32[1, 1, 32] block);
    # XLA reads the window with a dynamic slice of the cotangent, which its partitioner computes by gathering the
    # cotangent along the split positions first (1,536 B)
    "ho38_kv_seq_split_loss": "AllGather 0 B vs 1,536 B, AllReduce 3 (224 B) vs 2 (32 B)",
}


#: Losses whose (replicated) weight's gradient sums over two sharded dimensions: each completes it by two
#: AllReduces whose order is XLA's (the last of the other operand's dimensions first)
ORDERED = ("seq_parallel_matmul", "seq_first_matmul", "einsum_sequence_major", "seq_parallel_3d",
           "bias_over_batch_and_sequence", "norm_scale", "rms_scale_3d")


@pytest.fixture(scope="module")
def harness():
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8")
    r = subprocess.run([sys.executable, str(SCRIPT), str(ROOT), *AGREE, *DIFFER], text=True, capture_output=True,
                       env=env, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def compared(harness):
    return harness["bytes"]


def _same(by_kind: dict) -> bool:
    return all(k["plan"][1] == k["xla"][1] for k in by_kind.values())


@pytest.mark.slow
def test_every_loss_of_the_suite_is_compared():
    sys.path.insert(0, str(SCRIPT.parent))
    from training_suite import suite  # noqa: E402  (imports jax, which this module skips without)

    assert set(AGREE) | set(DIFFER) == set(suite()) and not set(AGREE) & set(DIFFER)


@pytest.mark.slow
def test_a_training_plan_moves_xlas_bytes_kind_by_kind(compared):
    planned = {name: compared[name] for name in AGREE}
    # a loss the planner refused is recorded as {"plan": its error}
    assert {name: v for name, v in planned.items() if isinstance(v.get("plan"), str) or not _same(v)} == {}


@pytest.mark.slow
def test_each_listed_difference_is_still_one(compared):
    # a loss that now moves XLA's bytes leaves DIFFER, and so joins AGREE
    assert [name for name in DIFFER if _same(compared[name])] == []


@pytest.mark.slow
def test_the_comparison_is_not_vacuous(compared):
    # every loss communicates on both sides, and the gradient reductions of weights whose gradient sums over two
    # sharded dimensions are there: XLA's two AllReduces of the whole weight (4 KiB of f32), not fewer bytes
    assert all(compared[name] and all(k["xla"][0] and k["plan"][0] for k in compared[name].values())
               for name in AGREE)
    # w is 32 x 32 f32 (4,096 B): an AllReduce over tp's 4 devices moves 2 * 3/4 of it, over dp's 2 devices all
    # of it; the loss's own completions add 32 B (a scalar over 4 devices, then 2)
    assert compared["seq_parallel_matmul"]["AllReduce"]["plan"][1] == 2 * 3 * 4096 // 4 + 4096 + 32


@pytest.mark.slow
def test_a_gradient_summed_over_two_sharded_dimensions_is_all_reduced_in_xlas_order(harness):
    # per weight, the device groups of each AllReduce completing its gradient, in order, plan against XLA's HLO
    groups = {name: harness["groups"][name] for name in ORDERED}
    assert all(len(v["xla"]) == 2 for g in groups.values() for v in g.values())  # two dimensions: two AllReduces
    assert {name: g for name, g in groups.items() if any(v["plan"] != v["xla"] for v in g.values())} == {}
