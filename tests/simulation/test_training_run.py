"""Training plans run: the forward program transposed executes on the simulated devices, every
parameter's gradient matches the single-device reference, and every phase moves what it predicts."""

import json

import numpy as np
import pytest

from graphs.ops import registry
from graphs.ops.opdef import OpDef
from planner.api import plan
from planner.cli.main import main
from planner.errors import ModelError, VarianceError
from planner.ir import parse_mesh, parse_sharding
from planner.ir.axis import AxisRef
from planner.partitioning.program import typecheck
from planner.partitioning.typecheck import check_step
from planner.redistribution.steps import Step
from planner.simulation.run import simulate

# Seed 004's motivating example, a batch data-parallel loss with a replicated parameter:
#   @partial(shmap, mesh=Mesh(devices, ('batch',)), in_specs=(P(None, None), P('batch', None)), out_specs=P())
#   def loss(params, batch):
#     inputs, targets = batch
#     predictions = predict(params, inputs)
#     local_loss = jnp.mean(jnp.sum(predictions - targets, -1))
#     global_loss = lax.pmean(local_loss, 'batch'))
#     return global_loss
# with predict a matmul; the strategies pin the data-parallel layout (batch over the 8 devices).
DATA_PARALLEL_LOSS = """
name: dp_loss
mesh: {batch: 8}
tensors:
  params:  {shape: [32, 16], kind: param, sharding: '[{}, {}]'}
  inputs:  {shape: [64, 32], kind: input, sharding: '[{"batch"}, {}]'}
  targets: {shape: [64, 16], kind: input, sharding: '[{"batch"}, {}]'}
ops:
  - {name: predict, op: matmul, inputs: [inputs, params], output: predictions, strategy: [[8, 1], [1, 1]]}
  - {name: diff, op: sub, inputs: [predictions, targets], output: d, strategy: [[8, 1], [8, 1]]}
  - {name: rowsum, op: sum, inputs: [d], output: s, axes: [-1], strategy: [[8, 1]]}
  - {name: loss, op: mean, inputs: [s], output: global_loss, strategy: [[8]]}
outputs: [global_loss]
"""


def assert_exact(r):
    assert r.ok, (r.outputs, r.gradients)
    assert r.gradients and all(g["ok"] and g["max_rel_error"] <= 1e-9 for g in r.gradients.values()), r.gradients
    for phase in r.phases.values():
        assert phase["measured_comm_bytes_per_device"] == phase["predicted_comm_bytes_per_device"]


def test_data_parallel_loss_reduces_the_gradient_once_and_never_psums_the_loss_cotangent():
    p = plan(DATA_PARALLEL_LOSS, training=True)
    r = simulate(p)
    assert_exact(r)
    # the loss stays a pending sum (its value is only reported) and its cotangent is whole on
    # every device: pbroadcast, no communication; the only collective of the backward is the
    # psum that transposes the pbroadcast of the replicated parameter into the batch-varying matmul
    assert r.phases["forward"]["collectives"] == {} and r.phases["backward"]["collectives"] == {}
    assert r.phases["gradient"]["collectives"] == {"AllReduce": 1}
    (sync,) = p.gradient_syncs
    assert sync.tensor == "params" and [s.kind for s in sync.steps] == ["AllReduce"]
    # ring AllReduce of the f32 gradient (32x16) over 8 devices: 2 (p-1)/p of it per device
    assert r.phases["gradient"]["measured_comm_bytes_per_device"] == 2 * 7 * (32 * 16 * 4) // 8


