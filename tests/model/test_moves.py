"""What a link moves in the backward: under the ``xla`` policy (``--search propagate``) each reader's pending
cotangent is completed where it lies, by itself, as XLA's partitioner all-reduces each dot's partial result; the
other searches add the readers' pending cotangents first and complete the sum once."""

from __future__ import annotations

import pytest

from planner.api import plan
from planner.partitioning import Backprop, Redistribute
from planner.simulation.memory import simulation_memory
from planner.simulation.run import simulate

# h (16 x 32, rows over dp) read by two column-parallel projections: each one's cotangent of h comes back
# pending over tp
TWO_READERS = """
name: two_readers
mesh: {dp: 2, tp: 4}
tensors:
  x:  {shape: [16, 32], kind: input, sharding: '[{"dp"}, {}]'}
  w0: {shape: [32, 32], kind: param, sharding: '[{}, {}]'}
  wq: {shape: [32, 64], kind: param, sharding: '[{}, {"tp"}]'}
  wk: {shape: [32, 64], kind: param, sharding: '[{}, {"tp"}]'}
ops:
  - {name: mm0, op: matmul, inputs: [x, w0], output: h0}
  - {name: act, op: tanh, inputs: [h0], output: h}
  - {name: q, op: matmul, inputs: [h, wq], output: hq}
  - {name: k, op: matmul, inputs: [h, wk], output: hk}
  - {name: mul, op: mul, inputs: [hq, hk], output: y}
outputs: [y]
"""

# one weight read by two matmuls whose rows are over dp: each one's gradient of w comes back pending over dp
TIED_WEIGHT = """
name: tied_weight
mesh: {dp: 2, tp: 4}
tensors:
  x1: {shape: [16, 32], kind: input, sharding: '[{"dp"}, {}]'}
  x2: {shape: [16, 32], kind: input, sharding: '[{"dp"}, {}]'}
  w:  {shape: [32, 32], kind: param, sharding: '[{}, {}]'}
ops:
  - {name: a, op: matmul, inputs: [x1, w], output: ya}
  - {name: b, op: matmul, inputs: [x2, w], output: yb}
  - {name: mul, op: mul, inputs: [ya, yb], output: y}
outputs: [y]
"""

# the ring AllReduce of p devices moves 2 (p - 1) / p of the buffer per device: h's block is 8 x 32 f32 (1024 B),
# over tp (4 devices) 1536 B; w's 32 x 32 f32 (4096 B), over dp (2 devices) 4096 B
H_ALL_REDUCE = 2 * 3 * (8 * 32 * 4) // 4
W_ALL_REDUCE = 2 * 1 * (32 * 32 * 4) // 2


def _moves(p, tensor):
    return [(r.route, sorted(r.readers), [(s.kind, s.bytes_per_device) for s in r.plan.steps])
            for r in p.program.instructions if isinstance(r, Redistribute) and r.phase != "forward"
            and r.tensor == tensor]


def test_propagate_completes_each_readers_pending_cotangent_by_itself():
    p = plan(TWO_READERS, search="propagate", training=True)
    assert _moves(p, "h") == [("q", ["q"], [("AllReduce", H_ALL_REDUCE)]),
                              ("k", ["k"], [("AllReduce", H_ALL_REDUCE)]),
                              (None, ["k", "q"], [])]  # the completed sum is home already
    routed = {ins.op.name: ins.routed for ins in p.program.instructions if isinstance(ins, Backprop)}
    assert routed["q"] == routed["k"] == (True, True)  # h's cotangent, and the weight's (pending over dp)


def test_the_other_searches_add_the_pending_cotangents_and_complete_the_sum_once():
    # the ILP gathers x, so h is whole on every device: its readers' cotangents come back pending over tp, are added
    # and all-reduced once (2 * 3/4 of h's 2048 B)
    p = plan(TWO_READERS, search="ilp", training=True)
    assert _moves(p, "h") == [(None, ["k", "q"], [("AllReduce", 2 * 3 * (16 * 32 * 4) // 4)])]
    assert not any(ins.routed and any(ins.routed) for ins in p.program.instructions if isinstance(ins, Backprop))


def test_a_weights_gradient_from_two_readers_is_completed_once_per_reader_under_propagate():
    p = plan(TIED_WEIGHT, search="propagate", training=True)
    assert _moves(p, "w") == [("a", ["a"], [("AllReduce", W_ALL_REDUCE)]), ("b", ["b"], [("AllReduce", W_ALL_REDUCE)]),
                              (None, ["a", "b"], [])]
    assert _moves(plan(TIED_WEIGHT, search="ilp", training=True), "w") == [
        (None, ["a", "b"], [("AllReduce", W_ALL_REDUCE)])]


@pytest.mark.parametrize("model", [TWO_READERS, TIED_WEIGHT], ids=["activation", "weight"])
def test_completed_cotangents_train_exactly_with_the_predicted_bytes_and_memory(model):
    p = plan(model, search="propagate", training=True)
    r = simulate(p, seed=1)
    assert r.ok, (r.outputs, r.gradients)
    assert all(g["max_rel_error"] <= 1e-9 for g in r.gradients.values())
    for name, phase in r.phases.items():
        assert phase["measured_comm_bytes_per_device"] == phase["predicted_comm_bytes_per_device"], name
    # what the search costed is what ran: each completion priced once per reader
    assert r.measured_comm_bytes_per_device == p.totals.comm_bytes_per_device
    assert simulation_memory(p.program, p.graph, 8).per_device >= r.peak_device_bytes
