"""Seed 004's worked examples on the real machinery: device-variance types, pbroadcast, efficient transposes.

Each example is the seed's ``shmap`` written as a manual region of a model (the seed's code is the comment
above it), planned with ``--training`` (:func:`planner.api.plan`: the program of
:mod:`planner.partitioning.program`, forward then transposed backward, type-checked), and run on the numpy
device simulator, which checks every output and gradient against the global computation and measures the
bytes each device receives. The seed's transposes are read off the program: the backward instruction of each
body collective, and the redistributions that take pending cotangents home (the psum that transposes an
implicit pbroadcast). Expected bytes follow the ring formulas: an AllReduce of ``n`` f32 on ``p`` devices
receives ``2(p-1) ceil(n/p)`` floats, a ReduceScatter ``(p-1)`` output pieces.

The mesh of every example is one axis ``i`` of 8 devices (the seed's ``/ 8``). The seed's "old" transposes
(without variance types) and ``all_gather_invariant``/``pscatter`` (example 4), which manual regions do not
offer, are checked on the registry (:mod:`planner.collectives`) at the end.
"""

import numpy as np
import pytest

from graphs import load_model_text
from planner.api import plan
from planner.collectives import primitive, result_variance, run_kernel, step_kind, transpose_of
from planner.errors import VarianceError
from planner.partitioning import Backprop
from planner.model.manual import manual_variance
from planner.simulation.collectives import Network
from planner.simulation.run import simulate


def _model(name, tensors, inputs, in_shardings, outputs, out_shardings, ops, mesh="{i: 8}", manual="i"):
    """A model whose body is one manual region over ``manual`` (the seed's shmap)."""
    lines = [f"name: {name}", f"mesh: {mesh}", "tensors:"]
    lines += [f"  {t}: {spec}" for t, spec in tensors.items()]
    lines += ["regions:", f"  - name: {name}", f"    manual_axes: [{manual}]", f"    inputs: [{', '.join(inputs)}]",
              f"    in_shardings: [{', '.join(repr(s) for s in in_shardings)}]", f"    outputs: [{', '.join(outputs)}]",
              f"    out_shardings: [{', '.join(repr(s) for s in out_shardings)}]", "    ops:"]
    lines += [f"      - {op}" for op in ops]
    lines += [f"outputs: [{', '.join(outputs)}]"]
    return load_model_text("\n".join(lines) + "\n")


def _trained(graph):
    """The training plan of ``graph``, simulated exactly: outputs and gradients right, bytes as predicted."""
    p = plan(graph, training=True)
    r = simulate(p)
    assert r.ok, (r.outputs, r.gradients)
    for phase in r.phases.values():
        assert phase["measured_comm_bytes_per_device"] == phase["predicted_comm_bytes_per_device"]
    return p, r


def _backprop(p, op):
    [b] = [i for i in p.program.instructions if isinstance(i, Backprop) and i.op.name.endswith("/" + op)]
    return b


def _backward_kinds(p):
    """Every communicating step of the backward: redistributions' steps and body collectives' transposes."""
    program = p.program
    kinds = [st.kind for red in program.redistributions("backward") for st in red.steps if st.kind != "Slice"]
    kinds += [st.kind for red in program.redistributions("gradient") for st in red.steps if st.kind != "Slice"]
    return sorted(kinds + [c.kind for c in program.op_collectives("backward")])


def _types(graph):
    """Body tensor (without its region's prefix) -> the manual axes it varies over, as the seed writes them."""
    return {t.split("/", 1)[1]: "{" + ",".join(sorted(v)) + "}" for t, v in manual_variance(graph).items()}


# ---------------------------------------------------------------------------
# Example 1: psum to an unmapped output
# ---------------------------------------------------------------------------
# f1 = shmap(lambda x: psum(g(x), 'i'), in_specs=P('i'), out_specs=P())
# def f1(x: f32[3,4]{i}):
#   w:f32[]{i} = g(x)
#   y:f32[]{} = psum(w, 'i')
#   return y
def example1():
    return _model("example1", {"x": "{shape: [24, 4], kind: param}"}, ["x"], ['[{"i"}, {}]'], ["y"], ["[]"], [
        "{name: g, op: sum, inputs: [x], output: w}",
        "{name: psum, op: psum, axes: [i], inputs: [w], output: y}",
    ])


