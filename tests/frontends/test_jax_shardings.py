"""planner.frontends.jax reads what a JAX program says about shardings: sharding constraints, a nested jit's
in/out shardings, shard_alike, shard_map (a manual region), out_sharding= and reshard on an Explicit mesh,
and the argument types there. Each case is a JAX function traced by the frontend and lowered by JAX itself
(8 host CPU devices, in a subprocess); the expected annotations are read from JAX's lowered sdy text at test
time: its sharding constraints, argument shardings, manual computations and sharding groups."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

from planner.errors import ModelError  # noqa: E402
from planner.frontends.jax import trace, trace_function  # noqa: E402
from tests.jax_devices import run_on_eight_devices  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

# Each case: a function, its example arguments, built under a mesh of 8 CPU devices. The script prints, per
# case, JAX's lowered text and what the traced graph says.
SCRIPT = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import jax, jax.numpy as jnp
import jax.experimental.shard_alike as sa
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from planner.frontends.jax import trace_function

auto = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
explicit = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
A = jax.ShapeDtypeStruct((8, 8), jnp.float32)


def constraint(a, b):
    h = jax.lax.with_sharding_constraint(a @ b, NamedSharding(auto, P("x", P.UNCONSTRAINED)))
    return jnp.tanh(jax.lax.with_sharding_constraint(h, NamedSharding(auto, P(None, ("x", "y")))))


def nested_jit(a, b):
    inner = jax.jit(lambda u: u * 2.0, in_shardings=NamedSharding(auto, P("x")),
                    out_shardings=NamedSharding(auto, P(None, "y")))
    return inner(a) @ b


def put(a, b):
    return jax.device_put(jnp.tanh(a), NamedSharding(auto, P(None, "y"))) @ b


def typed_put(a, b):
    return jnp.tanh(jax.device_put(a, P(None, "y"))) @ b


def alike(a, b):
    h, a2 = sa.shard_alike(jnp.tanh(a @ b), a)
    return h + a2


def body(a, w):
    h = jax.lax.psum(a @ w, "y")
    g = jax.lax.all_gather(h, "x", axis=0, tiled=True)
    s = jax.lax.psum_scatter(g, "x", scatter_dimension=0, tiled=True)
    t = jax.lax.all_to_all(s, "x", 0, 1, tiled=True)
    return jax.lax.ppermute(t, "x", [(0, 1), (1, 0)])


def every_collective(a, w):
    h = jax.lax.psum(a @ w, "y")
    g = jax.lax.all_gather(h, "x", axis=0, tiled=True)
    u = jax.lax.all_gather(h, "x", axis=1, tiled=False)
    s = jax.lax.psum_scatter(g, "x", scatter_dimension=0, tiled=True)
    t = jax.lax.all_to_all(s, "x", 0, 1, tiled=True)
    i = jax.lax.axis_index("x").astype(jnp.float32)
    extremes = jax.lax.pmax(h, "x") - jax.lax.pmin(h, "x")
    return (jax.lax.ppermute(t, "x", [(0, 1), (1, 0)]) * (i + 1.0),
            jnp.sum(u, axis=1) + jax.lax.pmean(h, "x") + extremes)


def collectives(a, w):
    return jax.shard_map(every_collective, mesh=auto, in_specs=(P("x", "y"), P("y", None)),
                         out_specs=(P("x", None), P("x")))(a, w)


def manual(a, w):
    return jax.shard_map(body, mesh=auto, in_specs=(P("x", "y"), P("y", None)), out_specs=P("x", None))(a, w) * 2.0


def partly_manual(a):
    f = jax.shard_map(lambda u: jax.lax.psum(u, "x"), mesh=auto, in_specs=P("x"), out_specs=P(), axis_names={"x"})
    return jnp.tanh(f(a))


def typed(a, b):
    h = jnp.matmul(a, b, out_sharding=P("x", "y"))
    r = jax.sharding.reshard(h, P(None, "y"))
    s = jnp.reshape(r, (4, 16), out_sharding=P(None, "y"))
    e = jnp.einsum("ij,jk->ik", a, b, out_sharding=P("x", None))
    return s, e


def mixed_typed(a, b, c):
    h = jnp.matmul(a, b, out_sharding=P("x", None))
    return jnp.tanh(jax.sharding.reshard(h, P(None, None))) @ c


def dims(s):
    return "[" + ", ".join(str(d) for d in s.dims) + "]"


def ours(t):
    g = t.graph
    producer = lambda n: g.op(g.producer(n)).op if g.producer(n) else "argument"  # noqa: E731
    return {
        "arguments": {n: dims(g.tensor(n).sharding) for n in t.inputs if g.tensor(n).sharding is not None},
        "constraints": [dims(op.out_sharding) for op in g.ops if op.out_sharding is not None
                        and g.region_of_op(op.name) is None],
        "regions": [{"manual_axes": list(r.manual_axes), "in": [dims(s) for s in r.in_shardings],
                     "out": [dims(s) for s in r.out_shardings], "inputs": list(r.inputs),
                     "body": [g.op(o).op for o in r.ops]} for r in g.manual_regions],
        "groups": [sorted(producer(n) if g.producer(n) else n for n in grp) for grp in g.shard_as],
        "inputs": list(t.inputs),
    }


out = {}
for name, fn, mesh, args in [
    ("constraint", constraint, auto, (A, A)), ("nested_jit", nested_jit, auto, (A, A)), ("put", put, auto, (A, A)),
    ("alike", alike, auto, (A, A)), ("manual", manual, auto, (A, A)), ("partly_manual", partly_manual, auto, (A,)),
]:
    out[name] = {"jax": jax.jit(fn).lower(*args).as_text(), "ours": ours(trace_function(fn, *args))}
import numpy as np
from graphs.evaluate import run_reference
rng = np.random.default_rng(0)
a, w = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
t = trace_function(collectives, a, w)
mine = run_reference(t.graph, {"a": a.astype(np.float64), "w": w.astype(np.float64), **{
    x.name: np.full(x.shape, x.value) for x in t.graph.tensors.values() if x.kind == "const"}})
out["collectives_max_abs_diff"] = [float(np.abs(mine[n] - np.asarray(v)).max())
                                   for n, v in zip(t.outputs, jax.jit(collectives)(a, w))]
placed = (jax.device_put(jnp.ones((8, 8)), NamedSharding(auto, P("x", None))),
          jax.device_put(jnp.ones((8, 8)), NamedSharding(auto, P(None, ("x", "y")))))
out["placed"] = {"jax": jax.jit(lambda a, b: a @ b).lower(*placed).as_text(),
                 "ours": ours(trace_function(lambda a, b: a @ b, *placed))}
with jax.set_mesh(explicit):
    args = (jax.ShapeDtypeStruct((8, 8), jnp.float32, sharding=P("x", None)),
            jax.ShapeDtypeStruct((8, 8), jnp.float32, sharding=P(None, "y")))
    out["typed"] = {"jax": jax.jit(typed).lower(*args).as_text(), "ours": ours(trace_function(typed, *args))}
    out["typed_put"] = {"jax": jax.jit(typed_put).lower(*args).as_text(),
                        "ours": ours(trace_function(typed_put, *args))}
    typed_args = args
mixed = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit, AxisType.Auto))
with jax.set_mesh(mixed):
    args = (jax.ShapeDtypeStruct((16, 32), jnp.float32, sharding=P("x", None)),
            jax.ShapeDtypeStruct((32, 64), jnp.float32, sharding=P()),
            jax.ShapeDtypeStruct((64, 32), jnp.float32, sharding=P()))
    t = trace_function(mixed_typed, *args)
    out["mixed"] = {"jax": jax.jit(mixed_typed).lower(*args).as_text(), "ours": ours(t),
                    "texts": [str(op.out_sharding.dims_text()) for op in t.graph.ops if op.out_sharding is not None]}
with jax.set_mesh(explicit):
    args = typed_args
    out["typed_mesh"] = {a.name: a.type.value for a in trace_function(typed, *args).graph.mesh.axes}
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def cases():
    return run_on_eight_devices(SCRIPT, timeout=300)


# -- JAX's side, read from its lowered sdy text -----------------------------------------------

_SHARDING = r"<@\w+, (\[[^\[\]]*\])>"


def sdy_constraints(text):
    """The shardings of the program's ``sdy.sharding_constraint``\\ s outside manual computations, in order."""
    outside = re.sub(r"sdy\.manual_computation.*?sdy\.return", "", text, flags=re.S)
    return re.findall(r"sdy\.sharding_constraint %\S+ " + _SHARDING, outside)


