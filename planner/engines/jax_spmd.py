"""A plan's SPMD program as one ``jax.shard_map``: XLA runs exactly the collectives the plan lists.

Constraints (``with_sharding_constraint``) tell XLA where values must be, and leave how to get them there
to XLA; a pending sum has no ``PartitionSpec``, so XLA all-reduces it and slices where the plan
reduce-scatters (twice the bytes). Here the per-device program that ``--format program`` prints
(:func:`planner.partitioning.program.lower`) is the body of one ``shard_map`` over every mesh axis, so XLA
is told each collective, not where values end:

* a ``Load`` is an argument of the ``shard_map``, its ``in_spec`` the layout it is stored in;
* every redistribution step is its ``jax.lax`` collective over the step's axes
  (:data:`planner.collectives.STEP_KINDS`: ``AllGather`` is ``all_gather_invariant``, ``ReduceScatter``
  ``psum_scatter``, ``AllReduce`` ``psum``, ``AllToAll`` ``all_to_all``, ``CollectivePermute``
  ``ppermute``); a ``Slice`` is a local ``dynamic_slice`` at the device's offset (``axis_index``), or,
  where it starts a pending sum, the value kept by the group's first member and zeros elsewhere;
* every op is its local instance on local blocks: the catalogue's ``jax.numpy`` form
  (:mod:`planner.engines.jax_ops`), or the op's own where its local instance differs
  (:attr:`graphs.ops.opdef.OpDef.jax_local_form`: a gather with a vocabulary-sharded table, a mean or a loss
  divided by the global count, a reshape or slice to local shapes); a manual region's body collective is
  its own ``jax.lax`` collective (:func:`planner.collectives.jax_lowering`);
* ``check_vma`` stays on, so JAX types every value varying or invariant over each axis as seed 004 does.
  An op's operand that does not vary where the op does is ``pcast`` to varying once per value and shared
  by every reader, as the plan's program does, so the backward sums the readers' cotangents before the one
  ``psum`` that transposes it; an ``AllGather`` whose readers all pbroadcast its result over the gathered
  axes is ``all_gather`` (varying, seed 004's fusion), whose transpose is ``psum_scatter``;
* with training, ``jax.vjp`` of the ``shard_map`` gives the backward: JAX's transposes of these
  primitives, which are seed 004's and the plan's (:mod:`planner.partitioning.program`'s backward).

The mesh is the plan's, each axis cut where some layout or step uses a sub-axis
(:func:`planner.export.split_mesh`, the JAX export's). Every layout of the program must divide its
tensor evenly (``shard_map`` has no padding): :func:`lowering_problem` says which does not.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from planner.collectives import jax_lowering
from planner.engines.jax_ops import jax_op
from planner.errors import EngineError
from planner.export import split_mesh, split_names
from planner.ir.axis import AxisRef
from planner.ir.layout import devices_to_positions
from planner.ir.sharding import TensorSharding
from planner.partitioning.program import Compute, Load, Program, Redistribute
from planner.partitioning.typecheck import pbroadcasts, variance
from graphs.ops.collectives import BOUNDARY_OPS, COLLECTIVE_OPS
from graphs.ops.registry import get_op


def program_layouts(program: Program):
    """Every layout a forward value of ``program`` takes, and every axis a step runs over."""
    layouts, refs = [], []
    for ins in program.instructions:
        if isinstance(ins, Load):
            layouts.append(ins.layout)
        elif isinstance(ins, Compute):
            layouts += [*ins.strategy.operands, ins.strategy.result]
        elif isinstance(ins, Redistribute) and ins.phase == "forward":
            for step in ins.plan.steps:
                layouts += [step.before, step.after]
                refs += list(step.axes)
    layouts += list(program.outputs.values())
    return layouts, refs


def lowering_problem(plan) -> str | None:
    """Why ``plan``'s program cannot run as one ``shard_map`` (None when it can): the first layout that does
    not divide its tensor evenly, or a redistribution between meshes of different device orders."""
    program = plan.program
    graph = plan.graph

    def uneven(layout: TensorSharding, shape, what: str) -> str | None:
        for d, (n, k) in enumerate(zip(shape, layout.shard_counts())):
            if n % k:
                return (f"{what} is laid out as {layout.dims_text()}: its dimension {d} of size {n} does not divide "
                        f"into {k} shards (shard_map needs even blocks)")
        return None

    for ins in program.instructions:
        if isinstance(ins, Load):
            why = uneven(ins.layout, ins.shape, f"tensor {ins.tensor!r}")
        elif isinstance(ins, Compute):
            shapes = [*ins.in_shapes, ins.out_shape]
            why = next((w for k, (lay, shape) in enumerate(zip([*ins.strategy.operands, ins.strategy.result], shapes))
                        if (w := uneven(lay, shape, f"op {ins.op.name!r} {'result' if k == len(shapes) - 1 else f'operand {k}'}"))),
                       None)
        elif isinstance(ins, Redistribute) and ins.phase == "forward":
            why = None
            for step in ins.plan.steps:
                if step.before.mesh != step.after.mesh:
                    return f"the redistribution of {ins.tensor!r} changes the mesh's device order"
                why = why or uneven(step.after, ins.plan.shape, f"tensor {ins.tensor!r} (after a {step.kind})")
        else:
            why = None
        if why:
            return why
    for o, layout in program.outputs.items():
        why = uneven(layout, graph.tensor(o).shape, f"output {o!r}")
        if why:
            return why
    return None


class _Names:
    """Mesh axes (and sub-axes) as the names of the split JAX mesh's axes."""

    def __init__(self, mesh, pieces):
        self.mesh = mesh
        self.pieces = pieces

    def of(self, refs) -> tuple[str, ...]:
        return tuple(n for ref in refs for n in split_names(ref, self.mesh, self.pieces))

    def axis_name(self, refs):
        names = self.of(refs)
        return names[0] if len(names) == 1 else names

    def spec(self, layout: TensorSharding):
        from jax.sharding import PartitionSpec

        dims = [self.of(d.axes) for d in layout.dims]
        return PartitionSpec(*[None if not n else n[0] if len(n) == 1 else n for n in dims])

    def atoms(self, atoms: frozenset) -> tuple[str, ...]:
        """The split axes that make up the axis pieces ``atoms`` (from :func:`~planner.partitioning.typecheck.variance`)."""
        out = []
        for name, ps in self.pieces.items():
            for lo, hi, n in ps:
                mine = {a for a in atoms if a.axis == name and lo <= a.lo and a.hi <= hi}
                if mine:
                    out.append(n)
        return tuple(out)