def test_example1_intermediates_have_the_seeds_types():
    assert {t: v for t, v in _types(example1()).items() if t in ("x", "w", "y")} == {"x": "{i}", "w": "{i}",
                                                                                      "y": "{}"}


def test_example1_transposes_to_pbroadcast_without_communication():
    # t(f1) = shmap(lambda ybar: t(g)(pbroadcast(ybar, 'i')), in_specs=P(), out_specs=P('i'))
    p, r = _trained(example1())
    assert _backprop(p, "psum").collectives == ()  # psum -> pbroadcast: a no-op
    assert _backward_kinds(p) == [] and r.phases["backward"]["measured_comm_bytes_per_device"] == 0
    # forward: the psum of one f32 on 8 devices, padded to one element per chunk: 2 * 7 * 4 B
    assert r.phases["forward"]["measured_comm_bytes_per_device"] == 2 * 7 * 4


# ---------------------------------------------------------------------------
# Example 2: psum to a mapped output
# ---------------------------------------------------------------------------
# f2 = shmap(lambda x, y: psum(g(x), 'i') * y, in_specs=(P('i'), P('i')), out_specs=P('i'))
# rewritten with explicit pbroadcast: lambda x, y: pbroadcast(psum(g(x), 'i'), 'i') * y
# (g sums x:f32[3,4] over its rows, so that it multiplies y:f32[4])
def example2(explicit=False):
    ops = ["{name: g, op: sum, axes: [0], inputs: [x], output: w}",
           "{name: psum, op: psum, axes: [i], inputs: [w], output: s}"]
    if explicit:
        ops += ["{name: pbroadcast, op: pbroadcast, axes: [i], inputs: [s], output: b}",
                "{name: mul, op: mul, inputs: [b, y], output: z}"]
    else:
        ops += ["{name: mul, op: mul, inputs: [s, y], output: z}"]
    return _model("example2", {"x": "{shape: [24, 4], kind: param}", "y": "{shape: [32]}"}, ["x", "y"],
                  ['[{"i"}, {}]', '[{"i"}]'], ["z"], ['[{"i"}]'], ops)


@pytest.mark.parametrize("explicit", [False, True], ids=["implicit", "explicit"])
def test_example2_transposes_to_psum_then_pbroadcast(explicit):
    # t(f2, 0) = shmap(lambda y, zbar: t(g)(pbroadcast(psum(zbar * y, 'i'), 'i')), ...)
    p, r = _trained(example2(explicit))
    assert _backprop(p, "psum").collectives == ()  # the psum's own transpose: pbroadcast
    # the pbroadcast's (implicit or written) transpose: one AllReduce of the f32[4] cotangent of s,
    # 2 * 7 chunks of ceil(4 / 8) = 1 float
    assert _backward_kinds(p) == ["AllReduce"]
    assert r.phases["backward"]["measured_comm_bytes_per_device"] == 2 * 7 * 1 * 4


def test_example2_types_the_product_varying():
    assert {t: v for t, v in _types(example2()).items() if t in ("w", "s", "z")} == {"w": "{i}", "s": "{}",
                                                                                      "z": "{i}"}


# ---------------------------------------------------------------------------
# Example 3: the cursed identity
# ---------------------------------------------------------------------------
# cursed_identity = shmap(lambda x: x, P(), P())
# t(cursed_identity) = shmap(lambda x: x, P(), P()); t(t(cursed_identity)) = shmap(lambda x: x, P(), P())
# (the body's identity is a cast to the value's own dtype, which computes nothing)
def test_cursed_identity_transposes_without_communication():
    graph = _model("cursed_identity", {"x": "{shape: [8], kind: param}"}, ["x"], ["[{}]"], ["y"], ["[{}]"],
                   ["{name: id, op: cast, dtype: f32, inputs: [x], output: y}"])
    assert _types(graph)["y"] == "{}"
    p, r = _trained(graph)
    assert p.program.collective_counts() == {}
    assert all(phase["measured_comm_bytes_per_device"] == 0 for phase in r.phases.values())


