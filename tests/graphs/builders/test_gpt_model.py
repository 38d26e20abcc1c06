from graphs.builders import gpt
from graphs.builders.gpt_model import param_count


def test_gpt_parameter_count_matches_the_formula():
    args = dict(layers=3, hidden=32, heads=4, seq=16, batch=2, vocab=101)
    g = gpt(**args)
    h, v, s, layers, f = 32, 101, 16, 3, 128
    expected = v * h + s * h + layers * (4 * h * h + 2 * h * f + 4 * h) + 2 * h + h * v
    assert g.param_count() == param_count(**args) == expected


def test_gpt_tensors_are_named_hierarchically():
    g = gpt(layers=2, hidden=16, heads=2, seq=8, batch=2, vocab=50)
    for name in ("embed.table", "embed.pos", "layer0.attn.wq", "layer1.mlp.w2", "final.ln.scale", "lm_head.w"):
        assert g.tensor(name).kind == "param"
    assert g.tensor("tokens").dtype == "i32" and g.tensor("labels").dtype == "i32"
    assert g.tensor("embed.tok").shape == (2, 8, 16)
    assert g.tensor("logits").shape == (2, 8, 50)
    assert g.outputs == ("loss",) and g.tensor("loss").shape == ()
    assert [op.name for op in g.ops][:2] == ["embed.lookup", "embed.add_pos"]


def test_gpt_matmul_flops_follow_the_usual_2_n_params_per_token_estimate():
    g = gpt(layers=2, hidden=64, heads=4, seq=32, batch=4, vocab=100)
    tokens = 4 * 32
    dense = sum(g.op_flops(op.name) for op in g.ops if op.op == "matmul")
    weights = sum(g.tensor(n).numel for n in g.tensors if n.endswith((".wq", ".wk", ".wv", ".wo", ".w1", ".w2")))
    assert dense == 2 * tokens * (weights + g.tensor("lm_head.w").numel)
