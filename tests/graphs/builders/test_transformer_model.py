import numpy as np

from graphs.builders import transformer
from graphs.evaluate import example_inputs, run_reference


def _layernorm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def test_block_names_and_shapes():
    g = transformer(layers=2, hidden=64, heads=4, seq=8, batch=2)
    assert g.tensor("layer0.attn.q_t").shape == (2, 4, 8, 16)
    assert g.tensor("layer0.attn.scores").shape == (2, 4, 8, 8)
    assert g.tensor("layer1.mlp.w1").shape == (64, 256)
    assert g.tensor("layer0.attn.inv_sqrt_d").kind == "const"
    assert g.outputs == ("layer1.out",)
    per_block = 4 * 64 * 64 + 2 * 64 * 256 + 4 * 64
    assert g.param_count() == 2 * per_block


def test_block_reference_matches_hand_written_attention_and_mlp():
    b, s, h, n = 2, 5, 12, 3
    d = h // n
    g = transformer(layers=1, hidden=h, heads=n, seq=s, batch=b, ffn=20)
    f = example_inputs(g, seed=7)
    p = lambda k: f[f"layer0.{k}"]  # noqa: E731
    x = f["x"]
    a = _layernorm(x, p("attn.ln.scale"), p("attn.ln.bias"))
    q, k, v = ((a @ p(f"attn.w{c}")).reshape(b, s, n, d).transpose(0, 2, 1, 3) for c in "qkv")
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
    x = x + ctx @ p("attn.wo")
    m = _layernorm(x, p("mlp.ln.scale"), p("mlp.ln.bias"))
    expected = x + _gelu(m @ p("mlp.w1")) @ p("mlp.w2")
    np.testing.assert_allclose(run_reference(g, f)["layer0.out"], expected, rtol=1e-10, atol=1e-12)
