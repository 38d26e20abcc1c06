"""Manual regions planned and simulated exactly (issue 13, point 4): forward, training, bytes measured = predicted."""

from pathlib import Path

import pytest

from graphs import load_model, load_model_text
from graphs.graph_builder import GraphBuilder
from planner.api import plan
from planner.errors import ModelError
from planner.partitioning import Backprop, Compute
from planner.simulation.run import simulate

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _simulated(p):
    r = simulate(p)
    assert r.ok, (r.outputs, r.gradients)
    for phase in r.phases.values():
        assert phase["measured_comm_bytes_per_device"] == phase["predicted_comm_bytes_per_device"]
    return r


def _auto_megatron():
    """The same MLP as configs/megatron_by_hand.yaml, planned automatically from the Megatron weight layouts."""
    b = GraphBuilder("auto_megatron", {"tp": 4})
    b.tensor("x", [16, 128], sharding='[{}, {}]')
    b.param("w1", [128, 512], sharding='[{}, {"tp"}]')
    b.param("w2", [512, 128], sharding='[{"tp"}, {}]')
    b.op("matmul", ["x", "w1"], output="h", name="mm1")
    b.op("relu", ["h"], output="a", name="act")
    b.op("matmul", ["a", "w2"], output="y", name="mm2", out_sharding='[{}, {}]')
    return b.build()


def test_megatron_by_hand_simulates_exactly_with_the_auto_planned_bytes():
    by_hand = plan(str(CONFIGS / "megatron_by_hand.yaml"))
    # propagated from the Megatron weight layouts (bfs and ilp prefer all-gathering the small weights here:
    # two AllGathers have half the latency terms of one AllReduce on this tiny model)
    auto = plan(_auto_megatron(), search="propagate")
    _simulated(auto)
    r = _simulated(by_hand)
    # one AllReduce of the [16, 128] f32 partial sums over tp = 4: ring chunks of 16*128/4 floats = 2048 B,
    # each device receives 2 * (4 - 1) chunks = 12288 B
    assert r.measured_comm_bytes_per_device == 12288
    assert by_hand.program.comm_bytes_per_device() == auto.program.comm_bytes_per_device() == 12288
    assert by_hand.program.collective_counts() == auto.program.collective_counts() == {"AllReduce": 1}
    [psum] = [c for c in by_hand.program.computes() if c.op.op == "psum"]
    assert [(c.kind, c.axis_names(), c.bytes_per_device) for c in psum.collectives] == [("AllReduce", ("tp",), 12288)]


def test_megatron_by_hand_trains_exactly():
    _simulated(plan(str(CONFIGS / "megatron_by_hand.yaml"), training=True))


def test_ring_matmul_moves_each_block_three_times_and_trains_exactly():
    p = plan(str(CONFIGS / "ring_matmul.yaml"))
    r = _simulated(p)
    # three ppermutes of x's [16, 16] block (1024 B) and of w's [16, 32] block (2048 B): 3 * 3072 B
    assert r.measured_comm_bytes_per_device == 9216
    assert p.program.collective_counts() == {"CollectivePermute": 6}
    t = plan(str(CONFIGS / "ring_matmul.yaml"), training=True)
    rt = _simulated(t)
    # backward: w's cotangent goes back around the ring (inverse ppermutes), x is an input with no gradient
    assert rt.phases["backward"]["measured_comm_bytes_per_device"] == 3 * 2048


def test_dp_training_step_psum_transposes_to_pbroadcast_and_w_is_reduced_once():
    p = plan(str(CONFIGS / "dp_training_step.yaml"), training=True)
    r = _simulated(p)
    program = p.program
    [psum_back] = [i for i in program.instructions if isinstance(i, Backprop) and i.op.op == "psum"]
    assert psum_back.collectives == ()  # psum -> pbroadcast: no backward communication
    backward = [st.kind for red in program.redistributions("backward") for st in red.steps]
    backward += [c.kind for c in program.op_collectives("backward")]
    assert backward == ["AllReduce"]  # the one reduction the implicit pbroadcast of w over dp transposes to
    [red] = [red for red in program.redistributions("backward") if red.steps]
    assert red.tensor == "step/w"
    # AllReduce of w's [32, 8] f32 cotangent over dp = 4: chunks of 64 floats = 256 B, 2 * 3 of them
    assert r.phases["backward"]["measured_comm_bytes_per_device"] == 1536
    # forward: the psum of the scalar loss (one f32, padded to one element per chunk): 2 * 3 * 4 B
    assert r.phases["forward"]["measured_comm_bytes_per_device"] == 24


@pytest.mark.parametrize("search", ["ilp", "propagate"])
@pytest.mark.parametrize("config", ["megatron_by_hand.yaml", "ring_matmul.yaml", "dp_training_step.yaml"])
def test_every_search_plans_regions_that_simulate_exactly(config, search):
    _simulated(plan(str(CONFIGS / config), search=search, training=True))


def test_body_ops_never_use_a_manual_axis():
    graph = load_model(CONFIGS / "megatron_by_hand.yaml")
    program = plan(graph).program
    for c in program.computes():
        role = graph.region_of_op(c.op.name).role(c.op.name)
        used = {a.name for axes in c.strategy.factor_axes for a in axes}
        assert role in ("enter", "exit") or not used & {"tp"}, c.op.name


