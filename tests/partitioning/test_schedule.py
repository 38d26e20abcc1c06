"""The step's schedule (planner/partitioning/schedule.py): small programs whose step is derived by hand
from their instructions' own times, the serial mode equal to the objective's sum, async never longer."""

import json
import math
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.api import plan
from planner.cli.main import main
from planner.errors import PlanningError
from planner.partitioning import Backprop, Compute, Redistribute
from planner.partitioning.schedule import PHASES, schedule
from planner.redistribution import step_link

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

# Compute slow enough (1 GFLOP/s) that a matmul's backward outlasts a small gradient AllReduce.
SLOW_COMPUTE = """
cluster:
  name: slow-compute
  device_peak_flops: 1e9
  device_memory_bytes: 1e9
  devices_per_node: 8
  intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
  inter_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
"""

# Two data-parallel layers: the batch split over dp, both weights replicated, so the only communication
# is each weight's gradient AllReduce.
DATA_PARALLEL = """
name: dp2
mesh: {dp: 4}
""" + SLOW_COMPUTE + """
tensors:
  x: {shape: [64, 32], kind: input, sharding: '[{"dp"}, {}]'}
  w0: {shape: [32, 32], kind: param, sharding: '[{}, {}]'}
  w1: {shape: [32, 32], kind: param, sharding: '[{}, {}]'}
ops:
  - {name: l0, op: matmul, inputs: [x, w0], output: h, strategy: [[4, 1], [1, 1]]}
  - {name: l1, op: matmul, inputs: [h, w1], output: y, strategy: [[4, 1], [1, 1]]}
outputs: [y]
"""

# Two independent branches: a's contraction is split over x (a pending sum the add needs reduced), b is
# computed whole; the AllReduce of a can run while b computes.
BRANCHES = """
name: branches
mesh: {x: 2}
""" + SLOW_COMPUTE + """
tensors:
  xa: {shape: [16, 32], kind: input, sharding: '[{}, {"x"}]'}
  wa: {shape: [32, 32], kind: param, sharding: '[{"x"}, {}]'}
  xb: {shape: [16, 32], kind: input, sharding: '[{}, {}]'}
  wb: {shape: [32, 32], kind: param, sharding: '[{}, {}]'}
ops:
  - {name: mm_a, op: matmul, inputs: [xa, wa], output: ha, strategy: [[1, 2], [2, 1]]}
  - {name: mm_b, op: matmul, inputs: [xb, wb], output: hb, strategy: [[1, 1], [1, 1]]}
  - {name: sum, op: add, inputs: [ha, hb], output: y, strategy: [[1, 1], [1, 1]], out_sharding: '[{}, {}]'}
outputs: [y]
"""


# Two branches reduced over different links: a's contraction over gpu (inside a node), b's over node
# (across nodes), both needed whole by the add.
TWO_LINKS = """
name: two_links
mesh: {node: 2, gpu: 8}
cluster:
  name: two-nodes
  device_peak_flops: 1e12
  device_memory_bytes: 1e9
  devices_per_node: 8
  intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
  inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
tensors:
  xa: {shape: [16, 64], kind: input, sharding: '[{}, {"gpu"}]'}
  wa: {shape: [64, 64], kind: param, sharding: '[{"gpu"}, {}]'}
  xb: {shape: [16, 64], kind: input, sharding: '[{}, {"node"}]'}
  wb: {shape: [64, 64], kind: param, sharding: '[{"node"}, {}]'}
ops:
  - {name: mm_a, op: matmul, inputs: [xa, wa], output: ha}
  - {name: mm_b, op: matmul, inputs: [xb, wb], output: hb}
  - {name: sum, op: add, inputs: [ha, hb], output: y, out_sharding: '[{}, {}]'}
outputs: [y]
"""


def _by_kind(program):
    computes = {i.op.name: i for i in program.instructions if isinstance(i, Compute)}
    grads = {i.tensor: i for i in program.instructions if isinstance(i, Redistribute) and i.phase == "gradient"}
    return computes, grads


