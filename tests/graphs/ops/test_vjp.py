"""Every op's VJP against central finite differences of its own ``reference``, in float64.

For an operand ``x_i``, a random direction ``v`` and a random cotangent ``u`` of the
result, the VJP must satisfy ``<vjp(u)_i, v> = <u, J_i v>``; the right side is
measured as ``(<u, f(x_i + h v)> - <u, f(x_i - h v)>) / 2h``.

Tolerance: with ``h = 1e-6`` the central difference's truncation error is
``O(h^2) ~ 1e-12`` and its rounding error ``~ eps·|f| / h ~ 1e-10`` relative on these
small O(1) problems; ``rtol = 1e-6`` sits orders of magnitude above both, so it is not
loosened to let anything through: a wrong derivative (a missing term, a wrong sign,
a wrong axis) is off by O(1).

Operands the VJP declares it does not read (``vjp_reads_inputs`` false) are passed as
zero-memory shape stand-ins, and the result as None when ``vjp_reads_result`` is false,
so the flags are checked too: a VJP reading what it claims not to read gets zeros.
"""

import numpy as np
import pytest

from graphs.ops.opdef import OpDef, shape_stand_in
from graphs.ops.registry import OPS, get_op
from planner.errors import ModelError

H = 1e-6
RTOL = 1e-6  # see the module docstring: far above the O(h^2) truncation and O(eps/h) rounding error


def _canonical(name, arrays, attrs):
    opdef = get_op(name)
    return opdef.canonical([a.shape for a in arrays], opdef.with_defaults(attrs or {}))


def check_vjp(name, arrays, attrs=None, seed=0):
    """Check op ``name``'s VJP for every float operand of ``arrays`` (see the module docstring)."""
    opdef = get_op(name)
    arrays = [np.asarray(a) for a in arrays]
    attrs = _canonical(name, arrays, attrs)
    rng = np.random.default_rng(seed)
    result = np.asarray(opdef.reference(arrays, attrs))
    cot = rng.standard_normal(result.shape)
    wrt = tuple(i for i, a in enumerate(arrays) if a.dtype.kind == "f")
    def passed(which):  # the operands the VJP says it reads for ``which``; stand-ins for the others
        reads = opdef.vjp_inputs(which, len(arrays))
        return [a if i in reads else shape_stand_in(a.shape, a.dtype) for i, a in enumerate(arrays)]

    grads = opdef.vjp(passed(wrt), attrs, result if opdef.vjp_reads_result else None, cot, wrt)
    assert len(grads) == len(wrt)
    for i, g in zip(wrt, grads):  # one operand at a time reads only what vjp_inputs says, same numbers
        (alone,) = opdef.vjp(passed((i,)), attrs, result if opdef.vjp_reads_result else None, cot, (i,))
        np.testing.assert_allclose(alone, g, rtol=1e-14, atol=1e-14)
        if opdef.vjp_in_place is not None:  # the in-place variant writes the same numbers into the cotangent
            buffer = cot.copy()
            (inplace,) = opdef.vjp_in_place(passed((i,)), attrs, result if opdef.vjp_reads_result else None,
                                            buffer, (i,))
            assert np.shares_memory(inplace, buffer)
            np.testing.assert_allclose(inplace, g, rtol=1e-13, atol=1e-14)
    for k, (i, g) in enumerate(zip(wrt, grads)):
        assert isinstance(g, np.ndarray) and g.shape == arrays[i].shape and g.dtype == cot.dtype
        for other in [*arrays, result, cot, *grads[:k]]:
            assert not np.shares_memory(g, other), f"{name}: gradient {i} aliases an argument"
        v = rng.standard_normal(arrays[i].shape)

        def objective(t):
            xs = list(arrays)
            xs[i] = arrays[i] + t * v
            return float(np.vdot(cot, np.asarray(opdef.reference(xs, attrs))))

        fd = (objective(H) - objective(-H)) / (2 * H)
        assert float(np.vdot(g, v)) == pytest.approx(fd, rel=RTOL, abs=1e-9), f"{name} operand {i}, attrs {attrs}"


def normal(rng, shape, away_from=None):
    """Standard-normal data; with ``away_from`` every value is at least 0.05 from it (kinks)."""
    x = rng.standard_normal(shape)
    if away_from is not None:
        x = np.where(np.abs(x - away_from) < 0.05, x + 0.1, x)
    return np.asarray(x)


