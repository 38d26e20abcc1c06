"""Graph outputs, closed annotations, shared redistributions and training memory (issue 9's fixes).

Expected bytes come from the ring formulas (SPEC §4): for a group of p devices and a
tensor of n bytes, ReduceScatter and AllGather move (p-1)/p * n per device, AllReduce
2 (p-1)/p * n.
"""

import pytest

from planner.api import plan
from planner.simulation.run import simulate

MEGATRON = """
name: megatron_free
mesh: {{tp: 4}}
{layout}
tensors:
  x:  {{shape: [16, 64], kind: input, sharding: '[{{}}, {{}}]'}}
  w1: {{shape: [64, 256], kind: param, sharding: '[{{}}, {{"tp"}}]'}}
  w2: {{shape: [256, 64], kind: param, sharding: '[{{"tp"}}, {{}}]'}}
ops:
  - {{name: fc1, op: matmul, inputs: [x, w1], output: h}}
  - {{name: act, op: relu, inputs: [h], output: a}}
  - {{name: fc2, op: matmul, inputs: [a, w2], output: y}}
outputs: [y]
"""


def kinds(p):
    return [(r.tensor, s.kind) for r in p.redistributions for s in r.steps]


@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_a_free_output_with_a_pending_sum_is_reduce_scattered(search):
    p = plan(MEGATRON.format(layout=""), search=search)
    n = 16 * 64 * 4  # y, f32
    assert kinds(p) == [("y", "ReduceScatter")]
    assert p.totals.comm_bytes_per_device == 3 * n // 4  # (p-1)/p * n, p = 4
    assert not p.program.outputs["y"].unreduced
    r = simulate(p)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device == 3 * n // 4


def test_outputs_layout_replicated_delivers_every_output_whole():
    p = plan(MEGATRON.format(layout="outputs_layout: replicated"), search="bfs")
    n = 16 * 64 * 4
    assert kinds(p) == [("y", "AllReduce")]
    assert p.totals.comm_bytes_per_device == 2 * 3 * n // 4  # 2 (p-1)/p * n
    assert p.program.outputs["y"].is_fully_replicated
    assert simulate(p).ok


def test_outputs_layout_is_checked():
    from planner.errors import ModelError

    with pytest.raises(ModelError, match="outputs_layout.*free.*replicated.*even.*got 'everywhere'"):
        plan(MEGATRON.format(layout="outputs_layout: everywhere"))


@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_outputs_layout_even_keeps_a_reduce_scatter_onto_a_dividing_dimension(search):
    # y's 16 rows divide over tp = 4, so the cheapest free delivery is already a JAX array's layout
    p = plan(MEGATRON.format(layout="outputs_layout: even"), search=search)
    assert kinds(p) == [("y", "ReduceScatter")]
    assert p.program.outputs["y"].dims_text() == '[{"tp"}, {}]'
    assert simulate(p).ok


WINDOWS = """
name: windows
mesh: {{d: 8}}
outputs_layout: {layout}
tensors:
  x: {{shape: [16, 32], kind: input, sharding: '[{{"d"}}, {{}}]'}}
  c: {{shape: [16, 32], kind: input, sharding: '[{{}}, {{"d"}}]'}}
ops:
  - {{name: split, op: reshape, inputs: [x], output: r, shape: [4, 4, 32]}}
  - {{name: act, op: tanh, inputs: [r], output: y}}
  - {{name: window, op: slice, inputs: [c], output: w, starts: [0, 1], stops: [16, 32]}}
outputs: [y, w]
"""


def test_outputs_layout_even_delivers_the_whole_axes_that_divide_each_dimension():
    # propagate computes y on sub-axes ([{"d":(1)4}, {"d":(4)2}, {}]: the reshape splits x's rows) and w's 31
    # columns padded on d; a JAX array holds neither, so each is delivered in the prefix of whole axes that divides
    # it, here none: both gathered whole. free delivers them as computed.
    free = plan(WINDOWS.format(layout="free"), search="propagate")
    even = plan(WINDOWS.format(layout="even"), search="propagate")
    assert free.program.outputs["y"].dims_text() == '[{"d":(1)4}, {"d":(4)2}, {}]'
    assert free.program.outputs["w"].dims_text() == '[{}, {"d"}]'
    assert even.tensor("y").sharding == free.tensor("y").sharding  # computed alike
    assert even.program.outputs["y"].is_fully_replicated and even.program.outputs["w"].is_fully_replicated
    # each delivery gathers the (p-1)/p of the padded whole that other devices hold: y 16x32 f32 over 8 devices
    # (one AllGather per dimension, as XLA compiles it), w's 8 blocks of 4 columns (32 padded columns)
    assert [(r.tensor, [s.kind for s in r.steps]) for r in even.reshards if not r.readers] == [
        ("y", ["AllGather", "AllGather"]), ("w", ["AllGather"])]
    assert even.totals.comm_bytes_per_device - free.totals.comm_bytes_per_device == 2 * 7 * 16 * 32 * 4 // 8
    r = simulate(even)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


