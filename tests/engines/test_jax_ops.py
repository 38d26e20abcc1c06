"""Every catalogue op has a jax.numpy version computing what its numpy reference computes (issue 14)."""

import numpy as np
import pytest

from graphs.dtypes import is_float, numpy_dtype
from graphs.ops.registry import get_op, op_names

jax = pytest.importorskip("jax")


@pytest.fixture(autouse=True, scope="module")
def x64():
    """i64 operands stay 64-bit, as jax_env sets for runs; restored after, so that tests that trace JAX
    functions later in the same process see JAX's default 32-bit types."""
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


from planner.engines.jax_ops import implemented_ops, jax_op, jnp_dtype  # noqa: E402
from planner.engines.jax_regions import lowered_ops  # noqa: E402

# One sample per op: operand shapes and dtypes, attributes. Shapes are small and uneven so that an
# axis mix-up (transpose, reduction axes, padding) changes the values. An op missing here fails below.
SAMPLES = {
    "abs": ([(3, 4)], ["f32"], {}),
    "add": ([(3, 4), (4,)], ["f32", "f32"], {}),
    "cast": ([(3, 4)], ["f32"], {"dtype": "bf16"}),
    "comparison": ([(3, 4), (4,)], ["f32", "f32"], {"direction": "ge"}),
    "concat": ([(2, 3), (4, 3)], ["f32", "f32"], {"axis": 0}),
    "conv2d": ([(2, 3, 7, 6), (4, 3, 3, 2)], ["f32", "f32"], {"stride": [2, 1], "padding": [1, 0]}),
    "cross_entropy": ([(3, 5, 7), (3, 5)], ["f32", "i64"], {}),
    "div": ([(3, 4), (3, 4)], ["f32", "f32"], {}),
    "einsum": ([(2, 3, 4), (4, 5)], ["f32", "f32"], {"equation": "bsh,hf->bfs"}),
    "exp": ([(3, 4)], ["f32"], {}),
    "expm1": ([(3, 4)], ["f32"], {}),
    "sin": ([(3, 4)], ["f32"], {}),
    "cos": ([(3, 4)], ["f32"], {}),
    "sign": ([(3, 4)], ["f32"], {}),
    "floor": ([(3, 4)], ["f32"], {}),
    "ceil": ([(3, 4)], ["f32"], {}),
    "round": ([(3, 4)], ["f32"], {}),
    "gather": ([(10, 4), (2, 3)], ["f32", "i32"], {}),
    "gelu": ([(3, 4)], ["f32"], {}),
    "argmax": ([(3, 4)], ["f32"], {"axis": 1}),
    "argmin": ([(3, 4, 2)], ["f32"], {"axis": 0, "index_dtype": "i64"}),
    "cumsum": ([(3, 4)], ["f32"], {"axis": 1, "reverse": True}),
    "take_along_axis": ([(3, 5, 4), (3, 2, 4)], ["f32", "i32"], {"axis": 1}),
    "iota": ([], [], {"shape": [3, 4], "dimension": 1}),
    "top_k": ([(3, 5)], ["f32"], {"k": 2}),
    "erf": ([(3, 4)], ["f32"], {}),
    "erfc": ([(3, 4)], ["f32"], {}),
    "is_finite": ([(3, 4)], ["f32"], {}),
    "layernorm": ([(3, 8), (8,), (8,)], ["f32", "f32", "f32"], {"eps": 1e-3}),
    "log": ([(3, 4)], ["f32"], {}),
    "log1p": ([(3, 4)], ["f32"], {}),
    "logical": ([(3, 4), (4,)], ["bool", "bool"], {"operation": "xor"}),
    "logical_not": ([(3, 4)], ["bool"], {}),
    "pow": ([(3, 4), (4,)], ["f32", "f32"], {}),
    "flip": ([(3, 4, 2)], ["f32"], {"axes": [0, 2]}),
    "roll": ([(3, 4, 2)], ["f32"], {"shift": -3, "axis": 1}),
    "pad": ([(3, 4)], ["f32"], {"low": [1, -1], "high": [0, 2], "value": 1.5}),
    "dynamic_slice": ([(6, 4, 3), (), ()], ["f32", "i32", "i32"], {"sizes": [2, 4, 2], "starts": [None, 0, None]}),
    "dynamic_update_slice": ([(6, 4, 3), (2, 4, 1), (), ()], ["f32", "f32", "i32", "i32"], {"starts": [None, 0, None]}),
    "matmul": ([(2, 5, 3), (4, 5)], ["f32", "f32"], {"transpose_a": True, "transpose_b": True}),
    "max": ([(3, 4, 5)], ["i32"], {"axes": [0, -1], "keepdims": True}),
    "maximum": ([(3, 4), (3, 1)], ["f32", "f32"], {}),
    "min": ([(3, 4, 5)], ["f32"], {"axes": [1], "keepdims": False}),
    "minimum": ([(3, 4), (4,)], ["f32", "f32"], {}),
    "mean": ([(3, 4, 5)], ["f32"], {"axes": [1]}),
    "mul": ([(3, 4), (3, 4)], ["f32", "f32"], {}),
    "rem": ([(3, 4), (4,)], ["f32", "f32"], {}),
    "neg": ([(3, 4)], ["i32"], {}),
    "propagation_barrier": ([(3, 4)], ["f32"], {"allowed_direction": "forward"}),
    "relu": ([(3, 4)], ["f32"], {}),
    "reshape": ([(4, 6)], ["f32"], {"shape": [2, -1, 3]}),
    "rmsnorm": ([(3, 8), (8,)], ["f32", "f32"], {}),
    "rsqrt": ([(3, 4)], ["f32"], {}),
    "select": ([(3, 4), (3, 4), (4,)], ["bool", "f32", "f32"], {}),
    "sharding_constraint": ([(3, 4)], ["f32"], {}),
    "stop_gradient": ([(3, 4)], ["f32"], {}),
    "sigmoid": ([(3, 4)], ["f32"], {}),
    "slice": ([(5, 6)], ["f32"], {"starts": [1, 2], "stops": [4, 6]}),
    "softmax": ([(3, 4, 5)], ["f32"], {"axis": 1}),
    "sqrt": ([(3, 4)], ["f32"], {}),
    "sort": ([(3, 5), (3, 5)], ["f32", "i32"], {"axis": 1, "returns": "payload"}),
    "sub": ([(3, 4), (3, 4)], ["f32", "f32"], {}),
    "sum": ([(3, 4, 5)], ["i32"], {}),
    "tanh": ([(3, 4)], ["f32"], {}),
    "transpose": ([(2, 3, 4)], ["f32"], {"perm": [2, 0, 1]}),
}


