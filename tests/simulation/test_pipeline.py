"""A pipelined training step runs on the simulated devices: stages on their device groups, microbatches in the
schedule's order, sends between stages, recomputation, the ZeRO data-parallel step and one optimizer step, checked
against the single-device full-batch reference; the bytes each phase moves and the peak bytes each device holds
equal the plan's prediction.

Every model pins its ``pipeline:`` so that the tests do not depend on the pipeline search; together the tests
exercise every schedule, recomputation policy, ZeRO stage and optimizer on the three 8-device factorisations
pp 2 x dp 2 x tp 2, pp 4 x tp 2 and pp 8."""

import json

import numpy as np
import pytest

from graphs import load_model_text
from planner.api import cluster_of, plan_pipeline
from planner.cli.main import main
from planner.simulation.optimizer import optimizer_named
from planner.simulation.pipeline import MEMORY_PARTS, PIPELINE_PHASES, simulate_pipeline

# Megatron's tensor parallelism over tp: the projections split by columns, then by rows
TP = """shardings:
  "layer*.attn.w[qkv]": '[{}, {"tp"}]'
  "layer*.attn.wo": '[{"tp"}, {}]'
  "layer*.mlp.w1": '[{}, {"tp"}]'
  "layer*.mlp.w2": '[{"tp"}, {}]'
"""


def gpt(mesh: str, pipeline: str, layers: int = 2, batch: int = 8) -> str:
    """A small GPT (hidden 32, 4 heads, 8 tokens, vocabulary 64) on ``mesh`` with ``pipeline`` pinned."""
    return (f"name: tiny_pipelined\nmesh: {mesh}\ncluster: a100\n"
            f"model: {{builder: gpt, layers: {layers}, hidden: 32, heads: 4, seq: 8, batch: {batch}, vocab: 64}}\n"
            + (TP if "tp" in mesh else "") + f"pipeline: {pipeline}\n")


def simulated(text: str, optimizer: str = "sgd"):
    graph = load_model_text(text)
    plan = plan_pipeline(graph)
    return plan, simulate_pipeline(graph, plan, cluster_of(graph), optimizer=optimizer)


def assert_exact_and_bytes_equal(result) -> None:
    assert result.ok, {n: o for part in (result.outputs, result.gradients, result.parameters)
                       for n, o in part.items() if not o["ok"]}
    for phase, rows in result.phases.items():
        for row in rows:
            assert row["measured_comm_bytes_per_device"] == row["predicted_comm_bytes_per_device"], (phase, row)
    assert result.bytes_ok
    # what every device holds at its worst moment is what the cost model says, and so are its parameters, gradient
    # accumulators and optimizer state then, and the stash of the microbatches in flight between two of its actions
    for row in result.memory:
        assert row["measured_peak_bytes_per_device"] == row["predicted_bytes_per_device"], row
        for part in ("parameters", "gradients", "optimizer_state"):
            assert row["measured_parts"][part] == row["predicted_parts"][part], (part, row)
        assert row["measured_held_activations"] == row["predicted_held_activations"], row
    assert result.memory_ok


# one configuration per line; across them every schedule, policy, ZeRO stage and optimizer appears
CONFIGS = [
    ("{pp: 2, dp: 2, tp: 2}", "{stages: 2, microbatches: 4, schedule: 1f1b, recompute: none, zero: 0}", 2, "sgd"),
    ("{pp: 2, dp: 2, tp: 2}", "{stages: 2, microbatches: 4, schedule: gpipe, recompute: full, zero: 1}", 2, "adam"),
    ("{pp: 2, dp: 2, tp: 2}", "{stages: 2, microbatches: 4, schedule: 1f1b, recompute: selective, zero: 2}", 2, "sgd"),
    ("{pp: 2, dp: 2, tp: 2}", "{stages: 2, microbatches: 4, schedule: interleaved, virtual_stages: 2, "
                              "recompute: selective, zero: 3}", 2, "adam"),
    ("{pp: 4, tp: 2}", "{stages: 4, microbatches: 4, schedule: gpipe, recompute: selective}", 2, "adam"),
    ("{pp: 8}", "{stages: 8, microbatches: 8, schedule: 1f1b, recompute: full}", 4, "sgd"),
]


