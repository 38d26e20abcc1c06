"""The trace a frontend translates into before it becomes a graph: values, declared tensors, traced ops.

A :class:`Trace` holds values (name -> shape and dtype), the declared tensors (arguments and
constants), and :class:`TracedOp`\\ s in execution order. A node is either a catalogue op
(``graphs.ops.registry``) or one of :data:`INTERNAL_OPS`, primitives the catalogue has no op
for but which :mod:`planner.frontends.fusion` folds into one (``sqrt`` inside a layernorm) or
lowers (``integer_pow`` to ``mul``); one left over is an error naming its primitive and source
line. Each node remembers the primitive it came from and where the user wrote it.

Besides values and ops a trace holds what the program says about shardings: ``shardings``
(a value -> the ``out_sharding`` of the op that makes it), ``shard_as`` (groups of values
sharded alike) and manual regions (:class:`Region`: a ``shard_map``; its body's nodes carry the
region's name, and ``manual_enter`` / ``manual_exit`` nodes link its local arguments and results
to the values outside). A primitive the frontend cannot express becomes a ``refused`` node
holding the error: it is raised only if an output needs that value (JAX drops dead code too).

:meth:`Trace.graph` names the ops (``matmul_0``, ``softmax_1`` ...), drops what no output
needs, and builds the :class:`~graphs.graph.ComputationGraph`, checking that every shape the
catalogue infers is the shape the frontend recorded.

>>> p = Trace()
>>> x = p.declare("x", (4, 8), "f32", "input")
>>> y = p.add("relu", (x,), (4, 8), "f32", where="model.py:3", primitive="max")
>>> p.outputs = [y]
>>> g, notes = p.graph("tiny", None)
>>> [op.name for op in g.ops], g.outputs, notes
(['relu_0'], ('out',), {'relu_0': 'model.py:3'})
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from graphs import ComputationGraph, GraphBuilder
from planner.errors import InternalError, ModelError

#: Ops a node may have that the catalogue lacks: folded or lowered by fusion, else an error.
INTERNAL_OPS = ("broadcast", "index_wrap", "integer_pow", "refused", "square")

#: The nodes that link a region's body to the values outside it (the builder makes them from the region).
BOUNDARY = ("manual_enter", "manual_exit")


@dataclass(frozen=True, slots=True)
class Value:
    """A value's shape and dtype (one of the catalogue's dtype names)."""

    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True, slots=True)
class Declared:
    """An argument (``input`` or ``param``) or a constant (``const``, every element ``value``)."""

    name: str
    kind: str
    value: float | None = None
    sharding: Any = None


@dataclass(frozen=True, slots=True, eq=False)
class TracedOp:
    """One op: ``op`` on ``inputs`` gives ``out``; ``attrs`` a sorted tuple of pairs. Nodes compare by identity
    (one result has one node at a time: :meth:`Trace.producer`)."""

    op: str
    inputs: tuple[str, ...]
    out: str
    attrs: tuple[tuple[str, Any], ...] = ()
    where: str = ""
    primitive: str = ""
    region: str = ""

    def attr(self, name: str, default: Any = None) -> Any:
        return dict(self.attrs).get(name, default)


def _attrs(attrs: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(attrs.items()))


@dataclass(frozen=True, slots=True)
class Region:
    """A manual region (``shard_map``): its name, manual axes and where the user wrote it. Its inputs and
    outputs are its ``manual_enter`` / ``manual_exit`` nodes (``sharding`` and ``index`` attributes)."""

    name: str
    manual_axes: tuple[str, ...]
    where: str = ""


@dataclass
class Trace:
    """The trace (see the module docstring); mutable while a frontend builds it."""

    values: dict[str, Value] = field(default_factory=dict)
    declared: dict[str, Declared] = field(default_factory=dict)
    nodes: list[TracedOp] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    out_shardings: dict[int, Any] = field(default_factory=dict)
    shardings: dict[str, Any] = field(default_factory=dict)
    shard_as: list[tuple[str, ...]] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    _count: int = 0
    _consts: dict = field(default_factory=dict)
    _made_by: dict = field(default_factory=dict)  # result name -> its node

    # -- building ------------------------------------------------------------------------
    def fresh(self) -> str:
        self._count += 1
        return f"%{self._count}"

    def declare(self, name: str, shape, dtype: str, kind: str, value: float | None = None, sharding: Any = None) -> str:
        if name in self.values:
            raise ModelError(f"two arguments are both called {name!r}; give them distinct names")
        self.values[name] = Value(tuple(shape), dtype)
        self.declared[name] = Declared(name, kind, value, sharding)
        return name

    def const(self, value: float, shape, dtype: str) -> str:
        """A constant of ``shape`` whose every element is ``value`` (one per distinct constant)."""
        key = (float(value), tuple(shape), dtype)
        if self._consts.get(key) not in self.declared:  # new, or pruned since: a name no value has
            n = len(self._consts)
            while f"%c{n}" in self.values:
                n += 1
            self._consts[key] = self.declare(f"%c{n}", shape, dtype, "const", float(value))
        return self._consts[key]

    def add(self, op: str, inputs, out_shape, dtype: str, /, *, where: str = "", primitive: str = "", out: str | None = None,
            region: str = "", out_sharding: Any = None, **attrs: Any) -> str:
        """Append a node; returns the name of its result (``out_sharding``: the op's, as the program gives it)."""
        out = self.fresh() if out is None else out
        self.values[out] = Value(tuple(out_shape), dtype)
        if out_sharding is not None:
            self.shardings[out] = out_sharding
        self.nodes.append(TracedOp(op, tuple(inputs), out, _attrs(attrs), where, primitive, region))
        self._made_by[out] = self.nodes[-1]
        return out

    def replace(self, old: TracedOp, op: str, inputs, /, **attrs: Any) -> TracedOp:
        """``old`` (same result, place and origin) as ``op`` on ``inputs``."""
        new = TracedOp(op, tuple(inputs), old.out, _attrs(attrs), old.where, old.primitive, old.region)
        self.nodes[self.nodes.index(old)] = new
        self._made_by[old.out] = new
        return new

    def insert_before(self, anchor: TracedOp, op: str, inputs, out_shape, dtype: str, /, **attrs: Any) -> str:
        """A new node computed just before ``anchor`` (same source line); returns its result."""
        out = self.fresh()
        self.values[out] = Value(tuple(out_shape), dtype)
        node = TracedOp(op, tuple(inputs), out, _attrs(attrs), anchor.where, anchor.primitive, anchor.region)
        self.nodes.insert(self.nodes.index(anchor), node)
        self._made_by[out] = node
        return out

    # -- reading -------------------------------------------------------------------------
    def producer(self, name: str) -> TracedOp | None:
        return self._made_by.get(name)

    def const_value(self, name: str) -> float | None:
        """The value of a constant (None for anything else)."""
        d = self.declared.get(name)
        return d.value if d is not None and d.kind == "const" else None

    def readers(self, name: str) -> list[TracedOp]:
        return [n for n in self.nodes if name in n.inputs]

    def uses(self, name: str) -> int:
        return sum(n.inputs.count(name) for n in self.nodes) + self.outputs.count(name)

    def walk(self) -> Iterator[TracedOp]:
        """The nodes in order, skipping those a rewrite has replaced meanwhile."""
        for n in list(self.nodes):
            if self._made_by.get(n.out) is n:
                yield n

    # -- result --------------------------------------------------------------------------
    def prune(self) -> None:
        """Drop nodes no output needs and constants nobody reads (arguments stay)."""
        live = set(self.outputs)
        kept = []
        for n in reversed(self.nodes):
            if n.out in live:
                kept.append(n)
                live.update(n.inputs)
        self.nodes = kept[::-1]
        self._made_by = {n.out: n for n in self.nodes}
        for name, d in list(self.declared.items()):
            if d.kind == "const" and name not in live:
                del self.declared[name]

    def graph(self, name: str, meshes: Any) -> tuple[ComputationGraph, dict[str, str]]:
        """The graph (ops named by kind and count) and, per op, where the user wrote it."""
        self.prune()
        refused = next((n for n in self.nodes if n.op == "refused"), None)
        if refused is not None:
            raise ModelError(refused.attr("message"), where=refused.where or None)
        leftover = next((n for n in self.nodes if n.op in INTERNAL_OPS), None)
        if leftover is not None:
            raise InternalError(f"node {leftover} was neither folded nor lowered")
        out_names = dict(zip(self.outputs, self.output_names or ["out"] * len(self.outputs)))
        consts = [d for d in self.declared.values() if d.kind == "const"]
        rename: dict[str, str] = {d: d for d in self.declared}
        rename.update({d.name: f"const_{k}" for k, d in enumerate(consts)})  # numbered as kept
        flat = dict(rename)  # value -> the name of its tensor in the built graph (a body's under region/)
        for e in (n for n in self.nodes if n.op == "manual_exit"):
            count = e.attr("outputs")
            rename[e.out] = out_names.get(e.out, f"{e.region}.out" + (f".{e.attr('index')}" if count > 1 else ""))
            rename[e.inputs[0]] = flat[e.out] = rename[e.out]
            flat[e.inputs[0]] = f"{e.region}/{rename[e.out]}"
        counts: dict[str, int] = {}
        notes, op_names = {}, {}
        for n in self.nodes:
            if n.op == "manual_enter":
                rename[n.out] = rename[n.inputs[0]]
                flat[n.out] = f"{n.region}/{rename[n.out]}"
                continue
            if n.op in BOUNDARY:
                continue
            k = counts.get(n.op, 0)
            counts[n.op] = k + 1
            op_names[n.out] = op_name = f"{n.op}_{k}"
            notes[f"{n.region}/{op_name}" if n.region else op_name] = n.where
            if n.out not in rename:
                rename[n.out] = out_names.get(n.out, f"{op_name}.out") if not n.region else f"{op_name}.out"
                flat[n.out] = f"{n.region}/{rename[n.out]}" if n.region else rename[n.out]
        b = GraphBuilder(name, meshes, outputs_layout="even")  # results are JAX arrays: whole, even axes
        for d in self.declared.values():
            v = self.values[d.name]
            b.tensor(rename[d.name], v.shape, v.dtype, d.kind, d.sharding, value=d.value)
        for n in self.nodes:
            if n.region or n.op in BOUNDARY:
                continue
            out_sharding = self.shardings.get(n.out)
            if n.out in self.outputs and self.out_shardings.get(self.outputs.index(n.out)) is not None:
                out_sharding = self.out_shardings[self.outputs.index(n.out)]
            try:
                b.op(n.op, [rename[i] for i in n.inputs], output=rename[n.out], name=op_names[n.out],
                     out_sharding=out_sharding, **dict(n.attrs))
            except ModelError as e:
                raise ModelError(e.message, where=n.where or None) from None
        for r in self.regions:
            self._region(b, r, rename, op_names)
        for group in self.shard_as:
            members = sorted({flat[v] for v in group if v in flat}, key=[flat[v] for v in group].index)
            if len(members) > 1:
                b.shard_as(*members)
        b.outputs(*[rename[o] for o in self.outputs])
        try:
            graph = b.build()
        except ModelError as e:  # the catalogue refuses an op (an integer div ...): say where the user wrote it
            named = re.search(r"op '([^']+)'", e.message)
            raise ModelError(e.message, where=notes.get(named.group(1)) if named else None) from None
        for old, new in flat.items():
            if graph.tensor(new).shape != self.values[old].shape or graph.tensor(new).dtype != self.values[old].dtype:
                raise InternalError(f"tensor {new}: the catalogue infers {graph.tensor(new).type_text()} but the "
                                    f"traced program has {self.values[old]}")
        return graph, notes

    def _region(self, b: GraphBuilder, r: Region, rename: dict[str, str], op_names: dict[str, str]) -> None:
        """Region ``r`` for the builder: its live inputs (and the constants its body reads, replicated), body
        and outputs."""
        enters = [n for n in self.nodes if n.op == "manual_enter" and n.region == r.name]
        exits = [n for n in self.nodes if n.op == "manual_exit" and n.region == r.name]
        if not exits:
            return
        body = [n for n in self.nodes if n.region == r.name and n.op not in BOUNDARY]
        inputs = [rename[n.inputs[0]] for n in enters]
        in_shardings = [n.attr("sharding") for n in enters]
        for n in body:
            for v in n.inputs:
                if self.const_value(v) is not None and rename[v] not in inputs:
                    inputs.append(rename[v])
                    in_shardings.append("[" + ", ".join("{}" for _ in self.values[v].shape) + "]")
        for n in exits:
            if n.out in self.outputs and self.out_shardings.get(self.outputs.index(n.out)) is not None:
                raise ModelError(f"result {rename[n.out]!r} is made by a shard_map, whose out_specs give its "
                                 "sharding; drop its out_shardings entry or change the out_specs", where=r.where)
        ops = [{"name": op_names[n.out], "op": n.op, "inputs": [rename[v] for v in n.inputs],
                "output": rename[n.out], "out_sharding": self.shardings.get(n.out), **dict(n.attrs)} for n in body]
        try:
            b.manual_region(r.name, r.manual_axes, inputs, in_shardings, [rename[n.out] for n in exits],
                            [n.attr("sharding") for n in exits], ops)
        except ModelError as e:
            raise ModelError(e.message, where=e.where or r.where or None) from None
