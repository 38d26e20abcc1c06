import numpy as np
import pytest

from graphs.ops.reductions import MAX, MEAN, SUM, reduced_axes
from planner.errors import ModelError


def test_reduction_without_axes_reduces_everything():
    assert SUM.infer([(4, 8)], ["f32"], {}) == ((), "f32")
    assert reduced_axes("sum", 3, None) == (0, 1, 2)


def test_negative_axes_and_keepdims():
    assert MAX.infer([(4, 8, 16)], ["f32"], {"axes": [-1], "keepdims": True}) == ((4, 8, 1), "f32")
    assert SUM.canonical([(4, 8, 16)], {"axes": [-1, 0]}) == {"axes": (0, 2), "keepdims": False}


def test_out_of_range_and_repeated_axes_are_errors():
    with pytest.raises(ModelError, match="sum axis 2 is out of range for rank 2"):
        SUM.infer([(4, 8)], ["f32"], {"axes": [2]})
    with pytest.raises(ModelError, match="lists axis 1 twice"):
        SUM.infer([(4, 8)], ["f32"], {"axes": [1, -1]})


def test_mean_needs_floats():
    with pytest.raises(ModelError, match="mean needs a floating-point input"):
        MEAN.infer([(4,)], ["i32"], {})


def test_reduction_flops():
    assert SUM.flops([(4, 8)], (4,), {"axes": [1]}) == 32
    assert MEAN.flops([(4, 8)], (4,), {"axes": [1]}) == 32 + 4


def test_reduction_references():
    x = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(SUM.reference([x], {"axes": [0, 2]}), x.sum(axis=(0, 2)))
    np.testing.assert_array_equal(MEAN.reference([x], {}), np.asarray(x.mean()))
    np.testing.assert_array_equal(MAX.reference([x], {"axes": [1], "keepdims": True}), x.max(axis=1, keepdims=True))