def sdy_arguments(text):
    """``{argument index: sharding}`` of the main function's annotated arguments."""
    main = re.search(r"func\.func public @main\((.*?)\) ->", text).group(1)
    return {int(i): s for i, s in re.findall(r"%arg(\d+): tensor<[^>]*> \{sdy\.sharding = #sdy\.sharding" + _SHARDING,
                                             main)}


def sdy_manual(text):
    """Each manual computation: its in/out shardings, manual axes and the collectives of its body."""
    found = []
    for m in re.finditer(r"sdy\.manual_computation\((.*?)\) in_shardings=\[(.*?)\] out_shardings=\[(.*?)\] "
                         r"manual_axes=\{(.*?)\}(.*?)sdy\.return", text, re.S):
        found.append({"in": re.findall(_SHARDING, m.group(2)), "out": re.findall(_SHARDING, m.group(3)),
                      "manual_axes": re.findall(r'"(\w+)"', m.group(4)),
                      "collectives": re.findall(r'"?stablehlo\.(all_reduce|all_gather|reduce_scatter|all_to_all|'
                                                r'collective_permute)"?', m.group(5))})
    return found


def sdy_groups(text):
    """Each sharding group: the kinds of its members (an argument by name, else the defining op's name)."""
    defined = dict(re.findall(r"(%\w+) = ([\w.]+)", text))
    groups: dict[str, list[str]] = {}
    for value, gid in re.findall(r"sdy\.sharding_group (%\w+) group_id=(\d+)", text):
        groups.setdefault(gid, []).append(value)
    return [[defined.get(v, v) for v in members] for _, members in sorted(groups.items())]


