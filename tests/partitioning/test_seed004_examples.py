"""Seed 004's worked examples, executable: device-variance types, pbroadcast, efficient transposes.

Each example carries the seed's code as a comment. Expected programs are written
the way the seed writes them (traced from the same lambdas) and compared modulo
variable names (:func:`canonical`); expected numbers are derived by hand or from
the defining property of a transpose, ``<t(f)(ybar), x> == <ybar, f(x)>``.

The mesh of every example is one axis ``i`` of 8 devices (the seed's ``/ 8``).
The transposed program takes the non-linear inputs first, then one cotangent
per output (the seed's ``t(f2, 0) = shmap(lambda y, zbar: ...)``), so
``t(t(f2, 0), 1)`` is ``f2`` with its arguments in the order ``(y, x)``.
"""

from collections import Counter

import numpy as np
import pytest

from planner.errors import RuleError, VarianceError
from planner.partitioning.shmap import (
    P, all_gather, all_gather_invariant, all_to_all, axis_index, broadcast, canonical, collectives,
    comm_bytes_per_device, dot, insert_pbroadcasts, linearize, mean, pbroadcast, pmean, ppermute, pscatter, psum,
    psum_scatter, reduce_sum, run, shmap, transpose, typecheck,
)

MESH = {"i": 8}


def g(x):  # the seed's g in example 1: w:f32[]{i} = g(x:f32[3,4]{i})
    return reduce_sum(x, (0, 1))


def t_g(wbar):  # its transpose: a sum transposes to a broadcast
    return broadcast(wbar, (3, 4))


def g2(x):  # example 2's g: f32[3,4] -> f32[4], so that it multiplies y:f32[4]
    return reduce_sum(x, 0)


def t_g2(wbar):
    return broadcast(wbar, (3, 4), dims=(1,))


def prims(f):
    return [e.prim for e in f.body.eqns]


def same(a, b):
    return canonical(a) == canonical(b)


# ---------------------------------------------------------------------------
# Example 1: psum to an unmapped output
# ---------------------------------------------------------------------------
# f1 = shmap(lambda x: psum(g(x), 'i'), in_specs=P('i'), out_specs=P())
f1 = shmap(lambda x: psum(g(x), "i"), P("i"), P(), mesh=MESH, in_types=["f32[3,4]"])


def test_example1_intermediates_have_the_seeds_types():
    # def f1(x: f32[3,4]{i}):
    #   w:f32[]{i} = g(x)
    #   y:f32[]{} = psum(w, 'i')
    (x,), (w, y) = f1.body.inputs, [e.outputs[0] for e in f1.body.eqns]
    assert (str(x.type), str(w.type), str(y.type)) == ("f32[3,4]{i}", "f32[]{i}", "f32[]")


def test_example1_transposes_to_pbroadcast_then_t_g_without_communication():
    # t(f1) = shmap(lambda ybar: t(g)(pbroadcast(ybar, 'i')), in_specs=P(), out_specs=P('i'))
    expected = shmap(lambda ybar: t_g(pbroadcast(ybar, "i")), P(), P("i"), mesh=MESH, in_types=["f32[]"])
    t = transpose(f1, (0,))
    assert same(t, expected)
    assert (t.in_specs, t.out_specs) == ((P(),), (P("i"),))
    assert collectives(t) == Counter() and comm_bytes_per_device(t) == 0


def test_example1_transposed_twice_is_f1():
    # "t(t(f1)) == f1. Efficiency achieved!"
    assert same(transpose(transpose(f1, (0,)), (0,)), f1)


def test_example1_old_transpose_divides_by_8_and_psums():
    # t(f1) = shmap(lambda ybar: t(g)(psum(ybar / 8, 'i')), in_specs=P(), out_specs=P('i'))
    expected = shmap(lambda ybar: t_g(psum(ybar / 8, "i")), P(), P("i"), mesh=MESH, in_types=["f32[]"],
                     check_variance=False)
    t = transpose(f1, (0,), variance=False)
    assert same(t, expected)
    # one all-reduce of a scalar: 2*(8-1) chunks, each padded to one 4-byte float
    assert collectives(t) == Counter({"AllReduce": 1}) and comm_bytes_per_device(t) == 2 * 7 * 4