def _shard_index(lax, jnp, names: _Names, refs):
    """This device's shard index along a dimension split by ``refs`` (major to minor): row-major over them."""
    axes = names.of(refs)
    if not axes:
        return jnp.int32(0)
    return lax.axis_index(axes if len(axes) > 1 else axes[0])


class JaxLocalContext:
    """What an op's JAX local instance knows (:attr:`graphs.ops.opdef.OpDef.jax_local_form`): global and local
    shapes of its operands and result, and each block's start along each dimension (traced: from
    ``axis_index``)."""

    def __init__(self, lax, jnp, names: _Names, layouts, shapes):
        self._lax, self._jnp, self._names = lax, jnp, names
        self.layouts = tuple(layouts)
        self.global_shapes = tuple(tuple(s) for s in shapes)
        self.local_shapes = tuple(lay.local_shape(s) for lay, s in zip(layouts, shapes))

    def start(self, which: int, dim: int):
        """Where block ``which`` (operands in order, then the result) starts along ``dim``."""
        refs = self.layouts[which].dims[dim].axes
        return _shard_index(self._lax, self._jnp, self._names, refs) * self.local_shapes[which][dim]


def spmd_forward(plan, jax, mesh, names: _Names) -> tuple[Callable, list[str], list[str]]:
    """``(fn, sources, outputs)``: ``fn(*arrays)`` runs ``plan``'s forward program as one ``shard_map`` on
    ``mesh`` from the global arrays of ``sources`` (in that order) and returns the ``outputs`` as the plan
    delivers them."""
    import jax.numpy as jnp
    from jax import lax

    program = plan.program
    graph = plan.graph
    loads = [i for i in program.instructions if isinstance(i, Load)]
    sources = [i.tensor for i in loads]
    outputs = list(program.outputs)
    fused = _fused_gathers(program)
    pvary = getattr(lax, "pcast")

    def body(*args):
        values: dict[tuple[str, TensorSharding], Any] = {}
        varied: dict[tuple, Any] = {}

        def get(t: str, layout: TensorSharding):
            try:
                return values[(t, layout)]
            except KeyError:
                raise EngineError(f"the program reads {t!r} as {layout.dims_text()} before it is there") from None

        for ins, a in zip(loads, args):
            values[(ins.tensor, ins.layout)] = a
        for ins in program.instructions:
            if isinstance(ins, Redistribute):
                if ins.phase != "forward":
                    continue
                x = get(ins.tensor, ins.source)
                for j, step in enumerate(ins.plan.steps):
                    x = _step(lax, jnp, names, step, x, fused.get((id(ins), j), False))
                values[(ins.tensor, ins.destination)] = x
            elif isinstance(ins, Compute):
                op = ins.op
                s = ins.strategy
                casts = pbroadcasts(s)
                operands = []
                for k, t in enumerate(op.inputs):
                    x = get(t, s.operands[k])
                    extra = tuple(a for a in names.atoms(casts[k]) if a not in _vma(jax, x))
                    if extra:  # once per value and axes, shared by every reader
                        key = (t, s.operands[k], extra)
                        if key not in varied:
                            varied[key] = pvary(x, extra, to="varying")
                        x = varied[key]
                    operands.append(x)
                values[(op.output, s.result)] = _local_op(jax, lax, jnp, names, ins, operands)
        return tuple(_vary(lax, values[(o, lay)][None], names.of(lay.unreduced)) if lay.unreduced
                     else values[(o, lay)] for o, lay in program.outputs.items())

    fn = jax.shard_map(body, mesh=mesh, in_specs=tuple(names.spec(i.layout) for i in loads),
                       out_specs=tuple(output_spec(names, lay) for lay in program.outputs.values()))
    return fn, sources, outputs


