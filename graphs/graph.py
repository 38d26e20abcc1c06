"""``ComputationGraph``: a model as a bipartite networkx graph of tensors and ops.

**Nodes.** One node per tensor (attribute ``kind="tensor"``, ``spec`` its
:class:`TensorSpec`) and one per op instance (``kind="op"``, ``spec`` its
:class:`OpSpec`). Tensor and op names share one namespace, so every node name is
unique.

**Edges.** ``tensor -> op`` when the op reads the tensor; its attribute ``operands``
lists the operand positions (``mul(x, x)`` gives one edge with ``operands=[0, 1]``).
``op -> tensor`` from an op to its result. Every op has exactly one result and
every tensor at most one producer; inputs, parameters and constants have none.

A graph is built once, validated and never changed: shapes and dtypes of every
activation are inferred by the op catalogue, attributes get their defaults and
canonical form, and ``ops`` is a deterministic topological order (Kahn's
algorithm, ties broken by the order the ops were given). Each violation raises
:class:`~planner.errors.ModelError` naming the file and line (when known), the op
or tensor, and what is wrong.

>>> from graphs.graph_builder import GraphBuilder
>>> b = GraphBuilder("sq", {"x": 2})
>>> x = b.tensor("x", [4, 8])
>>> y = b.op("mul", [x, x], output="y", name="square")
>>> g = b.build()
>>> g.nx.edges["x", "square"]["operands"], g.consumers("x"), g.producer("y")
([0, 1], [('square', 0), ('square', 1)], 'square')
"""

from __future__ import annotations

import heapq
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from graphs.axis_regions import AxisRegion, check_regions
from graphs.dtypes import dtype_itemsize, is_float
from graphs.manual_regions import ManualRegion, check_placement
from graphs.meshes import check_same_devices
from graphs.ops.common import shape_text
from graphs.ops.opdef import OpDef
from graphs.ops.registry import get_op
from graphs.specs import TENSOR_KINDS, OpSpec, TensorSpec
from planner.errors import ModelError, ShardplanError, clip, did_you_mean, quote
from planner.ir import Mesh
from planner.limits import check_op_flops

if TYPE_CHECKING:
    import networkx as nx  # imported when first used: it is slow to import

__all__ = ["ComputationGraph", "OpSpec", "TensorSpec", "TENSOR_KINDS"]


def _suggest(name: str, known: Iterable[str]) -> str:
    return did_you_mean(name, list(known), n=3)


OUTPUTS_LAYOUTS = ("free", "replicated", "even")
"""How graph outputs the user did not pin are delivered (``outputs_layout``)."""