# collectives as the frontend names them and as they lower (pbroadcast / pvary lowers to nothing)
LOWERED = {"psum": "all_reduce", "all_gather": "all_gather", "psum_scatter": "reduce_scatter",
           "all_to_all": "all_to_all", "ppermute": "collective_permute"}


@pytest.mark.slow
def test_sharding_constraints_are_the_programs(cases):
    for name in ("constraint", "nested_jit", "put"):
        c = cases[name]
        assert c["ours"]["constraints"] == sdy_constraints(c["jax"]), name
    # the first two constrain (an empty list would agree by accident); JAX lowers a device_put inside jit on an
    # Auto mesh to nothing, and so does the frontend
    assert cases["constraint"]["ours"]["constraints"] and cases["nested_jit"]["ours"]["constraints"]
    assert cases["put"]["ours"]["constraints"] == []


@pytest.mark.slow
def test_shard_alike_is_a_shard_as_group_of_the_same_values(cases):
    c = cases["alike"]
    [jax_group] = sdy_groups(c["jax"])
    [group] = c["ours"]["groups"]
    # JAX groups the tanh's result and argument %arg0 (a); the frontend the same two values
    args = {f"%arg{i}": n for i, n in enumerate(c["ours"]["inputs"])}
    expected = sorted(args.get(v, v.replace("stablehlo.", "")) for v in jax_group)
    assert group == expected


