import numpy as np

from graphs.builders import mlp
from graphs.evaluate import example_inputs, run_reference


def test_two_layer_mlp_names_shapes_and_flops():
    g = mlp(batch=128, hidden=1024, layers=2)
    assert [op.name for op in g.ops] == ["layer0.matmul", "layer0.relu", "layer1.matmul", "loss.square", "loss.mean"]
    assert [t.name for t in g.tensors_of_kind("param")] == ["layer0.w", "layer1.w"]
    assert g.tensor("x").kind == "input" and g.tensor("loss").shape == ()
    n = 128 * 1024
    assert g.total_flops() == 2 * (2 * 128 * 1024 * 1024) + n + n + (n + 1)
    assert g.param_bytes() == 2 * 1024 * 1024 * 4
    assert g.outputs == ("loss",)


def test_mlp_reference_is_mean_of_squares_of_the_chain():
    g = mlp(batch=4, hidden=6, layers=3)
    f = example_inputs(g, seed=5)
    h = np.maximum(f["x"] @ f["layer0.w"], 0)
    h = np.maximum(h @ f["layer1.w"], 0)
    h = h @ f["layer2.w"]
    np.testing.assert_allclose(run_reference(g, f)["loss"], np.mean(h * h), rtol=1e-12)