class ComputationGraph:
    """A validated model (see the module docstring). Read-only after construction.

    Parameters: ``name``; ``meshes`` (ordered ``{name: Mesh}``, the first is the
    default); ``tensors`` the declared (non-activation) :class:`TensorSpec`\\ s;
    ``ops`` the :class:`OpSpec`\\ s in any order; ``outputs`` (default: every result
    nobody reads, in op order); ``shard_as`` groups of tensor names sharded alike
    (hard: every search gives the members one sharding); ``shard_like`` groups
    sharded alike where nothing conflicts (soft: only rule-based propagation reads
    them); ``axis_regions`` the ``auto_axes`` / ``explicit_axes`` regions
    (:mod:`graphs.axis_regions`); ``cluster`` kept as given; ``pipeline`` the model's
    :class:`~graphs.pipeline_spec.PipelineSpec` (None: no ``pipeline:`` mapping); ``outputs_layout`` how outputs the user did not pin
    are delivered (``free``: any fully reduced layout; ``replicated``: whole on every
    device; ``even``: in the whole mesh axes that divide each dimension, as a JAX array,
    which the JAX frontend sets); ``source`` the file the model came from. ``lines``
    optionally gives the source line of ``"outputs"``, ``"shard_as"`` and ``"shard_like"``
    (one line, or a list with one per group).
    """

    __slots__ = ("name", "meshes", "cluster", "pipeline", "outputs_layout", "tensors", "ops", "outputs", "shard_as", "shard_like",
                 "axis_regions", "manual_regions", "source", "_nx", "_region_of", "_ops", "_producer", "_consumers")

    def __init__(
        self,
        name: str,
        meshes: Mapping[str, Mesh] | None,
        tensors: Iterable[TensorSpec],
        ops: Iterable[OpSpec],
        outputs: Sequence[str] | None = None,
        shard_as: Iterable[Sequence[str]] = (),
        *,
        shard_like: Iterable[Sequence[str]] = (),
        axis_regions: Iterable[AxisRegion] = (),
        manual_regions: Iterable[ManualRegion] = (),
        cluster: Any = None,
        pipeline: Any = None,
        outputs_layout: str = "free",
        source: str | None = None,
        lines: Mapping[str, int | None] | None = None,
    ):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        self._check_name(name, source)
        set_("name", name)
        set_("source", source)
        set_("cluster", cluster)
        set_("pipeline", pipeline)
        if outputs_layout not in OUTPUTS_LAYOUTS:
            raise self._error(f"outputs_layout must be one of {', '.join(OUTPUTS_LAYOUTS)}, got {quote(outputs_layout)}",
                              dict(lines or {}).get("outputs_layout"))
        set_("outputs_layout", outputs_layout)
        set_("meshes", MappingProxyType(check_same_devices(dict(meshes or {}))))
        lines = dict(lines or {})

        declared = self._declared(list(tensors))
        op_list = list(ops)
        producer = self._producers(op_list, declared)
        self._check_inputs(op_list, declared, producer)
        order = self._topological(op_list, producer)

        specs: dict[str, TensorSpec] = dict(declared)
        ordered_ops = []
        for op in order:
            op, specs[op.output] = self._infer(op, specs)
            ordered_ops.append(op)
        self._check_meshes(specs.values())

        set_("tensors", MappingProxyType(specs))
        set_("ops", tuple(ordered_ops))
        set_("_ops", {op.name: op for op in ordered_ops})
        set_("_producer", {op.output: op.name for op in ordered_ops})
        consumers: dict[str, list[tuple[str, int]]] = {t: [] for t in specs}
        for op in ordered_ops:
            for i, t in enumerate(op.inputs):
                consumers[t].append((op.name, i))
        set_("_consumers", consumers)
        set_("outputs", self._outputs(outputs, lines.get("outputs")))
        set_("shard_as", self._groups("shard_as", shard_as, lines.get("shard_as")))
        set_("shard_like", self._groups("shard_like", shard_like, lines.get("shard_like")))
        regions = tuple(axis_regions)
        mesh_axes = [a.name for a in next(iter(self.meshes.values())).axes] if self.meshes else []
        set_("axis_regions", check_regions(regions, self._ops, mesh_axes, lambda t: [o for o, _ in consumers[t]],
                                           self.outputs, self._error) if regions else ())
        manual = tuple(manual_regions)
        check_placement(manual, ordered_ops, self._error)
        set_("manual_regions", manual)
        region_of: dict[str, ManualRegion] = {}
        for r in manual:
            for name in r.ops + r.enter_ops + r.exit_ops + r.body_tensors:
                region_of[name] = r
        set_("_region_of", region_of)
        set_("_nx", None)  # the networkx view, built on first use of .nx

    def __setattr__(self, key, value):
        raise AttributeError(f"ComputationGraph is read-only; build a new one instead of setting {quote(key)}")

    def __reduce__(self):
        """Pickle and copy by rebuilding from the specs (the networkx view is derived)."""
        declared = [t for t in self.tensors.values() if t.kind != "activation"]
        args = (self.name, dict(self.meshes), declared, list(self.ops), self.outputs, self.shard_as)
        return _rebuild, (args, {"shard_like": self.shard_like, "axis_regions": self.axis_regions,
                                 "manual_regions": self.manual_regions, "cluster": self.cluster, "pipeline": self.pipeline,
                                 "outputs_layout": self.outputs_layout, "source": self.source})

    def __repr__(self) -> str:
        return f"ComputationGraph({self.name!r}, {len(self.ops)} ops, {len(self.tensors)} tensors)"

    # -- construction steps ---------------------------------------------------------
    def _where(self, line: int | None) -> str | None:
        if line is None:
            return None
        return f"{self.source or '<string>'}:{line}"

    def _error(self, message: str, line: int | None) -> ModelError:
        return ModelError(message, where=self._where(line))

    @staticmethod
    def _check_name(name: Any, source: str | None) -> None:
        if not isinstance(name, str) or not name:
            raise ModelError(f"a model needs a non-empty name, got {quote(name)}", where=source)

    def _declared(self, tensors: list[TensorSpec]) -> dict[str, TensorSpec]:
        out: dict[str, TensorSpec] = {}
        for t in tensors:
            if t.name in out:
                first = out[t.name].line
                at = f" (first at line {first})" if first else ""
                raise self._error(f"tensor {quote(t.name)} is defined twice{at}", t.line)
            if t.kind == "activation":
                raise self._error(
                    f"tensor {quote(t.name)} is declared with kind activation; activations are op results "
                    "and are not declared (use input, param or const)",
                    t.line,
                )
            self._check_const_value(t)
            out[t.name] = t
        return out

    def _check_const_value(self, t: TensorSpec) -> None:
        """An integer or bool constant's fill value is one its dtype holds (the simulator fills the tensor with it)."""
        if t.value is None or is_float(t.dtype):
            return
        if t.dtype == "bool":
            ok, wanted = t.value in (0, 1), "0 or 1"
        else:
            high = 2 ** (8 * dtype_itemsize(t.dtype) - 1)  # a signed integer of that many bytes
            ok = float(t.value).is_integer() and -high <= t.value < high
            wanted = f"an integer from {-high:,} to {high - 1:,}"
        if not ok:
            raise self._error(f"tensor {quote(t.name)}: the constant value {quote(t.value)} does not fit its dtype "
                              f"{t.dtype}; give {wanted}", t.line)

    def _producers(self, ops: list[OpSpec], declared: dict[str, TensorSpec]) -> dict[str, OpSpec]:
        names: dict[str, OpSpec] = {}
        producer: dict[str, OpSpec] = {}
        for op in ops:
            if op.name in names:
                first = names[op.name].line
                at = f" (first at line {first})" if first else ""
                raise self._error(f"op {quote(op.name)} is defined twice{at}", op.line)
            if op.name in declared:
                raise self._error(f"op {quote(op.name)} has the name of a tensor; tensor and op names must differ", op.line)
            names[op.name] = op
            if op.output in declared:
                t = declared[op.output]
                at = f" at line {t.line}" if t.line else ""
                raise self._error(
                    f"tensor {quote(op.output)} is defined twice: declared in tensors{at} and produced by op {quote(op.name)}",
                    op.line,
                )
            if op.output in producer:
                other = producer[op.output]
                at = f" (line {other.line})" if other.line else ""
                raise self._error(
                    f"tensor {quote(op.output)} is defined twice: produced by op {quote(other.name)}{at} and by op {quote(op.name)}",
                    op.line,
                )
            producer[op.output] = op
        for t, op in producer.items():
            if t in names:
                raise self._error(
                    f"op {quote(op.name)} names its output {quote(t)}, which is an op name; tensor and op names must differ",
                    op.line,
                )
        return producer

    def _check_inputs(self, ops: list[OpSpec], declared: Mapping[str, TensorSpec], producer: Mapping[str, OpSpec]):
        for op in ops:
            opdef = get_op(op.op)
            try:
                opdef.check_arity(len(op.inputs), op.inputs)
                opdef.with_defaults(op.attrs_dict)
            except ModelError as e:
                raise self._error(f"op {quote(op.name)}: {e.message}", op.line) from None
            for t in op.inputs:
                if t not in declared and t not in producer:
                    hint = _suggest(t, list(declared) + list(producer))
                    raise self._error(
                        f"op {quote(op.name)} reads tensor {quote(t)}, which is not defined{hint} "
                        "(declare it under tensors or produce it with an op)",
                        op.line,
                    )

    def _topological(self, ops: list[OpSpec], producer: Mapping[str, OpSpec]) -> list[OpSpec]:
        """Kahn's algorithm; among ready ops the one given first goes first."""
        index = {op.name: i for i, op in enumerate(ops)}
        deps = {op.name: sorted({producer[t].name for t in op.inputs if t in producer}, key=index.get) for op in ops}
        users: dict[str, list[str]] = {op.name: [] for op in ops}
        for name, ds in deps.items():
            for d in ds:
                users[d].append(name)
        waiting = {name: len(ds) for name, ds in deps.items()}
        ready = [(index[n], n) for n, k in waiting.items() if k == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            _, name = heapq.heappop(ready)
            order.append(ops[index[name]])
            for u in users[name]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    heapq.heappush(ready, (index[u], u))
        if len(order) < len(ops):
            import networkx as nx

            done = {op.name for op in order}
            g = nx.DiGraph()
            for op in ops:
                if op.name not in done:
                    g.add_node(op.name)
            for name in g.nodes:
                for d in deps[name]:
                    if d in g:
                        g.add_edge(d, name)
            cycle = [u for u, _ in nx.find_cycle(g)]
            first = min(cycle, key=index.get)
            k = cycle.index(first)
            cycle = cycle[k:] + cycle[:k]
            path = " -> ".join(f"{n} ({ops[index[n]].output})" for n in cycle + [cycle[0]])
            raise self._error(
                f"ops form a cycle: {path}; an op's result cannot depend on itself",
                ops[index[first]].line,
            )
        return order

    def _infer(self, op: OpSpec, specs: Mapping[str, TensorSpec]) -> tuple[OpSpec, TensorSpec]:
        """``op`` with canonical attributes and its inferred result; checks its annotations."""
        opdef = get_op(op.op)
        ins = [specs[t] for t in op.inputs]
        shapes = [t.shape for t in ins]
        try:
            attrs = opdef.with_defaults(op.attrs_dict)
            shape, dtype = opdef.infer(shapes, [t.dtype for t in ins], attrs, names=op.inputs)
            attrs = opdef.canonical(shapes, attrs)
            self._check_strategy(op, opdef, ins)
            self._check_constant_indices(opdef, ins, attrs)
            self._check_out_sharding(op, opdef, shape, dtype)
            out = TensorSpec(op.output, shape, dtype, "activation", op.out_sharding, op.line)
            check_op_flops(opdef.flops(shapes, shape, attrs), f"this {opdef.name}")  # priced as a float
        except ShardplanError as e:
            raise self._error(f"op {quote(op.name)}: {e.message}", op.line) from None
        return replace(op, attrs=attrs), out

    def _check_out_sharding(self, op: OpSpec, opdef: OpDef, shape: tuple[int, ...], dtype: str) -> None:
        """An op that means nothing without an ``out_sharding`` (``sharding_constraint``) must have one."""
        if not opdef.requires_out_sharding or op.out_sharding is not None:
            return
        axis = next((f'"{a}"' for mesh in self.meshes.values() for a in mesh.axis_names), "")
        example = "[" + ", ".join([f"{{{axis}}}"] + ["{}"] * (len(shape) - 1)) + "]" if shape else "[]"
        raise ModelError(
            f"{opdef.name} needs an out_sharding, the sharding the readers of {op.output} "
            f"({dtype}[{shape_text(shape)}]) get; add one {{...}} per dimension, "
            f"e.g. out_sharding: '{example}'"
        )

    @staticmethod
    def _check_constant_indices(opdef: OpDef, ins: list[TensorSpec], attrs: Mapping[str, Any]) -> None:
        """A constant that an op indexes with (gather's indices, cross_entropy's labels: ``OpDef.indexes``) lies in
        ``[0, size)`` of the dimension it indexes: the reference would fail on it only when run."""
        for i, j, d in opdef.indexed(attrs):
            index, indexed = ins[i], ins[j]
            if index.value is None:
                continue
            size = indexed.shape[d]
            if not 0 <= index.value < size:
                dim = d % indexed.rank
                raise ModelError(
                    f"{index.name} is a constant {quote(index.value)} used as an index into dimension {dim} of "
                    f"{indexed.name} ({indexed.type_text()}), whose size is {size:,}; an index lies in [0, {size:,})"
                )

    @staticmethod
    def _check_strategy(op: OpSpec, opdef: OpDef, ins: list[TensorSpec]) -> None:
        if op.strategy is None:
            return
        if len(op.strategy) != len(ins):
            raise ModelError(
                f"strategy gives {len(op.strategy)} entries but {opdef.name} has {len(ins)} inputs "
                f"({', '.join(t.name for t in ins)}); give one list of split counts per input"
            )
        for i, (split, t) in enumerate(zip(op.strategy, ins)):
            if len(split) != t.rank:
                raise ModelError(
                    f"strategy for input {i} ({t.name}, shape {t.type_text()}) has {len(split)} split counts "
                    f"but the tensor has rank {t.rank}; give one per dimension"
                )

    def _check_meshes(self, tensors: Iterable[TensorSpec]) -> None:
        known = dict(self.meshes)
        for t in tensors:
            s = t.sharding
            if s is not None and known.get(s.mesh.name) != s.mesh:
                names = ", ".join("@" + n for n in known) or "none"
                raise self._error(
                    f"tensor {quote(t.name)} is sharded on mesh @{s.mesh.name}, which is not a mesh of this model "
                    f"(meshes: {names})",
                    t.line,
                )

    def _outputs(self, outputs: Sequence[str] | None, line: int | None) -> tuple[str, ...]:
        if outputs is None:
            return tuple(op.output for op in self.ops if not self._consumers[op.output])
        outputs = (outputs,) if isinstance(outputs, str) else tuple(outputs)
        for t in outputs:
            if t not in self.tensors:
                raise self._error(f"output {quote(t)} is not a tensor of the model{_suggest(str(t), self.tensors)}", line)
        return outputs

    def _groups(self, key: str, groups: Iterable[Sequence[str]], lines: Any) -> tuple[tuple[str, ...], ...]:
        """``shard_as`` or ``shard_like`` (``key``) groups, checked: two or more defined tensors of one shape."""
        out = []
        for k, group in enumerate(groups):
            line = lines[k] if isinstance(lines, (list, tuple)) and k < len(lines) else lines
            group = tuple(group)
            if len(group) < 2:
                raise self._error(f"{key} group {list(group)} needs at least two tensors", line)
            for t in group:
                if t not in self.tensors:
                    raise self._error(
                        f"{key} names tensor {quote(t)}, which is not defined{_suggest(str(t), self.tensors)}", line
                    )
            first = self.tensors[group[0]]
            for t in group[1:]:
                spec = self.tensors[t]
                if spec.shape != first.shape:
                    raise self._error(
                        f"{key} groups tensors of different shapes: {first.name} is {first.type_text()} "
                        f"but {spec.name} is {spec.type_text()}; tensors sharded alike need equal shapes",
                        line,
                    )
            if key == "shard_as":
                self._check_agree(group, line)
            out.append(group)
        return tuple(out)

    def _check_agree(self, group: tuple[str, ...], line: int | None) -> None:
        """The annotations of a shard_as group's members can end alike: per dimension, one member's axes
        start the other's, and a closed dimension has all the axes the other gives it."""
        annotated = [self.tensors[t] for t in group if self.tensors[t].sharding is not None]
        for i, first in enumerate(annotated):
            for other in annotated[i + 1:]:
                a, b = first.sharding, other.sharding
                if a.mesh.name != b.mesh.name:
                    continue  # compared once both are on the planning mesh
                for d, (da, db) in enumerate(zip(a.dims, b.dims)):
                    short, long = (da, db) if len(da.axes) <= len(db.axes) else (db, da)
                    if long.axes[: len(short.axes)] == short.axes and (short.is_open or short.axes == long.axes):
                        continue
                    raise self._error(
                        f"shard_as group [{', '.join(map(clip, group))}] cannot hold: tensor {quote(first.name)} is annotated "
                        f"{a.dims_text()}{_line(first.line)} and tensor {quote(other.name)} {b.dims_text()}"
                        f"{_line(other.line)}, which disagree on dimension {d} ({da} against {db}); make the "
                        "members' annotations agree, or annotate one member only", line)

    def _networkx(self) -> nx.DiGraph:
        import networkx as nx

        g = nx.DiGraph(name=self.name)
        for t in self.tensors.values():
            if t.kind != "activation":
                g.add_node(t.name, kind="tensor", spec=t)
        for op in self.ops:
            g.add_node(op.name, kind="op", spec=op)
            for i, t in enumerate(op.inputs):
                if g.has_edge(t, op.name):
                    g.edges[t, op.name]["operands"].append(i)
                else:
                    g.add_edge(t, op.name, operands=[i])
            g.add_node(op.output, kind="tensor", spec=self.tensors[op.output])
            g.add_edge(op.name, op.output)
        return g

    # -- queries ---------------------------------------------------------------------
    @property
    def nx(self) -> nx.DiGraph:
        """The graph as a frozen networkx ``DiGraph`` (see the module docstring), built on first use."""
        g = self._nx
        if g is None:
            import networkx as nx

            g = nx.freeze(self._networkx())
            object.__setattr__(self, "_nx", g)
        return g

    @property
    def mesh(self) -> Mesh:
        """The default (first) mesh; ModelError if the model has none."""
        for mesh in self.meshes.values():
            return mesh
        raise ModelError(f"model {quote(self.name)} has no mesh; add `mesh:` to the YAML or pass mesh= to the builder")

    def tensor(self, name: str) -> TensorSpec:
        try:
            return self.tensors[name]
        except KeyError:
            raise ModelError(f"model {quote(self.name)} has no tensor {quote(name)}{_suggest(name, self.tensors)}") from None

    def op(self, name: str) -> OpSpec:
        try:
            return self._ops[name]
        except KeyError:
            raise ModelError(f"model {quote(self.name)} has no op {quote(name)}{_suggest(name, self._ops)}") from None

    def region_of_op(self, name: str) -> ManualRegion | None:
        """The manual region whose body, enter or exit op ``name`` is (None for an op outside regions)."""
        self.op(name)
        return self._region_of.get(name)

    def region_of_tensor(self, name: str) -> ManualRegion | None:
        """The manual region whose body tensor (argument or body result) ``name`` is; None for outer tensors
        (a region's inputs and outputs are outer tensors)."""
        self.tensor(name)
        return self._region_of.get(name)

    def op_def(self, name: str) -> OpDef:
        """The catalogue entry of op instance ``name``."""
        return get_op(self.op(name).op)

    def producer(self, tensor: str) -> str | None:
        """The op that computes ``tensor``, or None for inputs, parameters and constants."""
        self.tensor(tensor)
        return self._producer.get(tensor)

    def consumers(self, tensor: str) -> list[tuple[str, int]]:
        """``(op name, operand index)`` for every use of ``tensor``, in op order."""
        self.tensor(tensor)
        return list(self._consumers[tensor])

    def inputs_of(self, op: str) -> tuple[TensorSpec, ...]:
        return tuple(self.tensors[t] for t in self.op(op).inputs)

    def output_of(self, op: str) -> TensorSpec:
        return self.tensors[self.op(op).output]

    def tensors_of_kind(self, kind: str) -> tuple[TensorSpec, ...]:
        """Tensors of one kind (input, param, const, activation) in definition order."""
        if kind not in TENSOR_KINDS:
            raise ModelError(f"unknown tensor kind {quote(kind)} (kinds: {', '.join(TENSOR_KINDS)})")
        return tuple(t for t in self.tensors.values() if t.kind == kind)

    def walk(self) -> Iterator[tuple[OpSpec, tuple[TensorSpec, ...], TensorSpec]]:
        """``(op, operand specs, result spec)`` in topological order."""
        for op in self.ops:
            yield op, tuple(self.tensors[t] for t in op.inputs), self.tensors[op.output]

    def op_flops(self, name: str) -> int:
        op = self.op(name)
        ins = [self.tensors[t].shape for t in op.inputs]
        return get_op(op.op).flops(ins, self.tensors[op.output].shape, op.attrs_dict)

    def total_flops(self) -> int:
        """Forward FLOPs of the whole model (each family's convention, see :mod:`graphs.ops`)."""
        return sum(self.op_flops(op.name) for op in self.ops)

    def op_bytes_accessed(self, name: str, in_shapes: Sequence[Sequence[int]] | None = None,
                          out_shape: Sequence[int] | None = None) -> int:
        """Bytes of device memory op ``name`` reads and writes (:attr:`OpDef.bytes_accessed`'s convention).

        By default on the op's global shapes; ``in_shapes`` and ``out_shape`` give one
        device's local instance instead (the dtypes stay the op's).
        """
        op = self.op(name)
        if in_shapes is None:
            in_shapes = [self.tensors[t].shape for t in op.inputs]
        if out_shape is None:
            out_shape = self.tensors[op.output].shape
        itemsizes = [dtype_itemsize(self.tensors[t].dtype) for t in (*op.inputs, op.output)]
        return get_op(op.op).bytes_accessed(in_shapes, out_shape, itemsizes, op.attrs_dict)

    def total_bytes_accessed(self) -> int:
        """Forward bytes accessed of the whole model, op by op (no reuse between ops)."""
        return sum(self.op_bytes_accessed(op.name) for op in self.ops)

    def param_count(self) -> int:
        return sum(t.numel for t in self.tensors_of_kind("param"))

    def param_bytes(self) -> int:
        """Bytes of all parameters at their dtypes (unsharded)."""
        return sum(t.nbytes for t in self.tensors_of_kind("param"))


def _rebuild(args: tuple, kwargs: dict) -> ComputationGraph:
    return ComputationGraph(*args, **kwargs)


def _line(line: int | None) -> str:
    return f" (line {line})" if line is not None else ""
