"""planner.frontends.jax.trace: every mapped primitive gives the catalogue ops its jaxpr means, and the
graph computes what jax.jit(fn) computes; unsupported primitives are errors naming them and their line."""

import inspect
from collections import Counter

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy
from jax.sharding import PartitionSpec as P  # noqa: E402

from graphs.evaluate import run_reference  # noqa: E402
from graphs.gradients import reference_gradients, requires_grad  # noqa: E402
from planner.errors import ModelError, PlanningError  # noqa: E402
from planner.frontends.jax import trace, trace_function  # noqa: E402

F32_RTOL = 1e-5
"""jax computes in float32 (unit roundoff 2**-24 ~ 6e-8) and the reference in float64 from the same
float32 inputs; each case chains at most ~10 roundings and sums at most 64 terms, 64 * 6e-8 ~ 4e-6 < 1e-5."""


def _args(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) if not isinstance(s, np.ndarray) else s for s in shapes]


def _feeds(traced, args):
    """The graph's inputs from the function's arguments (floats widened to float64), its consts from their values."""
    leaves = jax.tree_util.tree_leaves(args)
    feeds = {n: (np.asarray(v, np.float64) if np.issubdtype(np.asarray(v).dtype, np.floating) else np.asarray(v))
             for n, v in zip(traced.inputs, leaves)}
    feeds.update({t.name: np.full(t.shape, t.value) for t in traced.graph.tensors.values() if t.kind == "const"})
    return feeds


def check_against_jax(fn, args, rtol=F32_RTOL):
    """Trace ``fn``, run the graph's numpy reference and ``jax.jit(fn)`` on ``args``; return the op counts."""
    traced = trace_function(fn, *args)
    ours = run_reference(traced.graph, _feeds(traced, args))
    theirs = jax.tree_util.tree_leaves(jax.jit(fn)(*args))
    assert len(theirs) == len(traced.outputs)
    for name, value in zip(traced.outputs, theirs):
        expected = np.asarray(value, np.float64)
        assert ours[name].shape == expected.shape, name
        np.testing.assert_allclose(ours[name], expected, rtol=rtol, atol=rtol * max(1.0, np.abs(expected).max()))
    return Counter(op.op for op in traced.graph.ops)


def check_gradient_against_jax(loss, args, param: str, **trace_kw):
    """Trace ``loss`` with ``param`` (an argument name) a parameter; the graph's reference gradient of it must be
    ``jax.grad``'s (float32 against float64: :data:`F32_RTOL`). Returns the traced function."""
    names = list(inspect.signature(loss).parameters)
    traced = trace_function(loss, *args, params=(param,), **trace_kw)
    _, grads = reference_gradients(traced.graph, _feeds(traced, args))
    expected = np.asarray(jax.grad(loss, argnums=names.index(param))(*args), np.float64)
    np.testing.assert_allclose(grads[param], expected, rtol=F32_RTOL, atol=F32_RTOL * np.abs(expected).max())
    return traced


IDX = np.array([[3, 0, 9], [9, 1, 2]], np.int32)  # rows of a 10-row table, in range
FLOAT = "float"


def _custom_vjp():
    @jax.custom_vjp
    def g(x):
        return jnp.tanh(x)

    g.defvjp(lambda x: (g(x), x), lambda x, ct: (ct,))
    return g


def _layer_norm(x, s, b):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * s + b