@pytest.mark.parametrize("mesh, pipeline, layers, optimizer", CONFIGS)
def test_pipelined_step_matches_the_full_batch_reference_and_its_bytes(mesh, pipeline, layers, optimizer):
    plan, result = simulated(gpt(mesh, pipeline, layers), optimizer)
    assert result.devices == 8
    assert_exact_and_bytes_equal(result)


def test_sends_and_gradient_sync_move_the_bytes_derived_by_hand():
    _, result = simulated(gpt(*CONFIGS[0][:2]))
    # the boundary activation is one microbatch of [1, 8, 32] f32, whole on each tp device: 1,024 B; group 0
    # receives the 4 microbatches' cotangents, group 1 their activations
    assert [row["measured_comm_bytes_per_device"] for row in result.phases["sends"]] == [4 * 1024, 4 * 1024]
    # stage 0 (embedding and block 0) holds, per device: the table 64x32 and positions 8x32, four layernorm
    # vectors of 32, wq wk wv wo split over tp (4 x 32x32 / 2) and the MLP's 32x128 twice split over tp:
    # 2,304 + 128 + 2,048 + 4,096 = 8,576 f32 = 34,304 B; a ring AllReduce over dp 2 receives 2 x (2 - 1) halves
    assert result.memory[0]["measured_parts"]["parameters"] == 34_304
    assert result.phases["gradient_sync"][0]["measured_comm_bytes_per_device"] == 2 * 1 * 34_304 // 2


