"""Every file in configs/ loads; hand-computed shapes, FLOPs and parameter counts for the small ones."""

from pathlib import Path

import pytest

from graphs import load_model
from graphs.builders.gpt_model import param_count

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
ALL = sorted(CONFIGS.glob("*.yaml"))


def test_the_documented_configs_exist():
    names = {p.stem for p in ALL}
    assert {"ffn", "megatron_mlp", "transformer_block", "gpt2_small", "embedding_head", "conv_net", "moe"} <= names


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_config_loads_and_starts_with_a_comment(path):
    assert path.read_text().startswith("#"), "each config starts with a comment saying what it exercises"
    g = load_model(path)
    assert g.name == path.stem
    assert g.ops and g.outputs
    assert g.total_flops() > 0


def test_ffn_is_seed_002s_example():
    g = load_model(CONFIGS / "ffn.yaml")
    assert str(g.mesh) == '@mesh = <["d"=8]>'
    assert [op.name for op in g.ops] == ["dense1.matmul", "dense1.add", "relu", "dense2.matmul", "dense2.add"]
    assert g.op("dense1.matmul").strategy == ((2, 1), (1, 4))
    assert all(g.tensor(t).shape == (64, 64) for t in ("x", "w1", "w2", "y"))
    assert g.tensor("b1").shape == (64,)
    assert g.op_flops("dense1.matmul") == 2 * 64 * 64 * 64
    assert g.op_flops("dense1.add") == 64 * 64
    assert g.total_flops() == 2 * (2 * 64**3) + 3 * 64 * 64
    assert g.param_bytes() == 4 * (2 * 64 * 64 + 2 * 64)
    assert g.outputs == ("y",)


def test_megatron_mlp_shapes_flops_and_annotations():
    g = load_model(CONFIGS / "megatron_mlp.yaml")
    assert g.mesh.shape == (2, 4) and g.mesh.axis_names == ("dp", "tp")
    assert g.tensor("h").shape == (512, 4096) and g.tensor("y").shape == (512, 1024)
    assert g.total_flops() == 2 * (2 * 512 * 1024 * 4096) + 512 * 4096
    assert g.tensor("w1").sharding.dims_text() == '[{}, {"tp"}]'
    assert g.tensor("w2").sharding.dims_text() == '[{"tp"}, {}]'
    assert g.cluster == "nvlink-node"


def test_gpt2_small_has_the_formula_parameter_count_and_tp_annotations():
    g = load_model(CONFIGS / "gpt2_small.yaml")
    # GPT-2 small's model sizes; the position table follows the config's 128-token sequence
    assert g.param_count() == param_count(layers=12, hidden=768, seq=128, vocab=50257) == 162_954_240 - (1024 - 128) * 768
    assert g.tensor("logits").shape == (2, 128, 50257)
    for i in range(12):
        assert g.tensor(f"layer{i}.mlp.w1").sharding.dims_text() == '[{}, {"tp"}]'
        assert g.tensor(f"layer{i}.attn.wo").sharding.dims_text() == '[{"tp"}, {}]'
    assert g.tensor("embed.table").sharding is None


def test_embedding_head_shards_the_vocabulary():
    g = load_model(CONFIGS / "embedding_head.yaml")
    assert g.tensor("table").sharding.dims_text() == '[{"tp"}, {}]'
    assert g.tensor("h").shape == (4, 256, 1024)
    assert g.tensor("loss_value").shape == () and g.tensor("loss_value").dtype == "f32"


def test_moe_shards_expert_weights_on_the_expert_dimension():
    g = load_model(CONFIGS / "moe.yaml")
    for name in ("expert.w1", "expert.w2"):
        assert g.tensor(name).sharding.dims_text() == '[{"ep"}, {}, {}]'
    assert g.tensor("y").shape == g.tensor("x").shape == (1024, 512)


def test_constraints_carries_every_annotation_of_issue_12():
    g = load_model(CONFIGS / "constraints.yaml")
    assert g.tensor("yc").sharding.dims_text() == '[{"dp"}, {}]' and g.tensor("y").sharding is None
    assert g.consumers("y") == [("y.constraint", 0), ("residual", 1)]  # the constraint is on one use of y
    assert g.op("barrier").attr("allowed_direction") == "forward"
    assert g.shard_as == (("z", "out"),) and g.shard_like == (("x", "yb"),)
    # fc1, fc2, fc3 are 2·m·k·n; gelu, add, mul 1 per element; mean 1 per input + 1 per output;
    # the constraint and the barrier compute nothing
    assert g.total_flops() == 2 * 32 * 64 * 128 * 2 + 2 * 32 * 64 * 64 + 32 * 128 + 2 * 32 * 64 + 32 * 64 + 1