# name: (function, argument shapes, the ops its jaxpr spells in catalogue terms)
CASES = {
    "add_broadcast": (lambda x, b: x + b, [(4, 8), (8,)], {"add": 1}),
    "sub_literal": (lambda x: x - 1.5, [(4, 8)], {"sub": 1}),
    "mul": (lambda x, y: x * y, [(4, 8), (4, 8)], {"mul": 1}),
    "div": (lambda x, y: x / (y * y + 1.0), [(4, 8), (4, 8)], {"mul": 1, "add": 1, "div": 1}),
    "neg": (lambda x: -x, [(4, 8)], {"neg": 1}),
    "exp": (jnp.exp, [(4, 8)], {"exp": 1}),
    "tanh": (jnp.tanh, [(4, 8)], {"tanh": 1}),
    "logistic_is_sigmoid": (jax.nn.sigmoid, [(4, 8)], {"sigmoid": 1}),
    "relu": (jax.nn.relu, [(4, 8)], {"relu": 1}),
    "max_with_zero_is_relu": (lambda x: jnp.maximum(x, 0.0), [(4, 8)], {"relu": 1}),
    "maximum": (jnp.maximum, [(4, 8), (4, 8)], {"maximum": 1}),
    "minimum": (jnp.minimum, [(4, 8), (4, 8)], {"minimum": 1}),
    "gelu_tanh": (jax.nn.gelu, [(4, 8)], {"gelu": 1}),
    "matmul": (lambda x, w: x @ w, [(2, 4, 8), (8, 3)], {"matmul": 1}),
    "matmul_transpose_b": (lambda x, w: jnp.einsum("ik,jk->ij", x, w), [(4, 8), (3, 8)], {"matmul": 1}),
    "batched_matmul": (lambda q, k: jnp.einsum("bnqd,bnkd->bnqk", q, k), [(2, 3, 4, 5), (2, 3, 6, 5)],
                       {"matmul": 1}),
    "dot_general_as_einsum": (lambda a, b: jax.lax.dot_general(a, b, (((0, 2), (0, 1)), ((), ()))),
                              [(2, 3, 4), (2, 4, 5)], {"einsum": 1}),
    "vector_matrix_as_einsum": (lambda v, w: v @ w, [(8,), (8, 3)], {"einsum": 1}),
    "sum": (lambda x: jnp.sum(x, axis=0), [(4, 8)], {"sum": 1}),
    "max": (lambda x: jnp.max(x, axis=(0, 2)), [(4, 8, 2)], {"max": 1}),
    "min": (lambda x: jnp.min(x, axis=1), [(4, 8, 2)], {"min": 1}),
    "mean": (lambda x: jnp.mean(x, axis=-1), [(4, 8)], {"mean": 1}),
    "mean_keepdims": (lambda x: x - jnp.mean(x, axis=0, keepdims=True), [(4, 8)], {"mean": 1, "sub": 1}),
    "softmax": (lambda x: jax.nn.softmax(x, axis=-1), [(4, 8)], {"softmax": 1}),
    "softmax_axis0": (lambda x: jax.nn.softmax(x, axis=0), [(4, 8)], {"softmax": 1}),
    "softmax_by_hand": (lambda x: jnp.exp(x) / jnp.sum(jnp.exp(x), axis=-1, keepdims=True), [(4, 8)],
                        {"softmax": 1}),
    "log": (lambda x: jnp.log(jnp.exp(x) + 1.0), [(4, 8)], {"exp": 1, "add": 1, "log": 1}),
    "log_softmax": (lambda x: jax.nn.log_softmax(x, axis=-1), [(4, 8)], {"softmax": 1, "log": 1}),
    "log_softmax_axis0": (lambda x: jax.nn.log_softmax(x, axis=0), [(4, 8)], {"softmax": 1, "log": 1}),
    # its jaxpr op by op: the guarded max (max, maximum with -inf, is_finite, select) and its stop_gradient, then
    # log|sum(exp(x - m))| + m
    "logsumexp": (lambda x: jax.nn.logsumexp(x, axis=-1), [(4, 8)],
                  {"max": 1, "maximum": 1, "is_finite": 1, "select": 1, "stop_gradient": 1, "reshape": 1, "sub": 1,
                   "exp": 1, "sum": 1, "abs": 1, "log": 1, "add": 1}),
    "log_softmax_by_hand": (lambda x: x - jnp.log(jnp.sum(jnp.exp(x), axis=-1, keepdims=True)), [(4, 8)],
                            {"softmax": 1, "log": 1}),
    "layernorm_weight_bias": (_layer_norm, [(4, 8), (8,), (8,)], {"layernorm": 1}),
    # the mean written twice is two reductions (XLA reduces both: no layernorm's two statistics), op by op
    "layernorm_div_sqrt": (lambda x: (x - x.mean(-1, keepdims=True))
                           / jnp.sqrt(((x - x.mean(-1, keepdims=True)) ** 2).mean(-1, keepdims=True) + 1e-6),
                           [(2, 3, 8)], {"mean": 3, "sub": 2, "mul": 1, "add": 1, "sqrt": 1, "div": 1}),
    "rmsnorm_weight": (lambda x, w: x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w,
                       [(4, 8), (8,)], {"rmsnorm": 1}),
    "reshape": (lambda x: x.reshape(2, -1), [(4, 8)], {"reshape": 1}),
    "squeeze": (lambda x: jnp.squeeze(x, 1), [(4, 1, 8)], {"reshape": 1}),
    "transpose": (lambda x: x.transpose(2, 0, 1), [(4, 8, 2)], {"transpose": 1}),
    "cast_to_int": (lambda x: (x * 10).astype(jnp.int32), [(4, 8)], {"mul": 1, "cast": 1}),
    "concat": (lambda x, y: jnp.concatenate([x, y], axis=1), [(4, 8), (4, 3)], {"concat": 1}),
    "slice": (lambda x: x[1:3], [(4, 8)], {"slice": 1}),
    # two dimensions cut: a slice per dimension, in dimension order (as XLA's windowed reshard, and Shardy shards each)
    "slice_two_dims": (lambda x: x[1:3, 2:], [(4, 8)], {"slice": 2}),
    "gather_rows": (lambda t, i: jnp.take(t, i, axis=0, mode="clip"), [(10, 4), IDX], {"gather": 1}),
    "integer_pow": (lambda x: x ** 3, [(4, 8)], {"mul": 2}),
    "square": (jnp.square, [(4, 8)], {"mul": 1}),
    "abs": (jnp.abs, [(4, 8)], {"abs": 1}),
    # where(x > 0, x, expm1(where(x > 0, 0, x))): JAX keeps expm1 off the large positives
    "elu": (jax.nn.elu, [(4, 8)], {"comparison": 2, "expm1": 1, "mul": 1, "select": 2}),
    "log1p": (lambda x: jnp.log1p(jnp.exp(x)), [(4, 8)], {"exp": 1, "log1p": 1}),
    "pad": (lambda x: jnp.pad(x, ((0, 0), (1, 2))), [(4, 8)], {"pad": 1}),
    # a shift right by one: the slice of the pad folds into one pad that crops the last column
    "shift_right": (lambda x: jnp.pad(x, ((0, 0), (1, 0)))[:, :-1] * 2.0, [(4, 8)], {"pad": 1, "mul": 1}),
    "negative_pad": (lambda x: jax.lax.pad(x, 0.0, ((0, 0, 0), (-2, 1, 0))), [(4, 8)], {"pad": 1}),
    "arange": (lambda x: x * jnp.arange(8.0), [(4, 8)], {"iota": 1, "mul": 1}),
    # ids[:, None] == iota(1, 4), cast to f32
    "one_hot": (lambda i: jax.nn.one_hot(i, 10), [IDX[0]], {"reshape": 1, "iota": 1, "comparison": 1, "cast": 1}),
    # tril: iota(rows) + 0 >= iota(cols) chooses the mask, then the where
    "causal_mask": (lambda s: jnp.where(jnp.tril(jnp.ones((8, 8), bool)), s, -1e9), [(8, 8)],
                    {"iota": 2, "add": 1, "comparison": 1, "select": 2}),
    "pad_two_dimensions_by_a_value": (lambda x: jnp.pad(x, ((1, 0), (0, 3)), constant_values=2.0), [(4, 8)],
                                      {"pad": 1}),
    "where": (lambda x, y: jnp.where(x > y, x, y * 2.0), [(4, 8), (8,)], {"comparison": 1, "mul": 1, "select": 1}),
    "where_scalar_branch": (lambda x: jnp.where(x >= 0.5, 1.0, x), [(4, 8)], {"comparison": 1, "select": 1}),
    "comparison_cast": (lambda x: (x != 0.0).astype(jnp.float32) * x, [(4, 8)],
                        {"comparison": 1, "cast": 1, "mul": 1}),
    "stack": (lambda x, y: jnp.stack([x, y], axis=1), [(4, 8), (4, 8)], {"reshape": 2, "concat": 1}),
    "stack_with_a_constant": (lambda x: jnp.stack([x, 2.0 * jnp.ones((4, 8))], axis=-1), [(4, 8)],
                              {"reshape": 1, "concat": 1}),
    # JAX's lowering: (4, 8) -> (1, 4, 8), broadcast to (2, 4, 8) (an add of zeros, which reads the (4, 8) the
    # numpy way: the leading-ones reshape is absorbed), -> (8, 8)
    "tile": (lambda x: jnp.tile(x, (2, 1)), [(4, 8)], {"add": 1, "reshape": 1}),
    # jnp.tile first makes x (1, 4, 8); then (1, 1, 4, 1, 8), broadcast to (3, 1, 4, 2, 8), -> (3, 4, 16)
    "tile_adding_a_dimension": (lambda x: jnp.tile(x, (3, 1, 2)), [(4, 8)], {"reshape": 3, "add": 1}),
    "sqrt_of_a_norm": (lambda x: jnp.sqrt(jnp.sum(x * x, axis=-1)), [(4, 8)], {"mul": 1, "sum": 1, "sqrt": 1}),
    "rsqrt": (lambda x: jax.lax.rsqrt(x * x + 1.0), [(4, 8)], {"mul": 1, "add": 1, "rsqrt": 1}),
    "broadcast_materialised": (lambda b: jnp.broadcast_to(b, (4, 8)), [(8,)], {"add": 1}),
    "custom_vjp_inlined": (lambda x: _custom_vjp()(x) * 2.0, [(4, 8)], {"tanh": 1, "mul": 1}),
    "jit_inlined": (lambda x: jax.jit(lambda y: jnp.exp(y) + 1.0)(x), [(4, 8)], {"exp": 1, "add": 1}),
    # rotary angles computed in the function; quantisation by floor, ceil and jnp.round (half to even), a sign
    "sin_cos": (lambda x: jnp.sin(x) * jnp.cos(2.0 * x), [(4, 8)], {"sin": 1, "cos": 1, "mul": 2}),
    "floor_ceil": (lambda x: jnp.floor(x * 4.0) + jnp.ceil(x), [(4, 8)], {"mul": 1, "floor": 1, "ceil": 1, "add": 1}),
    "round_half_even": (lambda x: jnp.round(x * 2.0) / 2.0, [(4, 8)], {"mul": 1, "round": 1, "div": 1}),
    "sign": (lambda x: jnp.sign(x) * jnp.sqrt(jnp.abs(x)), [(4, 8)], {"sign": 1, "abs": 1, "sqrt": 1, "mul": 1}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_traced_primitive_computes_what_jax_computes(case):
    fn, shapes, ops = CASES[case]
    assert check_against_jax(fn, _args(shapes)) == Counter(ops)


def test_log_softmax_read_as_log_of_softmax_has_jaxs_gradient():
    # jax.nn.log_softmax's stop_gradient on the max is the fused softmax's own shift (log-softmax does not change
    # when a row shifts alike), so the gradient of sum(log_softmax(x @ w) * c) w.r.t. w is JAX's
    def loss(x, w, c):
        return jnp.sum(jax.nn.log_softmax(x @ w, axis=-1) * c)

    x, w, c = _args([(4, 6), (6, 8), (4, 8)], seed=3)
    traced = check_gradient_against_jax(loss, [x, w, c], "w")
    assert Counter(op.op for op in traced.graph.ops) == Counter({"matmul": 1, "softmax": 1, "log": 1, "mul": 1,
                                                                 "sum": 1})


def test_logsumexp_keeps_its_shifts_stop_gradient_and_has_jaxs_gradient():
    # log(sum(exp(x - m))) + m with m = stop_gradient(max): the max is not differentiated, as in JAX, and the
    # gradient is JAX's
    def loss(x, w):
        return jnp.sum(jax.nn.logsumexp(x @ w, axis=-1)) + jnp.sum(jax.nn.logsumexp(x @ w, axis=0, keepdims=True))

    x, w = _args([(4, 6), (6, 8)], seed=11)
    traced = check_gradient_against_jax(loss, [x, w], "w")
    ops = Counter(op.op for op in traced.graph.ops)
    assert ops["stop_gradient"] == ops["max"] == 2
    flags = requires_grad(traced.graph)
    assert not any(flags[op.output] for op in traced.graph.ops if op.op == "max")


def _optax_cross_entropy(x, w, labels):
    # optax.softmax_cross_entropy_with_integer_labels, as optax writes it: the logits shifted by their stopped
    # maximum, the label's logit picked, the log of the sum of exponentials
    logits = x @ w
    logits = logits - jax.lax.stop_gradient(jnp.max(logits, axis=-1, keepdims=True))
    picked = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    return jnp.mean(jnp.log(jnp.sum(jnp.exp(logits), axis=-1)) - picked)


def test_optax_cross_entropy_reads_its_stopped_shift_and_has_jaxs_gradient():
    x, w = _args([(6, 5), (5, 8)], seed=19)
    labels = np.array([7, 0, 3, 3, 5, 1], np.int32)
    traced = check_gradient_against_jax(_optax_cross_entropy, [x, w, labels], "w")
    assert Counter(op.op for op in traced.graph.ops)["stop_gradient"] == 1


def _logsumexp_loss(x, w):
    return jnp.sum(jax.nn.logsumexp(x @ w, axis=-1))


# (loss, its arguments, their shardings): x over dp, the head's vocabulary over tp, the labels over dp
HEADS = {
    "logsumexp": (_logsumexp_loss, [(8, 16), (16, 32)], ['[{"dp"}, {}]', '[{}, {"tp"}]']),
    "optax": (_optax_cross_entropy, [(8, 16), (16, 32), np.array([5, 31, 0, 8, 8, 17, 30, 2], np.int32)],
              ['[{"dp"}, {}]', '[{}, {"tp"}]', '[{"dp"}]']),
}


@pytest.mark.parametrize("head", sorted(HEADS))
@pytest.mark.parametrize("search", ["bfs", "ilp", "propagate"])
def test_a_stopped_maximum_over_a_vocabulary_parallel_head_trains_exactly_on_the_simulator(search, head):
    # the max over the sharded vocabulary is only a shift whose gradient is stopped: propagate keeps it a pending
    # maximum all-reduced by max (as XLA), which no backward differentiates; gradients equal the single-device
    # reference's and the bytes are as predicted
    loss, shapes, shardings = HEADS[head]
    traced, p = _trained_plan(loss, shapes, ("w",), shardings, search, seed=2)
    if search == "propagate":
        [top] = [op.name for op in traced.graph.ops if op.op == "max"]
        assert p.op(top).result_sharding.unreduced  # reduced over the sharded vocabulary, completed by max


def _elu_softplus_loss(x, w):
    h = x @ w
    return jnp.sum(jax.nn.elu(h) * jax.nn.softplus(h) - jax.nn.log_sigmoid(h))


def test_elu_softplus_and_log_sigmoid_have_jaxs_gradients():
    # softplus and log_sigmoid are custom_jvp functions (logaddexp); their bodies are inlined and differentiated by
    # the catalogue's rules, which give JAX's gradient of the same function
    x, w = _args([(4, 6), (6, 8)], seed=13)
    check_gradient_against_jax(_elu_softplus_loss, [x, w], "w")


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_elu_softplus_and_log_sigmoid_train_exactly_on_a_sharded_matmul(search):
    # expm1, log1p, the comparisons and selects of their bodies on each device's block of a column-parallel
    # product: gradients equal the single-device reference's and the bytes are as predicted
    from planner.api import plan
    from planner.simulation.run import simulate

    x, w = _args([(8, 16), (16, 32)], seed=6)
    traced = trace_function(_elu_softplus_loss, x, w, params=("w",), mesh={"dp": 2, "tp": 4},
                            shardings=['[{"dp"}, {}]', '[{}, {"tp"}]'])
    r = simulate(plan(traced.graph, search=search, training=True), seed=2)
    assert r.ok and set(r.gradients) == {"w"}
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_causal_attention_with_a_tril_mask_has_jaxs_gradient_and_trains_exactly_when_sharded(search):
    # the mask is two iotas compared: each device counts its own block of rows and columns, so a sequence-sharded
    # score matrix masks what the single-device one masks
    from planner.api import plan
    from planner.simulation.run import simulate

    def loss(x, wq, wk):
        s = (x @ wq) @ (x @ wk).T
        return jnp.sum(jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((8, 8), bool)), s, -1e9), axis=-1) * s)

    x, wq, wk = _args([(8, 16), (16, 8), (16, 8)], seed=17)
    traced = check_gradient_against_jax(loss, [x, wq, wk], "wq", mesh={"dp": 2, "tp": 4},
                                        shardings=['[{"tp"}, {}]', '[{}, {}]', '[{}, {}]'])
    assert Counter(op.op for op in traced.graph.ops)["iota"] == 2
    traced = trace_function(loss, x, wq, wk, params=("wq", "wk"), mesh={"dp": 2, "tp": 4},
                            shardings=['[{"tp"}, {}]', '[{}, {}]', '[{}, {}]'])
    p = plan(traced.graph, search=search, training=True)
    r = simulate(p, seed=5)
    assert r.ok and set(r.gradients) == {"wq", "wk"}
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


