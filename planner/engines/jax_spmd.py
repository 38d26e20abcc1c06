"""A plan's SPMD program as a JAX module: one ``jax.shard_map`` in which XLA runs exactly the plan's collectives.

Constraints (``with_sharding_constraint``) tell XLA where values must be and leave how to get them there to
XLA; a pending sum has no ``PartitionSpec``, so XLA all-reduces it and slices where the plan reduce-scatters
(twice the bytes). Here the per-device program that ``--format program`` prints
(:func:`planner.partitioning.program.lower`) becomes the body of one ``shard_map`` over every mesh axis, written
out as Python source by :func:`module_source`, one line per op:

* each ``Load`` is an argument of the ``shard_map``, its ``in_spec`` the layout it is stored in;
* each redistribution step is its primitive's ``jax.lax`` version (the registry's,
  :func:`planner.collectives.jax_function`: ``AllGather`` is ``all_gather_invariant``, ``ReduceScatter``
  ``psum_scatter``, ``AllReduce`` ``psum``, ``AllToAll`` ``all_to_all``, ``CollectivePermute`` ``ppermute``,
  ``Slice`` ``pscatter``, seed 004's types and transposes); an ``AllGather`` whose readers all pbroadcast its
  result over the gathered axes is ``all_gather`` (varying; seed 004's fusion, which transposes to
  ``psum_scatter``); a ``Slice`` of a value already varying over its axes is a local ``dynamic_slice``, and one
  that starts a pending sum keeps the value on the group's first member (:func:`keep_share`); a
  ``CollectivePermute`` that moves parts of blocks (where it also adds axes, so blocks change shape) sends each
  receiver the box it lacks (:func:`permute_boxes`); a step's fused slice minor to its collective's axes takes a
  piece of each of the collective's chunks;
* each op is the catalogue's ``jax.numpy`` form (:attr:`graphs.ops.opdef.OpDef.jax_form`) on local blocks, or
  its own local instance where that differs (:attr:`~graphs.ops.opdef.OpDef.jax_local_form`: a gather from
  this device's table rows, a mean or loss over the global count, a reshape or slice to local shapes); a
  manual region's body collective is its registry primitive;
* ``check_vma`` stays on, so JAX types every value varying or invariant over each axis as seed 004 does. An
  operand that does not vary where its op does is ``pbroadcast`` once per value and axes and shared by every
  reader, as the plan's program does, so the backward adds the readers' cotangents before the one ``psum``
  that transposes it; a reader whose pending cotangent the plan completes by itself (propagate's, as XLA does:
  :func:`~planner.model.moves.split_cotangents`) pbroadcasts the value alone, its ``psum`` that completion;
* an output delivered as a pending sum leaves the ``shard_map`` stacked over its pending axes (one partial
  per group): returning it reduced would add a collective the plan does not have;
* with training, ``jax.vjp`` of the ``shard_map`` is the backward: JAX's transposes of these primitives, which
  are seed 004's and the plan's backward (:mod:`planner.partitioning.program`).

``shardplan run`` executes this module (:func:`load_module`, with the catalogue's and the registry's functions
bound in); ``shardplan export --to jax-module`` writes it with their sources embedded, so that it imports
only ``jax``, ``jax.numpy`` and ``numpy``. The mesh is the plan's, each axis cut where some layout or step uses a
sub-axis (:func:`planner.partitioning.split_mesh.split_mesh`).

A layout that splits a dimension unevenly is held as the plan holds it: blocks of ``ceil(n / shards)``, the
padding at the dimension's end (:func:`padded_shape`). Such arguments enter the ``shard_map`` padded with zeros
and such outputs leave it padded (the module's ``PADDED``, ``padded``, ``unpadded`` and ``place``); a step that splits a
whole dimension unevenly pads it first, one that makes an unevenly split dimension whole cuts the padding after
(:func:`step_padding`); an op reads its padded operands with their padding zeroed (:func:`zero_padding`), and a
local instance that counts positions masks them (:meth:`Local.valid`). So the collectives move the plan's padded
blocks, the bytes the plan prices. What cannot be held this way, :func:`lowering_problem` says.
"""

from __future__ import annotations

import inspect
import keyword
import math
import re
import textwrap
from typing import Any

import numpy as np

from graphs.dtypes import jax_dtype_name
from graphs.gradients import requires_grad
from graphs.ops.collectives import BOUNDARY_OPS, COLLECTIVE_OPS
from graphs.ops.registry import get_op
from planner.model.op_collectives import permutation_axes, statistic_axes
from planner.collectives import STEP_KINDS, jax_attrs, jax_function
from planner.errors import EngineError, InternalError
from planner.partitioning.split_mesh import split_mesh, split_names
from planner.ir.axis import AxisRef
from planner.ir.layout import device_index_ranges, devices_to_positions
from planner.ir.sharding import PENDING_MAX, PENDING_SUM, TensorSharding
from planner.partitioning.program import Compute, Load, Program, Redistribute
from planner.partitioning.typecheck import pbroadcasts, type_text, variance
from planner.redistribution.state import missing_box
from planner.redistribution.transpose import cotangent_layout

#: Ops whose local instance is their operand: a manual region's boundaries (annotations have identity forms).
IDENTITIES = frozenset(BOUNDARY_OPS)


# -- what cannot be one shard_map ------------------------------------------------------------------

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


