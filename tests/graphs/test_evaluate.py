import numpy as np
import pytest

from graphs import load_model_text
from graphs.builders import gpt
from graphs.evaluate import example_inputs, run_reference
from planner.errors import ModelError


def test_reference_runs_ffn_like_numpy():
    g = load_model_text("""
name: f
tensors: {x: {shape: [4, 8]}, w: {shape: [8, 3], kind: param}, b: {shape: [3], kind: param}}
ops:
  - {name: mm, op: matmul, inputs: [x, w], output: h}
  - {name: ad, op: add, inputs: [h, b], output: y}
""")
    feeds = example_inputs(g, seed=3)
    values = run_reference(g, feeds)
    np.testing.assert_allclose(values["y"], feeds["x"] @ feeds["w"] + feeds["b"])


def test_example_inputs_are_deterministic_and_keep_indices_in_range():
    g = gpt(layers=1, hidden=16, heads=2, seq=4, batch=2, vocab=7)
    a, b = example_inputs(g, seed=1), example_inputs(g, seed=1)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert a["tokens"].max() < 7 and a["labels"].max() < 7 and a["tokens"].dtype == np.int32
    assert a["layer0.attn.inv_sqrt_d"] == pytest.approx(1 / np.sqrt(8))
    loss = run_reference(g, a)["loss"]
    assert loss.shape == () and np.isfinite(loss)


def test_missing_or_misshapen_feeds_are_errors():
    g = load_model_text("name: f\ntensors: {x: {shape: [2]}}\nops: [{op: neg, inputs: [x]}]\n")
    with pytest.raises(ModelError, match="no value given for input 'x'"):
        run_reference(g, {})
    with pytest.raises(ModelError, match="value for 'x' has shape \\(3,\\)"):
        run_reference(g, {"x": np.zeros(3)})
