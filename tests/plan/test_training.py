"""--training: data parallelism and Megatron's tensor parallelism fall out of the costs (issue 5)."""

import pytest

from planner.api import plan

from .conftest import BANDWIDTH_BOUND, collectives


def mlp(batch, hidden):
    return f"""
name: mlp
mesh: {{d: 4}}
cluster: {BANDWIDTH_BOUND}
model: {{builder: mlp, batch: {batch}, hidden: {hidden}, layers: 2}}
"""


def strategies(p):
    return {o.name: o.strategy.text() for o in p.ops}


def test_small_batch_large_hidden_gives_megatron_with_one_all_reduce():
    p = plan(mlp(128, 1024), search="ilp", training=True)
    s = strategies(p)
    assert s["layer0.matmul"] == "((1, 1), (1, 4))"  # column-parallel
    assert s["layer1.matmul"] == "((1, 4), (4, 1))"  # row-parallel
    assert collectives(p) == [("layer1.h", "forward", "AllReduce")]
    (row,) = p.reshards
    assert row.bytes_per_device == 2 * 3 * (128 * 1024 // 4) * 4  # ring AllReduce of batch x hidden f32
    assert p.gradient_syncs == ()


def test_large_batch_small_hidden_gives_data_parallelism_with_two_gradient_all_reduces():
    p = plan(mlp(1024, 128), search="ilp", training=True)
    s = strategies(p)
    assert s["layer0.matmul"] == s["layer1.matmul"] == "((4, 1), (1, 1))"
    assert sorted(collectives(p)) == [("layer0.w", "gradient", "AllReduce"), ("layer1.w", "gradient", "AllReduce")]
    for g in p.gradient_syncs:
        assert g.bytes_per_device == 2 * 3 * (128 * 128 // 4) * 4


def test_without_training_data_parallelism_costs_nothing_but_the_loss_reduction():
    p = plan(mlp(1024, 128), search="ilp")
    assert strategies(p)["layer0.matmul"] == "((4, 1), (1, 1))" and not p.training and p.gradient_syncs == ()
    # the only communication left is summing the scalar loss's four partial sums
    assert collectives(p) == [("loss", "forward", "AllReduce")]


def transformer(layers, norm_params):
    return f"""
name: tf
mesh: {{tp: 4}}
cluster: {BANDWIDTH_BOUND}
model: {{builder: transformer, layers: {layers}, hidden: 1024, heads: 16, seq: 128, batch: 2,
         norm_params: {str(norm_params).lower()}}}
"""


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_transformer_layers_take_megatron_pattern_with_4l_minus_1_all_reduces(layers):
    p = plan(transformer(layers, norm_params=False), search="ilp", training=True)
    s = strategies(p)
    for i in range(layers):
        for proj in ("q_proj", "k_proj", "v_proj"):
            assert s[f"layer{i}.attn.{proj}"] == "((1, 1, 1), (1, 4))"  # column-parallel QKV
        assert s[f"layer{i}.mlp.up"] == "((1, 1, 1), (1, 4))"  # column-parallel first MLP weight
        assert s[f"layer{i}.attn.o_proj"] == "((1, 1, 4), (4, 1))"  # row-parallel attention output
        assert s[f"layer{i}.mlp.down"] == "((1, 1, 4), (4, 1))"  # row-parallel second MLP weight
    found = collectives(p)
    assert {k for _, _, k in found} == {"AllReduce"}
    assert len(found) == 4 * layers - 1
    # forward: after each row-parallel matmul; backward: into each layer norm output, except the
    # first layer's attention norm, whose gradient nothing needs
    assert sum(phase == "forward" for _, phase, _ in found) == 2 * layers


def test_trainable_first_layer_norm_needs_the_fourth_backward_all_reduce():
    """With scale and bias, the first norm's output gradient is needed for their gradients."""
    p = plan(transformer(2, norm_params=True), search="ilp", training=True)
    found = collectives(p)
    assert len(found) == 4 * 2 and ("layer0.attn.ln_out", "backward", "AllReduce") in found


def test_sharded_weight_storage_turns_the_gradient_reduction_into_a_reduce_scatter():
    """Weights stored sharded over the data-parallel axis (their optimizer state with them, as in
    ZeRO / FSDP): gathered for the forward pass, their gradients reduce-scattered back."""
    text = mlp(1024, 128).replace("model: {builder: mlp", 'shardings: {"layer*.w": \'[{"d"}, {}]\'}\nmodel: {builder: mlp')
    p = plan(text, search="ilp", training=True)
    assert p.op("layer0.matmul").strategy.text() == "((4, 1), (1, 1))"
    kinds = sorted((g.tensor, [s.kind for s in g.steps]) for g in p.gradient_syncs)
    assert kinds == [("layer0.w", ["ReduceScatter"]), ("layer1.w", ["ReduceScatter"])]
    gathers = [r for r in p.reshards if r.tensor in ("layer0.w", "layer1.w")]
    assert all([s.kind for s in r.steps] == ["AllGather"] for r in gathers) and len(gathers) == 2