def test_pointwise_vjps_match_central_differences():
    rng = np.random.default_rng(1)
    for name in ("exp", "gelu", "neg", "sigmoid", "tanh"):
        for shape in [(), (5,), (3, 4)]:
            check_vjp(name, [normal(rng, shape)])
    check_vjp("sigmoid", [np.array([-30.0, -3.0, 0.5, 4.0, 30.0])])
    check_vjp("relu", [normal(rng, (4, 5), away_from=0.0)])
    check_vjp("log", [np.abs(normal(rng, (3, 4))) + 0.5])  # log's domain: positive, away from 0
    for dtype in ("f32", "bf16", "f16"):
        check_vjp("cast", [normal(rng, (3, 2))], {"dtype": dtype})
    pairs = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((3, 4), ()), ((), (2, 3)), ((4, 1), (1, 5))]
    for a, b in pairs:
        for name in ("add", "sub", "mul", "maximum", "minimum"):
            x, y = normal(rng, a), normal(rng, b)
            while name in ("maximum", "minimum") and np.min(np.abs(x - y)) < 0.05:  # no tie within h of the data
                y = normal(rng, b)
            check_vjp(name, [x, y])
        denominator = np.sign(normal(rng, b)) * (0.5 + np.abs(normal(rng, b)))
        check_vjp("div", [normal(rng, a), denominator])


def test_annotation_vjps_pass_the_cotangent_through():
    rng = np.random.default_rng(12)
    for name in ("sharding_constraint", "propagation_barrier"):
        for shape in [(), (5,), (3, 4)]:
            check_vjp(name, [normal(rng, shape)])
        # the VJP of an identity is the identity: the cotangent itself, fresh (check_vjp checks aliasing)
        cot = normal(rng, (2, 3))
        (g,) = get_op(name).vjp([shape_stand_in((2, 3), np.float64)], {}, None, cot, (0,))
        np.testing.assert_array_equal(g, cot)


def test_stop_gradient_sends_no_cotangent_back():
    # its value is the identity's, but JAX defines its derivative as zero: the VJP is zeros of the cotangent's
    # shape and dtype, whatever the cotangent
    rng = np.random.default_rng(13)
    op = get_op("stop_gradient")
    assert op.blocks_gradient and op.reference([np.arange(3.0)], {}).tolist() == [0.0, 1.0, 2.0]
    for shape in [(), (5,), (3, 4)]:
        cot = normal(rng, shape).astype(np.float32)
        (g,) = op.vjp([shape_stand_in(shape, np.float64)], {}, None, cot, (0,))
        assert g.shape == shape and g.dtype == np.float32 and not np.any(g)


def test_relu_and_maximum_subgradients_at_kinks():
    relu, maximum = get_op("relu"), get_op("maximum")
    x = np.array([-1.0, 0.0, 2.0])
    (g,) = relu.vjp([shape_stand_in(x.shape, x.dtype)], {}, relu.reference([x], {}), np.ones(3), (0,))
    assert g.tolist() == [0.0, 0.0, 1.0]  # 0 at x <= 0, like np.maximum(x, 0) picking the constant
    a, b = np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])
    ga, gb = maximum.vjp([a, b], {}, None, np.array([4.0, 4.0, 4.0]), (0, 1))
    # the larger side gets the cotangent; the tie (2 == 2) splits it in halves that add up to it
    assert ga.tolist() == [0.0, 2.0, 4.0] and gb.tolist() == [4.0, 2.0, 0.0]
    # minimum: the smaller side gets it, the tie splits it as well
    ga, gb = get_op("minimum").vjp([a, b], {}, None, np.array([4.0, 4.0, 4.0]), (0, 1))
    assert ga.tolist() == [4.0, 2.0, 0.0] and gb.tolist() == [0.0, 2.0, 4.0]


def test_matmul_vjp_matches_central_differences():
    rng = np.random.default_rng(2)
    cases = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)),
             ((2, 3, 3, 4), (2, 3, 4, 2)), ((1, 3, 4), (2, 4, 5))]
    for a, b in cases:
        for ta in (False, True):
            for tb in (False, True):
                sa = a[:-2] + (a[-1], a[-2]) if ta else a
                sb = b[:-2] + (b[-1], b[-2]) if tb else b
                check_vjp("matmul", [normal(rng, sa), normal(rng, sb)], {"transpose_a": ta, "transpose_b": tb})
    # a non-contiguous batched operand against a 2-D weight
    x = np.asfortranarray(normal(rng, (2, 3, 4)))
    check_vjp("matmul", [x, normal(rng, (4, 5))])