def test_a_stop_gradient_anywhere_is_the_catalogue_op_with_jaxs_gradient():
    # a target held constant (a target network's output, a straight-through estimator's correction): no gradient
    # reaches w2, and w's is JAX's
    def loss(x, w, w2):
        h = x @ w
        return jnp.sum((jnp.tanh(h) - jax.lax.stop_gradient(jnp.tanh(x @ w2) + h)) ** 2)

    x, w, w2 = _args([(4, 6), (6, 8), (6, 8)], seed=31)
    traced = check_gradient_against_jax(loss, [x, w, w2], "w")
    assert Counter(op.op for op in traced.graph.ops)["stop_gradient"] == 1
    check_gradient_against_jax(loss, [x, w, w2], "w2")  # zeros, as JAX's


def test_cast_to_bf16_matches_jax_to_bf16_rounding():
    # jax rounds to bf16 (8 significant bits: relative error <= 2**-9); the reference keeps float64
    ops = check_against_jax(lambda x: jnp.tanh(x).astype(jnp.bfloat16), _args([(4, 8)]), rtol=2.0 ** -8)
    assert ops == Counter({"tanh": 1, "cast": 1})


def _line_of(fn, text):
    """``file:line`` of the source line of ``fn`` containing ``text``."""
    lines, first = inspect.getsourcelines(fn)
    k = next(i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(fn).split('/')[-1]}:{first + k}"