def _inputs(name, shapes, dtypes, rng, attrs=None):
    op = get_op(name)
    bounds = {i: shapes[j][d] for i, j, d in op.indexed(op.canonical(shapes, op.with_defaults(attrs or {})))}
    out = []
    for k, (shape, dtype) in enumerate(zip(shapes, dtypes)):
        if is_float(dtype):
            x = rng.standard_normal(shape)
            if name == "div" and k == 1:
                x = np.sign(x) * (0.5 + np.abs(x))  # away from 0
            if name in ("log", "log1p", "sqrt", "rsqrt", "pow"):
                x = 0.5 + np.abs(x)  # its domain, away from 0
            out.append(x.astype(numpy_dtype(dtype)))
        else:  # indices and labels within what their op accepts; other integers small and signed
            high = bounds.get(k, 10)
            low = 0 if k in bounds else -10
            out.append(rng.integers(low, high, shape).astype(numpy_dtype(dtype)))
    return out


#: Ops that run per device here; the collectives and region boundary ops run inside a region's shard_map
#: (planner.engines.jax_regions, tested end to end in test_jax_regions.py).
LOCAL_OPS = tuple(n for n in op_names() if n not in lowered_ops())


def test_every_registered_op_has_a_jax_version_and_a_sample_here():
    assert set(implemented_ops()) | set(lowered_ops()) == set(op_names())
    assert not set(implemented_ops()) & set(lowered_ops())
    assert set(SAMPLES) == set(LOCAL_OPS), "add a sample for each new catalogue op"


@pytest.mark.parametrize("name", LOCAL_OPS)
def test_jax_op_computes_what_the_numpy_reference_computes(name):
    shapes, dtypes, attrs = SAMPLES[name]
    opdef = get_op(name)
    attrs = opdef.canonical([tuple(s) for s in shapes], opdef.with_defaults(attrs))  # as a graph stores them
    arrays = _inputs(name, shapes, dtypes, np.random.default_rng(0), attrs)
    want = np.asarray(opdef.reference(arrays, attrs))
    got = jax_op(name)([jax.numpy.asarray(a) for a in arrays], attrs)
    out_dtype = opdef.infer([tuple(s) for s in shapes], dtypes, attrs)[1]
    assert got.shape == want.shape
    assert got.dtype == jnp_dtype(out_dtype)  # computed in the declared type (bytes on XLA are those)
    if is_float(out_dtype):
        # float32 against the float32 reference: both round; bf16 keeps 8 bits of mantissa
        rtol = 1e-2 if out_dtype == "bf16" else 1e-5
        np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(np.asarray(got), want)
