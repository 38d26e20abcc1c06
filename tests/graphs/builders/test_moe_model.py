import numpy as np

from graphs.builders import moe
from graphs.evaluate import example_inputs, run_reference


def test_moe_shapes_and_einsums():
    g = moe(tokens=64, hidden=16, experts=4, capacity=32, ffn=24)
    assert g.tensor("expert.in").shape == (4, 32, 16)
    assert g.tensor("expert.w1").shape == (4, 16, 24) and g.tensor("expert.w2").shape == (4, 24, 16)
    assert g.tensor("y").shape == (64, 16)
    assert g.op("dispatch.einsum").attr("equation") == "tec,th->ech"
    assert g.op("combine.einsum").attr("equation") == "tec,ech->th"
    assert g.op_flops("expert.up") == 2 * 4 * 32 * 16 * 24


def test_moe_reference_matches_hand_gshard():
    g = moe(tokens=6, hidden=4, experts=3, capacity=2, ffn=5)
    f = example_inputs(g, seed=11)
    logits = f["x"] @ f["gate.w"]
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    mask = f["dispatch.mask"]
    combine = mask * probs[:, :, None]
    xin = np.einsum("tec,th->ech", mask, f["x"])
    h = np.einsum("ech,ehf->ecf", xin, f["expert.w1"])
    h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    out = np.einsum("ecf,efh->ech", h, f["expert.w2"])
    np.testing.assert_allclose(run_reference(g, f)["y"], np.einsum("tec,ech->th", combine, out), rtol=1e-10)