def test_unsupported_primitive_names_it_and_its_line():
    def f(x):
        y = x * 2.0
        return jnp.arctan(y)

    with pytest.raises(ModelError) as e:
        trace(f, np.ones((4, 8), np.float32))
    assert "JAX primitive 'atan' has no op" in str(e.value)
    assert _line_of(f, "jnp.arctan") in e.value.where


def test_abs_sqrt_and_rsqrt_outside_a_norm_have_jaxs_gradients():
    # outside a layer or RMS norm they are the catalogue's own ops; abs's sub-gradient at 0 is JAX's (+1), so the
    # zeros of x are in the test
    def loss(x, w):
        h = x @ w
        return jnp.sum(jnp.abs(h) + jnp.sqrt(h * h + 1.0) * jax.lax.rsqrt(jnp.abs(h) + 2.0))

    x, w = _args([(4, 6), (6, 8)], seed=5)
    x[0] = 0.0  # a row of h exactly 0
    traced = check_gradient_against_jax(loss, [x, w], "w")
    assert {"abs", "sqrt", "rsqrt"} <= {op.op for op in traced.graph.ops}


def test_a_captured_array_of_different_values_is_refused():
    table = np.arange(8, dtype=np.float32)
    with pytest.raises(ModelError, match="constant array of shape \\[8\\].*pass the array as an argument"):
        trace(lambda x: x + table, np.ones((4, 8), np.float32))


def test_a_captured_array_of_one_value_is_a_const():
    g = trace(lambda x: x * jnp.full((4, 8), 3.0), np.ones((4, 8), np.float32))
    [c] = [t for t in g.tensors.values() if t.kind == "const"]
    assert c.value == 3.0 and c.shape == ()  # a broadcast constant read elementwise needs no full array


def test_names_kinds_and_shardings_follow_the_signature():
    def block(params, x, *, unused=None):
        return {"y": jnp.tanh(x @ params["w"]), "z": x + params["b"]}

    params = {"w": np.ones((8, 4), np.float32), "b": np.ones((8,), np.float32)}
    x = np.ones((16, 8), np.float32)
    g = trace(block, params, x, mesh={"dp": 2, "tp": 2}, params=["params"],
              shardings=[{"w": P(None, "tp")}, '[{"dp"}, {}]'], out_shardings={"y": P("dp", "tp")})
    assert {n: t.kind for n, t in g.tensors.items() if t.kind != "activation"} == \
        {"params.b": "param", "params.w": "param", "x": "input"}
    assert g.outputs == ("out.y", "out.z")
    assert g.tensor("params.w").sharding.dims_text() == '[{}, {"tp"}]'
    assert g.tensor("x").sharding.dims_text() == '[{"dp"}, {}]'
    assert g.op(g.producer("out.y")).out_sharding.dims_text() == '[{"dp"}, {"tp"}]'


def test_results_are_delivered_as_jax_arrays_and_the_model_file_says_so():
    # a jitted function's results are JAX arrays: whole mesh axes that divide them (Shardy's result shardings;
    # tests/frontends/test_shardy_suite.py compares them), so a result computed on sub-axes is gathered
    from graphs.yaml_dump import dump_model
    from graphs.yaml_format import load_model_text
    from planner.api import plan

    g = trace(lambda x: jnp.tanh(x.reshape(4, 4, 32)), np.ones((16, 32), np.float32), mesh={"d": 8},
              shardings=['[{"d"}, {}]'])
    assert g.outputs_layout == "even"
    p = plan(g, search="propagate")
    out = g.outputs[0]
    assert p.tensor(out).sharding.dims_text() == '[{"d":(1)4, ?}, {"d":(4)2, ?}, {?}]'
    assert p.program.outputs[out].is_fully_replicated
    assert "outputs_layout: even" in dump_model(g) and load_model_text(dump_model(g)).outputs_layout == "even"


def test_a_jax_mesh_gives_its_axis_names_and_sizes():
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("a", "b"))
    g = trace(lambda x: -x, np.ones((4,), np.float32), mesh=mesh)
    assert [(a.name, a.size) for a in g.mesh.axes] == [("a", 1), ("b", 1)]


def test_shardings_without_a_mesh_are_refused():
    with pytest.raises(ModelError, match="no mesh was given"):
        trace(lambda x: -x, np.ones((4,), np.float32), shardings=['[{"x"}]'])


def test_unknown_names_are_refused_with_a_suggestion():
    with pytest.raises(ModelError, match="no argument or result.*did you mean x"):
        trace(lambda x: -x, np.ones((4,), np.float32), mesh={"d": 2}, shardings={"xx": '[{"d"}]'})
    with pytest.raises(ModelError, match="params names 'w'"):
        trace(lambda x: -x, np.ones((4,), np.float32), params=["w"])


def test_tracing_is_deterministic():
    from graphs.yaml_dump import dump_model

    fn, shapes, _ = CASES["layernorm_weight_bias"]
    a = trace_function(fn, *_args(shapes))
    b = trace_function(fn, *_args(shapes))
    assert dump_model(a.graph, a.sources) == dump_model(b.graph, b.sources)


def test_jnp_var_folds_its_constants_and_is_a_mean_of_squares():
    # jnp.var divides by N - ddof (a constant) and chooses NaN when that is not positive (a constant choice)
    ops = check_against_jax(lambda x: jnp.var(x, axis=-1), _args([(4, 8)]))
    assert ops == Counter({"mean": 2, "sub": 1, "mul": 1})


def test_layer_norm_written_with_jnp_var_stays_op_by_op_as_xla_reduces_its_mean_twice():
    # jnp.var centres on a mean of its own: three means (the user's, var's, var's mean of squares), two
    # centrings, the square as a product, then eps, the root and the division; XLA all-reduces all three means
    # over a sharded axis where a layernorm's statistics are two (tests/frontends/shardy_suite.py, ln_var_form)
    def ln(x):
        return (x - x.mean(-1, keepdims=True)) / jnp.sqrt(jnp.var(x, -1, keepdims=True) + 1e-5)

    assert check_against_jax(ln, _args([(4, 8)])) == Counter({"mean": 3, "sub": 2, "mul": 1, "add": 1, "sqrt": 1,
                                                              "div": 1})