# ---------------------------------------------------------------------------
# Example 4: all_gather to an unmapped output
# ---------------------------------------------------------------------------
# f4 = shmap(lambda x: all_gather(x, 'i'), P('i'), P()): all_gather's result varies over 'i', so the
# replication check (now the variance type) refuses it
def test_example4_with_all_gather_is_refused_by_its_type():
    graph = _model("example4", {"x": "{shape: [8]}"}, ["x"], ['[{"i"}]'], ["y"], ["[{}]"],
                   ["{name: gather, op: all_gather, axes: [i], dim: 0, inputs: [x], output: y}"])
    with pytest.raises(VarianceError, match=r"output 'y' of region 'example4' varies over i but its out-sharding "
                                            r"replicates it"):
        plan(graph)


# f4_better = shmap(lambda x: x, P('i'), P('i'))
def test_example4_better_is_an_identity_with_mapped_output_and_no_communication():
    graph = _model("example4_better", {"x": "{shape: [8], kind: param}"}, ["x"], ['[{"i"}]'], ["y"], ['[{"i"}]'],
                   ["{name: id, op: cast, dtype: f32, inputs: [x], output: y}"])
    p, r = _trained(graph)
    assert p.program.collective_counts() == {}


# ---------------------------------------------------------------------------
# Example 5: all_gather to a mapped output
# ---------------------------------------------------------------------------
# f5 = shmap(lambda x, y: all_gather(x, 'i') * y, in_specs=(P('i'), P('i')), out_specs=P('i'))
# def f5(x:f32[1]{i}, y:f32[8]{i}):
#   z:f32[8]{i} = all_gather(x, 'i')
#   w:f32[8]{i} = z * y
# def f5_transpose(y:f32[8]{i}, wbar:f32[8]{i}):
#   zbar:f32[8]{i} = wbar * y
#   xbar:f32[1]{i} = psum_scatter(zbar, 'i')
def example5():
    return _model("example5", {"x": "{shape: [8], kind: param}", "y": "{shape: [64]}"}, ["x", "y"],
                  ['[{"i"}]', '[{"i"}]'], ["w"], ['[{"i"}]'], [
                      "{name: gather, op: all_gather, axes: [i], dim: 0, inputs: [x], output: z}",
                      "{name: mul, op: mul, inputs: [z, y], output: w}"])


def test_example5_has_the_seeds_types_and_transposes_to_psum_scatter():
    assert {t: v for t, v in _types(example5()).items() if t in ("x", "y", "z", "w")} == {
        "x": "{i}", "y": "{i}", "z": "{i}", "w": "{i}"}
    p, r = _trained(example5())
    (back,) = _backprop(p, "gather").collectives
    assert (back.primitive, back.kind) == ("psum_scatter", "ReduceScatter")
    assert _backward_kinds(p) == ["ReduceScatter"]
    # a ring reduce-scatter of zbar:f32[8] into xbar:f32[1]: 7 steps of one 4-byte piece
    assert r.phases["backward"]["measured_comm_bytes_per_device"] == 7 * 4


# ---------------------------------------------------------------------------
# The motivating loss: batch data parallel with a replicated parameter
# ---------------------------------------------------------------------------
# @partial(shmap, mesh=Mesh(devices, ('batch',)),
#          in_specs=(P(None, None), P('batch', None)), out_specs=P())
# def loss(params, batch):
#   inputs, targets = batch
#   predictions = predict(params, inputs)
#   local_loss = jnp.mean(jnp.sum(predictions - targets, -1))
#   global_loss = lax.pmean(local_loss, 'batch'))
#   return global_loss
# (batch is passed as its two arrays; predict is a matmul; the mesh axis is called i)
D, K, LOCAL_B = 5, 3, 4  # params f32[5,3]; each of the 8 devices holds 4 rows of the batch


