"""Every op's JAX form is a self-contained module-level ``def`` whose source a generated module can embed.

``shardplan export MODEL --to jax-module`` writes a standalone module that embeds, per catalogue op kind, the
source of its ``jax_form`` (and ``jax_local_form``) from ``inspect.getsource`` and calls it as
``name(jnp, lax, operands, attrs[, ctx])``. So each form must be one complete ``def`` (no lambda, no
closure, no factory) and read nothing but its parameters and builtins (``math`` or ``numpy`` it imports in
its body): exec'ing its source in a namespace holding only the builtins gives the same function.
"""

import ast
import builtins
import dis
import inspect

import numpy as np
import pytest

from graphs.dtypes import DTYPES, jax_dtype_name
from graphs.ops.normalization import DEFAULT_EPS
from graphs.ops.registry import OPS

FORMS = sorted((name, "jax_form") for name, opdef in OPS.items() if opdef.jax_form is not None)
LOCAL_FORMS = sorted((name, "jax_local_form") for name, opdef in OPS.items() if opdef.jax_local_form is not None)
BUILTIN_NAMES = frozenset(dir(builtins))


def _form(name, field):
    return getattr(OPS[name], field)


def _global_names(code) -> set[str]:
    """The global (and unqualified) names ``code`` and the code objects nested in it load or store."""
    names = {ins.argval for ins in dis.get_instructions(code)
             if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL", "STORE_NAME")}
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


def _exec_copy(f):
    """``f`` rebuilt from its source in a namespace holding only the builtins."""
    namespace = {"__builtins__": __builtins__}
    exec(compile(inspect.getsource(f), f"<{f.__name__}>", "exec"), namespace)
    assert set(namespace) == {"__builtins__", f.__name__}, "the source defines exactly the function"
    copy = namespace[f.__name__]
    assert inspect.isfunction(copy)
    return copy


def test_the_catalogue_has_jax_forms_and_the_eleven_local_ones():
    # the ops whose local instance differs from their global form: padding masked (cross_entropy, max, mean, min),
    # indices shifted (gather, take_along_axis, a dynamic_update_slice's window), shapes localised (reshape, slice,
    # a dynamic_slice's window), counting from the block's start (iota)
    assert len(FORMS) >= 30
    assert [name for name, _ in LOCAL_FORMS] == ["cross_entropy", "dynamic_slice", "dynamic_update_slice", "gather",
                                                 "iota", "max", "mean", "min", "reshape", "slice", "take_along_axis"]


@pytest.mark.parametrize("name, field", FORMS + LOCAL_FORMS, ids=lambda v: v)
def test_each_form_is_one_module_level_def_of_its_name(name, field):
    f = _form(name, field)
    assert inspect.isfunction(f)
    assert f.__name__ != "<lambda>", f"{name}'s {field} is a lambda: make it a module-level def"
    assert f.__qualname__ == f.__name__, f"{name}'s {field} is nested ({f.__qualname__}): no factory"
    assert f.__closure__ is None and not f.__code__.co_freevars
    assert f.__defaults__ is None and f.__kwdefaults__ is None
    tree = ast.parse(inspect.getsource(f))
    assert len(tree.body) == 1
    (node,) = tree.body
    assert isinstance(node, ast.FunctionDef) and node.name == f.__name__
    assert not node.decorator_list
    n_params = 5 if field == "jax_local_form" else 4
    assert f.__code__.co_argcount == n_params and not f.__code__.co_kwonlyargcount


@pytest.mark.parametrize("name, field", FORMS + LOCAL_FORMS, ids=lambda v: v)
def test_each_form_reads_only_its_parameters_and_builtins(name, field):
    f = _form(name, field)
    outside = _global_names(f.__code__) - BUILTIN_NAMES
    assert not outside, f"{name}'s {field} reads module globals {sorted(outside)}: import or inline them"
    _exec_copy(f)  # and its source alone defines it


# -- the exec'd copies compute what the originals compute ---------------------------------------------

@pytest.fixture(scope="module")
def jax_x64():
    """JAX with 64-bit types, as test_jax_ops and the runs use it; restored after."""
    jax = pytest.importorskip("jax")
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax
    jax.config.update("jax_enable_x64", before)


def _sample(name):
    """test_jax_ops's sample for ``name``: canonical attributes and numpy operands."""
    from tests.engines.test_jax_ops import SAMPLES, _inputs

    shapes, dtypes, attrs = SAMPLES[name]
    opdef = OPS[name]
    shapes = [tuple(s) for s in shapes]
    attrs = opdef.canonical(shapes, opdef.with_defaults(attrs))
    arrays = _inputs(name, shapes, dtypes, np.random.default_rng(0), attrs)
    out_shape = opdef.infer(shapes, dtypes, attrs)[0]
    return arrays, attrs, shapes + [tuple(out_shape)]


def _same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("name", [n for n, _ in FORMS])
def test_the_exec_d_source_of_each_jax_form_computes_what_the_form_computes(jax_x64, name):
    from jax import lax
    import jax.numpy as jnp

    arrays, attrs, _ = _sample(name)
    operands = [jnp.asarray(a) for a in arrays]
    f = OPS[name].jax_form
    _same(_exec_copy(f)(jnp, lax, operands, attrs), f(jnp, lax, operands, attrs))


class _OneDeviceContext:
    """A ``planner.engines.jax_spmd.Local`` of one device: every block is the whole tensor and starts at 0."""

    def __init__(self, jnp, shapes):
        self._jnp = jnp
        self.global_shapes = self.local_shapes = tuple(shapes)

    def start(self, which, dim):
        return self._jnp.int32(0)

    def valid(self, which):
        return None  # a whole tensor has no padding


@pytest.mark.parametrize("name", [n for n, _ in LOCAL_FORMS])
def test_the_exec_d_source_of_each_jax_local_form_computes_what_the_form_computes(jax_x64, name):
    from jax import lax
    import jax.numpy as jnp

    arrays, attrs, shapes = _sample(name)
    operands = [jnp.asarray(a) for a in arrays]
    ctx = _OneDeviceContext(jnp, shapes)
    f = OPS[name].jax_local_form
    want = f(jnp, lax, operands, attrs, ctx)
    _same(_exec_copy(f)(jnp, lax, operands, attrs, ctx), want)
    # on one device, the local instance is the op itself
    np.testing.assert_allclose(np.asarray(want), np.asarray(OPS[name].jax_form(jnp, lax, operands, attrs)),
                               rtol=1e-6, atol=1e-6)


# -- what the forms write out instead of reading a module's globals ------------------------------------

def test_cast_s_own_dtype_table_is_graphs_dtypes_one(jax_x64):
    from jax import lax
    import jax.numpy as jnp

    x = jnp.ones((2,), jnp.float32)
    for dtype in DTYPES:
        assert OPS["cast"].jax_form(jnp, lax, [x], {"dtype": dtype}).dtype == jnp.dtype(jax_dtype_name(dtype))


@pytest.mark.parametrize("name", ["layernorm", "rmsnorm"])
def test_the_norms_default_eps_is_default_eps(jax_x64, name):
    from jax import lax
    import jax.numpy as jnp

    x = jnp.asarray(np.random.default_rng(0).standard_normal((3, 8)) * 1e-3)  # small: eps matters
    f = OPS[name].jax_form
    _same(f(jnp, lax, [x], {}), f(jnp, lax, [x], {"eps": DEFAULT_EPS}))
    assert not np.array_equal(np.asarray(f(jnp, lax, [x], {})), np.asarray(f(jnp, lax, [x], {"eps": 2e-5})))