def test_layer_norm_centred_twice_on_one_mean_is_one_layernorm():
    # x - m written twice on the same mean m: one mean and one variance, a layernorm's two statistics
    def ln(x):
        m = x.mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)

    assert check_against_jax(ln, _args([(4, 8)])) == Counter({"layernorm": 1})


def test_indexing_a_table_drops_the_negative_index_wrap_for_the_gather():
    assert check_against_jax(lambda t, i: t[i], _args([(10, 4), IDX])) == Counter({"gather": 1})


def test_jnp_where_and_leaky_relu_have_jaxs_gradients():
    # jnp.where(p, a, b) is select_n(p, b, a): the catalogue's select(p, a, b); its gradient goes to the operand
    # each element was chosen from (the 0.1 * x branch gets 0.1 where x <= 0)
    def loss(x, w):
        h = x @ w
        return jnp.sum(jnp.where(h > 0, h, 0.1 * h) + jax.nn.leaky_relu(h, 0.2) * jnp.where(h <= 0.5, 1.0, h))

    x, w = _args([(4, 6), (6, 8)], seed=7)
    traced = check_gradient_against_jax(loss, [x, w], "w")
    assert Counter(op.op for op in traced.graph.ops)["select"] == 3


def test_interior_padding_is_refused_with_its_line():
    def f(x):
        return jax.lax.pad(x, 0.0, ((0, 0, 1), (0, 0, 0)))

    with pytest.raises(ModelError, match="pad with a computed value or interior padding") as e:
        trace(f, np.ones((4, 8), np.float32))
    assert _line_of(f, "jax.lax.pad") in e.value.where


def test_round_away_from_zero_is_refused_with_its_line():
    # lax.round's default rounds halves away from zero; the catalogue's round is jnp.round's, half to even
    def f(x):
        return jax.lax.round(x)

    with pytest.raises(ModelError, match="lax.round away from zero has no op") as e:
        trace(f, np.ones((4, 8), np.float32))
    assert _line_of(f, "jax.lax.round") in e.value.where


def test_sin_cos_sign_floor_ceil_and_round_have_jaxs_gradients():
    # sign, floor, ceil and round pass no gradient (JAX's zero derivative): w's comes through sin, cos and the
    # products with h
    def loss(x, w):
        h = x @ w
        return jnp.sum(jnp.sin(h) * jnp.cos(h) + jnp.sign(h) * h + jnp.floor(h) + jnp.ceil(h) * h + jnp.round(h) * h)

    check_gradient_against_jax(loss, _args([(4, 6), (6, 8)], seed=7), "w")


def test_select_n_of_more_than_two_cases_is_refused_with_its_line():
    def f(i, x):
        return jax.lax.select_n(i, x, 2.0 * x, 3.0 * x)

    with pytest.raises(ModelError, match="'select_n' with an integer case index \\(3 cases\\)") as e:
        trace(f, np.zeros((4, 8), np.int32), np.ones((4, 8), np.float32))
    assert _line_of(f, "jax.lax.select_n") in e.value.where


def test_results_that_are_arguments_or_repeated_are_copies():
    ops = check_against_jax(lambda x, y: (x, jnp.tanh(y), jnp.tanh(y) * 0 + x, x), _args([(4, 8), (4, 8)]))
    assert ops["reshape"] == 2  # the argument returned twice: one same-shape reshape each (a reshape is a copy)


def test_an_op_the_catalogue_refuses_names_the_users_line():
    def f(i, j):
        return jax.lax.div(i, j)  # an integer div: the catalogue's div takes floats

    with pytest.raises(ModelError, match="op 'div_0': div needs a floating-point input") as e:
        trace(f, np.ones((4,), np.int32), np.ones((4,), np.int32))
    assert _line_of(f, "lax.div") in e.value.where


def _trains_exactly(loss, shapes, params, shardings, search, seed):
    """``loss`` traced on dp=2 x tp=4 with its arguments so sharded, planned by ``search`` for training and
    simulated: gradients of ``params`` equal the single-device reference's, bytes as predicted. The trace."""
    return _trained_plan(loss, shapes, params, shardings, search, seed)[0]


def _trained_plan(loss, shapes, params, shardings, search, seed):
    """:func:`_trains_exactly`'s trace and training plan."""
    from planner.api import plan
    from planner.simulation.run import simulate

    args = _args(shapes, seed=seed)
    traced = trace_function(loss, *args, params=params, mesh={"dp": 2, "tp": 4}, shardings=shardings)
    p = plan(traced.graph, search=search, training=True)
    r = simulate(p, seed=2)
    assert r.ok and set(r.gradients) == set(params)
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device
    return traced, p


def _top1_router_loss(x, wg, we):
    # a top-1 mixture of experts: argmax picks each token's expert, one_hot dispatches it, the softmax gate of the
    # chosen expert scales its output
    logits = x @ wg
    choice = jax.nn.one_hot(jnp.argmax(logits, axis=-1), 4, dtype=x.dtype)
    gate = jnp.sum(jax.nn.softmax(logits, axis=-1) * choice, axis=-1, keepdims=True)
    h = jnp.einsum("td,edh->teh", x, we)
    return jnp.sum(jnp.tanh(gate * jnp.einsum("te,teh->th", choice, h)))


def test_a_top1_router_has_jaxs_gradients_through_its_argmax():
    x, wg, we = _args([(8, 6), (6, 4), (4, 6, 5)], seed=21)
    check_gradient_against_jax(_top1_router_loss, [x, wg, we], "wg")
    check_gradient_against_jax(_top1_router_loss, [x, wg, we], "we")


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_top1_router_trains_exactly_with_experts_over_tp(search):
    # argmax over the unsharded expert axis of token-parallel logits, experts sharded over tp
    traced = _trains_exactly(_top1_router_loss, [(16, 8), (8, 4), (4, 8, 6)], ("wg", "we"),
                             ['[{"dp"}, {}]', '[{}, {}]', '[{"tp"}, {}, {}]'], search, seed=3)
    assert "argmax" in {op.op for op in traced.graph.ops}


def _capacity_positions_loss(x, w):
    # GShard's dispatch: each token's position in its expert's buffer is the running count of the tokens before it
    # routed to that expert (a cumulative sum over the tokens), here weighting the token's projection
    h = jnp.tanh(x @ w)
    routed = jax.nn.softmax(h, axis=-1)
    position = jnp.cumsum(routed, axis=0) - routed
    return jnp.sum(h * position) + jnp.sum(jax.lax.cumsum(h, axis=1, reverse=True) ** 2)


def test_a_cumulative_sum_has_jaxs_gradient():
    x, w = _args([(8, 6), (6, 4)], seed=17)
    traced = check_gradient_against_jax(_capacity_positions_loss, [x, w], "w")
    assert Counter(op.op for op in traced.graph.ops)["cumsum"] == 2


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_cumulative_sum_over_sharded_tokens_trains_exactly(search):
    # the tokens sharded over dp, the experts over tp: the running sums along each are gathered and each device
    # keeps its block, forward and backward
    _trains_exactly(_capacity_positions_loss, [(16, 8), (8, 8)], ("w",), ['[{"dp"}, {}]', '[{}, {"tp"}]'], search,
                    seed=4)


