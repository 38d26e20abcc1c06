"""A model as a chain of layers: prefixes, alike layers priced once, microbatches."""

import pytest

from graphs.yaml_format import load_model_text
from planner.errors import PlanningError
from planner.stages.layers import batch_size, layers_of, microbatched, representatives

GPT = ("name: g\nmesh: {x: 2}\n"
       "model: {builder: gpt, layers: 3, hidden: 32, heads: 4, seq: 8, batch: 4, vocab: 64}\n")


def test_the_gpt_builder_is_embedding_blocks_norm_head_and_loss_in_order():
    layers = layers_of(load_model_text(GPT))
    assert [layer.name for layer in layers] == ["embed", "layer0", "layer1", "layer2", "final", "lm_head", "loss"]
    assert layers[2].receives == ("layer0.out",) and layers[2].sends == ("layer1.out",)
    assert layers[-1].sends == ("loss",)  # the output


def test_alike_blocks_share_their_first_and_the_rest_stand_alone():
    assert representatives(layers_of(load_model_text(GPT))) == (0, 1, 1, 1, 4, 5, 6)


def test_a_shared_parameter_keeps_its_readers_in_one_layer():
    g = load_model_text("""name: tied
mesh: {x: 2}
tensors:
  x: {shape: [4, 8], kind: input}
  w: {shape: [8, 8], kind: param}
ops:
  - {name: a.mm, op: matmul, inputs: [x, w], output: h}
  - {name: b.relu, op: relu, inputs: [h], output: r}
  - {name: c.mm, op: matmul, inputs: [r, w], output: y}
""")
    assert [layer.name for layer in layers_of(g)] == ["a"]  # a, b and c merged: w is read by a and c


def test_a_microbatch_cuts_dimension_0_of_inputs_and_of_reshapes_that_restate_it():
    g = microbatched(load_model_text(GPT), 2)
    assert g.tensor("tokens").shape == (2, 8)
    assert g.tensor("layer0.attn.q_heads").shape == (2, 8, 4, 8)  # the reshape's [batch, seq, heads, hd]
    assert batch_size(g) == 2


def test_a_microbatch_that_does_not_divide_the_batch_is_refused():
    with pytest.raises(PlanningError, match="does not divide"):
        microbatched(load_model_text(GPT), 3)
