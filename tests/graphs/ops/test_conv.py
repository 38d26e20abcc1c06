import numpy as np
import pytest

from graphs.ops.conv import CONV2D
from planner.errors import ModelError


def _naive_conv(x, w, stride, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride[0] + 1, (wd - kw) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for a in range(oh):
        for b in range(ow):
            patch = x[:, :, a * stride[0]:a * stride[0] + kh, b * stride[1]:b * stride[1] + kw]
            out[:, :, a, b] = np.einsum("nchw,ochw->no", patch, w)
    return out


@pytest.mark.parametrize("stride, padding", [(1, 0), (2, 1), ([1, 2], [2, 0])])
def test_conv_reference_matches_a_naive_loop(stride, padding):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 3, 7, 6)), rng.standard_normal((4, 3, 3, 2))
    attrs = {"stride": stride, "padding": padding}
    shape, _ = CONV2D.infer([x.shape, w.shape], ["f32", "f32"], attrs)
    canon = CONV2D.canonical([x.shape, w.shape], attrs)
    out = CONV2D.reference([x, w], attrs)
    assert out.shape == shape
    np.testing.assert_allclose(out, _naive_conv(x, w, canon["stride"], canon["padding"]), rtol=1e-12)


def test_conv_channel_mismatch_names_input_and_weight():
    with pytest.raises(ModelError, match=r"input x \(1x3x8x8\) has 3 channels but weight w \(4x2x3x3\) expects 2"):
        CONV2D.infer([(1, 3, 8, 8), (4, 2, 3, 3)], ["f32", "f32"], {}, names=["x", "w"])


def test_conv_flops_and_canonical_pairs():
    assert CONV2D.flops([(8, 3, 32, 32), (16, 3, 3, 3)], (8, 16, 32, 32), {}) == 2 * 8 * 16 * 32 * 32 * 3 * 9
    assert CONV2D.canonical([(1, 1, 4, 4), (1, 1, 3, 3)], {"stride": 2, "padding": 1}) == {
        "stride": (2, 2), "padding": (1, 1)}