def _top2_router_loss(x, wg, we):
    # a top-2 mixture of experts: lax.top_k picks each token's two experts and their gates (softmax over the two),
    # one_hot of the indices dispatches the token to each, the experts' outputs are mixed by the gates
    gates, experts = jax.lax.top_k(x @ wg, 2)
    weights = jax.nn.softmax(gates, axis=-1)
    combine = jnp.einsum("tk,tke->te", weights, jax.nn.one_hot(experts, 4, dtype=x.dtype))
    return jnp.sum(jnp.tanh(jnp.einsum("te,td,edh->th", combine, x, we)))


def test_a_top2_router_has_jaxs_gradients_through_its_top_k():
    x, wg, we = _args([(8, 6), (6, 4), (4, 6, 5)], seed=23)
    traced = check_gradient_against_jax(_top2_router_loss, [x, wg, we], "wg")
    assert Counter(op.op for op in traced.graph.ops)["top_k"] == 2
    check_gradient_against_jax(_top2_router_loss, [x, wg, we], "we")


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_top2_router_trains_exactly_with_tokens_over_dp(search):
    _trains_exactly(_top2_router_loss, [(16, 8), (8, 4), (4, 8, 6)], ("wg", "we"),
                    ['[{"dp"}, {}]', '[{}, {}]', '[{"tp"}, {}, {}]'], search, seed=5)


def _swiglu_split_loss(x, w, wo):
    a, b = jnp.split(x @ w, 2, axis=-1)
    return jnp.sum(jnp.tanh((jax.nn.silu(a) * b) @ wo))


def test_jnp_split_is_a_slice_per_piece_with_jaxs_gradient():
    x, w, wo = _args([(4, 6), (6, 8), (4, 3)], seed=29)
    traced = check_gradient_against_jax(_swiglu_split_loss, [x, w, wo], "w")
    assert Counter(op.op for op in traced.graph.ops)["slice"] == 2


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_split_swiglu_trains_exactly_with_its_projection_over_tp(search):
    # the two halves of a column-parallel projection: each a slice of a tp-sharded dimension (a halo exchange)
    _trains_exactly(_swiglu_split_loss, [(16, 8), (8, 32), (16, 8)], ("w", "wo"),
                    ['[{"dp"}, {}]', '[{}, {"tp"}]', '[{"tp"}, {}]'], search, seed=6)


def _gelu_exact_loss(x, w1, w2):
    return jnp.sum(jnp.tanh(jax.nn.gelu(x @ w1, approximate=False) @ w2))


def test_the_exact_gelu_reads_erfc_with_jaxs_gradient():
    x, w1, w2 = _args([(4, 6), (6, 8), (8, 3)], seed=31)
    traced = check_gradient_against_jax(_gelu_exact_loss, [x, w1, w2], "w1")
    assert Counter(op.op for op in traced.graph.ops)["erfc"] == 1
    assert check_against_jax(lambda a: jax.scipy.special.erf(a) * 2.0, _args([(4, 8)])) == Counter({"erf": 1,
                                                                                                    "mul": 1})


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_an_exact_gelu_mlp_trains_exactly_when_sharded(search):
    _trains_exactly(_gelu_exact_loss, [(16, 8), (8, 32), (32, 8)], ("w1", "w2"),
                    ['[{"dp"}, {}]', '[{}, {"tp"}]', '[{"tp"}, {}]'], search, seed=7)


def test_a_gather_of_another_form_is_refused_as_a_gather_not_as_its_index_wrap():
    # x[i, j] (one element per pair of index vectors, the rows' not arange) wraps negative indices (select_n)
    # before a gather of another form than whole slices or take_along_axis: the error names the gather, the op
    # missing from the catalogue
    rows, cols = np.array([1, 1, 0, 3], np.int32), np.array([1, 2, 0, 3], np.int32)
    with pytest.raises(ModelError, match="gather other than whole slices"):
        trace_function(lambda x, i, j: x[i, j], *_args([(4, 8), rows, cols]))


ROW_LABELS = np.array([3, 0, 7, 1, 2, 2, 5, 4], np.int32)  # a class of 8 per row, in range


def _rows_picked_loss(x, w, labels):
    # a cross-entropy as JAX's tutorials write it: each row's label picked by logp[jnp.arange(n), labels]
    logp = jax.nn.log_softmax(jnp.tanh(x) @ w, axis=-1)
    return -jnp.mean(logp[jnp.arange(8), labels])


def test_rows_picked_by_arange_are_take_along_axis_with_jaxs_gradient():
    x, w = _args([(8, 6), (6, 8)], seed=6)
    traced = check_gradient_against_jax(_rows_picked_loss, [x, w, ROW_LABELS], "w")
    [op] = [op for op in traced.graph.ops if op.op == "take_along_axis"]
    assert op.attr("axis") == 1 and traced.graph.tensor(op.inputs[1]).shape == (8, 1)
    assert "gather" not in {op.op for op in traced.graph.ops}


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_rows_picked_by_arange_over_sharded_classes_train_exactly(search):
    _trains_exactly(_rows_picked_loss, [(8, 6), (6, 8), ROW_LABELS], ("w",),
                    ['[{"dp"}, {}]', '[{}, {"tp"}]', '[{"dp"}]'], search, seed=8)


def _column_loss(x, w, cols):
    # columns picked by index (jnp.take along axis 1, x[:, cols]) from a projection: a channel or position
    # selection
    h = jnp.tanh(x @ w)
    return jnp.sum(jnp.take(h, cols, axis=1) ** 2) + jnp.sum(h[:, cols] * 0.5)


COLS = np.array([5, 0, 7, 5], np.int32)  # of 8 columns, one twice


def test_a_gather_along_another_axis_has_jaxs_gradient():
    x, w = _args([(6, 4), (4, 8)], seed=23)
    traced = check_gradient_against_jax(_column_loss, [x, w, COLS], "w")
    assert [op.attr("axis") for op in traced.graph.ops if op.op == "gather"] == [1, 1]


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_gather_of_tp_sharded_columns_trains_exactly(search):
    # the columns over tp: each device picks the indices among its columns, zeros elsewhere, and the picks are
    # summed (XLA's masked gather and AllReduce); the backward scatters into the device's columns
    _trains_exactly(_column_loss, [(16, 4), (4, 8), COLS], ("w",), ['[{"dp"}, {}]', '[{}, {"tp"}]', '[{}]'], search,
                    seed=9)


LABELS = np.array([[3, 0, 5, 1], [2, 2, 7, 4]], np.int32)  # a class of 8 per (batch, position), in range


def _picked_loss(x, w, labels):
    # a cross-entropy written by hand: each label's log-probability picked by jnp.take_along_axis
    logp = jax.nn.log_softmax(jnp.tanh(x) @ w, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))