def output_spec(names: _Names, layout: TensorSharding):
    """Where the ``shard_map`` leaves an output: its layout's spec; a pending sum (delivered unreduced, as a
    scalar loss whose mean was taken over sharded positions) is stacked along a new leading dimension over its
    pending axes, one partial per device group, so that no collective the plan lacks is added to return it
    (the caller adds the partials up: :func:`add_partials`)."""
    from jax.sharding import PartitionSpec

    spec = names.spec(layout)
    if not layout.unreduced:
        return spec
    stack = names.of(layout.unreduced)
    return PartitionSpec(stack[0] if len(stack) == 1 else stack, *spec)


def add_partials(value, layout: TensorSharding) -> np.ndarray:
    """An output as the plan delivers it, on the host: a pending sum's stacked partials added up in float64."""
    value = np.asarray(value)
    if not layout.unreduced:
        return value
    return value.astype(np.float64).sum(axis=0) if value.dtype.kind == "f" else value.sum(axis=0)


def _vma(jax, x) -> frozenset:
    return jax.typeof(x).manual_axis_type.varying


def _fused_gathers(program: Program) -> dict[tuple[int, int], bool]:
    """Per (redistribution, step index): an ``AllGather`` whose every reader pbroadcasts the gathered value over
    the gathered axes (and no later step of the redistribution reads it): seed 004's ``all_gather``, varying,
    which transposes to ``psum_scatter``."""
    readers: dict[tuple[str, TensorSharding], list] = {}
    for ins in program.instructions:
        if isinstance(ins, Compute):
            casts = pbroadcasts(ins.strategy)
            for k, t in enumerate(ins.op.inputs):
                readers.setdefault((t, ins.strategy.operands[k]), []).append(casts[k])
    out = {}
    for ins in program.instructions:
        if not isinstance(ins, Redistribute) or ins.phase != "forward" or not ins.plan.steps:
            continue
        j = len(ins.plan.steps) - 1
        step = ins.plan.steps[j]
        if step.kind != "AllGather":
            continue
        gathered = variance(step.before) - variance(step.after)
        casts = readers.get((ins.tensor, ins.destination), [])
        out[(id(ins), j)] = bool(casts) and all(gathered <= c for c in casts)
    return out