# ---------------------------------------------------------------------------
# Example 2: psum to a mapped output
# ---------------------------------------------------------------------------
# f2 = shmap(lambda x, y: psum(g(x), 'i') * y, in_specs=(P('i'), P('i')), out_specs=P('i'))
f2 = shmap(lambda x, y: psum(g2(x), "i") * y, (P("i"), P("i")), P("i"), mesh=MESH, in_types=["f32[3,4]", "f32[4]"])


def test_example2_gets_the_pbroadcast_the_seed_writes_explicitly():
    # f2 = shmap(lambda x, y: pbroadcast(psum(g(x), 'i'), 'i') * y, in_specs=(P('i'), P('i')), out_specs=P('i'))
    explicit = shmap(lambda x, y: pbroadcast(psum(g2(x), "i"), "i") * y, (P("i"), P("i")), P("i"), mesh=MESH,
                     in_types=["f32[3,4]", "f32[4]"], auto_pbroadcast=False)
    assert same(f2, explicit)


def test_example2_transposes_to_psum_then_pbroadcast():
    # t(f2, 0) = shmap(lambda y, zbar: t(g)(pbroadcast(psum(zbar * y, 'i'), 'i')),
    #                  in_specs=(P('i'), P('i')), out_specs=P('i'))
    expected = shmap(lambda y, zbar: t_g2(pbroadcast(psum(zbar * y, "i"), "i")), (P("i"), P("i")), P("i"),
                     mesh=MESH, in_types=["f32[4]", "f32[4]"])
    t = transpose(f2, (0,))
    assert same(t, expected)
    assert collectives(t) == Counter({"AllReduce": 1})


def test_example2_old_transpose_was_already_efficient():
    # t(f2, 0) = shmap(lambda y, zbar: t(g)(psum(zbar * y, 'i')), in_specs=(P('i'), P('i')), out_specs=P('i'))
    expected = shmap(lambda y, zbar: t_g2(psum(zbar * y, "i")), (P("i"), P("i")), P("i"), mesh=MESH,
                     in_types=["f32[4]", "f32[4]"], check_variance=False)
    assert same(transpose(f2, (0,), variance=False), expected)


def test_example2_transposed_twice_is_f2_with_y_first():
    f2_yx = shmap(lambda y, x: psum(g2(x), "i") * y, (P("i"), P("i")), P("i"), mesh=MESH,
                  in_types=["f32[4]", "f32[3,4]"])
    assert same(transpose(transpose(f2, (0,)), (1,)), f2_yx)


# ---------------------------------------------------------------------------
# Example 3: the cursed identity
# ---------------------------------------------------------------------------
# cursed_identity = shmap(lambda x: x, P(), P())
cursed_identity = shmap(lambda x: x, P(), P(), mesh=MESH, in_types=["f32[8]"])


def test_cursed_identity_transposes_to_itself_with_an_empty_body():
    # t(cursed_identity) = shmap(lambda x: x, P(), P())
    # t(t(cursed_identity)) = shmap(lambda x: x, P(), P())
    t = transpose(cursed_identity, (0,))
    tt = transpose(t, (0,))
    assert same(t, cursed_identity) and same(tt, cursed_identity)
    assert prims(t) == prims(tt) == []