@pytest.mark.slow
def test_shard_map_is_a_manual_region_with_its_specs_and_collectives(cases):
    for name in ("manual", "partly_manual"):
        c = cases[name]
        [theirs] = sdy_manual(c["jax"])
        [region] = c["ours"]["regions"]
        assert region["in"] == theirs["in"] and region["out"] == theirs["out"], name
        assert sorted(region["manual_axes"]) == sorted(theirs["manual_axes"]), name
        assert [LOWERED[k] for k in region["body"] if k in LOWERED] == theirs["collectives"], name
    assert cases["manual"]["ours"]["regions"][0]["body"].count("pbroadcast") == 1  # w (invariant over x) pvary'd


@pytest.mark.slow
def test_explicit_mesh_reads_argument_types_out_shardings_and_reshard(cases):
    c = cases["typed"]
    args = sdy_arguments(c["jax"])
    assert {c["ours"]["inputs"][i]: s for i, s in args.items()} == c["ours"]["arguments"]
    assert len(args) == 2
    # matmul's out_sharding, the reshard, the reshape's out_sharding, the einsum's: in program order
    assert c["ours"]["constraints"] == sdy_constraints(c["jax"])
    assert len(c["ours"]["constraints"]) == 4
    # a device_put on an Explicit mesh retypes its operand as reshard does (JAX then also constrains the matmul's
    # result to the type it infers, which explicit mode infers itself: not a sharding the program states)
    put = cases["typed_put"]
    assert put["ours"]["constraints"] == sdy_constraints(put["jax"])[:1] == ['[{}, {"y"}]']
    # no mesh= given: the mesh is the one the program's shardings name, with its axis types
    assert cases["typed_mesh"] == {"x": "Explicit", "y": "Explicit"}


@pytest.mark.slow
def test_arrays_placed_on_a_mesh_give_the_argument_shardings_jit_takes(cases):
    c = cases["placed"]
    args = sdy_arguments(c["jax"])
    assert len(args) == 2
    assert {c["ours"]["inputs"][i]: s for i, s in args.items()} == c["ours"]["arguments"]


@pytest.mark.slow
def test_a_shard_map_region_computes_what_jax_computes(cases):
    # every collective the frontend reads (psum, tiled and untiled all_gather, psum_scatter, all_to_all, ppermute,
    # axis_index, pmean, pmax, pmin) in one body, run by the graph's reference (the body once per manual coordinate)
    # and by JAX on 8 devices: float32 sums of at most 8 products of standard normals, |value| < 50 (pmax and pmin
    # pick one of them exactly), 50 * 8 * 2**-24 < 1e-4
    diffs = cases["collectives_max_abs_diff"]
    assert len(diffs) == 2 and max(diffs) < 1e-4


@pytest.mark.slow
def test_a_result_type_on_a_mesh_with_auto_axes_is_open_to_them_as_jax_lowers_it(cases):
    c = cases["mixed"]
    full = re.findall(r"sdy\.sharding_constraint %\S+ <@\w+, (\[[^\[\]]*\](?:, replicated=\{[^}]*\})?)>", c["jax"])
    # the matmul's out_sharding and the reshard, first in JAX's text (it then constrains each later result to the
    # type it infers, which explicit planning infers itself)
    assert c["texts"] == full[:2] == ['[{"x", ?}, {?}]', '[{?}, {?}], replicated={"x"}']
    # the arguments are placements (jit's in-shardings): closed, as JAX writes them
    assert c["ours"]["arguments"] == {"a": '[{"x"}, {}]', "b": "[{}, {}]", "c": "[{}, {}]"}


# -- in this process: no devices needed ------------------------------------------------------

