"""``GraphBuilder``: the Python way to write a model, used by the YAML loader and the builders.

Calls record tensors and ops; :meth:`GraphBuilder.build` validates everything at
once and returns a :class:`~graphs.graph.ComputationGraph`, so ops may be added in
any order. Shardings may be given as text (the short form binds to the default
mesh) or as :class:`~planner.ir.TensorSharding` objects.

>>> b = GraphBuilder("ffn", {"d": 8})
>>> x = b.tensor("x", [64, 64])
>>> w = b.param("w1", [64, 64], sharding='[{}, {"d"}]')
>>> h = b.op("matmul", [x, w], output="h1", name="dense1", strategy=[[2, 1], [1, 4]])
>>> y = b.op("relu", [h], output="y", name="relu")
>>> g = b.build()
>>> [op.name for op in g.ops], g.tensor("y").shape
(['dense1', 'relu'], (64, 64))
"""

from __future__ import annotations

import fnmatch
from dataclasses import replace
from typing import Any, Mapping, Sequence

from graphs.graph import ComputationGraph
from graphs.meshes import as_meshes
from graphs.specs import OpSpec, TensorSpec
from planner.errors import ModelError, ShardplanError
from planner.ir import TensorSharding, parse_sharding


class GraphBuilder:
    """Collects tensors and ops for one model; see the module docstring."""

    def __init__(self, name: str, meshes: Any = None, *, source: str | None = None, cluster: Any = None):
        self.name = name
        self.meshes = as_meshes(meshes)
        self.source = source
        self.cluster = cluster
        self._tensors: list[TensorSpec] = []
        self._ops: list[OpSpec] = []
        self._outputs: tuple[str, ...] | None = None
        self._shard_as: list[tuple[str, ...]] = []
        self._lines: dict[str, Any] = {"shard_as": []}

    # -- locations -------------------------------------------------------------------
    def where(self, line: int | None) -> str | None:
        """``file:line`` for errors (None when the line is unknown)."""
        return None if line is None else f"{self.source or '<string>'}:{line}"

    def _located(self, err: ShardplanError, line: int | None, prefix: str = "") -> ModelError:
        message = f"{prefix}{err.message}" if prefix and not err.message.startswith(prefix) else err.message
        return ModelError(message, where=self.where(line) if err.where is None else err.where)

    def sharding(self, value: Any, what: str, line: int | None = None) -> TensorSharding | None:
        """Parse ``value`` (text or TensorSharding) for ``what`` (e.g. ``tensor 'w1'``)."""
        if value is None or isinstance(value, TensorSharding):
            return value
        if not isinstance(value, str):
            raise ModelError(f"{what}: a sharding is text like '[{{\"x\"}}, {{}}]', got {value!r}", where=self.where(line))
        if not self.meshes:
            raise ModelError(f"{what} has a sharding but the model has no mesh; add `mesh:`", where=self.where(line))
        try:
            return parse_sharding(value, self.meshes)
        except ShardplanError as e:
            raise ModelError(f"{what}: bad sharding: {e.message}", where=self.where(line)) from None

    # -- recording -------------------------------------------------------------------
    def tensor(
        self,
        name: str,
        shape: Sequence[int],
        dtype: str = "f32",
        kind: str = "input",
        sharding: Any = None,
        *,
        value: float | None = None,
        line: int | None = None,
    ) -> str:
        """Declare an input, parameter or constant; returns its name."""
        parsed = self.sharding(sharding, f"tensor {name!r}", line)
        try:
            self._tensors.append(TensorSpec(name, shape, dtype, kind, parsed, line, value))
        except ShardplanError as e:
            raise self._located(e, line) from None
        return name

    def param(self, name: str, shape: Sequence[int], dtype: str = "f32", sharding: Any = None, **kw) -> str:
        """Declare a trained parameter (``kind="param"``)."""
        return self.tensor(name, shape, dtype, "param", sharding, **kw)

    def const(self, name: str, shape: Sequence[int], value: float | None = None, dtype: str = "f32", **kw) -> str:
        """Declare a constant, optionally filled with ``value``."""
        return self.tensor(name, shape, dtype, "const", value=value, **kw)

    def op(
        self,
        op: str,
        inputs: Sequence[str],
        output: str | None = None,
        name: str | None = None,
        *,
        strategy: Any = None,
        out_sharding: Any = None,
        line: int | None = None,
        **attrs: Any,
    ) -> str:
        """Add an op reading ``inputs``; returns the name of its result.

        ``name`` defaults to ``<op>_<n>`` (n = ops added so far), ``output`` to ``<name>.out``.
        """
        name = f"{op}_{len(self._ops)}" if name is None else name
        output = f"{name}.out" if output is None else output
        parsed = self.sharding(out_sharding, f"op {name!r} out_sharding", line)
        try:
            self._ops.append(OpSpec(name, op, inputs, output, attrs, strategy, parsed, line))
        except ShardplanError as e:
            raise self._located(e, line) from None
        return output

    def outputs(self, *names: str, line: int | None = None) -> None:
        """Set the model's outputs (default: every result nobody reads)."""
        self._outputs = tuple(names)
        self._lines["outputs"] = line

    def shard_as(self, *names: str, line: int | None = None) -> None:
        """Ask for ``names`` to be sharded alike."""
        self._shard_as.append(tuple(names))
        self._lines["shard_as"].append(line)

    # -- annotations by name pattern ------------------------------------------------------
    def _match(self, pattern: str, names: Sequence[str], what: str, line: int | None) -> list[str]:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if not hits:
            raise ModelError(f"{what} pattern {pattern!r} matches no {what.split()[0]} of the model", where=self.where(line))
        return hits

    def annotate_shardings(self, patterns: Mapping[str, Any], lines: Mapping[str, int] | None = None) -> None:
        """Give every tensor whose name matches a glob pattern that pattern's sharding.

        Activations get it as their producer's ``out_sharding``. A pattern matching
        nothing, or a tensor given two different shardings, is an error.
        """
        lines = lines or {}
        given: dict[str, tuple[str, TensorSharding]] = {}
        declared = [t.name for t in self._tensors]
        produced = [op.output for op in self._ops]
        for pattern, value in patterns.items():
            line = lines.get(pattern)
            sharding = self.sharding(value, f"shardings pattern {pattern!r}", line)
            for name in self._match(pattern, declared + produced, "tensor sharding", line):
                if name in given and given[name][1] != sharding:
                    raise ModelError(
                        f"tensor {name!r} matches shardings patterns {given[name][0]!r} and {pattern!r}, "
                        "which give different shardings; make the patterns disjoint",
                        where=self.where(line),
                    )
                given[name] = (pattern, sharding)
                self._set_sharding(name, sharding, pattern, line)

    def _set_sharding(self, name: str, sharding: TensorSharding, pattern: str, line: int | None) -> None:
        for i, t in enumerate(self._tensors):
            if t.name == name:
                if t.sharding is not None and t.sharding != sharding:
                    raise ModelError(
                        f"tensor {name!r} already has sharding {t.sharding.dims_text()}; pattern {pattern!r} "
                        f"would give it {sharding.dims_text()}",
                        where=self.where(line),
                    )
                try:
                    self._tensors[i] = replace(t, sharding=sharding)
                except ShardplanError as e:
                    raise self._located(e, line, f"shardings pattern {pattern!r}: ") from None
        for i, op in enumerate(self._ops):
            if op.output == name:
                if op.out_sharding is not None and op.out_sharding != sharding:
                    raise ModelError(
                        f"tensor {name!r} already has out_sharding {op.out_sharding.dims_text()} from op "
                        f"{op.name!r}; pattern {pattern!r} would give it {sharding.dims_text()}",
                        where=self.where(line),
                    )
                self._ops[i] = replace(op, out_sharding=sharding)

    def annotate_strategies(self, patterns: Mapping[str, Any], lines: Mapping[str, int] | None = None) -> None:
        """Give every op whose name matches a glob pattern that pattern's strategy."""
        lines = lines or {}
        given: dict[str, str] = {}
        names = [op.name for op in self._ops]
        for pattern, strategy in patterns.items():
            line = lines.get(pattern)
            for name in self._match(pattern, names, "op strategy", line):
                if name in given:
                    raise ModelError(
                        f"op {name!r} matches strategies patterns {given[name]!r} and {pattern!r}; "
                        "make the patterns disjoint",
                        where=self.where(line),
                    )
                given[name] = pattern
                i = names.index(name)
                op = self._ops[i]
                if op.strategy is not None:
                    raise ModelError(f"op {name!r} already has a strategy; pattern {pattern!r} would replace it",
                                     where=self.where(line))
                try:
                    self._ops[i] = replace(op, strategy=strategy)
                except ShardplanError as e:
                    raise self._located(e, line) from None

    # -- result --------------------------------------------------------------------------
    def build(self) -> ComputationGraph:
        """Validate everything and return the graph (raises ModelError on the first problem)."""
        return ComputationGraph(
            self.name, self.meshes, self._tensors, self._ops, self._outputs, self._shard_as,
            cluster=self.cluster, source=self.source, lines=self._lines,
        )
