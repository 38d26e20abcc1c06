"""Issue 12's annotation ops in every search: a sharding_constraint fixes the layout its readers get,
a propagation_barrier is an identity to bfs, ilp and explicit mode, and both simulate exactly,
forward and as a training step."""

import pytest

from planner.api import plan
from planner.simulation.run import simulate

from .conftest import BANDWIDTH_BOUND

# a [8, 16] batch-sharded over x -> up (matmul w1) -> h1, read twice:
#   c1 constrains one use of h1 to [{}, {"y"}] (h1c), then a barrier and the down matmul;
#   skip reads h1 itself (tanh). The loss is mean((y + s)^2), so every op has a gradient.
# Nothing in the model asks for [{}, {"y"}]: the batch arrives over x and w1, w2 are free,
# so a search that ignored the constraint would keep the batch sharding there (tested below).
CONSTRAINT = '[{}, {"y"}]'


def model(c1_op: str = "sharding_constraint", direction: str = "backward") -> str:
    pin = f", out_sharding: '{CONSTRAINT}'" if c1_op == "sharding_constraint" else ""
    return f"""
name: constrained
mesh: {{x: 2, y: 2}}
cluster: {BANDWIDTH_BOUND}
tensors:
  a:  {{shape: [8, 16], kind: input, sharding: '[{{"x"}}, {{}}]'}}
  w1: {{shape: [16, 16], kind: param}}
  w2: {{shape: [16, 16], kind: param}}
ops:
  - {{name: up, op: matmul, inputs: [a, w1], output: h1}}
  - {{name: c1, op: {c1_op}, inputs: [h1], output: h1c{pin}}}
  - {{name: bar, op: propagation_barrier, inputs: [h1c], output: h2, allowed_direction: {direction}}}
  - {{name: down, op: matmul, inputs: [h2, w2], output: y}}
  - {{name: skip, op: tanh, inputs: [h1], output: s}}
  - {{name: join, op: add, inputs: [y, s], output: z}}
  - {{name: square, op: mul, inputs: [z, z], output: z2}}
  - {{name: loss, op: mean, inputs: [z2], output: l}}
outputs: [l]
"""


def assert_simulates_exactly(p):
    r = simulate(p, seed=1)
    assert r.ok, (r.outputs, r.gradients)
    for name, phase in r.phases.items():
        assert phase["measured_comm_bytes_per_device"] == phase["predicted_comm_bytes_per_device"], name
    assert r.measured_comm_bytes_per_device == p.totals.comm_bytes_per_device
    if p.training:  # every parameter's gradient equals the single-device reference's
        assert set(r.gradients) == {"w1", "w2"}
        assert all(g["ok"] and g["max_rel_error"] <= 1e-9 for g in r.gradients.values()), r.gradients
    return r


@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("search", ["bfs", "ilp", "explicit"])
def test_constraint_is_the_layout_of_its_result_and_the_plan_simulates_exactly(search, training):
    p = plan(model(), search=search, training=training)
    # what c1's readers get (explicit mode computes c1 on h1 as it is and redistributes the result;
    # bfs and ilp may redistribute h1 first: either way h1c is laid out as the constraint)
    assert p.tensors["h1c"].sharding.dims_text() == CONSTRAINT
    assert_simulates_exactly(p)


@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_without_the_constraint_the_same_tensor_is_laid_out_otherwise(search):
    # c1 as a plain identity (a barrier): nothing asks for [{}, {"y"}] any more, so the pin above is
    # what put it there; the search is then free and h1c follows the batch sharding it arrives in
    free = plan(model(c1_op="propagation_barrier"), search=search)
    assert free.tensors["h1c"].sharding.dims_text() != CONSTRAINT
    assert free.totals.objective <= plan(model(), search=search).totals.objective


@pytest.mark.parametrize("direction", ["none", "forward", "backward", "both"])
@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_barrier_direction_does_not_change_a_cost_search(search, direction):
    # bfs and ilp cost every choice on both sides of a barrier: its direction is for propagation only
    p = plan(model(direction=direction), search=search)
    reference = plan(model(direction="none"), search=search)
    assert p.totals.objective == reference.totals.objective
    assert {t: str(d.sharding) for t, d in p.tensors.items()} == \
        {t: str(d.sharding) for t, d in reference.tensors.items()}