def test_cursed_identity_old_transposes_grow():
    # t(cursed_identity) = shmap(lambda x: psum(x / 8, 'i'), P(), P())
    # t(t(cursed_identity)) = shmap(lambda x: psum(psum(x / 8 / 8, 'i'), 'i')), P(), P())
    t = transpose(cursed_identity, (0,), variance=False)
    expected = shmap(lambda x: psum(x / 8, "i"), P(), P(), mesh=MESH, in_types=["f32[8]"], check_variance=False)
    assert same(t, expected)
    tt = transpose(t, (0,), variance=False)
    # Ours divides after the inner psum: psum(psum(x / 8) / 8). The seed's psum(psum(x / 8 / 8)) is the same
    # function with the scalar division moved through the (linear) psum; we do not simplify.
    grown = shmap(lambda x: psum(psum(x / 8, "i") / 8, "i"), P(), P(), mesh=MESH, in_types=["f32[8]"],
                  check_variance=False)
    assert same(tt, grown)
    ttt = transpose(tt, (0,), variance=False)
    assert [len(prims(p)) for p in (t, tt, ttt)] == [2, 4, 6]
    assert [collectives(p)["AllReduce"] for p in (t, tt, ttt)] == [1, 2, 3]
    x = np.arange(8.0)
    for p in (t, tt, ttt):  # the numbers stay right: the identity, however wastefully
        np.testing.assert_allclose(run(p, x)[0], x, rtol=1e-15)


# ---------------------------------------------------------------------------
# Example 4: all_gather to an unmapped output
# ---------------------------------------------------------------------------
# f4 = shmap(lambda x: all_gather_invariant(x, 'i'), P('i'), P())
f4 = shmap(lambda x: all_gather_invariant(x, "i"), P("i"), P(), mesh=MESH, in_types=["f32[1]"])


def test_example4_with_all_gather_fails_the_replication_check():
    # f4 = shmap(lambda x: all_gather(x, 'i'), P('i'), P()): all_gather's result varies over 'i'
    with pytest.raises(VarianceError, match=r"output 0: a:f32\[8\]\{i\} varies over 'i', but out_specs P\(\) does "
                                            r"not name 'i'"):
        shmap(lambda x: all_gather(x, "i"), P("i"), P(), mesh=MESH, in_types=["f32[1]"])


def test_example4_has_the_seeds_types_and_transposes_to_pscatter():
    # def f4(x:f32[1]{i}):
    #   y:f32[8]{} = all_gather_invariant(x, 'i')
    # def f4_transpose(ybar:f32[8]):
    #   xbar:f32[1]{i} = pscatter(ybar, 'i')
    assert [str(v.type) for v in f4.body.inputs + f4.body.outputs] == ["f32[1]{i}", "f32[8]"]
    t = transpose(f4, (0,))
    expected = shmap(lambda ybar: pscatter(ybar, "i"), P(), P("i"), mesh=MESH, in_types=["f32[8]"])
    assert same(t, expected)
    assert str(t.body.outputs[0].type) == "f32[1]{i}"
    assert collectives(t) == Counter() and comm_bytes_per_device(t) == 0  # a local slice
    assert same(transpose(t, (0,)), f4)


def test_example4_old_transpose_is_a_psum_scatter_of_a_divided_cotangent():
    # t(f4) = shmap(lambda ybar: psum_scatter(ybar / 8, 'i'), P(), P('i'))
    f4_old = shmap(lambda x: all_gather(x, "i"), P("i"), P(), mesh=MESH, in_types=["f32[1]"], check_variance=False)
    expected = shmap(lambda ybar: psum_scatter(ybar / 8, "i"), P(), P("i"), mesh=MESH, in_types=["f32[8]"],
                     check_variance=False)
    assert same(transpose(f4_old, (0,), variance=False), expected)
    assert same(transpose(f4, (0,), variance=False), expected)
    # a ring reduce-scatter: 7 steps of one 4-byte output piece
    assert comm_bytes_per_device(expected) == 7 * 4


def test_example4_better_is_an_identity_with_mapped_output():
    # f4_better = shmap(lambda x: x, P('i'), P('i'))
    f4_better = shmap(lambda x: x, P("i"), P("i"), mesh=MESH, in_types=["f32[1]"])
    x = np.arange(8.0)
    np.testing.assert_array_equal(run(f4_better, x)[0], run(f4, x)[0])
    assert prims(transpose(f4_better, (0,))) == []


