import pytest

from graphs.ops.registry import OPS, get_op, op_names
from planner.errors import ModelError

SPEC_OPS = (
    "matmul einsum add sub mul div maximum relu gelu tanh exp sigmoid neg cast sum mean max softmax "
    "layernorm rmsnorm reshape transpose gather concat slice cross_entropy conv2d"
).split() + ["sharding_constraint", "propagation_barrier"]  # issue 12's annotation ops
SPEC_OPS += ["psum", "pmean", "pbroadcast", "all_gather", "psum_scatter", "all_to_all", "ppermute", "axis_index",
             "manual_enter", "manual_exit"]  # issue 13's collectives and manual region boundary
SPEC_OPS += ["all_gather_invariant", "pscatter"]  # seed 004's invariant gather and its transpose, in regions
SPEC_OPS += ["log"]  # jax.nn.log_softmax's logarithm (the JAX frontend reads it)
SPEC_OPS += ["min", "minimum"]  # the minimum beside the maximum (a pending minimum, as JAX's reduce_min / pmin)
SPEC_OPS += ["abs", "rsqrt", "sqrt"]  # JAX primitives of losses and norms written by hand (the frontend reads them)
SPEC_OPS += ["comparison", "is_finite", "select"]
SPEC_OPS += ["expm1", "log1p"]
SPEC_OPS += ["erf", "erfc"]  # jax.nn.gelu(approximate=False) reads erfc (the frontend reads both)
SPEC_OPS += ["argmax", "argmin"]  # jnp.argmax / argmin: a router's expert choice (the frontend reads them)
SPEC_OPS += ["top_k"]  # lax.top_k: a top-2 router's experts and gates (the frontend reads its two results)
SPEC_OPS += ["cumsum"]  # jnp.cumsum: an expert's capacity positions in a GShard dispatch (the frontend reads it)
SPEC_OPS += ["flip"]  # jnp.flip (the frontend reads lax.rev)
SPEC_OPS += ["roll"]  # jnp.roll by a constant (the frontend reads its concatenate of two slices)
SPEC_OPS += ["pad"]  # jnp.pad / lax.pad by a constant (a negative count crops): the frontend reads lax.pad
SPEC_OPS += ["sort"]  # jnp.sort, jnp.argsort (keys with an iota payload): the frontend reads lax.sort
SPEC_OPS += ["pow"]  # x ** 0.5, x ** 2.0 and jnp.power of float exponents (the frontend reads lax.pow)
SPEC_OPS += ["take_along_axis"]  # jnp.take_along_axis: a cross-entropy's pick of each label (the frontend reads it)
SPEC_OPS += ["stop_gradient"]  # lax.stop_gradient: optax's cross-entropy shift, logsumexp's (the frontend reads it)
SPEC_OPS += ["pmax", "pmin"]  # lax.pmax / pmin in a shard_map body: a stable softmax's maximum (the frontend reads)
SPEC_OPS += ["sin", "cos"]  # rotary embeddings' angles computed in the traced function (the frontend reads them)
SPEC_OPS += ["sign", "floor", "ceil", "round"]  # quantisation written by hand (jnp.sign, floor, ceil, round)
SPEC_OPS += ["dynamic_update_slice"]  # lax.dynamic_update_slice: a KV cache's new entry (the frontend reads it)
SPEC_OPS += ["logical", "logical_not"]  # masks combined: jnp.logical_and/or/xor/not, & | ^ ~ (the frontend reads them)
SPEC_OPS += ["rem"]  # jnp.remainder and % (their lax.rem, then a select on the sign)
SPEC_OPS += ["dynamic_slice"]  # lax.dynamic_slice and x[i] at a computed i (the frontend reads lax.dynamic_slice)
SPEC_OPS += ["iota"]  # jnp.arange, jax.nn.one_hot and jnp.tril's masks (the frontend reads lax.iota)  # jax.nn.elu, softplus and log_sigmoid (the frontend reads them)  # jnp.where and JAX's comparisons (select_n, gt ...; the frontend reads them)


def test_registry_has_exactly_the_spec_ops_in_alphabetical_order():
    assert sorted(SPEC_OPS) == list(op_names())
    assert list(OPS) == sorted(OPS)


def test_every_entry_is_named_after_its_key():
    assert all(opdef.name == name for name, opdef in OPS.items())


def test_unknown_op_suggests_and_lists_known_ops():
    with pytest.raises(ModelError) as e:
        get_op("softmx")
    assert "did you mean softmax?" in e.value.message
    assert "known ops: abs, add, all_gather" in e.value.message


def test_unknown_attribute_lists_the_valid_ones():
    with pytest.raises(ModelError, match=r"matmul has no attribute 'transpose_c'; did you mean transpose_b\? "
                                         r"\(its attributes: transpose_a, transpose_b\)"):
        get_op("matmul").with_defaults({"transpose_c": True})


def test_missing_required_attribute():
    with pytest.raises(ModelError, match="reshape needs the attribute 'shape'"):
        get_op("reshape").with_defaults({})


@pytest.mark.parametrize("name, n, text", [("relu", 2, "1 input"), ("layernorm", 4, "1 to 3 inputs"),
                                          ("rmsnorm", 0, "1 or 2 inputs"), ("concat", 0, "at least 1 input")])
def test_arity_messages(name, n, text):
    with pytest.raises(ModelError, match=f"{name} takes {text}, got {n}"):
        get_op(name).check_arity(n)
