"""JAX functions in, plans' shardings out.

:func:`trace` runs ``jax.make_jaxpr`` on a function and its example arguments and turns the
jaxpr into a :class:`~graphs.graph.ComputationGraph` of catalogue ops
(:mod:`planner.frontends.jaxpr` maps the primitives, :mod:`planner.frontends.fusion` recognises
mean, softmax, layer and RMS norms and gelu); an unsupported primitive is a
:class:`~planner.errors.ModelError` naming it and the line that used it. The graph carries
the mesh and the shardings the user gave, so it plans like any model:

.. code-block:: python

    graph = trace(block, params, x, mesh={"dp": 2, "tp": 4}, params=["params"],
                  shardings={"x": '[{"dp"}, {}, {}]', "params.w1": P(None, "tp")})
    p = planner.api.plan(graph, search="ilp")
    s = shardings_for(p, block, params, x)        # NamedShardings on the plan's mesh
    jax.jit(block, in_shardings=s.in_shardings, out_shardings=s.out_shardings)(params, x)

**Names.** A tensor is named after the Python parameter it comes from
(``inspect.signature``); inside a pytree argument its path is appended with dots
(``params.wq``, ``layers.0.w``). Results are ``out`` (one result) or ``out.0``, ``out.1``,
``out.logits`` ... Ops are named by kind and count (``matmul_0``, ``softmax_0``), and
:attr:`Traced.sources` gives each op's source line.

**Kinds.** Arguments named in ``params`` (argument names, leaf names or positions) are
``param`` tensors (trained weights); the others ``input``. Literals and captured constants are
``const`` tensors (a captured array must hold one value throughout: the format stores one number).

**Shardings.** ``shardings`` gives argument shardings: a sequence with one entry per positional
argument, or a mapping from argument, leaf or result names; each entry is Shardy-style text
(``'[{"x"}, {}]'``), a ``PartitionSpec``, a ``NamedSharding``, None, or a dict / list of these
mirroring a pytree argument. ``out_shardings`` does the same for the results (they become the
``out_sharding`` of the ops that make them).

**Mesh.** ``{axis: size}``, mesh text (``x=2,y=4``), or a ``jax.sharding.Mesh`` (its axis names,
shape, device order and axis types; the function is traced under it, so bare ``PartitionSpec`` entries
resolve). Without one, the mesh the program's shardings name (axis types included).

**What the program says.** Sharding constraints, ``reshard``, ``out_sharding=``, ``shard_alike``,
``shard_map`` and a nested jit's shardings are read (:mod:`planner.frontends.jaxpr`); so are an
argument's type on an Explicit mesh (``jax.typeof(x).sharding``) and the ``NamedSharding`` an example
array is placed with (what ``jax.jit`` takes as its in-sharding). A sharding given in ``shardings``
must agree with them.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from graphs import ComputationGraph
from planner.errors import ModelError, ShardplanError, did_you_mean
from planner.frontends.fusion import fuse
from planner.frontends.jaxpr import Walker, dtype_of, mesh_axes, partition_spec_text
from planner.frontends.trace import Trace
from planner.ir import TensorSharding
from planner.ir.mesh import Mesh
from planner.ir.text import parse_mesh_spec
from planner.notations.jax import from_partition_spec

INSTALL_HINT = 'JAX is not installed; install the optional extra with pip install -e ".[jax]"'


def require_jax():
    """The ``jax`` module, or a ShardplanError saying how to install it."""
    try:
        import jax
    except ImportError:
        raise ShardplanError(INSTALL_HINT) from None
    return jax


@dataclass(frozen=True, slots=True)
class Traced:
    """A traced function: its ``graph``, each op's source line (``sources``), the names of its
    argument leaves (``inputs``, in flattening order) and of its results (``outputs``)."""

    graph: ComputationGraph
    sources: Mapping[str, str]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def trace(fn: Callable, *example_args: Any, mesh: Any = None, shardings: Any = None, out_shardings: Any = None,
          params: Sequence[str | int] = (), name: str | None = None) -> ComputationGraph:
    """The graph of ``fn`` on ``example_args`` (see the module docstring)."""
    return trace_function(fn, *example_args, mesh=mesh, shardings=shardings, out_shardings=out_shardings,
                          params=params, name=name).graph


def trace_function(fn: Callable, *example_args: Any, mesh: Any = None, shardings: Any = None,
                   out_shardings: Any = None, params: Sequence[str | int] = (), name: str | None = None) -> Traced:
    """:func:`trace`, also returning the op sources and the argument and result names."""
    jax = require_jax()
    arg_names = argument_names(fn, len(example_args))
    in_names = [n for i, a in enumerate(example_args) for n, _ in _leaves(jax, a, arg_names[i])]
    if mesh is None:  # the mesh the example arguments are placed on, as the program runs under it
        placed = {getattr(getattr(v, "sharding", None), "mesh", None) for v in jax.tree_util.tree_leaves(example_args)}
        placed = [m for m in placed if isinstance(m, jax.sharding.Mesh)]
        context_mesh = placed[0] if len(placed) == 1 else None
    else:
        context_mesh = mesh if isinstance(mesh, jax.sharding.Mesh) else None
    context = jax.set_mesh(context_mesh) if context_mesh is not None else contextlib.nullcontext()
    try:
        with context:
            closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*example_args)
    except ShardplanError:
        raise
    except Exception as e:  # a JAX error tracing the user's function: theirs to fix
        raise ModelError(f"JAX could not trace {_fn_name(fn)}: {type(e).__name__}: {' '.join(str(e).split())}") \
            from None
    out_names = _output_names(jax, out_shape, set(in_names))
    kinds = _kinds(params, arg_names, example_args, jax)
    given = _spread(shardings, arg_names, in_names + out_names, "shardings")
    given_out = _spread(out_shardings, ["out"] if len(out_names) == 1 and out_names[0] == "out" else None,
                        out_names, "out_shardings", prefix="out")
    for k, v in given_out.items():
        given[k] = v
    meshes = _mesh(jax, mesh)
    program = Trace()
    walker = Walker(program, _axes(meshes))
    args = []
    leaves = [v for a in example_args for v in jax.tree_util.tree_leaves(a)]
    for leaf, var, value in zip(in_names, closed.jaxpr.invars, leaves):
        kind = "param" if any(_under(leaf, k) for k in kinds) else "input"
        rank = len(var.aval.shape)
        placed = getattr(value, "sharding", None)  # a jax.Array's or ShapeDtypeStruct's, as jax.jit would take it
        typed = getattr(var.aval, "sharding", None)
        sharding = _sharding_text(given.get(leaf), rank, leaf)
        for source, s in (("jax.typeof", typed), ("its sharding", placed)):
            sharding = _argument_sharding(walker, leaf, rank, sharding, s, source)
        args.append(program.declare(leaf, tuple(var.aval.shape), dtype_of(var.aval, f"argument {leaf!r}"), kind,
                                    sharding=sharding))
    results = walker.closed(closed, args)
    for i, v in enumerate(results):  # a result that is an argument, a constant or another result: a copy of it
        if program.producer(v) is None or v in results[:i]:
            results[i] = program.add("reshape", [v], program.values[v].shape, program.values[v].dtype,
                                     primitive="copy", shape=program.values[v].shape)
    program.outputs = results
    program.output_names = out_names
    program.out_shardings = {i: _sharding_text(given[n], len(program.values[v].shape), n)
                             for i, (n, v) in enumerate(zip(out_names, program.outputs)) if given.get(n) is not None}
    fuse(program)
    if meshes is None and walker.seen_mesh is not None:  # the mesh the program's shardings name
        meshes = {"axes": {n: s for n, s, _ in walker.seen_mesh},
                  "axis_types": {n: t for n, _, t in walker.seen_mesh if t != "Auto"}}
    if meshes is None and (given or program.shardings or program.regions):
        raise ModelError(f"{next(iter(given), 'the program')!r} has a sharding but no mesh was given; pass mesh= "
                         "(--mesh x=2,y=4)")
    graph, sources = program.graph(name or _fn_name(fn), meshes)
    return Traced(graph, sources, tuple(in_names), graph.outputs)


def _axes(meshes: Any):
    """``(name, size, type)`` per axis of the trace's mesh value, or None."""
    if meshes is None:
        return None
    from graphs.meshes import as_meshes

    mesh = next(iter(as_meshes(meshes).values()))
    return tuple((a.name, a.size, a.type.value) for a in mesh.axes)


