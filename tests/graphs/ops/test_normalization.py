import numpy as np
import pytest

from graphs.ops.normalization import LAYERNORM, RMSNORM, SOFTMAX
from planner.errors import ModelError


def test_softmax_reference_sums_to_one_and_matches_numpy():
    x = np.random.default_rng(0).standard_normal((3, 5)) * 10
    y = SOFTMAX.reference([x], {"axis": -1})
    np.testing.assert_allclose(y, np.exp(x) / np.exp(x).sum(-1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(SOFTMAX.reference([x], {"axis": 0}).sum(0), np.ones(5))


def test_softmax_axis_is_canonical_and_checked():
    assert SOFTMAX.canonical([(2, 3, 4)], {"axis": -1}) == {"axis": 2}
    with pytest.raises(ModelError, match="softmax axis 3 is out of range"):
        SOFTMAX.infer([(2, 3)], ["f32"], {"axis": 3})


def test_layernorm_reference_with_weight_and_bias():
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((4, 8)), rng.standard_normal(8), rng.standard_normal(8)
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    expected = (x - mu) / np.sqrt(var + 1e-5) * w + b
    np.testing.assert_allclose(LAYERNORM.reference([x, w, b], {}), expected, rtol=1e-12)


def test_rmsnorm_reference():
    x, w = np.arange(1.0, 9.0).reshape(2, 4), np.full(4, 2.0)
    expected = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(RMSNORM.reference([x, w], {}), expected, rtol=1e-12)


def test_norm_weight_must_match_last_dimension():
    with pytest.raises(ModelError, match=r"layernorm weight g \(16\) must have shape \[8\]"):
        LAYERNORM.infer([(4, 8), (16,)], ["f32", "f32"], {}, names=["x", "g"])


def test_norm_flops_per_element():
    assert SOFTMAX.flops([(2, 8)], (2, 8), {}) == 5 * 16
    assert LAYERNORM.flops([(2, 8)], (2, 8), {}) == 7 * 16
    assert LAYERNORM.flops([(2, 8), (8,), (8,)], (2, 8), {}) == 9 * 16
    assert RMSNORM.flops([(2, 8), (8,)], (2, 8), {}) == 5 * 16