EMBEDDING = """
name: vocab_parallel
mesh: {tp: 4}
tensors:
  ids:   {shape: [16], dtype: i32, kind: input, sharding: '[{}]'}
  table: {shape: [1000, 32], kind: param, sharding: '[{"tp"}, {}]'}
ops:
  - {name: lookup, op: gather, inputs: [table, ids], output: e}
outputs: [e]
"""


@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_a_vocabulary_sharded_lookup_that_is_the_output_reduce_scatters_its_rows(search):
    """The lookup runs vocabulary-parallel (each device looks up its rows, zeros elsewhere) and the
    pending sum is reduce-scattered: (p-1)/p of the 16x32 f32 result, not an AllToAll of the table."""
    p = plan(EMBEDDING, search=search)
    assert kinds(p) == [("e", "ReduceScatter")]
    assert p.totals.comm_bytes_per_device == 3 * (16 * 32 * 4) // 4
    r = simulate(p)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


CLOSED = """
name: closed
mesh: {x: 2, y: 2}
tensors:
  a: {shape: [8, 8], kind: input, sharding: '[{"x"}, {"y"}]'}
  w: {shape: [8, 8], kind: param, sharding: '[{"y"}, {}]'}
ops:
  - {name: mm, op: matmul, inputs: [a, w], output: h, out_sharding: '[{"x"}, {}]'}
  - {name: act, op: relu, inputs: [h], output: z}
outputs: [z]
"""


@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_a_closed_annotation_excludes_pending_sums_over_other_axes(search):
    p = plan(CLOSED, search=search)
    assert str(p.tensors["h"].sharding) == 'sharding<@mesh, [{"x"}, {}]>'
    assert not p.op("mm").result_sharding.unreduced
    assert simulate(p).ok


def test_a_closed_annotation_may_name_its_pending_sums():
    p = plan(CLOSED.replace("""out_sharding: '[{"x"}, {}]'""", """out_sharding: '[{"x"}, {}], unreduced={"y"}'"""),
             search="bfs")
    assert [str(a) for a in p.op("mm").result_sharding.unreduced] == ['"y"']
    assert simulate(p).ok


SHARED = """
name: shared
mesh: {d: 4}
tensors:
  x:  {shape: [32, 64], kind: input, sharding: '[{"d"}, {}]'}
  w1: {shape: [64, 64], kind: param}
  w2: {shape: [64, 64], kind: param}
ops:
  - {name: mm1, op: matmul, inputs: [x, w1], output: h1, strategy: [[1, 1], [1, 4]]}
  - {name: mm2, op: matmul, inputs: [x, w2], output: h2, strategy: [[1, 1], [1, 4]]}
  - {name: sum, op: add, inputs: [h1, h2], output: y}
outputs: [y]
"""


@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_two_readers_of_one_layout_share_one_redistribution(search):
    """x is stored batch-sharded and both matmuls read it replicated: one AllGather serves both."""
    p = plan(SHARED, search=search)
    (gather,) = [r for r in p.redistributions if r.tensor == "x"]
    assert gather.readers == ("mm1", "mm2") and [s.kind for s in gather.steps] == ["AllGather"]
    assert gather.bytes_per_device == 3 * (32 * 64 * 4) // 4  # (p-1)/p of x, once
    r = simulate(p)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device == p.totals.comm_bytes_per_device
    # the objective counts the shared copy once: compute + every redistribution of the program
    recomputed = p.program.compute_time_s() + p.program.comm_time_s()
    assert p.totals.objective == pytest.approx(recomputed, rel=1e-12)


def test_training_memory_counts_gradient_adam_moments_and_an_f32_master_copy_for_bf16():
    text = """
name: mem
mesh: {d: 2}
tensors:
  x: {shape: [8, 64], dtype: bf16, kind: input, sharding: '[{"d"}, {}]'}
  w: {shape: [64, 64], dtype: bf16, kind: param, sharding: '[{}, {}]'}
ops:
  - {name: mm, op: matmul, inputs: [x, w], output: y}
outputs: [y]
"""
    def weight_bytes(p):
        m, choice = p.decision.model, p.decision.choice
        i = m.source_index["w"]
        return m.problem.nodes[i].memory[choice[i]]

    # the replicated bf16 weight itself (2 B per element), and with training its gradient (2 B),
    # two f32 Adam moments (8 B) and an f32 master copy (4 B)
    assert weight_bytes(plan(text)) == 64 * 64 * 2
    assert weight_bytes(plan(text, training=True)) == 64 * 64 * (2 + 2 + 8 + 4)