def test_data_parallel_gradient_reduction_of_layer_1_hides_behind_the_backward_of_layer_0():
    p = plan(DATA_PARALLEL, training=True)
    program = p.program
    kinds = [(type(i).__name__, getattr(i, "phase", None)) for i in program.instructions
             if isinstance(i, (Compute, Backprop)) or (isinstance(i, Redistribute) and i.steps)]
    # the program: F0, F1, B1, AllReduce(dw1), B0, AllReduce(dw0), and nothing else communicates (the
    # cotangent transposes move nothing)
    assert kinds == [("Compute", None), ("Compute", None), ("Backprop", None), ("Redistribute", "gradient"),
                     ("Backprop", None), ("Redistribute", "gradient")]
    computes, grads = _by_kind(program)
    f0, f1 = computes["l0"].forward_time_s, computes["l1"].forward_time_s
    b0, b1 = computes["l0"].backward_time_s, computes["l1"].backward_time_s
    r0, r1 = grads["w0"].time_s, grads["w1"].time_s
    assert 0 < r1 < b0  # the case this test is about: layer 1's reduction fits in layer 0's backward
    # compute runs F0, F1, B1, B0 back to back (every input is ready when the stream frees); AllReduce(dw1)
    # starts when B1 ends and runs beside B0; AllReduce(dw0) starts when B0 ends, on a stream free since
    # r1 < b0, and nothing hides it: step = forward + backward + the last reduction
    s = schedule(program, p.cluster)
    assert s.step_time_s == pytest.approx(f0 + f1 + b1 + max(b0, r1) + r0, rel=1e-12)
    assert s.step_time_s == pytest.approx(f0 + f1 + b1 + b0 + r0, rel=1e-12)
    g = s.phase("gradient")
    assert g.comm_time_s == pytest.approx(r0 + r1, rel=1e-12)
    assert g.hidden_comm_time_s == pytest.approx(r1, rel=1e-12)  # all of it runs during B0
    assert g.exposed_comm_time_s == pytest.approx(r0, rel=1e-12)
    assert s.phase("forward").compute_time_s == pytest.approx(f0 + f1, rel=1e-12)
    assert s.phase("backward").compute_time_s == pytest.approx(b0 + b1, rel=1e-12)
    # the serial sum adds r1 back: what the plan's totals report beside it
    none = schedule(program, p.cluster, "none")
    assert none.step_time_s - s.step_time_s == pytest.approx(r1, rel=1e-9)
    assert p.totals.step_time_s == s.step_time_s and p.totals.overlap == "async"
    assert p.totals.overlap_gap == pytest.approx(r1 / p.totals.objective, rel=1e-9)


def test_a_pending_sum_is_reduced_while_an_independent_branch_computes():
    p = plan(BRANCHES)
    program = p.program
    seq = [i for i in program.instructions if isinstance(i, (Compute, Redistribute))]
    # the AllReduce of ha waits in the program until its first reader, after mm_b
    assert [getattr(i, "op", None) and i.op.name or i.tensor for i in seq] == ["mm_a", "mm_b", "ha", "sum"]
    fa, fb, r, fsum = seq[0].forward_time_s, seq[1].forward_time_s, seq[2].time_s, seq[3].forward_time_s
    assert [st.kind for st in seq[2].steps] == ["AllReduce"] and r > 0
    # compute: mm_a, mm_b back to back; the reduction starts when mm_a ends and runs beside mm_b; sum waits
    # for both: step = fa + max(fb, r) + fsum, of which min(fb, r) of the reduction is hidden
    s = schedule(program, p.cluster)
    assert s.step_time_s == pytest.approx(fa + max(fb, r) + fsum, rel=1e-12)
    f = s.phase("forward")
    assert f.hidden_comm_time_s == pytest.approx(min(fb, r), rel=1e-12)
    assert f.exposed_comm_time_s == pytest.approx(r - min(fb, r), rel=1e-12)