def test_take_along_axis_is_one_op_with_jaxs_gradient():
    x, w, labels = _args([(2, 4, 6), (6, 8), LABELS], seed=5)
    traced = check_gradient_against_jax(_picked_loss, [x, w, labels], "w")
    [op] = [op for op in traced.graph.ops if op.op == "take_along_axis"]
    assert op.attr("axis") == 2 and traced.graph.tensor(op.inputs[1]).shape == (2, 4, 1)


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_picked_cross_entropy_over_sharded_classes_trains_exactly(search):
    # the batch over dp, the classes over tp: each device picks the labels among its classes (zeros elsewhere)
    # and the picks are summed, forward; the backward scatters into the device's classes only
    from planner.api import plan
    from planner.simulation.run import simulate

    x, w = _args([(2, 4, 6), (6, 8)], seed=4)
    traced = trace_function(_picked_loss, x, w, LABELS, params=("w",), mesh={"dp": 2, "tp": 4},
                            shardings=['[{"dp"}, {}, {}]', '[{}, {"tp"}]', '[{"dp"}, {}]'])
    p = plan(traced.graph, search=search, training=True)
    r = simulate(p, seed=2)
    assert r.ok and set(r.gradients) == {"w"}
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


def _power_loss(x, w, e):
    # lax.pow of a float exponent, as users write it: a square root, a float square, a constant base, an array
    # exponent
    h = jnp.abs(x @ w) + 0.5
    return jnp.sum(h ** 0.5 + (h - h.mean(-1, keepdims=True)) ** 2.0 + 2.0 ** jnp.tanh(h) + h ** e)


@pytest.mark.parametrize("param", ["w", "e"])
def test_pow_has_jaxs_gradient_in_base_and_exponent(param):
    x, w, e = _args([(4, 6), (6, 8), (8,)], seed=11)
    traced = check_gradient_against_jax(_power_loss, [x, w, e], param)
    assert Counter(op.op for op in traced.graph.ops)["pow"] == 4


def _sorted_loss(x, w):
    # jnp.sort of a projection (its gradient goes back where each element came from) and jnp.argsort of it (an
    # iota payload, no gradient) weighting the sorted rows
    h = jnp.tanh(x @ w)
    ranks = jnp.argsort(h, axis=0).astype(jnp.float32)
    return jnp.sum(jnp.sort(h, axis=1) * jnp.linspace(0.0, 1.0, h.shape[1])) + jnp.sum(ranks * h)


def test_sort_has_jaxs_gradient():
    x, w = _args([(6, 4), (4, 8)], seed=19)
    traced = check_gradient_against_jax(_sorted_loss, [x, w], "w")
    assert sorted(op.attr("returns") for op in traced.graph.ops if op.op == "sort") == ["keys", "payload"]


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_sort_along_a_sharded_axis_runs_forward_and_trains_whole(search):
    # forward: the columns sorted along tp move off it by an AllToAll and back (propagate keeps XLA's exchange);
    # training: the sort's gradient is needed, so its axis is kept whole (bfs gathers it; propagate, which would
    # keep it sharded, is refused with the reason)
    from planner.api import plan
    from planner.simulation.run import simulate

    x, w = _args([(16, 8), (8, 8)], seed=3)
    traced = trace_function(_sorted_loss, x, w, params=("w",), mesh={"dp": 2, "tp": 4},
                            shardings=['[{"dp"}, {}]', '[{}, {"tp"}]'])
    forward = plan(traced.graph, search=search)
    r = simulate(forward, seed=2)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device
    if search == "propagate":
        kinds = {c.kind for c in forward.program.op_collectives("forward")}
        assert "AllToAll" in kinds
        with pytest.raises(PlanningError, match="a scatter by the keys' order"):
            plan(traced.graph, search=search, training=True)
        return
    r = simulate(plan(traced.graph, search=search, training=True), seed=2)
    assert r.ok and set(r.gradients) == {"w"}
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device


def _pooled_loss(x, w):
    # a classifier on the first position (BERT's CLS pooling) and a head on the last (a language model's next
    # token): each a single position of the sequence
    return jnp.sum(jnp.tanh(x[:, 0] @ w)) + jnp.sum((x[:, -1] @ w) ** 2)


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_single_position_of_a_sharded_sequence_is_summed_not_gathered(search):
    # the sequence sharded over tp: the device holding the position gives it, the others zeros, and an AllReduce
    # of the [batch, hidden] position completes it (XLA's masked AllReduce); propagate never gathers the
    # sequence (bfs chooses by its costs). Trained exactly on the simulator, bytes as predicted
    _, p = _trained_plan(_pooled_loss, [(4, 16, 8), (8, 6)], ("w",), ['[{"dp"}, {"tp"}, {}]', '[{}, {}]'], search,
                         seed=8)
    if search == "propagate":
        kinds = {step.kind for r in p.program.redistributions() for step in r.plan.steps}
        assert "AllReduce" in kinds and "AllGather" not in kinds


def _shifted_loss(x, w):
    # a causal shift of the sequence (each position sees the previous one's projection, the first zeros), as a
    # language model's inputs are shifted against its targets, and a border of zeros around it
    h = jnp.tanh(x @ w)
    previous = jnp.pad(h, ((0, 0), (1, 0), (0, 0)))[:, :-1]
    return jnp.sum(h * previous) + jnp.sum(jnp.pad(h, ((0, 0), (4, 4), (0, 0))) ** 2)


def test_pad_and_a_shift_have_jaxs_gradient():
    x, w = _args([(2, 8, 4), (4, 6)], seed=21)
    traced = check_gradient_against_jax(_shifted_loss, [x, w], "w")
    assert Counter(op.op for op in traced.graph.ops)["pad"] == 2  # the shift's slice folded into its pad


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_shift_along_a_sharded_sequence_trains_exactly(search):
    # the sequence over tp: the shift and the border are XLA's halo exchanges forward (propagate: each device
    # sends its last position on), and their transposes backward; gradients exact, bytes as predicted
    _, p = _trained_plan(_shifted_loss, [(4, 16, 8), (8, 6)], ("w",), ['[{"dp"}, {"tp"}, {}]', '[{}, {}]'], search,
                         seed=6)
    if search == "propagate":
        assert {c.kind for c in p.program.op_collectives("forward")} == {"CollectivePermute"}


def _reversed_loss(x, w):
    # a sequence read backwards (a bidirectional model's reverse pass) against its forward projection
    h = jnp.tanh(x @ w)
    return jnp.sum(h * jnp.flip(h, axis=1)) + jnp.sum(jnp.flip(h, axis=(0, 2)) ** 2)


def test_flip_has_jaxs_gradient():
    x, w = _args([(2, 8, 4), (4, 6)], seed=29)
    traced = check_gradient_against_jax(_reversed_loss, [x, w], "w")
    assert sorted(op.attr("axes") for op in traced.graph.ops if op.op == "flip") == [(0, 2), (1,)]


def _rolled_loss(x, w):
    # each position against the next one (a roll by one along the sequence) and a roll by half of it
    h = jnp.tanh(x @ w)
    return jnp.sum(h * jnp.roll(h, -1, axis=1)) + jnp.sum(jnp.roll(h, 8, axis=1) ** 2)