def test_einsum_vjp_matches_central_differences():
    rng = np.random.default_rng(3)
    sizes = dict(zip("abcdefhijklmnqt", (2, 3, 4, 3, 2, 3, 4, 2, 3, 4, 2, 3, 2, 3, 4)))
    for equation in ["bnqd,bnkd->bnqk", "bnqk,bnkd->bnqd", "tec,th->ech", "ech,ehf->ecf", "ecf,efh->ech",
                     "tec,ech->th", "ij,jk->ik", "ij->ji", "ijk->j", "ij,jk,kl->il", "ij,kl->ik", "i,i->",
                     "abc,c->ba", "ij,ij->ij", "i,j->ij", "ijk,kl,l->ji"]:
        terms = equation.split("->")[0].split(",")
        arrays = [normal(rng, [sizes[c] for c in t]) for t in terms]
        check_vjp("einsum", arrays, {"equation": equation})


def test_einsum_reference_is_numpy_einsum():
    rng = np.random.default_rng(4)
    a, b = normal(rng, (2, 3, 4)), normal(rng, (4, 3, 5))
    for equation in ["bsh,hsf->bf", "bsh,hcf->sfcb", "bsh,hsf->bshf"]:
        got = get_op("einsum").reference([a, b], {"equation": equation})
        np.testing.assert_allclose(got, np.einsum(equation, a, b), rtol=1e-12, atol=1e-12)


def test_normalization_vjps_match_central_differences():
    rng = np.random.default_rng(5)
    for axis in (-1, 0, 1):
        check_vjp("softmax", [normal(rng, (2, 3, 4))], {"axis": axis})
    for shape in [(6,), (3, 5), (2, 3, 4)]:
        h = shape[-1]
        for eps in (1e-5, 0.1):
            x = 3.0 * normal(rng, shape) + 1.0
            for n in (1, 2, 3):
                check_vjp("layernorm", [x, normal(rng, (h,)), normal(rng, (h,))][:n], {"eps": eps})
            for n in (1, 2):
                check_vjp("rmsnorm", [x, normal(rng, (h,))][:n], {"eps": eps})


def test_reduction_vjps_match_central_differences():
    rng = np.random.default_rng(6)
    for shape, axes in [((5,), None), ((3, 4), None), ((3, 4), [0]), ((2, 3, 4), [-1, 0]), ((2, 3, 4), [1]),
                        ((2, 3, 4), [0, 1, 2])]:
        for keepdims in (False, True):
            for name in ("sum", "mean", "max", "min"):
                check_vjp(name, [normal(rng, shape)], {"axes": axes, "keepdims": keepdims})


def test_max_splits_the_cotangent_among_tied_maxima():
    mx = get_op("max")
    x = np.array([[1.0, 3.0, 3.0], [5.0, 2.0, 5.0]])
    attrs = _canonical("max", [x], {"axes": [1]})
    (g,) = mx.vjp([x], attrs, mx.reference([x], attrs), np.array([6.0, 1.0]), (0,))
    # each row's cotangent is shared equally by its two maxima: the derivative along
    # the direction raising both tied entries together is the full cotangent
    assert g.tolist() == [[0.0, 3.0, 3.0], [0.5, 0.0, 0.5]]
    # min likewise: the tied minima of the first row (1, 1) and the one of the second (2)
    mn = get_op("min")
    y = np.array([[1.0, 3.0, 1.0], [5.0, 2.0, 5.0]])
    (g,) = mn.vjp([y], attrs, mn.reference([y], attrs), np.array([6.0, 1.0]), (0,))
    assert g.tolist() == [[3.0, 0.0, 3.0], [0.0, 1.0, 0.0]]


def test_shape_op_vjps_match_central_differences():
    rng = np.random.default_rng(7)
    x = normal(rng, (2, 3, 4))
    check_vjp("reshape", [x], {"shape": [6, -1]})
    check_vjp("reshape", [x], {"shape": [24]})
    for perm in ([0, 1, 2], [2, 0, 1], [1, 2, 0], [2, 1, 0]):
        check_vjp("transpose", [x], {"perm": perm})
    check_vjp("transpose", [normal(rng, ())], {"perm": []})
    for axis in (0, 1, -1):
        parts = [normal(rng, tuple(k + 1 if d == axis % 3 else s for d, s in enumerate((2, 3, 4)))) for k in range(3)]
        check_vjp("concat", parts, {"axis": axis})
    check_vjp("concat", [normal(rng, (3,))], {})
    check_vjp("slice", [x], {"starts": [0, 1, 1], "stops": [2, 3, 3]})
    check_vjp("slice", [x], {"starts": [1, 0, 0], "stops": [2, 3, 4]})


