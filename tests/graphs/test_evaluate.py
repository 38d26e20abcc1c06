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


def test_non_finite_names_what_a_value_holds():
    from graphs.evaluate import non_finite

    assert non_finite(np.array([1.0, 2.0])) is None and non_finite(np.array([3], np.int32)) is None
    assert non_finite(np.array([np.nan, -np.inf, 1.0])) == "nan and -inf"
    assert non_finite(np.array(np.inf)) == "inf"


def test_non_finite_origin_is_the_first_ancestor_that_is_not_finite():
    from graphs.evaluate import non_finite_origin

    g = load_model_text("name: m\nmesh: {x: 2}\ntensors:\n  x: {shape: [4], kind: input}\n"
                        "  m: {shape: [4], kind: const, value: -.inf}\n  z: {shape: [4], kind: const, value: 0.0}\n"
                        "ops:\n  - {name: e, op: exp, inputs: [m], output: em}\n"
                        "  - {name: d, op: div, inputs: [x, z], output: q}\n"
                        "  - {name: a, op: add, inputs: [q, em], output: y}\noutputs: [y, em]\n", source="m.yaml")
    feeds = example_inputs(g)
    # y's ancestors hold the -inf constant m first (exp(-inf) = 0 later), then x / 0 in op d
    assert non_finite_origin(g, feeds, "y") == ("const 'm', which holds -inf", "m.yaml:5")
    assert non_finite_origin(g, feeds, "q") == ("op 'd' (div), whose result 'q' holds inf and -inf", "m.yaml:9")