def loss_model():
    return _model("loss", {"params": f"{{shape: [{D}, {K}], kind: param}}", "inputs": f"{{shape: [{8 * LOCAL_B}, {D}]}}",
                           "targets": f"{{shape: [{8 * LOCAL_B}, {K}]}}"},
                  ["params", "inputs", "targets"], ["[{}, {}]", '[{"i"}, {}]', '[{"i"}, {}]'], ["global_loss"], ["[]"], [
                      "{name: predict, op: matmul, inputs: [inputs, params], output: predictions}",
                      "{name: diff, op: sub, inputs: [predictions, targets], output: d}",
                      "{name: rowsum, op: sum, axes: [-1], inputs: [d], output: s}",
                      "{name: mean, op: mean, inputs: [s], output: local_loss}",
                      "{name: pmean, op: pmean, axes: [i], inputs: [local_loss], output: global_loss}"])


def test_loss_gradient_has_one_all_reduce_from_pbroadcasts_transpose():
    p, r = _trained(loss_model())
    assert _backprop(p, "pmean").collectives == ()  # pmean -> pbroadcast / 8: no communication
    # the one reduction: the parameter gradient, pending over i (params was pbroadcast by the matmul);
    # an AllReduce of 15 floats on 8 devices: 2 * 7 chunks of ceil(15 / 8) = 2 floats
    assert _backward_kinds(p) == ["AllReduce"]
    assert r.phases["backward"]["measured_comm_bytes_per_device"] + r.phases["gradient"][
        "measured_comm_bytes_per_device"] == 2 * 7 * 2 * 4
    # forward: the pmean of the scalar loss, 2 * 7 chunks of one float
    assert r.phases["forward"]["measured_comm_bytes_per_device"] == 2 * 7 * 4


# ---------------------------------------------------------------------------
# The other collectives, trained and checked against the global gradients
# ---------------------------------------------------------------------------
def test_all_to_all_transposes_with_its_dims_swapped():
    # shmap(lambda x: all_to_all(x, 'i', 0, 1), P('i'), P(None, 'i'))
    graph = _model("all_to_all", {"x": "{shape: [64, 2], kind: param}"}, ["x"], ['[{"i"}, {}]'], ["y"],
                   ['[{}, {"i"}]'], ["{name: a2a, op: all_to_all, axes: [i], split_dim: 0, concat_dim: 1, "
                                    "inputs: [x], output: y}"])
    p, r = _trained(graph)
    (back,) = _backprop(p, "a2a").collectives
    assert (back.primitive, back.kind) == ("all_to_all", "AllToAll")
    # the local f32[8,2] cut into 8 chunks of 2 floats, 7 of them received, each way
    assert r.phases["forward"]["measured_comm_bytes_per_device"] == r.phases["backward"][
        "measured_comm_bytes_per_device"] == 7 * 2 * 4


def test_ppermute_transposes_to_the_inverse_permutation():
    # shmap(lambda x: ppermute(x, 'i', [(k, k+1 mod 8)]), P('i'), P('i'))
    shift = ", ".join(f"[{k}, {(k + 1) % 8}]" for k in range(8))
    graph = _model("ppermute", {"x": "{shape: [16], kind: param}"}, ["x"], ['[{"i"}]'], ["y"], ['[{"i"}]'],
                   [f"{{name: shift, op: ppermute, axes: [i], perm: [{shift}], inputs: [x], output: y}}"])
    p, r = _trained(graph)
    (back,) = _backprop(p, "shift").collectives
    assert (back.primitive, back.kind) == ("ppermute", "CollectivePermute")
    assert r.phases["backward"]["measured_comm_bytes_per_device"] == 2 * 4  # one f32[2] block


