"""Each layer's costs on a stage mesh, read off one SPMD plan: recomputation policies, alike layers, and what a
microbatch holds on a device while a layer runs."""

from costmodels import load_cluster
from graphs.yaml_format import load_model_text
from planner.ir.mesh import Mesh
from planner.stages.layers import layers_of, microbatched
from planner.stages.profile import attention_core, profile_layers, stage_program

GPT = ("name: g\nmesh: {x: 2}\n"
       "model: {builder: gpt, layers: 3, hidden: 32, heads: 4, seq: 8, batch: 4, vocab: 64}\n")


def test_selective_recomputation_is_the_attention_scores_and_softmax_of_a_block():
    g = load_model_text(GPT)
    layers = layers_of(g)
    assert attention_core(g, layers[1]) == ("layer0.attn.qk", "layer0.attn.scale", "layer0.attn.softmax")
    assert attention_core(g, layers[0]) == () and attention_core(g, layers[-2]) == ()  # no product of activations


def test_alike_layers_cost_the_same_and_recomputation_trades_time_for_memory():
    g = load_model_text(GPT)
    costs = profile_layers(g, Mesh.from_sizes("stage", {"tp": 2}), load_cluster("a100"))
    assert [c.name for c in costs] == [layer.name for layer in layers_of(g)]
    blocks = costs[1:4]
    assert blocks[0] == blocks[1].__class__(**{**blocks[1].__dict__, "name": blocks[0].name})  # equal but the name
    b = blocks[0]
    assert b.stash("full") < b.stash("selective") < b.stash("none")
    assert 0 < b.recompute("selective") < b.recompute("full") == b.forward_s
    assert b.param_elements > 0 and b.send_bytes > 0 and b.forward_s > 0 and b.backward_s > 0


def test_the_stage_program_plans_one_copy_of_each_run_of_alike_layers():
    g = load_model_text(GPT)
    staged = stage_program(g, Mesh.from_sizes("stage", {"tp": 2}), load_cluster("a100"))
    # embed, three alike blocks, final, lm_head, loss: the blocks 1 and 2 are read off block 0
    assert staged.representatives == (0, 1, 1, 1, 4, 5, 6)
    kept = [op for i, layer in enumerate(staged.layers) if staged.representatives[i] == i for op in layer.ops]
    assert [op.name for op in staged.reduced.ops] == kept
    assert staged.decision.model.graph is staged.reduced and staged.decision.model.options.training


def test_a_layers_peaks_are_what_it_holds_instruction_by_instruction():
    from tests.simulation.test_pipeline import gpt

    g = microbatched(load_model_text(gpt("{pp: 2, tp: 2}", "{stages: 2, microbatches: 8}")), 1)
    embed = profile_layers(g, Mesh.from_sizes("stage", {"tp": 2}), load_cluster("a100"))[0]
    # the embedding of one microbatch on tp 2, replicated: the tokens [1, 8] i32 (32 B, which the lookup's backward
    # reads: its stash), the looked-up rows and their sum with the positions, [1, 8, 32] f32 each (1,024 B)
    tokens, rows = 1 * 8 * 4, 1 * 8 * 32 * 4
    assert embed.stash("none") == tokens
    # forward: the tokens, the rows and the sum are held together after the add, the rows' last reader
    assert embed.forward_peak("none") == tokens + 2 * rows
    # backward: the stash and one cotangent of that shape at a time (the sum's, then the rows')
    assert embed.backward_peak("none") == tokens + rows
    # full recomputation reruns both ops from the kept tokens while the output's cotangent waits: rows, sum and it
    assert embed.backward_peak("full") == tokens + 3 * rows


def test_every_layer_holds_its_stash_at_its_worst_moment():
    g = load_model_text(GPT)
    for c in profile_layers(g, Mesh.from_sizes("stage", {"tp": 2}), load_cluster("a100")):
        for policy in ("none", "selective", "full"):
            assert c.forward_peak(policy) >= c.stash(policy) and c.backward_peak(policy) >= c.stash(policy)
            assert c.forward_peak(policy) >= c.largest_bytes


def test_a_stage_holds_the_stash_before_each_layer_plus_that_layers_peak():
    from dataclasses import replace

    from planner.stages.cost import Config, evaluate, stage_peaks

    g = load_model_text(GPT)
    costs = profile_layers(g, Mesh.from_sizes("stage", {"tp": 2}), load_cluster("a100"))
    # one stage of every layer, one microbatch, GPipe: the device's peak is that stage's forward or backward
    config = Config(1, 1, (("tp", 2),), 4, 1, "gpipe", 1, "none", 0, (0, len(costs)))
    forward, backward = stage_peaks(costs, 0, len(costs), "none")
    before, want = 0, 0
    for c in costs:  # the same maximum, written out
        want = max(want, before + c.forward_peak("none"), before + c.backward_peak("none"))
        before += c.stash("none")
    assert max(forward, backward) == want
    ev = evaluate(config, costs, load_cluster("a100"))
    params = sum(c.param_bytes for c in costs)
    assert ev.memory_bytes_per_device == (2 * params + 8 * sum(c.param_elements for c in costs) + want,)
    # prefix sums give the same stage peaks for every cut
    for cut in range(1, len(costs)):
        two = evaluate(replace(config, pp=2, bounds=(0, cut, len(costs))), costs, load_cluster("a100"))
        assert two.memory_bytes_per_device[1] - 2 * sum(c.param_bytes for c in costs[cut:]) - \
            8 * sum(c.param_elements for c in costs[cut:]) == max(stage_peaks(costs, cut, len(costs), "none"))