# ---------------------------------------------------------------------------
# Example 5: all_gather to a mapped output
# ---------------------------------------------------------------------------
# f5 = shmap(lambda x, y: all_gather(x, 'i') * y, in_specs=(P('i'), P('i')), out_specs=P('i'))
f5 = shmap(lambda x, y: all_gather(x, "i") * y, (P("i"), P("i")), P("i"), mesh=MESH, in_types=["f32[1]", "f32[8]"])


def test_example5_has_the_seeds_types_and_transposes_to_psum_scatter():
    # def f5(x:f32[1]{i}, y:f32[8]{i}):
    #   z:f32[8]{i} = all_gather(x, 'i')
    #   w:f32[8]{i} = z * y
    # def f5_transpose(y:f32[8]{i}, wbar:f32[8]{i}):
    #   zbar:f32[8]{i} = wbar * y
    #   xbar:f32[1]{i} = psum_scatter(zbar, 'i')
    assert [str(e.outputs[0].type) for e in f5.body.eqns] == ["f32[8]{i}", "f32[8]{i}"]
    expected = shmap(lambda y, wbar: psum_scatter(wbar * y, "i"), (P("i"), P("i")), P("i"), mesh=MESH,
                     in_types=["f32[8]", "f32[8]"])
    assert same(transpose(f5, (0,)), expected)
    assert collectives(transpose(f5, (0,))) == Counter({"ReduceScatter": 1})


def test_example5_transposed_twice_is_f5_with_y_first():
    f5_yx = shmap(lambda y, x: all_gather(x, "i") * y, (P("i"), P("i")), P("i"), mesh=MESH,
                  in_types=["f32[8]", "f32[1]"])
    assert same(transpose(transpose(f5, (0,)), (1,)), f5_yx)


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
# (batch is passed as its two arrays; predict is a matmul.)
D, K, LOCAL_B = 5, 3, 4  # params f32[5,3]; each of the 8 devices holds 4 rows of the batch


def loss_body(params, inputs, targets):
    predictions = dot(inputs, params)
    local_loss = mean(reduce_sum(predictions - targets, -1))
    return pmean(local_loss, "batch")


loss = shmap(loss_body, (P(None, None), P("batch", None), P("batch", None)), P(), mesh={"batch": 8},
             in_types=[f"f32[{D},{K}]", f"f32[{LOCAL_B},{D}]", f"f32[{LOCAL_B},{K}]"])
# d loss / d params: linearize with respect to params, transpose with respect to the tangent (input 3)
grad_loss = transpose(linearize(loss, (0,)), (3,))
grad_loss_old = transpose(linearize(loss, (0,)), (3,), variance=False)


def _batch():
    rng = np.random.default_rng(4)
    return rng.standard_normal((D, K)), rng.standard_normal((8 * LOCAL_B, D)), rng.standard_normal((8 * LOCAL_B, K))


def test_loss_runs_as_the_global_computation():
    params, inputs, targets = _batch()
    # mean over each device's rows of the row sums, averaged over devices = mean over all rows
    expected = np.mean(np.sum(inputs @ params - targets, -1))
    assert run(loss, params, inputs, targets)[0] == pytest.approx(expected, rel=1e-12)


def test_loss_gradient_by_transposition_is_the_hand_derived_one():
    params, inputs, targets = _batch()
    # loss = (1/B) sum_n sum_k (sum_j X[n,j] W[j,k] - T[n,k]) over the B = 32 global rows, so
    # d loss / d W[j,k] = (1/B) sum_n X[n,j]: the column means of the inputs, the same for every k.
    by_hand = np.repeat(inputs.mean(axis=0)[:, None], K, axis=1)
    for program in (grad_loss, grad_loss_old):
        (grad,) = run(program, params, inputs, targets, 1.0)
        np.testing.assert_allclose(grad, by_hand, rtol=1e-12, atol=1e-15)


