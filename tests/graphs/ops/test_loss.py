import numpy as np
import pytest

from graphs.ops.loss import CROSS_ENTROPY
from planner.errors import ModelError


def test_cross_entropy_is_a_scalar_f32():
    assert CROSS_ENTROPY.infer([(8, 16, 50), (8, 16)], ["bf16", "i32"], {}) == ((), "f32")


def test_cross_entropy_labels_shape_must_drop_the_class_dimension():
    with pytest.raises(ModelError, match=r"labels y \(8x15\) must have the shape of logits z \(8x16x50\)"):
        CROSS_ENTROPY.infer([(8, 16, 50), (8, 15)], ["f32", "i32"], {}, names=["z", "y"])


def test_cross_entropy_reference_is_mean_logsumexp_minus_picked_logit():
    logits = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 4.0]])
    labels = np.array([2, 0])
    lse = np.log(np.exp(logits).sum(-1))
    expected = np.mean(lse - logits[[0, 1], labels])
    assert CROSS_ENTROPY.reference([logits, labels], {}) == pytest.approx(expected, rel=1e-15)


def test_cross_entropy_flops():
    assert CROSS_ENTROPY.flops([(4, 10), (4,)], (), {}) == 4 * 40 + 3 * 4