def test_zero_3_gathers_each_stage_before_every_forward_and_backward():
    plan, result = simulated(gpt(*CONFIGS[3][:2]), "adam")
    # the search's partition (the layers: embed, layer0, layer1, final, lm_head, loss): group 0 runs stage 0 (the
    # embedding) and stage 2 (block 1)
    assert plan.config.bounds == (0, 1, 2, 3, 6)
    embed, block = 2_304 * 4, 6_272 * 4  # bytes per device (see the test above)
    # a ring AllGather over dp 2 receives the other half, before each of the 4 forwards and 4 backwards
    assert result.phases["zero_gathers"][0]["measured_comm_bytes_per_device"] == 2 * 4 * (embed // 2 + block // 2)
    parts = result.memory[0]["measured_parts"]
    # Adam's two f32 moments of the half a replica owns; its half of the parameters and, at the peak, block 1's whole
    assert parts["optimizer_state"] == 8 * (2_304 + 6_272) // 2
    assert parts["parameters"] == (embed + block) // 2 + block


def test_zero_2_reduce_scatters_each_layers_bucket_and_holds_less_than_zero_1_from_three_blocks():
    base = "{stages: 2, microbatches: 4, schedule: 1f1b, recompute: none, zero: %d}"
    embed, block = 2_304 * 4, 6_272 * 4  # gradient bytes per device (see above)
    for layers, stage_0 in ((2, (embed, block)), (6, (embed, block, block, block))):
        (plan_1, zero_1), (plan_2, zero_2) = (simulated(gpt("{pp: 2, dp: 2, tp: 2}", base % z, layers)) for z in (1, 2))
        assert plan_1.config.bounds == plan_2.config.bounds and plan_2.config.bounds[1] == len(stage_0)
        assert_exact_and_bytes_equal(zero_2)
        whole = sum(stage_0)
        # ZeRO 1 accumulates stage 0's gradients whole over the 4 microbatches; one ReduceScatter and one AllGather
        # over dp 2 each receive half of them
        assert zero_1.memory[0]["measured_parts"]["gradients"] == whole
        assert zero_1.phases["gradient_sync"][0]["measured_comm_bytes_per_device"] == 2 * whole // 2
        # ZeRO 2 reduce-scatters each layer's bucket after its backward of each microbatch (4 halves of every layer
        # received), then AllGathers the updated parameters once (one half); it holds its halves all step and, at its
        # peak (the backward of its last block, with every earlier layer's stash), that block's bucket
        assert zero_2.phases["gradient_sync"][0]["measured_comm_bytes_per_device"] == (4 + 1) * whole // 2
        assert zero_2.memory[0]["measured_parts"]["gradients"] == whole // 2 + block
        # less than ZeRO 1 exactly when the largest bucket and the halves are less than the whole (cost.py): not with
        # the embedding and one block, with the embedding and three
        less = block + whole // 2 < whole
        assert less == (layers == 6)
        peak_1, peak_2 = (r.memory[0]["measured_peak_bytes_per_device"] for r in (zero_1, zero_2))
        assert (peak_2 < peak_1) == less
        # the activations at the peak are the same: the difference is the gradients'
        assert peak_1 - peak_2 == whole - (whole // 2 + block)


def test_flat_buffers_padded_to_the_replicas_move_and_hold_as_predicted():
    # hidden 34 and vocabulary 65 over dp 4: the embedding's 65x34 table and 8x34 positions are 2,482 elements, not a
    # multiple of 4; block 0's layer norms (4 x 34), attention (4 x 34x34) and MLP (2 x 34x136) are 14,008
    text = ("name: odd\nmesh: {pp: 2, dp: 4}\ncluster: a100\n"
            "model: {builder: gpt, layers: 2, hidden: 34, heads: 2, seq: 8, batch: 8, vocab: 65}\n"
            "pipeline: {stages: 2, microbatches: 2, schedule: 1f1b, recompute: none, zero: %d}\n")
    sync = {}
    for zero in range(4):
        plan, result = simulated(text % zero, "adam")
        assert plan.config.bounds[1] == 2  # stage 0: the embedding and block 0
        assert_exact_and_bytes_equal(result)
        sync[zero] = result.phases["gradient_sync"][0]["measured_comm_bytes_per_device"]
    # ZeRO 1 pads stage 0's 16,490 elements to 16,492: a ring ReduceScatter and AllGather over 4 each receive 3 shards
    # of 4,123 f32; ZeRO 2 pads each layer's bucket, to shards of 621 and 3,502 elements, and receives 3 of them per
    # layer in each of the 2 microbatches' ReduceScatters and once in the AllGather
    assert sync[1] == 2 * 3 * 4_123 * 4
    assert sync[2] == (2 * 3 + 3) * (621 + 3_502) * 4


def test_gradients_reduced_inside_the_stage_mesh_are_held_all_step():
    # the batch and the blocks' activations split over tp, the weights whole: each weight's gradient comes pending
    # over tp and is all-reduced inside the stage mesh once a step, its accumulator held from the start
    split = "'[{\"tp\"}, {}, {}]'"
    pinned = ("shardings:\n  tokens: '[{\"tp\"}, {}]'\n  labels: '[{\"tp\"}, {}]'\n" +
              "".join(f'  "{n}": {split}\n' for n in ("embed.out", "layer*.attn.res", "layer*.out", "layer*.attn.ln_out",
                                                      "layer*.mlp.ln_out", "layer*.mlp.h", "final.ln_out", "logits")))
    text = gpt("{pp: 2, tp: 2}", "{stages: 2, microbatches: 2, schedule: gpipe, recompute: none}").replace(TP, pinned)
    _, result = simulated(text, "adam")
    assert_exact_and_bytes_equal(result)
    assert result.phases["gradient"][0]["measured_comm_bytes_per_device"] > 0
    # stage 0's parameters whole: the table and positions (2,304), the layer norms (128), attention (4 x 32x32) and
    # the MLP (2 x 32x128): 14,720 f32, and as many gradient bytes at the peak, before the first backward
    assert result.memory[0]["measured_parts"]["gradients"] == 14_720 * 4


def test_recomputation_recomputes_and_holds_less():
    base = "{stages: 2, microbatches: 4, schedule: gpipe, recompute: %s, zero: 0}"
    held = {}
    for policy in ("none", "selective", "full"):
        _, result = simulated(gpt("{pp: 2, dp: 2, tp: 2}", base % policy))
        assert_exact_and_bytes_equal(result)
        held[policy] = result.memory[1]["measured_held_activations"]
        recomputed = result.phases["recompute"][0]["measured_comm_bytes_per_device"]
        # full recomputation reruns every forward, its tensor-parallel collectives included: once per microbatch
        forward = result.phases["forward"][0]["measured_comm_bytes_per_device"]
        assert recomputed == (forward if policy == "full" else 0)
    # GPipe holds every microbatch's stash once its forwards are done: dropping the attention cores, then all but
    # the layers' inputs, holds less
    assert held["full"] < held["selective"] < held["none"]


def test_optimizers_update_as_documented():
    g = np.array([0.5, -2.0, 0.0])
    p = np.array([1.0, 1.0, 1.0])
    assert np.allclose(optimizer_named("sgd").step(p, g, ())[0], p - 0.1 * g)
    adam = optimizer_named("adam")
    # the first Adam step from zero moments: m_hat = g, v_hat = g^2, so each element moves by lr * g / (|g| + eps)
    updated, _ = adam.step(p, g, adam.init(p))
    assert np.allclose(updated, p - 1e-3 * g / (np.abs(g) + 1e-8))


def test_simulate_command_runs_a_pipelined_model(tmp_path, capsys):
    path = tmp_path / "model.yaml"
    path.write_text(gpt(*CONFIGS[1][:2]))
    assert main(["simulate", str(path), "--optimizer", "adam", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["command"] == "simulate" and doc["ok"] and doc["bytes_equal"]
    assert doc["pipeline"]["schedule"] == "gpipe" and doc["optimizer"] == "adam"
    assert set(doc["phases"]) == set(PIPELINE_PHASES)
    assert set(doc["memory"][0]["measured_parts"]) == set(MEMORY_PARTS) == set(doc["memory"][0]["predicted_parts"])
    assert main(["simulate", str(path)]) == 0
    assert "updated parameters" in capsys.readouterr().out


def test_simulate_command_refuses_bad_pipeline_flags(tmp_path, capsys):
    path = tmp_path / "model.yaml"
    path.write_text(gpt(*CONFIGS[0][:2]))
    assert main(["simulate", str(path), "--devices", "0"]) == 2
    assert "--devices" in capsys.readouterr().err
    assert main(["simulate", str(path), "--optimizer", "rmsprop"]) == 2
    assert "--optimizer" in capsys.readouterr().err


GRID = [(mesh, f"{{stages: {pp}, microbatches: {m}, schedule: {schedule}{v}, recompute: {policy}{zero}}}", layers,
         optimizer)
        for mesh, pp, m, layers, zeros in (("{pp: 2, dp: 2, tp: 2}", 2, 4, 2, (0, 1, 2, 3)),
                                           ("{pp: 4, tp: 2}", 4, 8, 4, (None,)), ("{pp: 8}", 8, 8, 4, (None,)))
        for schedule, v in (("gpipe", ""), ("1f1b", ""), ("interleaved", ", virtual_stages: 2"))
        if not (schedule == "interleaved" and pp * 2 > layers + 4)  # a virtual stage needs a layer
        for policy in ("none", "selective", "full")
        for zero in (tuple(f", zero: {z}" for z in zeros) if zeros != (None,) else ("",))
        for optimizer in ("adam",)]


@pytest.mark.slow
@pytest.mark.parametrize("mesh, pipeline, layers, optimizer", GRID)
def test_every_schedule_policy_and_zero_stage_is_exact(mesh, pipeline, layers, optimizer):
    _, result = simulated(gpt(mesh, pipeline, layers), optimizer)
    assert_exact_and_bytes_equal(result)