def test_loss_gradient_matches_central_differences():
    params, inputs, targets = _batch()
    (grad,) = run(grad_loss, params, inputs, targets, 1.0)
    h, numeric = 1e-3, np.zeros_like(params)
    for j, k in np.ndindex(params.shape):
        step = np.zeros_like(params)
        step[j, k] = h
        numeric[j, k] = (run(loss, params + step, inputs, targets)[0]
                         - run(loss, params - step, inputs, targets)[0]) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=1e-9)  # the loss is affine in params: exact up to rounding


def test_efficient_backward_has_one_all_reduce_from_pbroadcasts_transpose():
    assert collectives(grad_loss) == Counter({"AllReduce": 1})
    (reduce,) = [e for e in grad_loss.body.eqns if e.prim == "psum"]
    assert str(reduce.outputs[0].type) == f"f32[{D},{K}]"  # the parameter gradient, summed once
    assert str(grad_loss.body.outputs[0].type) == f"f32[{D},{K}]"  # invariant: fits out_specs P(None, None)


def test_old_backward_communicates_more():
    assert collectives(grad_loss_old) == Counter({"AllReduce": 2})
    # efficient: an all-reduce of the 15-float gradient on 8 devices: 2*(8-1) chunks of ceil(15/8)=2 floats.
    # old: the same, plus an all-reduce of the scalar loss cotangent: 2*(8-1) chunks of 1 float.
    assert comm_bytes_per_device(grad_loss) == 2 * 7 * 2 * 4
    assert comm_bytes_per_device(grad_loss_old) == 2 * 7 * 2 * 4 + 2 * 7 * 1 * 4


# ---------------------------------------------------------------------------
# The defining property of a transpose, on 8 devices, in float64
# ---------------------------------------------------------------------------
SHIFT = [(k, (k + 1) % 8) for k in range(8)]

f_permute = shmap(lambda x: ppermute(x, "i", SHIFT) * broadcast(axis_index("i"), (2,)), P("i"), P("i"), mesh=MESH,
                  in_types=["f32[2]"])
f_all_to_all = shmap(lambda x: all_to_all(x, "i", 0, 1), P("i"), P(None, "i"), mesh=MESH, in_types=["f32[8,2]"])
f_two_axes = shmap(lambda x, y: all_gather(psum(x, "i"), "j") * y, (P(("i", "j")), P("j")), P("j"),
                   mesh={"i": 4, "j": 2}, in_types=["f32[2]", "f32[4]"])
f_mapped_invariant = shmap(lambda x: x * 3.0, P(), P("i"), mesh=MESH, in_types=["f32[2]"])

CASES = {
    "example1": (f1, (0,)), "example2": (f2, (0,)), "example3": (cursed_identity, (0,)), "example4": (f4, (0,)),
    "example5": (f5, (0,)), "loss": (linearize(loss, (0,)), (3,)),
    "t_example1": (transpose(f1, (0,)), (0,)), "t_example2": (transpose(f2, (0,)), (1,)),
    "t_example4": (transpose(f4, (0,)), (0,)), "t_example5": (transpose(f5, (0,)), (1,)),
    "ppermute": (f_permute, (0,)), "all_to_all": (f_all_to_all, (0,)), "two_axes": (f_two_axes, (0,)),
    "mapped_invariant_output": (f_mapped_invariant, (0,)),
}
OLD_SCHEME = [name for name in CASES if name != "t_example4"]  # pscatter did not exist in the old scheme


def _global_shape(f, k):
    v, spec = f.body.inputs[k], f.in_specs[k]
    return tuple(n * int(np.prod([f.axes[a] for a in spec.dim_axes(d)])) for d, n in enumerate(v.type.shape))