def _argument_sharding(walker: Walker, leaf: str, rank: int, given: Any, program: Any, source: str) -> Any:
    """An argument's sharding: the one given, or the one the program gives it (``source``: its type on an
    Explicit mesh, ``jax.typeof(x).sharding``, or the ``NamedSharding`` an example array is placed with, which
    ``jax.jit`` takes as its in-sharding); where both are there they must agree."""
    if type(program).__name__ != "NamedSharding":
        return given  # none, or one device's
    if source == "jax.typeof" and "Explicit" not in [t for _, _, t in mesh_axes(program.mesh)]:
        return given  # an abstract value's sharding says something on Explicit axes only
    text = walker.sharding_text(program, rank, f"argument {leaf!r}")
    mine = given.dims_text() if isinstance(given, TensorSharding) else given
    if mine is not None and "".join(str(mine).split()) != "".join(text.split()):
        raise ModelError(f"argument {leaf!r} is sharded {text} by {source}, but the sharding given for it is "
                         f"{given}; drop one of them or make them equal")
    return text


# -- names ----------------------------------------------------------------------------------

def _fn_name(fn: Callable) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def argument_names(fn: Callable, n: int) -> list[str]:
    """The Python parameter names of the first ``n`` positional arguments (``args0`` ... for ``*args``)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            names += [f"{p.name}{i}" for i in range(n - len(names))]
    names += [f"arg{i}" for i in range(len(names), n)]
    return names[:n]


def _key(k) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(k, attr):
            return f".{getattr(k, attr)}"
    return f".{k}"


def _leaves(jax, tree, prefix: str) -> list[tuple[str, Any]]:
    """``(name, leaf)`` for every leaf of ``tree``, named ``prefix`` plus its path."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(prefix + "".join(_key(k) for k in path), leaf) for path, leaf in flat]