def test_each_link_has_its_own_stream():
    p = plan(TWO_LINKS)
    seq = [i for i in p.program.instructions
           if isinstance(i, Compute) or (isinstance(i, Redistribute) and i.plan.communicates)]
    names = [i.op.name if isinstance(i, Compute) else (i.tensor, [st.kind for st in i.steps]) for i in seq]
    assert names == ["mm_a", "mm_b", ("ha", ["AllReduce"]), ("hb", ["AllReduce", "AllGather"]), "sum"]
    fa, fb, fsum = seq[0].forward_time_s, seq[1].forward_time_s, seq[4].forward_time_s
    (ra,) = seq[2].steps
    rb, gb = seq[3].steps
    intra, inter = p.cluster.intra_node, p.cluster.inter_node
    assert step_link(ra, p.cluster) == intra and step_link(rb, p.cluster) == inter
    assert step_link(gb, p.cluster) == intra
    # ha's AllReduce (intra) starts when mm_a ends; hb's AllReduce (inter) when mm_b ends, beside it on the
    # other link; hb's AllGather (intra) once that is done and ha's AllReduce has left the intra link; the
    # add waits for both: step = fa + max(fb + rb, ra) + gb + fsum
    s = schedule(p.program, p.cluster)
    expected = fa + max(fb + rb.time_s, ra.time_s) + gb.time_s + fsum
    assert s.step_time_s == pytest.approx(expected, rel=1e-12)
    # one stream for both links would run the reductions one after the other
    assert expected < fa + fb + ra.time_s + rb.time_s + gb.time_s + fsum


def test_a_chain_with_a_manual_collective_has_nothing_to_overlap():
    # dp_training_step's forward: mm -> square -> local_loss -> psum, each reading the previous; the psum's
    # communication is the body collective its op waits for, so the schedule is the serial sum
    p = plan(CONFIGS / "dp_training_step.yaml")
    s = schedule(p.program, p.cluster)
    none = schedule(p.program, p.cluster, "none")
    assert s.step_time_s == pytest.approx(none.step_time_s, rel=1e-12)
    assert s.hidden_comm_time_s == 0.0
    collective = next(i.collectives[0] for i in p.program.instructions if isinstance(i, Compute) and i.collectives)
    assert s.phase("forward").comm_time_s == pytest.approx(collective.time_s, rel=1e-12)


def test_the_forward_part_of_a_training_op_is_what_the_forward_program_computes():
    forward = {i.op.name: i for i in plan(DATA_PARALLEL).program.computes()}
    for c in plan(DATA_PARALLEL, training=True).program.computes():
        assert c.strategy == forward[c.op.name].strategy
        assert c.forward_time_s == pytest.approx(forward[c.op.name].compute_time_s, rel=1e-12)
        assert forward[c.op.name].backward_time_s == 0.0
        # a matmul with g needed operand gradients costs (1 + g) forwards: l0 needs dw0, l1 dh and dw1
        g = {"l0": 1, "l1": 2}[c.op.name]
        assert c.backward_time_s == pytest.approx(g * c.forward_time_s, rel=1e-9)


def test_overlap_none_is_the_objective_sum_exactly():
    for training in (False, True):
        p = plan(CONFIGS / "megatron_mlp.yaml", training=training, overlap="none")
        t = p.totals
        assert t.step_time_s == t.compute_time_s + t.comm_time_s  # the same sum, in the same order
        assert t.step_time_s == pytest.approx(t.objective, rel=1e-12)
        assert t.overlap == "none" and t.hidden_comm_time_s == 0.0 and t.overlap_gap == 0.0
        assert t.exposed_comm_time_s == pytest.approx(t.comm_time_s, rel=1e-12)
        for ph, times in t.phases:
            assert times.comm_time_s == pytest.approx(p.program.comm_time_s(ph), rel=1e-12, abs=0)


def _configs():
    return sorted(p.name for p in CONFIGS.glob("*.yaml"))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=st.sampled_from(_configs()), training=st.booleans(), cluster=st.sampled_from([None, "ib-cluster"]))
