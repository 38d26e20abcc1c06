"""A normalisation over a sharded axis runs as partial statistics, AllReduces of them and a local finish:
forward and backward equal the single-device reference (f64) and the bytes the simulator's ring AllReduces
move equal the plan's."""

import math

import pytest

from planner.api import plan
from planner.partitioning import render
from planner.simulation.run import simulate

#: op, its attributes, its weight operands, (forward, backward) statistics per AllReduce (graphs/ops/normalization.py)
OPS = {
    "softmax": ("axis: 1", [], ((1, 1), (1,))),
    "layernorm": ("", ["w", "b"], ((1, 1), (2,))),
    "rmsnorm": ("", ["w"], ((1,), (1,))),
}
#: mesh, the input's sharding, the normalised dim's axes' group size, the rows each device holds
MESHES = {
    "1d": ("{x: 4}", '[{}, {"x"}]', 4, 16),
    "2d": ("{x: 2, y: 4}", '[{"y"}, {"x"}]', 2, 4),
    "2d_both": ("{x: 2, y: 4}", '[{}, {"x", "y"}]', 8, 16),
}


def _model(op: str, mesh: str) -> str:
    attrs, params, _ = OPS[op]
    mesh_text, sharding, _, _ = MESHES[mesh]
    weights = "".join(f"\n  {p}: {{shape: [512], kind: param}}" for p in params)
    extra = f", {attrs}" if attrs else ""
    return f"""
name: norm
mesh: {mesh_text}
tensors:
  a: {{shape: [16, 512], kind: param, sharding: '{sharding}'}}{weights}
ops:
  - {{name: n, op: {op}, inputs: [a{"".join(", " + p for p in params)}], output: y, out_sharding: '{sharding}'{extra}}}
  - {{name: r, op: relu, inputs: [y], output: c}}
outputs: [c]
"""


def _ring_all_reduce_bytes(elements: int, p: int, itemsize: int = 4) -> int:
    """A ring AllReduce: 2 (p - 1) rounds of ceil(n / p) elements each device receives."""
    return 2 * (p - 1) * math.ceil(elements / p) * itemsize


@pytest.mark.parametrize("mesh", sorted(MESHES))
@pytest.mark.parametrize("op", sorted(OPS))
def test_normalisation_over_a_sharded_axis_simulates_exactly_with_its_statistics(op, mesh):
    p = plan(_model(op, mesh), search="bfs", training=True)
    [compute] = [c for c in p.program.computes() if c.op.name == "n"]
    _, _, group, rows = MESHES[mesh]
    forward, backward = OPS[op][2]
    # each statistic is one value per row a device holds; an AllReduce of k statistics carries k of them
    assert [(c.kind, c.group_size, c.bytes_per_device) for c in compute.collectives] == \
        [("AllReduce", group, _ring_all_reduce_bytes(k * rows, group)) for k in forward]
    [back] = p.program.op_collectives("backward")  # one backward AllReduce each (OPS)
    assert (back.kind, back.bytes_per_device) == ("AllReduce", _ring_all_reduce_bytes(backward[0] * rows, group))
    r = simulate(p)
    assert r.ok, r
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


def test_forward_only_plan_counts_only_the_forward_statistics():
    p = plan(_model("softmax", "1d").replace("kind: param", "kind: input"), search="bfs")
    # a row max, then a row sum: two AllReduces of the 16 rows over x = 4
    assert p.program.collective_counts() == {"AllReduce": 2}
    r = simulate(p)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device == \
        2 * _ring_all_reduce_bytes(16, 4)


SUB_AXIS = """
name: subsoft
mesh: {x: 4}
tensors:
  a: {shape: [16, 8], kind: param, sharding: '[{"x"}, {}]'}
ops:
  - {name: r, op: reshape, inputs: [a], output: b, shape: [2, 8, 8]}
  - {name: s, op: softmax, inputs: [b], output: c, axis: 1}
outputs: [c]
"""


@pytest.mark.parametrize("search", ["propagate", "bfs"])
def test_a_statistic_sharded_by_a_sub_axis_all_reduces_over_it(search):
    # 16 rows on x = 4 reshaped to 2 x 8: [{"x":(1)2}, {"x":(2)2}, {}], and the softmax over the second dimension
    # reduces its statistics over the sub-axis "x":(2)2 (groups of 2); named by its text in the program and the report
    p = plan(SUB_AXIS, search=search, training=True)
    [compute] = [c for c in p.program.computes() if c.op.name == "s"]
    if search == "propagate":  # propagate keeps the reshape's sub-axes; bfs may choose another layout
        assert [(c.group_size, c.axis_names()) for c in compute.collectives] == [(2, ('"x":(2)2',))] * 2
        assert 'AllReduce over "x":(2)2 (group of 2)' in render(p.program)
    r = simulate(p)
    assert r.ok, r
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


ARG = """
name: pick
mesh: {{x: 2, y: 4}}
tensors:
  a: {{shape: [8, 32], kind: input, sharding: '[{{"x"}}, {{"y"}}]'}}
  zero: {{shape: [], kind: const, value: 0.0}}
ops:
  - {{name: t, op: comparison, inputs: [a, zero], output: p, direction: gt}}
  - {{name: c, op: cast, inputs: [p], output: v, dtype: {dtype}}}
  - {{name: m, op: {op}, inputs: [v], output: i, axis: 1, out_sharding: '[{{"x"}}]'}}
outputs: [i]
"""


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_an_argmax_over_a_sharded_axis_gathers_each_blocks_extreme_and_index(op, dtype):
    # the 32 columns on y = 4 (8 each), rows on x: each device's first extreme of its 4 rows and its global index
    # are AllGathered over y (ring: 3 rounds of 4 elements, the extreme in the operand's dtype, the index in i32),
    # as XLA partitions it (propagate; bfs and ilp may gather the columns instead: one collective, less latency);
    # the values are 0 and 1 (the sign of a normal draw), so extremes tie across blocks and the first in block
    # order, the lowest index, must win, as numpy's
    p = plan(ARG.format(op=op, dtype=dtype), search="propagate")
    [compute] = [c for c in p.program.computes() if c.op.name == "m"]
    itemsize = {"f32": 4, "bf16": 2}[dtype]
    assert [(c.kind, c.group_size, c.bytes_per_device) for c in compute.collectives] == \
        [("AllGather", 4, 3 * 4 * itemsize), ("AllGather", 4, 3 * 4 * 4)]
    r = simulate(p)
    assert r.ok, r
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device