def _output_names(jax, out_shape, taken: set[str]) -> list[str]:
    flat = _leaves(jax, out_shape, "out")
    names = [n for n, _ in flat]
    clash = [n for n in names if n in taken]
    if clash:
        raise ModelError(f"the function's result would be called {clash[0]!r}, which is also an argument's name; "
                         "rename that parameter")
    return names


def _under(leaf: str, name: str) -> bool:
    return leaf == name or leaf.startswith(name + ".")


def _kinds(params, arg_names: list[str], example_args, jax) -> list[str]:
    """The names (argument or leaf prefixes) whose leaves are parameters."""
    if isinstance(params, (str, int)):
        params = [params]
    out = []
    for p in params:
        if isinstance(p, int) and not isinstance(p, bool):
            if not 0 <= p < len(arg_names):
                raise ModelError(f"params names argument {p}, but the function takes {len(arg_names)} arguments")
            out.append(arg_names[p])
            continue
        leaves = [n for i, a in enumerate(example_args) for n, _ in _leaves(jax, a, arg_names[i])]
        if not any(_under(n, str(p)) for n in leaves):
            raise ModelError(f"params names {p!r}, which is no argument of the function"
                             f"{did_you_mean(str(p), arg_names + leaves)} (arguments: {', '.join(arg_names)})")
        out.append(str(p))
    return out


# -- shardings and meshes -------------------------------------------------------------------

def _is_spec(value: Any) -> bool:
    """A sharding entry (not a container of them): text, PartitionSpec, NamedSharding, TensorSharding, None."""
    from jax.sharding import NamedSharding, PartitionSpec

    return value is None or isinstance(value, (str, PartitionSpec, NamedSharding, TensorSharding))


def _spread(given: Any, positional: list[str] | None, known: list[str], what: str, prefix: str = "") -> dict:
    """``{leaf or result name: sharding entry}`` from a sequence, mapping or pytree of entries."""
    if given is None:
        return {}
    out: dict[str, Any] = {}

    def walk(value: Any, name: str) -> None:
        if _is_spec(value):
            if value is None:
                return
            if name not in known:
                raise ModelError(f"{what} names {name!r}, which is no argument or result of the function"
                                 f"{did_you_mean(name, known)} (names: {', '.join(known)})")
            out[name] = value
        elif isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{name}.{k}")
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{name}.{i}")
        else:
            raise ModelError(f"{what} entry {name!r} is {value!r}; give Shardy text like '[{{\"x\"}}, {{}}]', a "
                             "PartitionSpec, a NamedSharding or None")

    if _is_spec(given):
        if positional is None or len(positional) != 1:
            names = [n for n in known if n.startswith(prefix)] if prefix else known
            if len(names) != 1:
                raise ModelError(f"{what} is one sharding but the function has {len(names)} "
                                 f"{'results' if prefix else 'arguments'}; give one per {'result' if prefix else 'argument'}")
            positional = names
        walk(given, positional[0])
    elif isinstance(given, Mapping):
        for k, v in given.items():
            walk(v, str(k) if not prefix or str(k) in known or str(k).startswith(prefix + ".") else f"{prefix}.{k}")
    elif isinstance(given, (list, tuple)):
        names = positional if positional is not None else [n for n in known if n.startswith(prefix)]
        if len(given) > len(names):
            raise ModelError(f"{what} has {len(given)} entries but the function has {len(names)} "
                             f"{'results' if prefix else 'arguments'}")
        for n, v in zip(names, given):
            walk(v, n)
    else:
        raise ModelError(f"{what} must be a sequence (one entry per argument) or a mapping from names, got {given!r}")
    return out


