import numpy as np
import pytest

from graphs.ops.pointwise import ADD, CAST, DIV, EXP, GELU, MAXIMUM, MUL, NEG, RELU, SIGMOID, SUB, TANH, broadcast_shapes
from planner.errors import ModelError


def test_broadcast_right_aligns_and_stretches_size_one():
    assert broadcast_shapes([(8, 1, 6), (7, 1)]) == (8, 7, 6)
    assert broadcast_shapes([(), (3, 4)]) == (3, 4)


def test_broadcast_mismatch_names_both_operands_and_dimension():
    with pytest.raises(ModelError) as e:
        ADD.infer([(64, 32), (64,)], ["f32", "f32"], {}, names=["h", "b"])
    msg = e.value.message
    assert "h (64x32)" in msg and "b (64)" in msg and "dimension -1" in msg


def test_binary_mixing_dtypes_asks_for_cast():
    with pytest.raises(ModelError, match="mixes dtypes f32 .* and bf16 .*cast"):
        MUL.infer([(4,), (4,)], ["f32", "bf16"], {}, names=["a", "b"])


def test_bias_add_keeps_activation_shape():
    assert ADD.infer([(64, 64), (64,)], ["f32", "f32"], {}) == ((64, 64), "f32")


def test_elementwise_flops_are_one_per_output_element():
    assert ADD.flops([(64, 64), (64,)], (64, 64), {}) == 4096
    assert RELU.flops([(3, 5)], (3, 5), {}) == 15


@pytest.mark.parametrize(
    "opdef, fn",
    [
        (ADD, np.add), (SUB, np.subtract), (MUL, np.multiply), (DIV, np.divide), (MAXIMUM, np.maximum),
    ],
)
def test_binary_reference_broadcasts_like_numpy(opdef, fn):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4,)) + 3.0
    np.testing.assert_array_equal(opdef.reference([a, b], {}), fn(a, b))


def test_unary_references_match_hand_numpy():
    x = np.linspace(-3, 3, 13)
    np.testing.assert_array_equal(RELU.reference([x], {}), np.where(x > 0, x, 0.0))
    np.testing.assert_allclose(SIGMOID.reference([x], {}), 1 / (1 + np.exp(-x)), rtol=1e-15)
    np.testing.assert_array_equal(TANH.reference([x], {}), np.tanh(x))
    np.testing.assert_array_equal(EXP.reference([x], {}), np.exp(x))
    np.testing.assert_array_equal(NEG.reference([x], {}), -x)


def test_gelu_uses_the_tanh_approximation():
    x = np.array([-2.0, -0.5, 0.0, 1.0, 3.0])
    expected = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(GELU.reference([x], {}), expected, rtol=1e-15)


def test_reference_keeps_float64():
    assert GELU.reference([np.ones(3)], {}).dtype == np.float64


def test_transcendental_ops_reject_integers():
    with pytest.raises(ModelError, match="exp needs a floating-point input, but t is i32"):
        EXP.infer([(4,)], ["i32"], {}, names=["t"])


def test_cast_changes_dtype_and_requires_a_known_one():
    assert CAST.infer([(4,)], ["f32"], {"dtype": "bf16"}) == ((4,), "bf16")
    with pytest.raises(ModelError, match="unknown dtype 'f64'"):
        CAST.infer([(4,)], ["f32"], {"dtype": "f64"})
    assert CAST.reference([np.array([1.7, -2.2])], {"dtype": "i32"}).tolist() == [1, -2]