def test_without_pbroadcast_the_same_plan_runs_a_wasteful_backward():
    efficient = plan(DATA_PARALLEL_LOSS, training=True)
    wasteful = plan(DATA_PARALLEL_LOSS, training=True, insert_pbroadcast=False)
    assert [o.strategy for o in efficient.ops] == [o.strategy for o in wasteful.ops]
    r_eff, r_waste = simulate(efficient), simulate(wasteful)
    assert_exact(r_eff)
    assert_exact(r_waste)  # the same gradients, to rounding ...
    # ... but the cotangents that are already whole get psum-ed (seed 004's psum(ybar / 8))
    backward = lambda r: sum(r.phases[ph]["measured_comm_bytes_per_device"] for ph in ("backward", "gradient"))
    assert backward(r_waste) > backward(r_eff)
    assert sum(r_waste.phases["backward"]["collectives"].values()) > 0 == sum(r_eff.phases["backward"]["collectives"].values())


def test_megatron_mlp_trains_exactly_under_both_searches():
    for search in ("bfs", "ilp"):
        r = simulate(plan("configs/megatron_mlp.yaml", search=search, training=True))
        assert_exact(r)
        assert set(r.gradients) == {"w1", "w2"}


def test_f32_simulation_runs_the_same_program_faster_and_close():
    p = plan("configs/transformer_block.yaml", training=True)
    r64, r32 = simulate(p, dtype="f64"), simulate(p, dtype="f32")
    assert_exact(r64)
    assert r32.ok and r32.dtype == "f32" and r32.phases == r64.phases


def test_an_op_without_a_vjp_is_refused_before_any_work(monkeypatch, capsys):
    gelu = registry.OPS["gelu"]
    untrainable = OpDef(gelu.name, gelu.family, gelu.min_inputs, gelu.max_inputs, gelu.attrs, gelu.infer, gelu.flops,
                        gelu.reference, gelu.canonical)  # no vjp
    ops = dict(registry.OPS)
    ops["gelu"] = untrainable
    monkeypatch.setattr(registry, "OPS", ops)
    with pytest.raises(ModelError, match=r"op 'act' \(gelu\).*no gradient"):
        plan("configs/megatron_mlp.yaml", training=True)
    assert main(["simulate", "configs/megatron_mlp.yaml", "--training"]) == 2
    err = capsys.readouterr().err
    assert "act" in err and "gelu" in err and "Traceback" not in err
    plan("configs/megatron_mlp.yaml")  # forward plans need no VJP