def test_grad_adds_are_read_and_compute_what_jax_computes():
    f = jax.grad(lambda x: jnp.sum(jnp.tanh(x) * x))  # x read twice: its cotangents summed by add_any
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    traced = trace_function(f, x)
    from graphs.evaluate import run_reference

    ours = run_reference(traced.graph, {"x": x.astype(np.float64), **{
        t.name: np.full(t.shape, t.value) for t in traced.graph.tensors.values() if t.kind == "const"}})
    np.testing.assert_allclose(ours[traced.outputs[0]], np.asarray(f(x), np.float64), rtol=1e-5, atol=1e-5)
    assert "add" in {op.op for op in traced.graph.ops}


def test_grad_of_relu_reads_its_comparison_and_select_and_computes_jaxs_gradient():
    # jax.grad writes relu's backward as gt and select_n: a comparison and a select of the catalogue
    from collections import Counter

    from graphs.evaluate import run_reference

    def mlp(w, x):
        return jnp.sum(jax.nn.relu(x @ w))

    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((2, 8)).astype(np.float32)
    t = trace_function(jax.grad(mlp), w, x)
    g = t.graph
    assert {"comparison", "select"} <= set(Counter(op.op for op in g.ops))
    feeds = {n: a.astype(np.float64) for n, a in zip(t.inputs, (w, x))}
    feeds.update({c.name: np.full(c.shape, c.value) for c in g.tensors.values() if c.kind == "const"})
    [out] = g.outputs
    ours = run_reference(g, feeds)[out]
    np.testing.assert_allclose(ours, np.asarray(jax.grad(mlp)(w, x), np.float64), rtol=1e-5, atol=1e-5)


def test_a_refused_primitive_no_result_needs_is_dropped_as_jax_drops_it():
    g = trace(lambda x: (jnp.arctan(x), x * 2.0)[1], np.ones((4,), np.float32))
    assert [op.op for op in g.ops] == ["mul"]


def test_collective_outside_shard_map_is_refused():
    # under vmap with a named axis JAX traces psum; shardplan reads collectives inside shard_map bodies only
    f = jax.vmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")
    with pytest.raises(ModelError, match=r"shard_map|psum"):
        trace(f, np.ones((4, 2), np.float32))


CLI_MODULE = '''
import jax, jax.numpy as jnp

def mlp(w, x):
    return jnp.sum(jax.lax.erf_inv(jnp.tanh(x @ w)))

grad_mlp = jax.grad(mlp)
'''


def test_cli_refuses_a_primitive_without_an_op_with_exit_2_naming_it(tmp_path):
    (tmp_path / "gradmod.py").write_text(CLI_MODULE)
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-m", "planner", "import-jax", "gradmod.py:grad_mlp", "--args", "f32[8,4]",
                        "f32[2,8]"], text=True, capture_output=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "JAX primitive 'erf_inv'" in r.stderr and "gradmod.py:5" in r.stderr
    assert "Traceback" not in r.stderr


# -- abstract meshes: tracing needs no devices --------------------------------------------------

def _explicit():
    from jax.sharding import AbstractMesh, AxisType

    return AbstractMesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)


def _typed(mesh, shape, *spec):
    from jax.sharding import NamedSharding, PartitionSpec as P

    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*spec)))


def test_a_sharded_broadcast_stays_with_its_out_sharding():
    from jax.sharding import PartitionSpec as P

    mesh = _explicit()

    def f(a, b):
        return a + jax.lax.broadcast_in_dim(b, (8, 8), (1,), out_sharding=P("x", None))

    with jax.sharding.use_abstract_mesh(mesh):
        g = trace(f, _typed(mesh, (8, 8), "x", None), _typed(mesh, (8,), None))
    sharded = [op for op in g.ops if op.out_sharding is not None]
    # the broadcast is materialised (an add of zeros of its shape), not absorbed into the add that reads it
    assert [(op.op, g.tensor(op.output).shape, str(op.out_sharding.dims_text())) for op in sharded] == \
        [("add", (8, 8), '[{"x"}, {}]')]