def _check_adjoint(f, linear, variance):
    rng = np.random.default_rng(7)
    args = [rng.standard_normal(_global_shape(f, k)) for k in range(len(f.body.inputs))]
    ys = run(f, *args)
    ybars = [rng.standard_normal(y.shape) for y in ys]
    residuals = [a for k, a in enumerate(args) if k not in linear]
    xbars = run(transpose(f, linear, variance=variance), *residuals, *ybars)
    lhs = sum(np.vdot(xbar, args[k]) for xbar, k in zip(xbars, linear))
    rhs = sum(np.vdot(ybar, y) for ybar, y in zip(ybars, ys))
    assert lhs == pytest.approx(rhs, rel=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_transpose_satisfies_the_adjoint_identity(name):
    _check_adjoint(*CASES[name], variance=True)


@pytest.mark.parametrize("name", OLD_SCHEME)
def test_old_transpose_gets_the_same_numbers(name):
    _check_adjoint(*CASES[name], variance=False)


def test_mapped_invariant_output_transposes_to_a_psum():
    # each device returns the same block to a mapped output: the cotangent blocks are summed
    assert prims(transpose(f_mapped_invariant, (0,))) == ["psum", "mul"]


def test_all_to_all_transposes_with_its_axes_swapped():
    (e,) = transpose(f_all_to_all, (0,)).body.eqns
    assert (e.prim, e.params["split_axis"], e.params["concat_axis"]) == ("all_to_all", 1, 0)


# ---------------------------------------------------------------------------
# pbroadcast insertion and the variance check
# ---------------------------------------------------------------------------
def test_pbroadcast_is_inserted_once_per_operand_and_axes():
    f = shmap(lambda x, y: x * y + x * y, (P("i"), P()), P("i"), mesh=MESH, in_types=["f32[2]", "f32[2]"])
    assert prims(f) == ["pbroadcast", "mul", "mul", "add"]


def test_without_insertion_a_mismatch_names_the_op_the_axis_and_the_rule():
    with pytest.raises(VarianceError, match=r"a = mul\(x, y\): mul needs operands that vary over the same axes, "
                                            r"but x:f32\[2\]\{i\} varies over 'i' and y:f32\[2\] does not"):
        shmap(lambda x, y: x * y, (P("i"), P()), P("i"), mesh=MESH, in_types=["f32[2]", "f32[2]"],
              auto_pbroadcast=False)


def test_insertion_can_be_turned_off_on_a_built_program():
    assert insert_pbroadcasts(f2, enabled=False) is f2
    assert insert_pbroadcasts(f2) == f2  # nothing left to insert


def test_psum_of_an_invariant_value_is_refused_at_the_eqn():
    with pytest.raises(VarianceError, match=r"a = psum\(x\): psum over 'i' needs an operand that varies over 'i', "
                                            r"but x:f32\[2\] is invariant over it"):
        shmap(lambda x: psum(x, "i"), P(), P(), mesh=MESH, in_types=["f32[2]"])


def test_a_collective_of_a_number_is_refused():
    with pytest.raises(RuleError, match=r"psum needs an array operand, not the number 1"):
        shmap(lambda x: psum(1, "i") * x, P("i"), P("i"), mesh=MESH, in_types=["f32[2]"])


def test_old_scheme_programs_do_not_type_check_under_the_new_rules():
    old = transpose(cursed_identity, (0,), variance=False)  # psum(x / 8) of an invariant x
    typecheck(old)  # only shapes are checked for an old-scheme program
    with pytest.raises(VarianceError, match="built without variance checking"):
        transpose(old, (0,))


def test_run_refuses_an_unreplicated_output_of_an_unchecked_program():
    f = shmap(lambda x: x, P("i"), P(), mesh=MESH, in_types=["f32[1]"], check_variance=False)
    with pytest.raises(VarianceError, match=r"output 0 \(x\) is not replicated over 'i'"):
        run(f, np.arange(8.0))