def _sharding_text(value: Any, rank: int, name: str) -> Any:
    """Shardy text (or a TensorSharding) for one entry; a PartitionSpec is padded to ``rank``."""
    if value is None or isinstance(value, (str, TensorSharding)):
        return value
    return partition_spec_text(getattr(value, "spec", value), rank, f"tensor {name!r}")


def _mesh(jax, mesh: Any) -> Any:
    """The model's mesh value (``graphs.meshes`` forms) from a dict, text or a ``jax.sharding.Mesh``."""
    if mesh is None or isinstance(mesh, Mapping):
        return mesh
    if isinstance(mesh, str):
        return parse_mesh_spec(mesh)
    if isinstance(mesh, jax.sharding.Mesh):
        ids = [d.id for d in mesh.devices.flat]
        rank = {d: i for i, d in enumerate(sorted(ids))}
        order = [rank[d] for d in ids]
        full: dict[str, Any] = {"axes": dict(zip(mesh.axis_names, mesh.devices.shape))}
        if order != list(range(len(order))):
            full["device_ids"] = order
        types = {n: t.name for n, t in zip(mesh.axis_names, getattr(mesh, "axis_types", ()) or ())
                 if t.name != "Auto"}
        if types:
            full["axis_types"] = types
        return full
    raise ModelError(f"mesh must be {{axis: size}}, text like x=2,y=4 or a jax.sharding.Mesh, got {mesh!r}")


# -- the way back ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class JaxShardings:
    """A plan's shardings for a traced function: the ``mesh`` they live on (the plan's, split where it
    uses sub-axes: ``note`` says so), and ``in_shardings`` / ``out_shardings`` pytrees of
    ``NamedSharding`` shaped like the arguments and results, ready for ``jax.jit``."""

    mesh: Any
    in_shardings: tuple
    out_shardings: Any
    note: str | None = None


def shardings_for(plan, fn: Callable, *example_args: Any, devices: Sequence[Any] | None = None) -> JaxShardings:
    """The ``NamedSharding`` of every argument and result of ``fn`` under ``plan`` (a plan of the graph
    :func:`trace` made of ``fn`` on arguments shaped like ``example_args``), from ``plan.export("jax")``.

    ``devices`` (default ``jax.devices()``) are the devices of the mesh, in the plan's device order.
    """
    jax = require_jax()
    import numpy as np
    from jax.sharding import Mesh as JaxMesh, NamedSharding, PartitionSpec


    exported = plan.export("jax")
    m = exported["mesh"]
    pool = list(devices) if devices is not None else jax.devices()
    if len(pool) < len(m["device_ids"]):
        raise ShardplanError(f"the plan's mesh has {len(m['device_ids'])} devices but JAX has {len(pool)}; on CPU set "
                             f"XLA_FLAGS=--xla_force_host_platform_device_count={len(m['device_ids'])} before "
                             "importing jax")
    mesh = JaxMesh(np.array(pool, dtype=object)[m["device_ids"]].reshape(m["shape"]), tuple(m["axis_names"]))
    ours = Mesh.from_sizes(plan.mesh.name, list(zip(m["axis_names"], m["shape"])))
    delivered = exported.get("outputs", {})

    def named(name: str, leaf) -> Any:  # leaf: an array or a ShapeDtypeStruct
        entry = delivered.get(name) or exported["tensors"].get(name)
        if entry is None:
            raise ModelError(f"the plan has no tensor {name!r}: was it made from the graph trace() gives for "
                             f"{_fn_name(fn)} on arguments of these shapes?")
        rank = len(leaf.shape) if hasattr(leaf, "shape") else np.ndim(leaf)
        s = from_partition_spec(entry["partition_spec"], ours, rank)
        dims = []
        for d in s.dims:
            names = tuple(a.name for a in d.axes)
            dims.append(PartitionSpec.UNCONSTRAINED if d.is_open else (None if not names else
                                                                       names[0] if len(names) == 1 else names))
        return NamedSharding(mesh, PartitionSpec(*dims))

    arg_names = argument_names(fn, len(example_args))
    ins = []
    for i, a in enumerate(example_args):
        _, tree = jax.tree_util.tree_flatten(a)
        ins.append(jax.tree_util.tree_unflatten(tree, [named(n, leaf) for n, leaf in _leaves(jax, a, arg_names[i])]))
    out_shape = jax.eval_shape(fn, *example_args)
    _, tree = jax.tree_util.tree_flatten(out_shape)
    outs = jax.tree_util.tree_unflatten(tree, [named(n, leaf) for n, leaf in _leaves(jax, out_shape, "out")])
    return JaxShardings(mesh, tuple(ins), outs, m.get("note"))