def test_conv2d_vjp_matches_central_differences():
    rng = np.random.default_rng(8)
    for x, w, stride, padding in [((2, 3, 5, 6), (4, 3, 3, 3), 1, 0), ((2, 3, 5, 6), (4, 3, 3, 2), 2, 1),
                                  ((1, 2, 7, 5), (3, 2, 2, 3), [2, 1], [0, 2]), ((2, 1, 6, 6), (2, 1, 3, 3), 3, 0),
                                  ((1, 2, 4, 4), (2, 2, 1, 1), 1, 0)]:
        check_vjp("conv2d", [normal(rng, x), normal(rng, w)], {"stride": stride, "padding": padding})


def test_gather_vjp_scatter_adds_repeated_rows_and_matches_central_differences():
    rng = np.random.default_rng(9)
    idx = np.array([[0, 2, 2, 4], [2, 1, 0, 0]], dtype=np.int32)
    check_vjp("gather", [normal(rng, (5, 3)), idx])
    check_vjp("gather", [normal(rng, (5, 2, 3)), np.array([4, 4, 1], dtype=np.int64)])
    check_vjp("gather", [normal(rng, (4,)), np.array(3)])


def test_cross_entropy_vjp_matches_central_differences():
    rng = np.random.default_rng(10)
    check_vjp("cross_entropy", [normal(rng, (4, 6)), np.array([0, 5, 2, 2], dtype=np.int32)])
    check_vjp("cross_entropy", [3 * normal(rng, (2, 3, 5)), rng.integers(0, 5, (2, 3))])
    check_vjp("cross_entropy", [normal(rng, (7,)), np.array(3, dtype=np.int64)])


def test_every_registered_op_has_a_vjp():
    # no op of the catalogue is untrainable but pmax and pmin, which JAX 0.10.2 does not differentiate either
    # ("Differentiation rule for 'pmax' not implemented"); the other gradient-free cases are integer/bool operands
    # and casts to integer/bool types (tested below)
    missing = [name for name, opdef in OPS.items() if opdef.vjp is None]
    assert missing == ["pmax", "pmin"]
    assert all(isinstance(opdef, OpDef) for opdef in OPS.values())


def test_asking_for_the_gradient_of_an_integer_operand_is_a_model_error():
    table, idx = np.ones((4, 2)), np.array([1, 3], dtype=np.int32)
    with pytest.raises(ModelError, match=r"gather has no gradient with respect to its indices \(operand 1, int32\)"):
        get_op("gather").vjp([table, idx], {}, None, np.ones((2, 2)), (1,))
    logits, labels = np.ones((2, 3)), np.array([0, 2], dtype=np.int64)
    with pytest.raises(ModelError, match=r"cross_entropy has no gradient with respect to its labels"):
        get_op("cross_entropy").vjp([logits, labels], {}, None, np.array(1.0), (0, 1))
    ints = np.arange(3, dtype=np.int32)
    with pytest.raises(ModelError, match="add has no gradient with respect to operand 0"):
        get_op("add").vjp([ints, ints], {}, None, np.ones(3), (0,))


def test_a_cast_to_an_integer_type_has_no_gradient():
    cast = get_op("cast")
    x = np.array([1.5, -2.0])
    with pytest.raises(ModelError, match="cast to i32 has no gradient"):
        cast.vjp([x], {"dtype": "i32"}, cast.reference([x], {"dtype": "i32"}), np.ones(2), (0,))
    with pytest.raises(ModelError, match="cast to bool has no gradient"):
        cast.vjp([x], {"dtype": "bool"}, None, np.ones(2), (0,))
    with pytest.raises(ModelError, match=r"cast has no gradient with respect to operand 0 \(int64\)"):
        cast.vjp([np.arange(2)], {"dtype": "f32"}, None, np.ones(2), (0,))


def test_vjp_results_take_the_cotangents_dtype():
    rng = np.random.default_rng(11)
    a, b = normal(rng, (3, 4)).astype(np.float32), normal(rng, (4, 2)).astype(np.float32)
    for cot_dtype in (np.float32, np.float64):
        grads = get_op("matmul").vjp([a, b], {}, None, np.ones((3, 2), cot_dtype), (0, 1))
        assert [g.dtype for g in grads] == [np.dtype(cot_dtype)] * 2