def test_two_axes_psum_then_all_gather_transpose_to_psum_scatter_then_pbroadcast():
    # shmap(lambda x, y: all_gather(psum(x, 'i'), 'j') * y, (P(('i', 'j')), P('j')), P('j')), mesh {i: 4, j: 2}
    graph = _model("two_axes", {"x": "{shape: [16], kind: param}", "y": "{shape: [8]}"}, ["x", "y"],
                   ['[{"i", "j"}]', '[{"j"}]'], ["w"], ['[{"j"}]'], [
                       "{name: psum, op: psum, axes: [i], inputs: [x], output: s}",
                       "{name: gather, op: all_gather, axes: [j], dim: 0, inputs: [s], output: g}",
                       "{name: mul, op: mul, inputs: [g, y], output: w}"], mesh="{i: 4, j: 2}", manual="i, j")
    assert {t: v for t, v in _types(graph).items() if t in ("x", "s", "g", "w")} == {
        "x": "{i,j}", "s": "{j}", "g": "{j}", "w": "{j}"}
    p, r = _trained(graph)
    assert _backprop(p, "psum").collectives == ()
    (back,) = _backprop(p, "gather").collectives
    assert (back.primitive, back.kind, back.axis_names()) == ("psum_scatter", "ReduceScatter", ("j",))
    # a reduce-scatter of the f32[4] cotangent of g over j = 2 into pieces of 2 floats: one round of 8 B
    assert _backward_kinds(p) == ["ReduceScatter"]
    assert r.phases["backward"]["measured_comm_bytes_per_device"] == 1 * 2 * 4


def test_mapped_invariant_output_transposes_to_a_psum():
    # shmap(lambda x: x * 3, P(), P('i')): each device returns the same block to a mapped output, so the
    # cotangent blocks, which differ, are summed: the psum that transposes the pbroadcast of x
    graph = _model("mapped_invariant", {"x": "{shape: [2], kind: param}", "three": "{shape: [16]}"},
                   ["x", "three"], ["[{}]", '[{"i"}]'], ["y"], ['[{"i"}]'],
                   ["{name: scale, op: mul, inputs: [x, three], output: y}"])
    p, r = _trained(graph)
    assert _backward_kinds(p) == ["AllReduce"]


# ---------------------------------------------------------------------------
# On the registry: example 4's all_gather_invariant and pscatter, and the "old" transposes
# ---------------------------------------------------------------------------
def test_example4_with_all_gather_invariant_has_the_seeds_types_and_transposes_to_pscatter():
    # f4 = shmap(lambda x: all_gather_invariant(x, 'i'), P('i'), P())
    # def f4(x:f32[1]{i}):
    #   y:f32[8]{} = all_gather_invariant(x, 'i')
    # def f4_transpose(ybar:f32[8]):
    #   xbar:f32[1]{i} = pscatter(ybar, 'i')
    assert result_variance("all_gather_invariant", {"i"}, "i") == frozenset()
    assert transpose_of("all_gather_invariant").name == "pscatter"
    assert result_variance("pscatter", set(), "i") == {"i"}
    assert not primitive("pscatter").communicates  # a local slice
    ybar = np.arange(8.0)
    net = Network(8)
    xbar = run_kernel("pscatter", net, np.arange(8), [ybar] * 8, {"axes": ("i",), "dim": 0})
    assert [x.tolist() for x in xbar] == [[k] for k in range(8)] and net.bytes_per_device == 0
    # forward: one ring all-gather of a 4-byte piece: 7 rounds
    assert step_kind(primitive("all_gather_invariant").lowering).received(8, 4) == 7 * 4


def test_the_old_transposes_communicate_what_the_seed_says():
    # without variance types, psum transposed to psum (example 1's t(f1) = ... psum(ybar / 8, 'i')): one
    # all-reduce of a scalar, 2 * 7 * 4 B, where pbroadcast moves nothing; all_gather transposed to
    # psum_scatter also for an unmapped output (example 4's t(f4) = psum_scatter(ybar / 8, 'i')): 7 * 4 B,
    # where pscatter moves nothing
    assert step_kind(primitive("psum").lowering).received(8, 4) == 2 * 7 * 4
    assert not transpose_of("psum").communicates
    assert step_kind(primitive("psum_scatter").lowering).received(8, 4) == 7 * 4
    assert not transpose_of("all_gather_invariant").communicates