def padded_shape(layout: TensorSharding, shape) -> tuple[int, ...]:
    """The global shape whose even blocks are ``layout``'s blocks of ``shape``: each dimension rounded up to a whole
    number of its shards, the padding at its end (the planner's and the simulator's blocks,
    :meth:`~planner.ir.sharding.TensorSharding.local_shape`)."""
    return tuple(k * -(-n // k) for n, k in zip(shape, layout.shard_counts()))


def _uneven(layout: TensorSharding, shape, what: str, positions: bool = False) -> str | None:
    for d, (n, k) in enumerate(zip(shape, layout.shard_counts())):
        if n % k and not (positions and n == 1):
            axes = ", ".join(str(a) for a in layout.dims[d].axes)
            return (f"{what} is laid out as {layout.dims_text()}: its dimension {d} of size {n} does not divide into "
                    f"the {k} shards of mesh axes {axes}")
    return None


def uneven_layout(plan, positions: bool = False) -> str | None:
    """The first layout of ``plan``'s program that does not divide its tensor evenly (None when all do): a
    ``NamedSharding`` cannot place it (the shard_map lowering pads it: :func:`padding_problem`). With
    ``positions``, a dimension of size 1 split past its size (a slice's one position) does not count: the
    constraints lowering leaves such a value to XLA."""
    program = plan.program
    for ins in program.instructions:
        why = None
        if isinstance(ins, Load):
            why = _uneven(ins.layout, ins.shape, f"tensor {ins.tensor!r}", positions)
        elif isinstance(ins, Compute):
            layouts = [*ins.strategy.operands, ins.strategy.result]
            shapes = [*ins.in_shapes, ins.out_shape]
            for k, (lay, shape) in enumerate(zip(layouts, shapes)):
                which = "result" if k == len(shapes) - 1 else f"operand {k}"
                why = why or _uneven(lay, shape, f"op {ins.op.name!r} {which}", positions)
        elif isinstance(ins, Redistribute) and ins.phase == "forward":
            for step in ins.plan.steps:
                why = why or _uneven(step.after, ins.plan.shape, f"tensor {ins.tensor!r} (after a {step.kind})",
                                     positions)
        if why:
            return why
    for o, layout in program.outputs.items():
        why = _uneven(layout, plan.graph.tensor(o).shape, f"output {o!r}", positions)
        if why:
            return why
    return None


def step_padding(step, shape) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """How a redistribution step of a value of ``shape`` runs on padded blocks: ``(padded, even, cut)``. A value in
    a layout is held as its :func:`padded_shape`; the step runs as on a tensor of shape ``even``, after padding the
    dimensions ``padded`` (whole before the step, split by it unevenly: zeros at the end) and before cutting the
    dimensions ``cut`` back to their size (split unevenly before, whole after). Where a dimension is split unevenly
    on both sides and the padding differs (a size-50257 dimension from 4 to 8 shards: 4 x 12565 against 8 x 6283),
    no collective on even blocks does the step: :class:`EngineError`."""
    before, after = step.before.shard_counts(), step.after.shard_counts()
    held, wanted = padded_shape(step.before, shape), padded_shape(step.after, shape)
    even, padded, cut = list(held), [], []
    for d, (n, kb, ka) in enumerate(zip(shape, before, after)):
        if held[d] == wanted[d]:
            continue
        if kb == 1:
            even[d] = wanted[d]
            padded.append(d)
        elif ka == 1:
            cut.append(d)
        else:
            raise EngineError(
                f"a {step.kind} step from {step.before.dims_text()} to {step.after.dims_text()} splits dimension {d} "
                f"(size {n}) unevenly on both sides with different padding ({kb} blocks of {held[d] // kb} against "
                f"{ka} of {wanted[d] // ka}), which no collective on even blocks does")
    return tuple(padded), tuple(even), tuple(cut)


def padding_problem(plan) -> str | None:
    """Why the shard_map lowering cannot hold ``plan``'s padded blocks (None when it can): a redistribution step
    between two uneven splits that pad differently (:func:`step_padding`), or an op that reads or makes a padded
    block and whose local instance does not keep the padding at the end of each dimension (an op without the
    ``keeps_padding`` trait, a manual region's collective)."""
    program = plan.program
    for r in program.redistributions():
        for step in r.plan.steps:
            try:
                step_padding(step, r.plan.shape)
            except EngineError as e:
                return f"the {r.phase} redistribution of {r.tensor!r} has {e}"
    for ins in program.instructions:
        if isinstance(ins, Compute) and (ins.op.op in COLLECTIVE_OPS or not get_op(ins.op.op).keeps_padding):
            layouts = [*ins.strategy.operands, ins.strategy.result]
            for lay, shape in zip(layouts, [*ins.in_shapes, ins.out_shape]):
                why = _uneven(lay, shape, f"op {ins.op.name!r} ({ins.op.op})")
                if why:
                    return f"{why}, and a {ins.op.op} cannot run on padded blocks"
    return None


def lowering_problem(plan) -> str | None:
    """Why ``plan``'s program cannot be one ``shard_map`` (None when it can): padded blocks it cannot hold
    (:func:`padding_problem`), a redistribution between meshes of different device orders, or a normalisation
    over a sharded dimension."""
    for r in plan.program.redistributions("forward"):
        if any(step.before.mesh != step.after.mesh for step in r.plan.steps):
            return f"the redistribution of {r.tensor!r} changes the mesh's device order"
    for phase in ("forward", "backward"):
        for r in plan.program.redistributions(phase):
            for step in r.plan.steps:
                if step.kind == "CollectivePermute" and variance(step.before) - variance(step.after):
                    return (f"the {phase} redistribution of {r.tensor!r} permutes blocks from "
                            f"{step.before.dims_text()} to {step.after.dims_text()}, invariant over axes its "
                            "operand varies over: JAX types a ppermute's result varying over every axis it runs "
                            "over and has no cast back to invariant")
    for c in plan.program.computes():
        if statistic_axes(c.rule, c.strategy):
            return (f"op {c.op.name!r} ({c.op.op}) reduces over a sharded dimension through statistics (a "
                    "normalisation's AllReduces, an argmax's gathered extremes) this lowering does not communicate")
        if permutation_axes(c.rule, c.strategy):
            return (f"op {c.op.name!r} ({c.op.op}) exchanges blocks along a sharded dimension (a concatenate, a "
                    "slice or a scan along it), which this lowering does not run")
    return padding_problem(plan)


# -- functions the module embeds (self-contained: they read only their arguments) -------------------

def keep_share(jax, x, attrs):
    """A value made a pending sum over ``attrs["axes"]`` without communication: the group's first member keeps
    it, the others hold zeros (then it varies over the axes)."""
    axes = tuple(attrs["axes"])
    first = jax.numpy.all(jax.numpy.stack([jax.lax.axis_index(a) == 0 for a in axes]))
    x = jax.numpy.where(first, x, jax.numpy.zeros((), x.dtype))
    have = jax.typeof(x).manual_axis_type.varying
    todo = tuple(a for a in axes if a not in have)
    return jax.lax.pcast(x, todo, to="varying") if todo else x


def local_slice(jax, x, attrs):
    """This device's ``attrs["size"]`` piece along ``attrs["dim"]`` of a block it holds, where the value already
    varies over the axes that split it (``after``: the dimension's axes after, ``before``: before)."""
    def index(axes):
        axes = tuple(axes)
        if not axes:
            return 0
        return jax.lax.axis_index(axes[0] if len(axes) == 1 else axes)

    dim, size = attrs["dim"], attrs["size"]
    offset = index(attrs["after"]) * size - index(attrs["before"]) * x.shape[dim]
    return jax.lax.dynamic_slice_in_dim(x, offset, size, axis=dim)


def permute_boxes(jax, x, attrs):
    """A ``CollectivePermute`` that moves parts of blocks: each sender sends the box of its block that its receiver
    lacks (the pairs ``perm``, as mesh positions), and each device makes its new block (``shape``) of what it keeps
    of its own block and the box it receives. Per mesh position: ``send``, where the box it sends starts in its
    block; ``receive``, the ``[start, stop)`` of the box it receives in its new block (empty: it receives nothing);
    ``keep``, where its new block starts in its own block padded by ``pad``. Boxes of several shapes (``boxes``;
    ``send_box`` and ``receive_box`` index them) travel flat, padded to ``size`` elements, the largest box."""
    jnp, lax = jax.numpy, jax.lax
    axes = tuple(attrs["axes"])
    me = lax.axis_index(axes)
    boxes = [tuple(b) for b in attrs["boxes"]]
    shape, flat = tuple(attrs["shape"]), len(boxes) > 1

    def mine(key):
        return jnp.asarray(attrs[key], dtype=jnp.int32)[me]

    def switch(key, branches, *operands):
        return lax.switch(mine(key), branches, *operands) if flat else branches[0](*operands)

    def pack(box):
        def send(start):
            piece = lax.dynamic_slice(x, list(start), box)
            return jnp.pad(piece.reshape(-1), (0, attrs["size"] - piece.size)) if flat else piece
        return send

    def unpack(box):
        def place(piece, start):
            if flat:
                piece = piece[:jnp.zeros(box, bool).size].reshape(box)
            return lax.dynamic_update_slice(jnp.zeros(shape, x.dtype), piece, list(start))
        return place

    # varying over every axis once, here: JAX's transpose then sums the cotangent once (a psum)
    have = jax.typeof(x).manual_axis_type.varying
    todo = tuple(a for a in axes if a not in have)
    x = lax.pcast(x, todo, to="varying") if todo else x
    got = lax.ppermute(switch("send_box", [pack(b) for b in boxes], mine("send")), axes,
                       [tuple(p) for p in attrs["perm"]])
    receive = mine("receive")
    placed = switch("receive_box", [unpack(b) for b in boxes], got, receive[:, 0])
    inside = jnp.ones(shape, bool)
    for d in range(len(shape)):
        at = lax.broadcasted_iota(jnp.int32, shape, d)
        inside = inside & (at >= receive[d, 0]) & (at < receive[d, 1])
    if any(lo or hi for lo, hi in attrs["margin"]):
        x = jnp.pad(x, [tuple(p) for p in attrs["margin"]])
    return jnp.where(inside, placed, lax.dynamic_slice(x, list(mine("keep")), shape))


def redistributed(jax, forward, backward):
    """A redistribution run as ``forward``, whose cotangent goes home as ``backward`` (a ``custom_vjp``): where the
    plan's backward is cheaper than JAX's transpose of the forward steps."""
    fn = jax.custom_vjp(forward)
    fn.defvjp(lambda v: (forward(v), None), lambda _, c: (backward(c),))
    return fn


class Local:
    """What an op's JAX local instance knows (:attr:`graphs.ops.opdef.OpDef.jax_local_form`): the global and local
    shapes of its operands and result (in that order), and where each block starts along each dimension
    (``start(which, dim)``, traced from ``axis_index`` over the axes that split it, major to minor); with ``counts``
    (the shards of each dimension), which of its positions are padding (``valid(which)``)."""

    def __init__(self, jax, global_shapes, local_shapes, axes, counts=None):
        self.jax = jax
        self.global_shapes = tuple(tuple(s) for s in global_shapes)
        self.local_shapes = tuple(tuple(s) for s in local_shapes)
        self.axes = axes
        self.counts = counts

    def start(self, which, dim):
        axes = tuple(self.axes[which][dim])
        if not axes:
            return 0
        index = self.jax.lax.axis_index(axes[0] if len(axes) == 1 else axes)
        return index * self.local_shapes[which][dim]

    def valid(self, which):
        """Boolean array of the block's shape, False on its padding (positions past the end of a dimension its
        shards do not divide); None where the block has none."""
        shape, keep = self.local_shapes[which], None
        for d, n in enumerate(self.global_shapes[which]):
            if self.counts is None or shape[d] * self.counts[which][d] == n:
                continue
            at = self.jax.lax.broadcasted_iota("int32", shape, d) + self.start(which, d)
            keep = at < n if keep is None else keep & (at < n)
        return keep


def all_reduce_extremum(jax, x, attrs):
    """The AllReduce of a value pending a maximum or minimum (a local ``max`` over sharded axes): ``pmax`` or
    ``pmin`` over ``attrs["axes"]``. A plan keeps a maximum pending only where no gradient flows through it (a
    training step keeps the axes of a differentiated one whole), so the value is a constant to the backward:
    stopping its gradient says so to ``jax.grad``, which has no rule for ``pmax``."""
    axes = tuple(attrs["axes"])
    reduce = jax.lax.pmax if attrs["largest"] else jax.lax.pmin
    return reduce(jax.lax.stop_gradient(x), axes[0] if len(axes) == 1 else axes)


def zero_padding(jax, x, ctx):
    """``x``, one padded block (``ctx``: a :class:`Local` of it alone), with its padding set to zero: what an op
    reads, so that padding adds nothing to a sum over the dimension (and holds no inf or nan)."""
    keep = ctx.valid(0)
    return x if keep is None else jax.numpy.where(keep, x, jax.numpy.zeros((), x.dtype))


# -- the mesh --------------------------------------------------------------------------------------

class MeshNames:
    """The plan's mesh axes (and sub-axes) as the axes of the split JAX mesh."""

    def __init__(self, plan):
        layouts, refs = program_layouts(plan.program)
        self.mesh = plan.mesh
        self.split, self.pieces = split_mesh(plan.mesh, [r for lay in layouts for r in lay.used_axes()] + refs)
        self.axis_names = tuple(a.name for a in self.split.axes)
        self.sizes = {a.name: a.size for a in self.split.axes}

    def of(self, refs) -> tuple[str, ...]:
        return tuple(n for ref in refs for n in split_names(ref, self.mesh, self.pieces))

    def spec_entries(self, layout: TensorSharding) -> list:
        return [None if not n else n[0] if len(n) == 1 else n for n in (self.of(d.axes) for d in layout.dims)]

    def atoms(self, atoms: frozenset) -> tuple[str, ...]:
        """The split axes that make up the axis pieces ``atoms`` (of
        :func:`~planner.partitioning.typecheck.variance`)."""
        return tuple(n for name, ps in self.pieces.items() for lo, hi, n in ps
                     if any(a.axis == name and lo <= a.lo and a.hi <= hi for a in atoms))


# -- the generator ---------------------------------------------------------------------------------

def _identifier(text: str) -> str:
    out = re.sub(r"\W", "_", text)
    if not out or out[0].isdigit() or keyword.iskeyword(out):
        out = "t_" + out
    return out


class _Writer:
    """The program's body lines, and the functions they call (name -> the function to embed or bind)."""

    def __init__(self, plan, names: MeshNames):
        self.plan = plan
        self.names = names
        self.lines: list[str] = []
        self.functions: dict[str, Any] = {}
        self.used: set[str] = {"jax", "jnp", "lax", "np", "P", "Mesh", "NamedSharding", "math"}
        self.values: dict[tuple[str, TensorSharding], str] = {}
        self.casts: dict[tuple, str] = {}
        self.indent = "    "
        self.backward = [r for r in plan.program.redistributions() if r.phase != "forward"]
        self.redistributed: set[tuple[str, TensorSharding]] = set()  # values a forward redistribution made
        self.routed = _routed(plan.program)

    def fresh(self, base: str) -> str:
        name = _identifier(base)
        if name in self.used or name in self.functions:
            k = 1
            while f"{name}_{k}" in self.used or f"{name}_{k}" in self.functions:
                k += 1
            name = f"{name}_{k}"
        self.used.add(name)
        return name

    def function(self, name: str, fn) -> str:
        if self.functions.setdefault(name, fn) is not fn:
            raise InternalError(f"two functions would be called {name!r} in the generated module")
        return name

    def collective(self, primitive: str) -> str:
        return self.function(primitive, jax_function(primitive))

    def emit(self, line: str, comment: str = "") -> None:
        self.lines.append(f"{self.indent}{line}" + (f"  # {comment}" if comment else ""))

    def value(self, t: str, layout: TensorSharding) -> str:
        try:
            return self.values[(t, layout)]
        except KeyError:
            raise InternalError(f"the program reads {t!r} as {layout.dims_text()} before it is there") from None


def _attrs(d: dict) -> str:
    return "{" + ", ".join(f"{k!r}: {_literal(v)}" for k, v in d.items()) + "}"


def _literal(v) -> str:
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_literal(x) for x in v)
        return f"({inner},)" if isinstance(v, tuple) and len(v) == 1 else (f"({inner})" if isinstance(v, tuple)
                                                                         else f"[{inner}]")
    if isinstance(v, dict):
        return _attrs(v)
    return repr(v)


def _casts(program: Program) -> dict[int, tuple[frozenset, int, frozenset]]:
    """Per forward redistribution (by instruction index): where its readers' pbroadcasts go, so that JAX's
    transpose of the forward is the plan's backward (:func:`planner.redistribution.transpose.transpose_plan`).

    The axes every reader pbroadcasts the redistributed value over come back as a pending cotangent, which
    the plan carries back hop by hop and sums where it is cheapest. So, walking the steps backwards as the
    transpose does: an ``AllGather`` whose gathered axes are all still pending is fused (seed 004's
    ``all_gather``, varying: its transpose is the ``psum_scatter``), and the rest is pbroadcast at the layout
    where the plan sums it (before the hop where the buffer would grow, or at the source, after a first step
    that the transpose makes grow). Returns ``(fused step indices, position, axes)``: the pbroadcast over
    ``axes`` goes before step ``position`` (``len(steps)``: at the readers, as written)."""
    readers: dict[tuple[str, TensorSharding], list] = {}
    routed = _routed(program)
    for ins in program.instructions:
        if isinstance(ins, Compute):
            casts = _shared_casts(ins, routed)
            for k, t in enumerate(ins.op.inputs):
                readers.setdefault((t, ins.strategy.operands[k]), []).append(casts[k])
    out = {}
    for n, ins in enumerate(program.instructions):
        if not isinstance(ins, Redistribute) or ins.phase != "forward" or not ins.plan.steps:
            continue
        casts = readers.get((ins.tensor, ins.destination), [])
        if not casts:
            continue
        pending = frozenset.intersection(*casts)
        steps = ins.plan.steps
        shape = ins.plan.shape
        layouts = [ins.plan.source] + [st.after for st in steps]
        size = [math.prod(lay.local_shape(shape)) for lay in layouts]
        fused: set[int] = set()
        position = len(steps)
        for i in range(len(steps), 0, -1):
            step = steps[i - 1]
            gathered = variance(step.before) - variance(step.after)
            if step.kind == "AllGather" and gathered and gathered <= pending:
                fused.add(i - 1)
                pending = pending - gathered
            if not pending:
                break
            if i == 1:  # summed on the last hop home: at the source, or after a first step that shrinks the buffer
                position = 0 if size[0] <= size[1] else 1
                break
            if size[i - 1] > size[i] or pending & variance(layouts[i - 1]):
                position = i  # summed before a hop that grows the buffer (or uses the axes)
                break
            position = i - 1  # carried one hop further back
        out[n] = (frozenset(fused), position if pending else len(steps), pending)
    return out


def _write_step(w: _Writer, x: str, step, shape, fused: bool, target: str, comment: str) -> None:
    names = w.names
    kind = step.kind
    axes = list(names.of(step.axes))
    if kind == "Slice":
        before, after = step.before, step.after
        fresh = [a for a in after.unreduced if a not in before.unreduced]
        if fresh and step.dims and any(after.local_shape(shape)[d] > 1 for d in step.dims):
            # each device's positions put in place in the whole dimension: only a slice's window of fewer positions
            # than devices makes such a layout, and this lowering does not run those slices (lowering_problem)
            raise EngineError(f"a Slice from {before.dims_text()} to {after.dims_text()} puts each device's positions "
                              "of a dimension split past its size in place, which this lowering does not do")
        if fresh:
            attrs = {"axes": list(names.of(fresh))}
            w.emit(f"{target} = {w.function('keep_share', keep_share)}(jax, {x}, {_attrs(attrs)})",
                   comment)
            x, comment = target, ""
        varying = set(names.atoms(variance(before)))
        for d, (b, a) in enumerate(zip(before.dims, after.dims)):
            if a.axes == b.axes:
                continue
            new_refs = a.axes[len(b.axes):] if a.axes[:len(b.axes)] == b.axes else ()
            if new_refs and not set(names.of(new_refs)) & varying:  # invariant there: seed 004's pscatter
                attrs = {"axes": list(names.of(new_refs)), "dim": d}
                w.emit(f"{target} = {w.collective('pscatter')}(jax, {x}, {_attrs(attrs)})", comment)
            else:
                attrs = {"dim": d, "size": after.local_shape(shape)[d], "after": list(names.of(a.axes)),
                         "before": list(names.of(b.axes))}
                w.emit(f"{target} = {w.function('local_slice', local_slice)}(jax, {x}, {_attrs(attrs)})", comment)
            x, comment = target, ""
        if x != target:
            w.emit(f"{target} = {x}", comment)
        return
    if kind == "CollectivePermute":
        boxes = _box_tables(step, shape, names)
        if boxes is None:
            mesh = step.before.mesh
            pos = devices_to_positions(mesh)
            sends = {int(s): int(d) for s, d in step.pairs}
            receives = set(sends.values())
            perm = [(int(pos[s]), int(pos[d])) for s, d in sends.items()]
            perm += [(int(pos[d]), int(pos[d])) for d in range(mesh.size) if d not in sends and d not in receives]
            attrs = {"axes": list(names.axis_names), "perm": sorted(perm)}
            w.emit(f"{target} = {w.collective('ppermute')}(jax, {x}, {_attrs(attrs)})", comment)
        else:
            w.emit(f"{target} = {w.function('permute_boxes', permute_boxes)}(jax, {x}, {_attrs(boxes)})", comment)
        return
    if kind == "AllReduce" and step.before.reduction != PENDING_SUM:  # a pending maximum or minimum
        attrs = {"axes": axes, "largest": step.before.reduction == PENDING_MAX}
        w.emit(f"{target} = {w.function('all_reduce_extremum', all_reduce_extremum)}(jax, {x}, {_attrs(attrs)})",
               comment)
        return
    x, comment = _fused_pscatters(w, x, step, shape, target, comment)
    primitive = "all_gather" if fused else STEP_KINDS[kind].primitive
    attrs: dict = {"axes": axes}
    if kind in ("AllGather", "ReduceScatter"):
        attrs["dim"] = step.dims[0]
    elif kind == "AllToAll":
        attrs["split_dim"], attrs["concat_dim"] = step.dims[1], step.dims[0]
    w.emit(f"{target} = {w.collective(primitive)}(jax, {x}, {_attrs(attrs)})", comment)


def _write_padded_step(w: _Writer, x: str, step, shape, fused: bool, target: str, comment: str) -> None:
    """A redistribution step (:func:`_write_step`) on padded blocks (:func:`step_padding`): the dimensions it splits
    unevenly padded first, those it makes whole from uneven blocks cut after."""
    padded, even, cut = step_padding(step, shape)
    if padded:
        widths = [(0, even[d] - n if d in padded else 0) for d, n in enumerate(shape)]
        w.emit(f"{target} = jnp.pad({x}, {_literal(widths)})", f"pad to {list(even)}, as {step.after.dims_text()} "
               "blocks it")
        x = target
    _write_step(w, x, step, even, fused, target, comment)
    if cut:
        limits = [n if d in cut else step.after.local_shape(shape)[d] for d, n in enumerate(shape)]
        w.emit(f"{target} = lax.slice({target}, {_literal([0] * len(shape))}, {_literal(limits)})",
               f"cut the padding: {list(shape)}")


def _box_tables(step, shape, names: MeshNames) -> dict | None:
    """The attributes of :func:`permute_boxes` for a ``CollectivePermute`` step; None where the step permutes
    whole blocks (every receiver's new block is its sender's block, every other device keeps its block and sends
    nothing), which one plain ``ppermute`` does.

    A receiver lacks one box of its new block (:func:`~planner.redistribution.state.missing_box`), which its sender
    holds; a permute that also adds axes to the layout (``[{"tp"}, {}]`` to ``[{"dp", "tp"}, {}]``) sends a part of
    a block and keeps a part, so blocks change shape."""
    before, after = step.before, step.after
    mesh = before.mesh
    pos = devices_to_positions(mesh)
    old, new = device_index_ranges(before, shape), device_index_ranges(after, shape)
    source = {int(d): int(s) for s, d in step.pairs}
    senders = set(source.values())
    def whole(d: int) -> bool:
        if d in source:
            return np.array_equal(new[d], old[source[d]])
        return d not in senders and np.array_equal(new[d], old[d])

    if before.unreduced or all(whole(d) for d in range(mesh.size)):
        return None
    ok, missing = missing_box(old, new)
    rank, count = len(shape), mesh.size
    extent = missing[..., 1] - missing[..., 0]
    boxes = sorted({tuple(int(n) for n in extent[d]) for d in source})
    send, send_box = [[0] * rank for _ in range(count)], [0] * count
    receive, receive_box = [[[0, 0]] * rank for _ in range(count)], [0] * count
    for d, s in sorted(source.items()):
        if not ok[d] or np.any(missing[d, :, 0] < old[s, :, 0]) or np.any(missing[d, :, 1] > old[s, :, 1]):
            raise InternalError(f"the CollectivePermute from {before.dims_text()} to {after.dims_text()} sends device "
                                f"{d} a box device {s} does not hold")
        k = boxes.index(tuple(int(n) for n in extent[d]))
        send[pos[s]], send_box[pos[s]] = [int(v) for v in missing[d, :, 0] - old[s, :, 0]], k
        receive[pos[d]] = [[int(a - n), int(b - n)] for (a, b), n in zip(missing[d], new[d, :, 0])]
        receive_box[pos[d]] = k
    # where each new block starts in the device's own block; padded where it reaches past it (kept parts only)
    start = new[..., 0] - old[..., 0]
    kept = np.all(np.minimum(old[..., 1], new[..., 1]) > np.maximum(old[..., 0], new[..., 0]), axis=-1)
    held, local = np.asarray(before.local_shape(shape)), np.asarray(after.local_shape(shape))
    lo = np.maximum(0, -start[kept].min(axis=0)) if kept.any() else np.zeros(rank, dtype=np.int64)
    hi = np.maximum(0, (start[kept] + local).max(axis=0) - held) if kept.any() else np.zeros(rank, dtype=np.int64)
    keep = [[0] * rank for _ in range(count)]
    for d in np.flatnonzero(kept):
        keep[pos[d]] = [int(v) for v in start[d] + lo]
    attrs = {"axes": list(names.axis_names), "perm": sorted((int(pos[s]), int(pos[d])) for d, s in source.items()),
             "shape": [int(n) for n in local], "boxes": [list(b) for b in boxes],
             "size": max(math.prod(b) for b in boxes), "send": send, "receive": receive, "keep": keep,
             "margin": [[int(a), int(b)] for a, b in zip(lo, hi)]}
    if len(boxes) > 1:
        attrs["send_box"], attrs["receive_box"] = send_box, receive_box
    return attrs


def _joined_dim(step) -> int | None:
    """The dimension a step's collective adds its axes to (as the most minor): a ReduceScatter's, an AllToAll's
    split dimension; None for the others."""
    joins = {"ReduceScatter": 0, "AllToAll": 1}.get(step.kind)
    return step.dims[joins] if joins is not None else None


def _sliced_minor(step, names: MeshNames) -> list:
    """The axes a step slices besides its collective (a fused pscatter) that its result has on the dimension the
    collective joins, minor to the collective's axes (``[{"tp"}, {}]`` to ``[{}, {"tp", "dp"}]`` by an AllToAll over
    ``"tp"`` slices ``"dp"`` there): the slice takes a piece of each of the collective's chunks."""
    d = _joined_dim(step)
    if d is None or not step.axes:
        return []
    moved = list(names.of(step.axes))
    want = list(names.of(step.after.dims[d].axes))
    if not all(n in want for n in moved):
        return []
    had = set(names.of(step.before.used_axes()))
    last = max(want.index(n) for n in moved)
    return [n for n in want[last + 1:] if n not in had]


def _fused_pscatters(w: _Writer, x: str, step, shape, target: str, comment: str) -> tuple[str, str]:
    """A step may also slice axes its collective does not use (they were invariant: a fused pscatter, seed 004):
    those slices come first, so that the collective moves the smaller block. Each sliced axis joins its dimension
    where the step's result has it: before the axes the collective adds to that dimension (a contiguous piece),
    or after them (every piece of the collective's chunks: the dimension split in two, the slice taken in the minor
    half). The collective then takes the block to the step's result layout (checked here, by split axis names)."""
    names = w.names
    before, after = step.before, step.after
    k = step.kind
    moved = list(names.of(step.axes))
    had = set(names.of(before.used_axes()))
    dims = [list(names.of(d.axes)) for d in before.dims]
    joined = _joined_dim(step)
    later = {joined: _sliced_minor(step, names)} if joined is not None else {}
    for d, dim in enumerate(after.dims):
        new = [n for n in names.of(dim.axes) if n not in had and n not in moved and n not in later.get(d, ())]
        if new:
            w.emit(f"{target} = {w.collective('pscatter')}(jax, {x}, {_attrs({'axes': new, 'dim': d})})", comment)
            x, comment = target, ""
            dims[d] += new
        if later.get(d):
            local = [n // math.prod(names.sizes[a] for a in axes) for n, axes in zip(shape, dims)]
            chunks, pieces = math.prod(names.sizes[a] for a in moved), math.prod(names.sizes[a] for a in later[d])
            split = local[:d] + [chunks, local[d] // chunks] + local[d + 1:]
            w.emit(f"{target} = jnp.reshape({x}, {_literal(tuple(split))})", comment)
            w.emit(f"{target} = {w.collective('pscatter')}(jax, {target}, "
                   f"{_attrs({'axes': later[d], 'dim': d + 1})})")
            sliced = local[:d] + [local[d] // pieces] + local[d + 1:]
            w.emit(f"{target} = jnp.reshape({target}, {_literal(tuple(sliced))})")
            x, comment = target, ""
    # the collective's own effect on the dimensions, by split axis names: it gathers (or sends away) the most minor
    # splitters of a dimension and adds its axes as the most minor ones
    what = (f"a {k} step from {before.dims_text()} to {after.dims_text()} over {', '.join(map(str, step.axes))} "
            "has no shard_map lowering")
    if k in ("AllGather", "AllToAll"):
        d = step.dims[0]
        kept = len(dims[d]) - len(moved)
        if dims[d][kept:] != moved:
            raise EngineError(f"{what} (its collective takes the most minor splitters of dimension {d}, "
                              f"{dims[d][kept:]}, not {moved})")
        dims[d] = dims[d][:kept]
    if joined is not None:
        dims[joined] += moved + later.get(joined, [])
    want = [list(names.of(d.axes)) for d in after.dims]
    if dims != want:
        raise EngineError(f"{what} (its collective gives {dims}, not {want})")
    return x, comment


def _write_compute(w: _Writer, ins: Compute) -> None:
    op, s = ins.op, ins.strategy
    names = w.names
    casts = pbroadcasts(s)
    args = []
    for k, t in enumerate(op.inputs):
        x = w.value(t, s.operands[k])
        axes = names.atoms(casts[k])
        if axes:  # once per value and axes, shared by every reader (but a routed one, which has its own)
            routed = (t, op.name) in w.routed
            key = (t, s.operands[k], axes, op.name if routed else None)
            if key not in w.casts:
                w.casts[key] = w.fresh(f"{x}_v")
                read_as_it_lies = (t, s.operands[k]) not in w.redistributed
                back = _completion(w, t, s.operands[k], op.name) if routed else \
                    _direct_backward(w, t, s.operands[k], op.name) if read_as_it_lies else None
                cast = (f"{w.collective('pbroadcast')}(jax, @, {_attrs({'axes': list(axes)})})",
                        f"pbroadcast {t} over {', '.join(axes)}" + (f" for {op.name} alone" if routed else ""))
                if back is not None and _communication(back.plan.steps, names) != [("AllReduce", tuple(sorted(axes)))]:
                    forth, backward = w.fresh(f"{w.casts[key]}_forward"), w.fresh(f"{w.casts[key]}_backward")
                    tail = [(f"v = {cast[0].replace('@', 'v', 1)}", cast[1])]
                    _write_steps_function(w, forth, "v", (), f"{t} for its readers", tail)
                    _write_steps_function(w, backward, "c", back.plan,
                                          f"the plan's backward of {t}: {back.bytes_per_device:,} B per device", [])
                    w.emit(f"{w.casts[key]} = {w.function('redistributed', redistributed)}(jax, {forth}, "
                           f"{backward})({x})", f"{cast[1]}, " + ("its cotangent completed as the plan does" if routed
                                                                  else "its cotangents summed as the plan does"))
                else:
                    w.emit(f"{w.casts[key]} = {cast[0].replace('@', x, 1)}", cast[1])
            x = w.casts[key]
        if padded_shape(s.operands[k], ins.in_shapes[k]) != tuple(ins.in_shapes[k]):
            x = _zeroed(w, x, s.operands[k], ins.in_shapes[k])
        args.append(x)
    target = w.fresh(op.output)
    w.values[(op.output, s.result)] = target
    where = f"{op.name}: {s.text()} -> {type_text(ins.dtype, ins.out_shape, s.result)}"
    if op.op in IDENTITIES:
        w.emit(f"{target} = {args[0]}", f"{where} ({op.op})")
        return
    if op.op in COLLECTIVE_OPS:
        attrs = dict(op.attrs_dict)
        attrs["axes"] = list(names.of([AxisRef(a) for a in attrs["axes"]]))
        attrs = jax_attrs(op.op, attrs, names.axis_names, names.sizes)
        operand = args[0] if args else "None"
        w.emit(f"{target} = {w.collective(op.op)}(jax, {operand}, {_attrs(attrs)})", where)
        return
    opdef = get_op(op.op)
    attrs = opdef.canonical(list(ins.in_shapes), opdef.with_defaults(dict(op.attrs_dict)))
    fn = opdef.jax_local_form if opdef.jax_local_form is not None else opdef.jax_form
    if fn is None:
        raise InternalError(f"op {op.op!r} of the catalogue has no jax.numpy form: give its OpDef a jax_form")
    call = f"{w.function('op_' + op.op, fn)}(jnp, lax, [{', '.join(args)}], {_attrs(dict(attrs))}"
    if opdef.jax_local_form is not None:
        layouts = [*s.operands, s.result]
        shapes = [*ins.in_shapes, ins.out_shape]
        call += f", {_local(w, layouts, shapes)}"
    w.emit(f"{target} = {call})", where)


def _local(w: _Writer, layouts, shapes) -> str:
    """The source of a :class:`Local` of blocks of ``shapes`` in ``layouts``."""
    local = [list(lay.local_shape(shape)) for lay, shape in zip(layouts, shapes)]
    axes = [[list(w.names.of(d.axes)) for d in lay.dims] for lay in layouts]
    counts = [list(lay.shard_counts()) for lay in layouts]
    return (f"{w.function('Local', Local)}(jax, {_literal([list(x) for x in shapes])}, {_literal(local)}, "
            f"{_literal(axes)}, {_literal(counts)})")


def _zeroed(w: _Writer, x: str, layout: TensorSharding, shape) -> str:
    """``x``, a padded block, with its padding zeroed (:func:`zero_padding`): once per value, shared by its readers."""
    key = ("zeroed", x)
    if key not in w.casts:
        w.casts[key] = w.fresh(f"{x}_z")
        w.emit(f"{w.casts[key]} = {w.function('zero_padding', zero_padding)}(jax, {x}, "
               f"{_local(w, [layout], [shape])})", f"zero {x}'s padding: {layout.dims_text()} pads {list(shape)}")
    return w.casts[key]


def _write_redistribution(w: _Writer, ins: Redistribute, x: str, target: str, where: str, fused, position: int,
                          hoisted: frozenset) -> None:
    """A forward redistribution whose transpose by JAX is the plan's backward: its steps, with the readers'
    pbroadcast where :func:`_casts` puts it."""
    names = w.names
    for j, step in enumerate(ins.plan.steps):
        if j == position and hoisted:
            axes = list(names.atoms(hoisted))
            w.emit(f"{target} = {w.collective('pbroadcast')}(jax, {x}, {_attrs({'axes': axes})})",
                   f"pbroadcast {ins.tensor} over {', '.join(axes)} for its readers, where the plan's backward sums "
                   "their cotangents")
            x = target
        comment = (f"{step.kind} {', '.join(map(str, step.axes))} {where}: {step.bytes_per_device:,} B per device -> "
                   f"{type_text(ins.plan.dtype, ins.plan.shape, step.after)}")
        _write_padded_step(w, x, step, ins.plan.shape, j in fused, target, comment)
        x = target


def _write_custom(w: _Writer, ins: Redistribute, back: Redistribute, x: str, target: str, where: str) -> None:
    """A forward redistribution whose backward in the plan is cheaper than JAX's transpose of its steps (the
    engine re-plans the cotangent's way home: :func:`planner.redistribution.transpose.transpose_plan`): a
    ``custom_vjp`` (:func:`redistributed`) whose forward is the plan's steps and whose backward the plan's."""
    forth, backward = w.fresh(f"{target}_forward"), w.fresh(f"{target}_backward")
    pending = _pending_of(w.plan.program, ins, w.routed)
    axes = list(w.names.atoms(pending))
    cast = [(f"v = {w.collective('pbroadcast')}(jax, v, {_attrs({'axes': axes})})",
             f"pbroadcast over {', '.join(axes)} for its readers")] if pending else []
    _write_steps_function(w, forth, "v", ins.plan, f"{ins.tensor} {where}: the plan's steps", cast)
    _write_steps_function(w, backward, "c", back.plan,
                          f"the plan's backward of {ins.tensor}: {back.bytes_per_device:,} B per device", [])
    w.emit(f"{target} = {w.function('redistributed', redistributed)}(jax, {forth}, {backward})({x})",
           f"{ins.tensor} {where}, backward as the plan's")


def _write_steps_function(w: _Writer, name: str, arg: str, plan, comment: str, tail: list) -> None:
    """A nested ``def name(arg)`` applying the steps of redistribution plan ``plan`` (none: ``()``), then the
    ``tail`` lines."""
    outer = w.indent
    w.emit(f"def {name}({arg}):", comment)
    w.indent = outer + "    "
    for step in getattr(plan, "steps", ()):
        note = (f"{step.kind} {', '.join(map(str, step.axes))}: {step.bytes_per_device:,} B per device -> "
                f"{type_text(plan.dtype, plan.shape, step.after)}")
        _write_padded_step(w, arg, step, plan.shape, False, arg, note)
    for line, note in tail:
        w.emit(line, note)
    w.emit(f"return {arg}")
    w.indent = outer
    w.emit("")


def _direct_backward(w: _Writer, t: str, layout: TensorSharding, reader: str) -> Redistribute | None:
    """The plan's backward (or gradient) redistribution of the cotangent ``reader`` sends to ``t``, read as it lies
    (``layout``, no forward redistribution): the psum of its pbroadcast, which the engine may route more cheaply
    (slicing over a free axis first, reducing the half, gathering it back)."""
    home = cotangent_layout(layout)
    for r in w.backward:
        if r.tensor == t and reader in r.readers and r.plan.destination == home \
                and r.plan.source.with_unreduced(()) == home and r.route is None:
            return r
    return None


def _pending_of(program: Program, ins: Redistribute, routed: frozenset) -> frozenset:
    """The axis pieces every reader of ``ins``'s result pbroadcasts it over (a ``routed`` reader's own pbroadcast
    not counted: its cotangent comes back complete)."""
    casts = [_shared_casts(i, routed)[k] for i in program.instructions if isinstance(i, Compute)
             for k, t in enumerate(i.op.inputs) if t == ins.tensor and i.strategy.operands[k] == ins.destination]
    return frozenset.intersection(*casts) if casts else frozenset()


def _routed(program: Program) -> frozenset:
    """``(tensor, reader)`` pairs whose pending cotangent a redistribution of its own completes (the ``xla``
    policy: :func:`~planner.model.moves.split_cotangents`): that reader pbroadcasts the value by itself."""
    return frozenset((r.tensor, r.route) for r in program.redistributions() if r.route)


def _shared_casts(ins: Compute, routed: frozenset) -> list:
    """:func:`pbroadcasts` of ``ins``'s operands, none for those its op pbroadcasts by itself (``routed``)."""
    return [frozenset() if (t, ins.op.name) in routed else c
            for t, c in zip(ins.op.inputs, pbroadcasts(ins.strategy))]


def _completion(w: _Writer, t: str, layout: TensorSharding, reader: str) -> Redistribute | None:
    """The plan's completion of the pending cotangent ``reader`` sends to ``t`` (read in ``layout``)."""
    home = cotangent_layout(layout)
    for r in w.backward:
        if r.tensor == t and r.route == reader and r.plan.destination == home:
            return r
    return None


def _backward_of(ins: Redistribute, backward) -> Redistribute | None:
    """The plan's backward (or gradient) redistribution that takes the cotangent of ``ins``'s readers home."""
    home = cotangent_layout(ins.plan.source)
    for r in backward:
        if r.tensor == ins.tensor and r.route is None and set(r.readers) == set(ins.readers) \
                and r.plan.destination == home \
                and r.plan.source.with_unreduced(()) == cotangent_layout(ins.destination):
            return r
    return None


def _communication(steps, names: MeshNames) -> list:
    """The communicating steps of a redistribution, as ``(kind, axes)`` in a canonical order."""
    return sorted((st.kind, tuple(sorted(names.of(st.axes)))) for st in steps if st.kind != "Slice")


def _natural_transpose(steps, fused, hoisted: frozenset, names: MeshNames) -> list:
    """The communicating steps of JAX's transpose of a redistribution lowered by :func:`_write_redistribution`:
    a fused gather's ``psum_scatter``, a scatter's ``all_gather``, an all-to-all's all-to-all, a permute's
    inverse permute (and the ``psum`` over the axes its value did not vary over: ``ppermute`` makes it vary over
    every axis), a ``pscatter``'s ``all_gather_invariant`` (one that gathers a piece of each chunk of a collective,
    :func:`_sliced_minor`, is no step of the engine's: the plan's backward differs), a fresh pending sum's and the
    hoisted pbroadcast's ``psum``."""
    out = []
    for j, step in enumerate(steps):
        axes = tuple(sorted(names.of(step.axes)))
        if step.kind == "AllGather" and j in fused:
            out.append(("ReduceScatter", axes))
        elif step.kind == "ReduceScatter":
            out.append(("AllGather", axes))
        elif step.kind == "AllToAll":
            out.append((step.kind, axes))
        elif step.kind == "CollectivePermute":  # a ppermute over every axis: varying over all, its transpose a psum
            out.append((step.kind, axes))
            invariant = tuple(sorted(set(names.axis_names) - set(names.atoms(variance(step.before)))))
            if invariant:
                out.append(("AllReduce", invariant))
            continue
        had = set(names.of(step.before.used_axes())) | (set(names.of(step.axes)) if step.kind != "Slice" else set())
        minor = set(_sliced_minor(step, names))
        new = sorted(n for d in step.after.dims for n in names.of(d.axes) if n not in had and n not in minor)
        if new:
            out.append(("AllGather", tuple(new)))
        if minor:  # gathered back across the collective's chunks: not a step the engine plans
            out.append(("AllGather of a piece of each chunk", tuple(sorted(minor))))
        fresh = [a for a in step.after.unreduced if a not in step.before.unreduced]
        if fresh:
            out.append(("AllReduce", tuple(sorted(names.of(fresh)))))
    if hoisted:
        out.append(("AllReduce", tuple(sorted(names.atoms(hoisted)))))
    return sorted(out)


def _program(plan, names: MeshNames) -> _Writer:
    """The body of ``program(...)``: one line per op and per collective, in the program's order."""
    program = plan.program
    w = _Writer(plan, names)
    casts = _casts(program)
    for ins in program.instructions:
        if isinstance(ins, Load):
            w.values[(ins.tensor, ins.layout)] = w.fresh(ins.tensor)
    backward = w.backward
    for n, ins in enumerate(program.instructions):
        if isinstance(ins, Redistribute) and ins.phase == "forward":
            x = w.value(ins.tensor, ins.source)
            target = w.fresh(f"{ins.tensor}_{'_'.join(map(str, ins.destination.shard_counts()))}")
            where = f"for {', '.join(ins.readers)}" if ins.readers else "as graph output"
            fused, position, hoisted = casts.get(n, ((), len(ins.plan.steps), frozenset()))
            back = _backward_of(ins, backward)
            if back is not None and _communication(back.plan.steps, names) != _natural_transpose(
                    ins.plan.steps, fused, hoisted, names):
                _write_custom(w, ins, back, x, target, where)
            else:
                _write_redistribution(w, ins, x, target, where, fused, position, hoisted)
            w.values[(ins.tensor, ins.destination)] = target
            w.redistributed.add((ins.tensor, ins.destination))
        elif isinstance(ins, Compute):
            _write_compute(w, ins)
    returned = []
    for o, lay in program.outputs.items():
        x = w.value(o, lay)
        if lay.unreduced:  # stacked over its pending axes: one partial per group (see the module docstring)
            x = f"{x}[None]"
        returned.append(x)
    w.emit(f"return ({', '.join(returned)}{',' if len(returned) == 1 else ''})")
    return w


def _source_of(name: str, fn) -> str:
    """``fn``'s source as a module-level definition called ``name``."""
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise InternalError(f"the source of {getattr(fn, '__qualname__', fn)!r} cannot be read: give it a "
                            "module-level def") from None
    own = fn.__name__
    head = re.compile(rf"^(def|class) {re.escape(own)}\b", re.M)
    if fn.__closure__ if hasattr(fn, "__closure__") else False:
        raise InternalError(f"{own} is a closure: a generated module cannot embed it")
    if not head.search(text):
        raise InternalError(f"the source of {own} is not one module-level def (a lambda?): it cannot be embedded")
    return head.sub(lambda m: f"{m.group(1)} {name}", text, count=1).rstrip() + "\n"


def _spec_text(entries) -> str:
    return "P(" + ", ".join(_literal(e) for e in entries) + ")"


def module_source(plan, *, embed: bool = True, command: str = "") -> str:
    """The Python source of ``plan``'s program as a JAX module (see the module docstring). With ``embed`` the
    functions it calls (catalogue ops, registry collectives, :func:`keep_share`, :func:`local_slice`,
    :func:`permute_boxes`, :class:`Local`) are written into it; without, :func:`load_module` binds them."""
    return _generate(plan, embed, command)[0]


def _generate(plan, embed: bool, command: str = "") -> tuple[str, dict]:
    why = lowering_problem(plan)
    if why:
        raise EngineError(f"the plan cannot be one shard_map: {why}")
    names = MeshNames(plan)
    w = _program(plan, names)
    program = plan.program
    graph = plan.graph
    loads = [i for i in program.instructions if isinstance(i, Load)]
    sources = [w.values[(i.tensor, i.layout)] for i in loads]
    trained = tuple(i.tensor for i in loads if graph.tensor(i.tensor).kind == "param" and program.training
                    and _needs_grad(plan, i.tensor))
    split = {a: [n for _, _, n in ps] for a, ps in names.pieces.items() if len(ps) > 1}
    out = [f'"""Model {plan.model!r} as planned by shardplan (search {plan.search}'
           f'{", training" if program.training else ""}): its SPMD program as one jax.shard_map.', ""]
    if command:
        out += [f"Generated by: {command}", ""]
    out += ["Every collective below is one the plan lists (shardplan plan --format program); XLA runs them as written.",
            "Call make_mesh() on as many devices as MESH_SHAPE holds (on CPU: XLA_FLAGS=",
            f"--xla_force_host_platform_device_count={plan.mesh.size} before importing jax), then forward(params, "
            "inputs)" + (" or step(params, inputs)." if program.training else "."),
            '"""', "", "import jax", "import jax.numpy as jnp", "import numpy as np", "from jax import lax",
            "from jax.sharding import Mesh, NamedSharding, PartitionSpec as P", "",
            f"MESH_AXES = {_literal(names.axis_names)}"
            + ("  # split where the plan uses sub-axes: "
               + "; ".join(f"{a} = {' x '.join(v)}" for a, v in split.items()) if split else ""),
            f"MESH_SHAPE = {_literal(tuple(names.sizes[a] for a in names.axis_names))}",
            f"DEVICE_IDS = {_literal(tuple(int(d) for d in names.split.devices))}  # device at each mesh position",
            "", "# every argument of program(): its global shape, JAX dtype and PartitionSpec"]
    out.append("SOURCES = {")
    for i, v in zip(loads, sources):
        out.append(f"    {i.tensor!r}: ({_literal(tuple(i.shape))}, {jax_dtype_name(i.dtype)!r}, "
                   f"{_spec_text(names.spec_entries(i.layout))}),")
    out.append("}")
    out.append(f"ARGUMENTS = {_literal(tuple(i.tensor for i in loads))}  # program()'s parameters, in order")
    out.append(f"TRAINED = {_literal(trained)}  # the parameters step() differentiates")
    out.append("# every output and where the program leaves it; PENDING: outputs left as a pending sum over those")
    out.append("# axes, stacked along a new leading dimension (one partial per group: add them up to read the value)")
    out.append("OUTPUTS = {")
    for o, lay in program.outputs.items():
        spec = names.spec_entries(lay)
        if lay.unreduced:
            stack = names.of(lay.unreduced)
            spec = [stack[0] if len(stack) == 1 else stack] + spec
        out.append(f"    {o!r}: {_spec_text(spec)},")
    out.append("}")
    pending = {o: list(names.of(lay.unreduced)) for o, lay in program.outputs.items() if lay.unreduced}
    out.append(f"PENDING = {_literal(pending)}")
    padding = {}
    for i in loads:
        padding[i.tensor] = (tuple(i.shape), padded_shape(i.layout, i.shape))
    for o, lay in program.outputs.items():
        shape = tuple(graph.tensor(o).shape)
        stack = (math.prod(names.sizes[a] for a in names.of(lay.unreduced)),) if lay.unreduced else ()
        padding[o] = (stack + shape, stack + padded_shape(lay, shape))
    padding = {n: v for n, v in padding.items() if v[0] != v[1]}
    out.append("# arguments and outputs whose layout splits a dimension unevenly: (shape, shape as program() holds it,")
    out.append("# zeros past the end of each such dimension); padded() and unpadded() go between the two")
    out.append(f"PADDED = {_literal(padding)}")
    out.append("")
    out.append("")
    if embed:
        for name, fn in w.functions.items():
            out += ["", _source_of(name, fn)]
    out += ["", f"def program({', '.join(sources)}):",
            '    """One device\'s program on its blocks (shard_map\'s body)."""'] + w.lines
    out += ["", "", _API]
    return "\n".join(out).rstrip() + "\n", w.functions


def _needs_grad(plan, tensor: str) -> bool:
    return requires_grad(plan.graph).get(tensor, False)


_API = '''def make_mesh(devices=None):
    """The plan's mesh on ``devices`` (default: the first of jax.devices())."""
    devices = list(jax.devices() if devices is None else devices)
    count = int(np.prod(MESH_SHAPE))
    if len(devices) < count:
        raise ValueError(f"the plan's mesh needs {count} devices, JAX has {len(devices)}")
    grid = np.empty(count, dtype=object)
    grid[:] = [devices[d] for d in DEVICE_IDS]
    return Mesh(grid.reshape(MESH_SHAPE), MESH_AXES)


def shardings(mesh):
    """The NamedSharding of every argument of program() (of its PADDED shape where it has one)."""
    return {name: NamedSharding(mesh, spec) for name, (_, _, spec) in SOURCES.items()}


def padded(name, value):
    """``value`` (an argument or output of the model's shape) as program() holds it: zeros appended where PADDED
    says (numpy in, numpy out)."""
    if name not in PADDED:
        return value
    shape, padded = PADDED[name]
    return (np if isinstance(value, np.ndarray) else jnp).pad(value, [(0, p - n) for n, p in zip(shape, padded)])


def unpadded(name, value):
    """``value`` as program() holds it, cut to the model's shape."""
    return value[tuple(slice(0, n) for n in PADDED[name][0])] if name in PADDED else value


def place(values, mesh):
    """Arguments of the model's shapes (name -> array), padded and placed where program() takes them."""
    sh = shardings(mesh)
    return {name: jax.device_put(padded(name, value), sh[name]) for name, value in values.items()}


def spmd(mesh):
    """program() as one shard_map on ``mesh``: global arrays of ARGUMENTS in, the OUTPUTS (PENDING ones stacked) out."""
    return jax.shard_map(program, mesh=mesh, in_specs=tuple(SOURCES[t][2] for t in ARGUMENTS),
                         out_specs=tuple(OUTPUTS.values()))


def raw_step(mesh):
    """jitted ``(params, inputs[, cotangents]) -> (outputs as the program leaves them, gradients of TRAINED)``,
    every array as program() holds it (PADDED: see place()); with cotangents (one per float output, shaped as
    OUTPUTS leaves it; integer and bool outputs take none), the gradients are the program's backward."""
    fn = spmd(mesh)

    def run(params, inputs):
        values = {**inputs, **params}
        return dict(zip(OUTPUTS, fn(*[values[t] for t in ARGUMENTS])))

    def step(params, inputs, cotangents=None):
        if cotangents is None:
            return run(params, inputs), {}
        trained = {t: params[t] for t in TRAINED}
        rest = {t: v for t, v in params.items() if t not in trained}

        def seeded(p):  # the outputs that take a cotangent, and every output beside them
            outs = run({**rest, **p}, inputs)
            return {o: outs[o] for o in cotangents if o in outs}, outs

        diffed, pullback, outs = jax.vjp(seeded, trained, has_aux=True)
        (grads,) = pullback({o: cotangents[o] for o in diffed})
        return outs, grads

    return jax.jit(step)


def _read(outputs):
    outputs = {o: unpadded(o, v) for o, v in outputs.items()}
    return {o: jnp.sum(v, axis=0) if o in PENDING else v for o, v in outputs.items()}


def forward(params, inputs, mesh=None):
    """The model's outputs (PENDING ones added up: one reduction the plan leaves to its reader); params and inputs
    as place() puts them."""
    outs, _ = raw_step(make_mesh() if mesh is None else mesh)(params, inputs)
    return _read(outs)


def step(params, inputs, mesh=None):
    """``(loss, gradients)``: loss is the sum of every float output's elements (the model's loss where its one
    output is a scalar), gradients those of TRAINED by the plan's backward; params and inputs as place() puts them."""
    mesh = make_mesh() if mesh is None else mesh
    shapes = jax.eval_shape(lambda p, i: raw_step(mesh)(p, i)[0], params, inputs)
    ones = {o: padded(o, jnp.ones(PADDED[o][0] if o in PADDED else s.shape, s.dtype)) for o, s in shapes.items()
            if jnp.issubdtype(s.dtype, jnp.floating)}
    outs, grads = raw_step(mesh)(params, inputs, ones)
    return sum(jnp.sum(v) for o, v in _read(outs).items() if o in ones), {n: unpadded(n, g) for n, g in grads.items()}
'''


def load_module(plan) -> dict:
    """The module of ``plan`` (:func:`module_source`, the functions it calls bound rather than embedded),
    executed: its namespace."""
    source, functions = _generate(plan, embed=False)
    namespace: dict = dict(functions)
    exec(compile(source, f"<shardplan jax module of {plan.model}>", "exec"), namespace)
    return namespace