def test_a_sharding_inside_a_fused_pattern_is_refused_with_its_line():
    from jax.sharding import PartitionSpec as P

    mesh = _explicit()

    def f(a):
        return jnp.reshape(jnp.sum(a, axis=1), (8, 1), out_sharding=P("x", None)) / 8.0  # a mean, keepdims

    with jax.sharding.use_abstract_mesh(mesh):
        with pytest.raises(ModelError, match="'reshape' has a sharding.*folded into a larger op") as e:
            trace(f, _typed(mesh, (8, 8), "x", None))
    assert "test_jax_shardings.py" in e.value.where


def test_a_sharding_on_another_mesh_is_refused_naming_both():
    from jax.sharding import AbstractMesh, NamedSharding, PartitionSpec as P

    m = AbstractMesh((2, 4), ("x", "y"))
    f = lambda a: jax.lax.with_sharding_constraint(a * 2.0, NamedSharding(m, P("x")))  # noqa: E731
    with pytest.raises(ModelError, match="on mesh x=2,y=4 but the traced program's mesh is x=4,y=2"):
        trace(f, np.ones((8, 8), np.float32), mesh={"x": 4, "y": 2})
    g = trace(f, np.ones((8, 8), np.float32))  # no mesh given: the program's
    assert [(a.name, a.size) for a in g.mesh.axes] == [("x", 2), ("y", 4)]


def test_a_given_sharding_that_disagrees_with_the_arguments_type_is_refused():
    mesh = _explicit()
    with jax.sharding.use_abstract_mesh(mesh):
        with pytest.raises(ModelError, match=r"argument 'a' is sharded \[\{\"x\"\}, \{\}\] by jax.typeof"):
            trace(lambda a: a * 2.0, _typed(mesh, (8, 8), "x", None), shardings=['[{}, {"y"}]'])


MANUAL_MODULE = '''
import jax, jax.numpy as jnp
import jax.experimental.shard_alike as sa
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec as P

mesh = AbstractMesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)


def block(a, w):
    h = jax.shard_map(lambda u, v: jax.lax.psum(u @ v, "y"), mesh=mesh, in_specs=(P("x", "y"), P("y")),
                      out_specs=P("x"))(a, w)
    h2, a2 = sa.shard_alike(jnp.tanh(h), a)
    return jax.lax.with_sharding_constraint(h2 + a2, NamedSharding(mesh, P(None, "y")))
'''


def test_cli_writes_the_programs_region_group_and_constraint_as_a_model_that_loads_back(tmp_path):
    from graphs import load_model
    from graphs.yaml_dump import dump_model

    (tmp_path / "manualmod.py").write_text(MANUAL_MODULE)
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-m", "planner", "import-jax", "manualmod.py:block", "--args", "f32[8,8]",
                        "f32[8,8]", "--out", "block.yaml"], text=True, capture_output=True, env=env, cwd=tmp_path,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    g = load_model(str(tmp_path / "block.yaml"))
    # no --mesh: the mesh is the one the program's shardings name
    assert [(a.name, a.size) for a in g.mesh.axes] == [("x", 2), ("y", 4)]
    [region] = g.manual_regions
    assert region.manual_axes == ("x", "y") and region.inputs == ("a", "w")
    assert [op.op for op in g.ops if g.region_of_op(op.name) is region and op.op not in
            ("manual_enter", "manual_exit")] == ["pbroadcast", "matmul", "psum"]
    assert g.shard_as == (("tanh_0.out", "a"),)
    assert [str(op.out_sharding.dims_text()) for op in g.ops if op.op == "sharding_constraint"] == ['[{}, {"y"}]']
    # the file is the model: dumped again (without the source comments) it is the same text
    written = re.sub(r"  # .*$", "", (tmp_path / "block.yaml").read_text(), flags=re.M)
    assert dump_model(g) == written