def test_async_is_never_longer_than_the_serial_sum_and_accounts_every_second(config, training, cluster):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = plan(CONFIGS / config, training=training, cluster=cluster)
    a = schedule(p.program, p.cluster)
    n = schedule(p.program, p.cluster, "none")
    assert a.step_time_s <= n.step_time_s
    # the step is at least the compute stream's work and at least any one stream's communication
    assert a.step_time_s >= p.totals.compute_time_s * (1 - 1e-12)
    for ph in PHASES:
        x = a.phase(ph)
        assert x.comm_time_s == pytest.approx(p.program.comm_time_s(ph), rel=1e-9, abs=1e-18)
        assert x.exposed_comm_time_s + x.hidden_comm_time_s == pytest.approx(x.comm_time_s, rel=1e-9, abs=1e-18)
        assert x.hidden_comm_time_s >= 0 and x.exposed_comm_time_s >= 0
    assert sum(x.compute_time_s for _, x in a.phases) == pytest.approx(p.totals.compute_time_s, rel=1e-9)
    # hidden communication ran during compute, so what is not hidden bounds how much the step shrank
    assert n.step_time_s - a.step_time_s <= a.hidden_comm_time_s * (1 + 1e-9) + 1e-18
    assert math.isfinite(a.step_time_s)


def test_the_schedule_and_its_report_are_deterministic():
    p = plan(DATA_PARALLEL, training=True)
    assert schedule(p.program, p.cluster) == schedule(p.program, p.cluster)
    q = plan(DATA_PARALLEL, training=True)
    assert json.dumps(p.to_dict()) == json.dumps(q.to_dict())


def test_an_unknown_overlap_mode_is_refused_with_the_modes():
    p = plan(DATA_PARALLEL)
    with pytest.raises(PlanningError, match="unknown overlap mode 'sync'; use one of none, async"):
        schedule(p.program, p.cluster, "sync")
    with pytest.raises(PlanningError, match="unknown overlap mode"):
        plan(DATA_PARALLEL, overlap="sync")



def test_a_backprop_waits_for_its_cotangent_which_waits_behind_a_reduction_on_the_same_link():
    # layer 0 splits its contraction over dp: the forward all-to-alls x and reduce-scatters h; in the
    # backward dh comes home by an AllGather, queued on the dp link behind layer 1's gradient AllReduce
    model = DATA_PARALLEL.replace("output: h, strategy: [[4, 1], [1, 1]]", "output: h, strategy: [[1, 4], [4, 1]]")
    p = plan(model, training=True)
    comm = [(i.tensor, i.phase, tuple(st.kind for st in i.steps)) for i in p.program.instructions
            if isinstance(i, Redistribute) and i.steps and any(st.kind != "Slice" for st in i.steps)]
    assert comm == [("x", "forward", ("AllToAll",)), ("h", "forward", ("ReduceScatter",)),
                    ("w1", "gradient", ("AllReduce",)), ("h", "backward", ("AllGather",)),
                    ("w0", "gradient", ("AllGather",))]
    # every collective is on the one dp link, in program order: the forward is a chain (AllToAll, F0,
    # ReduceScatter, F1), B1 then AllReduce(dw1) then AllGather(dh) (behind it on the link), B0 waits for
    # dh, and AllGather(dw0) waits for B0: nothing runs beside anything, the step is the serial sum
    s = schedule(p.program, p.cluster)
    assert s.step_time_s == pytest.approx(schedule(p.program, p.cluster, "none").step_time_s, rel=1e-12)
    assert s.hidden_comm_time_s == 0.0


@pytest.mark.parametrize("overlap", ["none", "async"])
def test_the_step_overhead_is_paid_once_per_step_and_is_not_overlap(overlap):
    model = str(CONFIGS / "transformer_block.yaml")
    base = plan(model, training=True, overlap=overlap)
    launched = plan(model, training=True, overlap=overlap,
                    cluster={"preset": "default", "step_overhead_s": "300us"})
    # the launch changes no plan and no objective: the same step, plus 300 us once
    assert launched.totals.objective == base.totals.objective
    assert launched.totals.step_time_s == pytest.approx(base.totals.step_time_s + 300e-6, rel=1e-12)
    assert launched.totals.step_overhead_s == 300e-6
    # the gap compares the schedule with the serial sum plus the same launch: it is unchanged
    serial = launched.totals.objective + 300e-6
    assert launched.totals.overlap_gap == pytest.approx((serial - launched.totals.step_time_s) / serial, rel=1e-9)