def _step(lax, jnp, names: _Names, step, x, fused: bool):
    """One redistribution step on a device's block (see the module docstring)."""
    kind = step.kind
    axis = names.axis_name(step.axes) if step.axes else None
    if kind == "AllGather":
        if fused:
            return lax.all_gather(x, axis, axis=step.dims[0], tiled=True)
        return _all_gather_invariant()(x, axis, axis=step.dims[0], tiled=True)
    if kind == "ReduceScatter":
        return lax.psum_scatter(x, axis, scatter_dimension=step.dims[0], tiled=True)
    if kind == "AllReduce":
        return lax.psum(x, axis)
    if kind == "AllToAll":
        return lax.all_to_all(x, axis, step.dims[1], step.dims[0], tiled=True)
    if kind == "CollectivePermute":
        return _permute(lax, names, step, x)
    if kind == "Slice":
        return _slice(lax, jnp, names, step, x)
    raise EngineError(f"no shard_map lowering of a {kind} step")


def _all_gather_invariant():
    """``all_gather_invariant`` (seed 004): public in ``jax.lax`` in later releases, in ``jax._src`` in 0.10."""
    from jax import lax

    fn = getattr(lax, "all_gather_invariant", None)
    if fn is None:
        from jax._src.lax.parallel import all_gather_invariant as fn
    return fn


def _permute(lax, names: _Names, step, x):
    """Every receiver's new block is one whole block of its source: a ``ppermute`` over every mesh axis."""
    mesh = step.before.mesh
    if step.before.local_shape((1 << 20,) * step.before.rank) != step.after.local_shape((1 << 20,) * step.after.rank):
        raise EngineError("a CollectivePermute that changes the local block's shape has no shard_map lowering")
    pos = devices_to_positions(mesh)
    every = tuple(n for a in mesh.axes for n in names.of([AxisRef(a.name)]))
    moved = {int(d) for _, d in step.pairs}
    perm = [(int(pos[s]), int(pos[d])) for s, d in step.pairs]
    # devices that keep their block: send to themselves (ppermute zero-fills a device nobody sends to)
    perm += [(int(p), int(p)) for d, p in enumerate(pos) if d not in moved and d not in {s for s, _ in step.pairs}]
    return lax.ppermute(x, every, perm=perm)


def _slice(lax, jnp, names: _Names, step, x):
    """A local ``Slice``: a fresh pending sum is kept by the group's first member (zeros elsewhere); a dimension
    newly split keeps this device's part of its block: seed 004's ``pscatter`` where the value is invariant over
    the new axes (its transpose ``all_gather_invariant``: :func:`_pscatter`), a ``dynamic_slice`` where it
    already varies over them."""
    import jax

    before, after = step.before, step.after
    fresh = [a for a in after.unreduced if a not in before.unreduced]
    if fresh:
        first = jnp.all(jnp.stack([_shard_index(lax, jnp, names, [a]) == 0 for a in fresh]))
        x = jnp.where(first, x, jnp.zeros((), x.dtype))
        x = _vary(lax, x, names.of(fresh))
    big = tuple(1 << 20 for _ in range(before.rank))  # local sizes scale with it: shapes divide evenly here
    for d, (b, a) in enumerate(zip(before.dims, after.dims)):
        if a.axes == b.axes:
            continue
        lb, la = before.local_shape(big)[d], after.local_shape(big)[d]
        if lb == la:
            continue
        size = x.shape[d] * la // lb
        new = names.of(a.axes[len(b.axes):]) if a.axes[:len(b.axes)] == b.axes else ()
        if new and not set(new) & _vma(jax, x):
            x = _pscatter(jax, lax, new, d, size)(x)
            continue
        offset = (_shard_index(lax, jnp, names, a.axes) * size
                  - _shard_index(lax, jnp, names, b.axes) * x.shape[d])
        x = lax.dynamic_slice_in_dim(x, offset, size, axis=d)
    return x