def test_roll_is_read_as_one_op_with_jaxs_gradient():
    x, w = _args([(2, 16, 4), (4, 6)], seed=31)
    traced = check_gradient_against_jax(_rolled_loss, [x, w], "w")
    # jnp.roll's two slices and concatenate, each read as one roll (its shift taken modulo the size)
    rolls = sorted((op.attr("shift"), op.attr("axis")) for op in traced.graph.ops if op.op == "roll")
    assert rolls == [(8, 1), (15, 1)]
    assert not [op for op in traced.graph.ops if op.op in ("slice", "concat")]


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_roll_of_a_sharded_sequence_trains_exactly(search):
    # the sequence over tp (4 blocks of 4): a roll by one brings each block the next block's first position, a roll
    # by 8 two blocks away, forward and backward; gradients exact, bytes as predicted
    _, p = _trained_plan(_rolled_loss, [(4, 16, 8), (8, 6)], ("w",), ['[{"dp"}, {"tp"}, {}]', '[{}, {}]'], search,
                         seed=12)
    if search == "propagate":
        assert {c.kind for c in p.program.op_collectives("forward")} == {"CollectivePermute"}


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_flip_of_a_sharded_sequence_trains_exactly(search):
    # the sequence over tp: each device's block goes to the device holding the mirrored block (one
    # CollectivePermute, XLA's), forward and backward; gradients exact, bytes as predicted
    _, p = _trained_plan(_reversed_loss, [(4, 16, 8), (8, 6)], ("w",), ['[{"dp"}, {"tp"}, {}]', '[{}, {}]'],
                         search, seed=10)
    if search == "propagate":
        assert "CollectivePermute" in {c.kind for c in p.program.op_collectives("forward")}


def _kv_write_loss(cache, new, q, pos):
    # a KV cache's new entries written at a computed position (JAX wraps a negative one, then clamps), then read by
    # attention scores
    k = jax.lax.dynamic_update_slice(cache, jnp.tanh(new), (0, pos, 0))
    return jnp.sum(jnp.einsum("bqd,bkd->bqk", q, k) ** 2)


@pytest.mark.parametrize("pos", [5, -3, 20])
def test_a_kv_cache_write_at_a_computed_position_has_jaxs_values_and_gradients(pos):
    # in range, wrapped from the end (-3 is 16 - 3 = 13) and clamped (20 to 16 - 2 = 14)
    args = _args([(2, 16, 8), (2, 2, 8), (2, 3, 8), np.array(pos, np.int32)], seed=31)
    ops = check_against_jax(_kv_write_loss, args)
    assert ops["dynamic_update_slice"] == 1 and ops["select"] == 1  # the wrap is JAX's select, kept
    for param in ("cache", "new"):
        check_gradient_against_jax(_kv_write_loss, args, param)


def test_a_constant_start_is_kept_in_the_op_not_as_an_input():
    traced = trace_function(lambda x, u: jax.lax.dynamic_update_slice(x, u, (0, 3)), *_args([(4, 8), (4, 2)]))
    [op] = [op for op in traced.graph.ops if op.op == "dynamic_update_slice"]
    assert op.attr("starts") == (0, 3) and len(op.inputs) == 2


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_kv_cache_split_over_its_positions_trains_exactly(search):
    # the cache's positions over tp, 4 per device: the window at 3 spans two devices' blocks, each writes its part
    # and the new entries' gradient is summed over tp
    _trains_exactly(_kv_write_loss, [(2, 16, 8), (2, 2, 8), (2, 3, 8), np.array(3, np.int32)], ("cache", "new"),
                    ['[{"dp"}, {"tp"}, {}]', '[{"dp"}, {}, {}]', '[{"dp"}, {}, {}]', "[]"], search, seed=5)


def _layer_pick_loss(x, stack, i):
    # one layer's weight picked from a stack at a computed index (x[i]: JAX's dynamic slice of one, squeezed) and a
    # window of the activations' rows at it
    h = jnp.tanh(x @ stack[i])
    return jnp.sum(jax.lax.dynamic_slice_in_dim(h, i, 6, axis=0) ** 2)


@pytest.mark.parametrize("i", [1, -2, 3])
def test_a_window_at_a_computed_index_has_jaxs_values_and_gradients(i):
    # the 6 rows' window in range (1), wrapped from the end (-2: layer 4 - 2 = 2, rows from 8 - 2 = 6, clamped to
    # 8 - 6 = 2) and clamped (3 to 2)
    args = _args([(8, 6), (4, 6, 5), np.array(i, np.int32)], seed=37)
    ops = check_against_jax(_layer_pick_loss, args)
    assert ops["dynamic_slice"] == 2
    for param in ("x", "stack"):
        check_gradient_against_jax(_layer_pick_loss, args, param)


def test_a_window_at_constant_starts_is_a_slice():
    # one slice per cut dimension, as the frontend reads lax.slice; the column start 9 clamped to 10 - 3
    traced = trace_function(lambda x: jax.lax.dynamic_slice(x, (2, 9), (4, 3)), *_args([(8, 10)]))
    assert [(op.op, op.attr("starts"), op.attr("stops")) for op in traced.graph.ops] == [
        ("slice", (2, 0), (6, 10)), ("slice", (0, 7), (4, 10))]


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_a_layer_picked_from_a_split_stack_trains_exactly(search):
    # the stack's output features over tp and the rows over dp: the picked layer keeps tp, the window of rows is
    # read from rows gathered over dp
    _trains_exactly(_layer_pick_loss, [(8, 6), (4, 6, 8), np.array(2, np.int32)], ("x", "stack"),
                    ['[{"dp"}, {}]', '[{}, {}, {"tp"}]', "[]"], search, seed=6)


def _two_masks_loss(q, k, valid):
    # a causal mask and a key-padding mask combined (& of bools), one inverted (~), then softmax attention weights
    s = q @ k.T
    causal = jnp.tril(jnp.ones(s.shape, dtype=bool))
    keep = (causal & (valid[None, :] > 0)) | ~(s > 1e9)  # the second term is all True: | and ~ exercised
    keep = keep & ~(causal ^ causal)
    return jnp.sum(jax.nn.softmax(jnp.where(keep & (valid[None, :] > 0), s, -1e9), axis=-1) ** 2)


def test_masks_combined_by_and_or_xor_not_have_jaxs_values_and_gradients():
    args = _args([(6, 4), (6, 4), np.array([1.0, 1.0, 0.0, 1.0, 0.0, 1.0], np.float32)], seed=41)
    ops = check_against_jax(_two_masks_loss, args)
    assert ops["logical"] == 5 and ops["logical_not"] == 2  # &, |, ^, & and & again; two ~
    check_gradient_against_jax(_two_masks_loss, args, "q")


def test_bitwise_and_of_integers_is_refused_with_its_line():
    def f(i, x):
        return x * ((i & 3) > 0)

    with pytest.raises(ModelError, match="'and' of i32 operands is bitwise") as e:
        trace_function(f, np.arange(4, dtype=np.int32), *_args([(4,)]))
    assert _line_of(f, "i & 3") in e.value.where


def test_remainder_and_percent_have_jaxs_values_and_gradients():
    # jnp.remainder (x % y) is lax.rem then a select to the divisor's sign (which reads an and of two masks);
    # jnp.fmod is lax.rem itself
    def loss(x, y):
        return jnp.sum((x % y) * jnp.remainder(x, 1.5) + jnp.fmod(x, y))

    x, y = _args([(4, 6), (6,)], seed=43)
    ops = check_against_jax(loss, [x, y + np.sign(y) * 0.5])
    assert ops["rem"] == 3 and ops["logical"] == 2
    check_gradient_against_jax(loss, [x, y + np.sign(y) * 0.5], "x")