def test_simulate_training_json_has_gradients_and_phases(capsys):
    assert main(["simulate", "configs/ffn.yaml", "--training", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and set(out["phases"]) == {"forward", "backward", "gradient"}
    assert set(out["gradients"]) == {"w1", "b1", "w2", "b2"}
    for g in out["gradients"].values():
        assert set(g) == {"ok", "max_abs_error", "max_rel_error"} and g["ok"]
    for ph in out["phases"].values():
        assert set(ph) == {"measured_comm_bytes_per_device", "predicted_comm_bytes_per_device", "collectives"}
    total = sum(ph["measured_comm_bytes_per_device"] for ph in out["phases"].values())
    assert out["measured_comm_bytes_per_device"] == total == out["predicted_comm_bytes_per_device"]


def test_a_psum_of_an_invariant_value_is_a_type_error_naming_the_axis_and_the_rule():
    mesh = parse_mesh('@m = <["dp"=2, "tp"=4]>')
    replicated = parse_sharding("[{}, {}]", mesh)
    bad = Step("AllReduce", (AxisRef("tp"),), (), replicated, replicated, 0, 0.0)
    with pytest.raises(VarianceError, match=r'psum over .*"tp".* invariant .*\(psum: varying -> invariant\)'):
        check_step(bad, "step 1")


def test_the_lowered_program_is_type_checked(monkeypatch):
    p = plan("configs/megatron_mlp.yaml", training=True)
    typecheck(p.program)  # the planner's own programs are well typed
    # drop the pending sum of fc2's result: the row-parallel matmul's partial sums would be lost
    compute = next(i for i in p.program.instructions if getattr(getattr(i, "op", None), "name", None) == "fc2"
                   and hasattr(i, "compute_time_s"))
    from dataclasses import replace

    wrong = replace(compute, strategy=replace(compute.strategy, result=compute.strategy.result.with_unreduced(())))
    program = replace(p.program, instructions=tuple(wrong if i is compute else i for i in p.program.instructions))
    with pytest.raises(VarianceError, match=r"op 'fc2'.*\"tp\".*psum is missing"):
        typecheck(program)


SQUARE = """
name: square
mesh: {x: 4}
tensors:
  a: {shape: [8, 8], kind: input, sharding: '[{"x"}, {}]'}
  w: {shape: [8, 8], kind: param}
ops:
  - {name: ww, op: matmul, inputs: [w, w], output: w2, strategy: [[4, 1], [1, 1]]}
  - {name: mm, op: matmul, inputs: [a, w2], output: y}
  - {name: s, op: sum, inputs: [y], output: loss}
outputs: [loss]
"""


@pytest.mark.parametrize("training", [False, True])
def test_a_parameter_one_op_reads_in_two_layouts_is_redistributed_and_its_two_cotangents_go_home(training):
    # w @ w with the first operand row-sharded and the second replicated: w is stored once and
    # redistributed for the other operand; with training both operands' cotangents come back
    r = simulate(plan(SQUARE, training=training))
    assert r.ok, (r.outputs, r.gradients)
    for phase in r.phases.values():
        assert phase["measured_comm_bytes_per_device"] == phase["predicted_comm_bytes_per_device"]
    if training:
        assert_exact(r)


@pytest.mark.parametrize("search", ["bfs", "ilp", "propagate"])
def test_abs_sqrt_and_rsqrt_train_exactly_on_a_sharded_matmul(search):
    # elementwise ops of the catalogue: each device applies them and their VJPs to its block; the gradient of w
    # equals the single-device reference's and the bytes are as predicted
    from graphs.graph_builder import GraphBuilder

    g = GraphBuilder("roots", {"dp": 2, "tp": 4})
    g.tensor("x", [16, 32], sharding='[{"dp"}, {}]')
    g.param("w", [32, 64], sharding='[{}, {"tp"}]')
    h = g.op("matmul", ["x", "w"], output="h", name="mm")
    a = g.op("abs", [h], output="a", name="magnitude")
    s = g.op("sqrt", [g.op("mul", [a, a], output="b", name="square")], output="s", name="root")
    r = g.op("rsqrt", [g.op("add", [a, a], output="c", name="twice")], output="r", name="inverse_root")
    g.op("sum", [g.op("mul", [s, r], output="m", name="product")], output="loss", name="total")
    p = plan(g.build(), search=search, training=True)
    r = simulate(p, seed=1)
    assert r.ok and set(r.gradients) == {"w"}
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device == p.totals.comm_bytes_per_device


@pytest.mark.parametrize("search", ["bfs", "ilp", "propagate"])
def test_a_leaky_relu_written_with_comparison_and_select_trains_exactly(search):
    # jnp.where(h > 0, h, 0.1 * h): the cotangent goes to the branch each element came from, on every device's
    # block; the comparison's bool result takes none
    from graphs.graph_builder import GraphBuilder

    g = GraphBuilder("leaky", {"dp": 2, "tp": 4})
    g.tensor("x", [16, 32], sharding='[{"dp"}, {}]')
    g.param("w", [32, 64], sharding='[{}, {"tp"}]')
    g.const("zero", [], value=0.0)
    g.const("slope", [], value=0.1)
    h = g.op("matmul", ["x", "w"], output="h", name="mm")
    positive = g.op("comparison", [h, "zero"], output="p", name="positive", direction="gt")
    small = g.op("mul", [h, "slope"], output="s", name="scaled")
    a = g.op("select", [positive, h, small], output="a", name="leaky")
    g.op("sum", [g.op("mul", [a, a], output="q", name="square")], output="loss", name="total")
    p = plan(g.build(), search=search, training=True)
    r = simulate(p, seed=4)
    assert r.ok and set(r.gradients) == {"w"}
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device == p.totals.comm_bytes_per_device