def _megatron_variant(mesh: str, x_in: str) -> str:
    text = (CONFIGS / "megatron_by_hand.yaml").read_text()
    text = text.replace("mesh: {tp: 4}", mesh).replace("  x:  {shape: [16, 128]}", "  x:  {shape: [16, 128], kind: param}")
    return text.replace("in_shardings: ['[{}, {}]', ", f"in_shardings: ['{x_in}', ")


def test_a_replicated_input_read_with_sharded_weights_gets_its_gradient_all_reduced():
    # x is replicated over tp and pbroadcast by mm1 (w1 varies over tp), so dx comes back pending over tp:
    # Megatron's backward AllReduce of dx, [16, 128] f32 over tp = 4: 2 * 3 * 2048 B
    p = plan(load_model_text(_megatron_variant("mesh: {tp: 4}", "[{}, {}]")), training=True)
    r = _simulated(p)
    assert r.phases["backward"]["measured_comm_bytes_per_device"] == 12288
    assert r.phases["backward"]["collectives"] == {"AllReduce": 1}


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_free_axis_in_the_in_sharding_shards_the_body_and_trains_exactly(search):
    graph = load_model_text(_megatron_variant("mesh: {dp: 2, tp: 4}", '[{"dp"}, {}]'))
    p = plan(graph, search=search, training=True)
    _simulated(p)
    assert p.tensors["mlp/x"].sharding.dims_text().startswith('[{"dp"')  # the free axis crosses the boundary
    for t in graph.manual_regions[0].body_tensors:
        assert "tp" not in {a.name for a in p.tensors[t].sharding.used_axes()}, t


SWAP_AND_SHIFT = """
name: swap_and_shift
mesh: {dp: 2, tp: 4}
tensors:
  x: {shape: [16, 32], kind: param}
regions:
  - name: body
    manual_axes: [dp, tp]
    inputs: [x]
    in_shardings: ['[{}, {"tp"}]']
    outputs: [z]
    out_shardings: ['[{"tp"}, {"dp"}]']
    ops:
      - {name: swap, op: all_to_all, axes: [tp], split_dim: 0, concat_dim: 1, inputs: [x], output: y}
      - {name: shift, op: ppermute, axes: [tp], perm: [[0, 1], [1, 2], [2, 3], [3, 0]], inputs: [y], output: s}
      - {name: act, op: tanh, inputs: [s], output: t}
      - {name: keep, op: pscatter, axes: [dp], dim: 1, inputs: [t], output: z}
outputs: [z]
"""


def test_a_body_collective_over_one_axis_of_two_counts_each_devices_bytes_once():
    # the all_to_all and the ppermute run over tp in two groups (one per dp coordinate) at once: a device receives
    # 3/4 of its [16, 8] f32 block (384 B) in the all_to_all and its whole [4, 32] block (512 B) in the ppermute,
    # once each, not once per group; the backward moves the same through their transposes
    r = _simulated(plan(load_model_text(SWAP_AND_SHIFT), training=True))
    assert r.phases["forward"]["measured_comm_bytes_per_device"] == 384 + 512
    assert r.phases["forward"]["collectives"] == {"AllToAll": 1, "CollectivePermute": 1}


# a softmax over columns sharded on tp, written by hand in a region: the row maximum taken locally then by pmax, the
# row sum of the exponentials by psum (jax.nn.softmax's stable form, as manual code writes it); the row minimum by
# pmin beside it (tests/engines/test_jax_regions.py runs it on XLA)
STABLE_SOFTMAX = """\
name: stable_softmax
mesh: {tp: 4}
tensors:
  x: {shape: [8, 16]}
regions:
  - name: r
    manual_axes: [tp]
    inputs: [x]
    in_shardings: ['[{}, {"tp"}]']
    outputs: [p, lo]
    out_shardings: ['[{}, {"tp"}]', '[{}, {}]']
    ops:
      - {name: local_max, op: max, axes: [1], keepdims: true, inputs: [x], output: m}
      - {name: row_max, op: pmax, axes: [tp], inputs: [m], output: mm}
      - {name: shifted, op: sub, inputs: [x, mm], output: s}
      - {name: exponent, op: exp, inputs: [s], output: e}
      - {name: local_sum, op: sum, axes: [1], keepdims: true, inputs: [e], output: z}
      - {name: row_sum, op: psum, axes: [tp], inputs: [z], output: zz}
      - {name: normalise, op: div, inputs: [e, zz], output: p}
      - {name: local_min, op: min, axes: [1], keepdims: true, inputs: [x], output: n}
      - {name: row_min, op: pmin, axes: [tp], inputs: [n], output: lo}
outputs: [p, lo]
"""


def test_pmax_and_pmin_in_a_region_simulate_exactly_as_all_reduces():
    p = plan(STABLE_SOFTMAX)
    r = _simulated(p)
    # three AllReduces over tp = 4 of an [8, 1] f32 block (32 B, ring chunks of two floats): 2 * 3 * 8 B each
    assert p.program.collective_counts() == {"AllReduce": 3}
    assert r.measured_comm_bytes_per_device == 3 * 48


def test_training_through_pmax_is_refused_as_jax_refuses_it():
    text = STABLE_SOFTMAX.replace("x: {shape: [8, 16]}", "x: {shape: [8, 16], kind: param}")
    with pytest.raises(ModelError, match=r"op 'r/row_max' \(pmax\) of model 'stable_softmax' has no gradient"):
        plan(text, training=True)