def _pscatter(jax, lax, axes: tuple[str, ...], dim: int, size: int):
    """Seed 004's ``pscatter`` over ``axes`` along ``dim`` (invariant -> varying, this device's ``size`` piece, no
    communication), whose transpose is ``all_gather_invariant``. JAX 0.10 has no such primitive (slicing with
    ``axis_index`` would pvary the operand, transposing to a psum), so it is a ``custom_vjp``."""
    name = axes[0] if len(axes) == 1 else axes

    def forward(x):
        y = lax.pcast(x, axes, to="varying")
        return lax.dynamic_slice_in_dim(y, lax.axis_index(name) * size, size, axis=dim), None

    def backward(_, cotangent):
        return (_all_gather_invariant()(cotangent, name, axis=dim, tiled=True),)

    fn = jax.custom_vjp(lambda x: forward(x)[0])
    fn.defvjp(forward, backward)
    return fn


def _vary(lax, x, axes):
    import jax

    todo = tuple(a for a in axes if a not in _vma(jax, x))
    return lax.pcast(x, todo, to="varying") if todo else x


def _local_op(jax, lax, jnp, names: _Names, ins: Compute, operands):
    """Op ``ins.op``'s local instance on this device's blocks."""
    op = ins.op
    if op.op in BOUNDARY_OPS or op.op in ("sharding_constraint", "propagation_barrier"):
        return operands[0]
    if op.op in COLLECTIVE_OPS:
        attrs = dict(op.attrs_dict)
        attrs["axes"] = list(names.of([AxisRef(a) for a in attrs["axes"]]))
        return jax_lowering(op.op, _MeshAxes(names))(operands[0] if operands else None, attrs)
    opdef = get_op(op.op)
    attrs = opdef.canonical(list(ins.in_shapes), opdef.with_defaults(dict(op.attrs_dict)))
    if opdef.jax_local_form is not None:
        ctx = JaxLocalContext(lax, jnp, names, [*ins.strategy.operands, ins.strategy.result],
                              [*ins.in_shapes, ins.out_shape])
        return opdef.jax_local_form(jnp, lax, operands, attrs, ctx)
    return jax_op(op.op)(operands, attrs)


class _MeshAxes:
    """What :func:`planner.collectives.jax_lowering` reads of a mesh (``ppermute`` over several axes): its axis
    names and sizes."""

    def __init__(self, names: _Names):
        self.axis_names = tuple(n for ps in names.pieces.values() for _, _, n in ps)
        self.shape = {n: hi // lo for ps in names.pieces.values() for lo, hi, n in ps}


def jax_mesh(plan, jax):
    """The JAX mesh of ``plan``'s program (axes split where any layout or step uses a sub-axis) and its names."""
    from jax.sharding import Mesh

    layouts, refs = program_layouts(plan.program)
    split, pieces = split_mesh(plan.mesh, [r for lay in layouts for r in lay.used_axes()] + refs)
    devices = np.array(jax.devices()[:plan.mesh.size])[np.asarray(split.devices)].reshape(
        [a.size for a in split.axes])
    return Mesh(devices, tuple(a.name for a in split.axes)), _Names(plan.mesh, pieces)


def spmd_step(plan, jax, mesh, names: _Names, trained: frozenset):
    """``(step, placement, delivered)``: ``step(params, others[, cotangents]) -> (outputs, gradients)`` (dicts by
    name) runs the program (with training: ``jax.vjp`` of it, the gradients of the ``trained`` sources);
    ``placement[t]`` is the ``NamedSharding`` a source ``t`` is stored in (its ``Load`` layout), ``delivered[o]``
    that of output ``o`` (:func:`output_spec`: a pending sum's cotangent is given once per stacked partial)."""
    from jax.sharding import NamedSharding

    fn, sources, outputs = spmd_forward(plan, jax, mesh, names)
    layouts = {i.tensor: i.layout for i in plan.program.instructions if isinstance(i, Load)}
    placement = {t: NamedSharding(mesh, names.spec(layouts[t])) for t in sources}
    delivered = {o: NamedSharding(mesh, output_spec(names, lay)) for o, lay in plan.program.outputs.items()}

    def run(params: dict, others: dict) -> dict:
        values = {**others, **params}
        return dict(zip(outputs, fn(*[values[t] for t in sources])))

    if not plan.program.training:
        return (lambda params, others: (run(params, others), {})), placement, delivered

    def step(params, others, cotangents):
        outs, pullback = jax.vjp(lambda p: run(p, others), {t: params[t] for t in params if t in trained})
        (grads,) = pullback({o: cotangents[o] for o in outs})
        return outs, grads

    return step, placement, delivered
