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

from graphs.axis_regions import AxisRegion
from graphs.graph import ComputationGraph
from graphs.manual_regions import RegionSpec, flatten
from graphs.meshes import as_meshes
from graphs.specs import OpSpec, TensorSpec
from planner.errors import ModelError, ShardplanError, quote
from planner.ir import TensorSharding, parse_sharding


class GraphBuilder:
    """Collects tensors and ops for one model; see the module docstring."""

    def __init__(self, name: str, meshes: Any = None, *, source: str | None = None, cluster: Any = None,
                 outputs_layout: str = "free", pipeline: Any = None):
        self.name = name
        self.pipeline = pipeline
        self.meshes = as_meshes(meshes)
        self.source = source
        self.cluster = cluster
        self.outputs_layout = outputs_layout
        self._tensors: list[TensorSpec] = []
        self._ops: list[OpSpec] = []
        self._outputs: tuple[str, ...] | None = None
        self._shard_as: list[tuple[str, ...]] = []
        self._regions: list[AxisRegion] = []
        self._manual: list[RegionSpec] = []
        self._shard_like: list[tuple[str, ...]] = []
        self._lines: dict[str, Any] = {"shard_as": [], "shard_like": []}

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
            raise ModelError(f"{what}: a sharding is text like '[{{\"x\"}}, {{}}]', got {quote(value)}", where=self.where(line))
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
        parsed = self.sharding(sharding, f"tensor {quote(name)}", line)
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
        parsed = self.sharding(out_sharding, f"op {quote(name)} out_sharding", line)
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
        """Ask for ``names`` to be sharded alike (hard: every search gives them one sharding)."""
        self._shard_as.append(tuple(names))
        self._lines["shard_as"].append(line)

    def shard_like(self, *names: str, line: int | None = None) -> None:
        """Ask for ``names`` to be sharded alike where nothing conflicts (soft: read by rule-based
        propagation only; a member keeps a sharding it already has)."""
        self._shard_like.append(tuple(names))
        self._lines["shard_like"].append(line)

    def auto_axes(self, name: str, axes: Sequence[str], ops: Sequence[str], out_shardings: Mapping[str, Any],
                  line: int | None = None) -> None:
        """Seed 001's ``auto_axes``: in ``ops`` the (Explicit) ``axes`` are Auto; every region output goes
        back with its type from ``out_shardings`` (tensor -> sharding)."""
        self._region("auto", name, axes, ops, out_shardings, line)

    def explicit_axes(self, name: str, axes: Sequence[str], ops: Sequence[str], in_shardings: Mapping[str, Any],
                      line: int | None = None) -> None:
        """Seed 001's ``explicit_axes``: in ``ops`` the (Auto) ``axes`` are Explicit; every region input enters
        with its type from ``in_shardings`` (tensor -> sharding)."""
        self._region("explicit", name, axes, ops, in_shardings, line)

    def _region(self, kind: str, name: str, axes, ops, shardings, line) -> None:
        key = "out_shardings" if kind == "auto" else "in_shardings"
        parsed = tuple((str(t), self.sharding(s, f"{kind}_axes region {quote(name)} {key} of {quote(t)}", line))
                       for t, s in dict(shardings or {}).items())
        self._regions.append(AxisRegion(str(name), kind, tuple(map(str, axes)), tuple(map(str, ops)), parsed, line))

    def manual_region(self, name: str, manual_axes: Sequence[str], inputs: Sequence[str], in_shardings: Sequence[Any],
                      outputs: Sequence[str], out_shardings: Sequence[Any], ops: Sequence[Mapping[str, Any]],
                      line: int | None = None) -> tuple[str, ...]:
        """A manual computation region (shard_map, :mod:`graphs.manual_regions`); returns its outputs.

        ``ops`` are the body's ops on local shapes, each a mapping with ``op``, ``inputs``
        (the region's inputs by their outer names, or body results), ``output``,
        optionally ``name``, ``out_sharding`` (free axes only), ``line`` and attributes
        (a collective's ``axes``, ``dim`` ...). Shardings are text or TensorSharding.

        >>> b = GraphBuilder("m", {"tp": 2})
        >>> x, w = b.tensor("x", [4, 8]), b.param("w", [8, 6])
        >>> b.manual_region("r", ["tp"], [x, w], ['[{}, {"tp"}]', '[{"tp"}, {}]'], ["y"], ['[{}, {}]'],
        ...                 [{"name": "mm", "op": "matmul", "inputs": [x, w], "output": "p"},
        ...                  {"name": "sum", "op": "psum", "axes": ["tp"], "inputs": ["p"], "output": "y"}])
        ('y',)
        >>> g = b.build()
        >>> g.tensor("r/x").shape, g.tensor("y").shape, g.region_of_op("r/sum").name
        ((4, 4), (4, 6), 'r')
        """
        body = []
        for i, o in enumerate(ops):
            o = dict(o)
            if o.get("out_sharding") is not None:
                o["out_sharding"] = self.sharding(o["out_sharding"], f"region {name!r} body op "
                                                                     f"{o.get('name', i)!r} out_sharding",
                                                  o.get("line", line))
            body.append(o)
        outputs = (outputs,) if isinstance(outputs, str) else tuple(outputs)
        self._manual.append(RegionSpec(name, tuple(manual_axes), tuple(inputs), tuple(in_shardings), outputs,
                                       tuple(out_shardings), tuple(body), line))
        return outputs

    def _flattened(self) -> tuple[list[OpSpec], tuple]:
        """The outer ops plus every region's ops, and the ManualRegions."""
        if not self._manual:
            return self._ops, ()
        mesh = next(iter(self.meshes.values()), None)
        outer = {t.name for t in self._tensors} | {op.output for op in self._ops}
        for spec in self._manual:
            outer.update(spec.outputs)
        ops, regions = list(self._ops), []
        for spec in self._manual:
            made, region = flatten(spec, mesh, outer, lambda v, what: self.sharding(v, what, spec.line), self.where)
            ops += made
            regions.append(region)
        return ops, tuple(regions)

    # -- annotations by name pattern ------------------------------------------------------
    def _match(self, pattern: str, names: Sequence[str], section: str, kind: str, line: int | None) -> list[str]:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
        if not hits:
            raise ModelError(f"{section} pattern {quote(pattern)} matches no {kind} of the model", where=self.where(line))
        return hits

    def annotate_shardings(self, patterns: Mapping[str, Any], lines: Mapping[str, int] | None = None) -> None:
        """Give every tensor whose name matches a glob pattern that pattern's sharding.

        Activations get it as their producer's ``out_sharding``. A pattern matching
        nothing, a tensor given two different shardings, or one that already has a
        different sharding is an error.
        """
        lines = lines or {}
        declared = {t.name: i for i, t in enumerate(self._tensors)}
        produced = {op.output: i for i, op in enumerate(self._ops)}
        given: dict[str, str] = {}
        for pattern, value in patterns.items():
            line = lines.get(pattern)
            sharding = self.sharding(value, f"shardings pattern {quote(pattern)}", line)
            for name in self._match(pattern, [*declared, *produced], "shardings", "tensor", line):
                old = self._tensors[declared[name]].sharding if name in declared else \
                    self._ops[produced[name]].out_sharding
                if old is not None and old != sharding:
                    source = f"pattern {quote(given[name])}" if name in given else "its definition"
                    raise ModelError(
                        f"tensor {quote(name)} already has sharding {old.dims_text()} from {source}; pattern "
                        f"{quote(pattern)} would give it {sharding.dims_text()}",
                        where=self.where(line),
                    )
                given[name] = pattern
                try:
                    if name in declared:
                        i = declared[name]
                        self._tensors[i] = replace(self._tensors[i], sharding=sharding)
                    else:
                        i = produced[name]
                        self._ops[i] = replace(self._ops[i], out_sharding=sharding)
                except ShardplanError as e:
                    raise self._located(e, line, f"shardings pattern {quote(pattern)}: ") from None

    def annotate_strategies(self, patterns: Mapping[str, Any], lines: Mapping[str, int] | None = None) -> None:
        """Give every op whose name matches a glob pattern that pattern's strategy.

        A pattern matching nothing, or an op that already has a strategy (from its
        definition or an earlier pattern), is an error.
        """
        lines = lines or {}
        position = {op.name: i for i, op in enumerate(self._ops)}
        given: dict[str, str] = {}
        for pattern, strategy in patterns.items():
            line = lines.get(pattern)
            for name in self._match(pattern, list(position), "strategies", "op", line):
                op = self._ops[position[name]]
                if op.strategy is not None:
                    source = f"pattern {quote(given[name])}" if name in given else "its definition"
                    raise ModelError(
                        f"op {quote(name)} already has a strategy from {source}; pattern {quote(pattern)} would replace it",
                        where=self.where(line),
                    )
                given[name] = pattern
                try:
                    self._ops[position[name]] = replace(op, strategy=strategy)
                except ShardplanError as e:
                    raise self._located(e, line) from None

    # -- result --------------------------------------------------------------------------
    def build(self) -> ComputationGraph:
        """Validate everything and return the graph (raises ModelError on the first problem)."""
        ops, manual = self._flattened()
        return ComputationGraph(
            self.name, self.meshes, self._tensors, ops, self._outputs, self._shard_as,
            shard_like=self._shard_like, axis_regions=self._regions, manual_regions=manual, cluster=self.cluster, pipeline=self.pipeline,
            outputs_layout=self.outputs_layout, source=self.source, lines=self._lines,
        )
