"""The trace a frontend translates into before it becomes a graph: values, declared tensors, traced ops.

A :class:`Trace` holds values (name -> shape and dtype), the declared tensors (arguments and
constants), and :class:`TracedOp`\\ s in execution order. A node is either a catalogue op
(``graphs.ops.registry``) or one of :data:`INTERNAL_OPS`, primitives the catalogue has no op
for but which :mod:`planner.frontends.fusion` folds into one (``sqrt`` inside a layernorm) or
lowers (``integer_pow`` to ``mul``); one left over is an error naming its primitive and source
line. Each node remembers the primitive it came from and where the user wrote it.

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
INTERNAL_OPS = ("broadcast", "index_wrap", "integer_pow", "lt", "rsqrt", "sqrt", "square", "stop_gradient")


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

    def attr(self, name: str, default: Any = None) -> Any:
        return dict(self.attrs).get(name, default)


def _attrs(attrs: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(attrs.items()))


@dataclass
class Trace:
    """The trace (see the module docstring); mutable while a frontend builds it."""

    values: dict[str, Value] = field(default_factory=dict)
    declared: dict[str, Declared] = field(default_factory=dict)
    nodes: list[TracedOp] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    out_shardings: dict[int, Any] = field(default_factory=dict)
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
        if self._consts.get(key) not in self.declared:  # new, or pruned since
            self._consts[key] = self.declare(f"%c{len(self._consts)}", shape, dtype, "const", float(value))
        return self._consts[key]

    def add(self, op: str, inputs, out_shape, dtype: str, /, *, where: str = "", primitive: str = "", out: str | None = None,
            **attrs: Any) -> str:
        """Append a node; returns the name of its result."""
        out = self.fresh() if out is None else out
        self.values[out] = Value(tuple(out_shape), dtype)
        self.nodes.append(TracedOp(op, tuple(inputs), out, _attrs(attrs), where, primitive))
        self._made_by[out] = self.nodes[-1]
        return out

    def replace(self, old: TracedOp, op: str, inputs, /, **attrs: Any) -> TracedOp:
        """``old`` (same result, place and origin) as ``op`` on ``inputs``."""
        new = TracedOp(op, tuple(inputs), old.out, _attrs(attrs), old.where, old.primitive)
        self.nodes[self.nodes.index(old)] = new
        self._made_by[old.out] = new
        return new

    def insert_before(self, anchor: TracedOp, op: str, inputs, out_shape, dtype: str, /, **attrs: Any) -> str:
        """A new node computed just before ``anchor`` (same source line); returns its result."""
        out = self.fresh()
        self.values[out] = Value(tuple(out_shape), dtype)
        node = TracedOp(op, tuple(inputs), out, _attrs(attrs), anchor.where, anchor.primitive)
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
        leftover = next((n for n in self.nodes if n.op in INTERNAL_OPS), None)
        if leftover is not None:
            raise InternalError(f"node {leftover} was neither folded nor lowered")
        out_names = dict(zip(self.outputs, self.output_names or ["out"] * len(self.outputs)))
        counts: dict[str, int] = {}
        consts = [d for d in self.declared.values() if d.kind == "const"]
        rename: dict[str, str] = {d: d for d in self.declared}
        rename.update({d.name: f"const_{k}" for k, d in enumerate(consts)})  # numbered as kept
        b = GraphBuilder(name, meshes)
        for d in self.declared.values():
            v = self.values[d.name]
            b.tensor(rename[d.name], v.shape, v.dtype, d.kind, d.sharding, value=d.value)
        notes = {}
        for n in self.nodes:
            k = counts.get(n.op, 0)
            counts[n.op] = k + 1
            op_name = f"{n.op}_{k}"
            rename[n.out] = out_names.get(n.out, f"{op_name}.out")
            out_sharding = self.out_shardings.get(self.outputs.index(n.out)) if n.out in self.outputs else None
            notes[op_name] = n.where
            try:
                b.op(n.op, [rename[i] for i in n.inputs], output=rename[n.out], name=op_name,
                     out_sharding=out_sharding, **dict(n.attrs))
            except ModelError as e:
                raise ModelError(e.message, where=n.where or None) from None
        b.outputs(*[rename[o] for o in self.outputs])
        try:
            graph = b.build()
        except ModelError as e:  # the catalogue refuses an op (an integer div ...): say where the user wrote it
            named = re.search(r"op '([^']+)'", e.message)
            raise ModelError(e.message, where=notes.get(named.group(1)) if named else None) from None
        for old, new in rename.items():
            if graph.tensor(new).shape != self.values[old].shape or graph.tensor(new).dtype != self.values[old].dtype:
                raise InternalError(f"tensor {new}: the catalogue infers {graph.tensor(new).type_text()} but the "
                                    f"traced program has {self.values[old]}")
        return graph, notes
