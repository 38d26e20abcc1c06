import numpy as np

from graphs.builders import conv
from graphs.evaluate import example_inputs, run_reference


def test_conv_net_shapes_and_flops():
    g = conv(batch=8, channels=16, image=32, classes=10, layers=2)
    assert g.tensor("images").shape == (8, 3, 32, 32)
    assert g.tensor("layer0.w").shape == (16, 3, 3, 3) and g.tensor("layer1.w").shape == (16, 16, 3, 3)
    assert g.tensor("layer1.h").shape == (8, 16, 32, 32)
    assert g.tensor("pool.out").shape == (8, 16) and g.tensor("logits").shape == (8, 10)
    assert g.op_flops("layer1.conv") == 2 * 8 * 16 * 32 * 32 * 16 * 9
    assert g.op("pool.mean").attr("axes") == (2, 3)


def test_conv_net_reference_runs():
    g = conv(batch=2, channels=4, image=6, classes=3, layers=1)
    values = run_reference(g, example_inputs(g))
    assert np.isfinite(values["loss"])
