"""The YAML model format (documented in ``docs/model-format.md``): loading only.

:func:`load_model` reads a file, :func:`load_model_text` a string. Both return a
validated :class:`~graphs.graph.ComputationGraph`. YAML is read with a
``SafeLoader`` that records lines, so every error is a
:class:`~planner.errors.ModelError` located at ``file:line`` that names the op or
tensor and says what is wrong, e.g.
``configs/ffn.yaml:12: op 'dense1': matmul contracts 64 with 32: inputs x (64x64) and w1 (32x16) ...``.

>>> g = load_model_text('''
... name: two
... mesh: '<["x"=2]>'
... tensors: {a: {shape: [4]}, b: {shape: [4]}}
... ops: [{name: s, op: add, inputs: [a, b], output: c}]
... ''')
>>> g.outputs, str(g.mesh)
(('c',), '@mesh = <["x"=2]>')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graphs import builders
from graphs.graph import OUTPUTS_LAYOUTS, ComputationGraph
from graphs.graph_builder import GraphBuilder
from graphs.pipeline_spec import read_pipeline
from graphs.meshes import DEFAULT_MESH_NAME, check_same_devices, mesh_from_value
from graphs.yaml_lines import LineDict, LineList, parse_yaml, plain
from planner.errors import QUOTE_CHARS, ModelError, did_you_mean, quote
from planner.files import read_text

#: Every top-level key of a model file.
TOP_LEVEL_KEYS = ("name", "mesh", "meshes", "cluster", "tensors", "ops", "outputs", "outputs_layout", "shard_as",
                  "auto_axes", "explicit_axes", "regions",
                  "shard_like", "model", "shardings", "strategies", "pipeline")
#: Keys of one entry of ``regions`` (a manual computation region).
REGION_KEYS = ("name", "manual_axes", "inputs", "in_shardings", "outputs", "out_shardings", "ops")
#: Keys of one entry of ``tensors``.
TENSOR_KEYS = ("shape", "dtype", "kind", "sharding", "value")
#: Keys of one entry of ``ops`` that are not op attributes.
OP_KEYS = ("name", "op", "inputs", "output", "strategy", "out_sharding")


def load_model(path: str | Path) -> ComputationGraph:
    """Load the model file at ``path``; errors are located as ``<path>:<line>``."""
    return load_model_text(read_text(path, "model file", ModelError), source=str(path))


def load_model_text(text: str, source: str = "<string>") -> ComputationGraph:
    """Load a model from YAML text; ``source`` names it in error locations."""
    return _Reader(parse_yaml(text, source), source).graph()


def _suggest(word: str, options: tuple[str, ...] | list[str]) -> str:
    return did_you_mean(word, options)


class _Reader:
    """Turns one parsed document into GraphBuilder calls, in the order of the format's sections."""

    def __init__(self, doc: Any, source: str):
        self.doc = doc
        self.source = source

    def error(self, message: str, line: int | None) -> ModelError:
        return ModelError(message, where=f"{self.source}:{line}" if line else self.source)

    def graph(self) -> ComputationGraph:
        doc = self.doc
        if doc is None:
            raise self.error("the model file is empty; it needs at least `name` and `tensors`/`ops` or `model`", 1)
        if not isinstance(doc, LineDict):
            raise self.error("a model file must be a mapping with keys like name, mesh, tensors, ops", 1)
        for key in doc:
            if key not in TOP_LEVEL_KEYS:
                raise self.error(
                    f"unknown top-level key {quote(key)}{_suggest(key, TOP_LEVEL_KEYS)} "
                    f"(keys: {', '.join(TOP_LEVEL_KEYS)})",
                    doc.line_of(key),
                )
        if "name" not in doc:
            raise self.error("missing `name`: every model needs one, e.g. `name: ffn`", doc.line)
        name = doc["name"]
        if not isinstance(name, str) or not name:
            raise self.error(f"`name` must be a non-empty string, got {quote(name)}", doc.line_of("name"))
        cluster = doc.get("cluster")
        if cluster is not None and not isinstance(cluster, (str, dict)):
            raise self.error(
                f"`cluster` must be a preset name, a file path or a mapping, got {quote(cluster)}", doc.line_of("cluster")
            )
        layout = doc.get("outputs_layout", "free")
        if layout not in OUTPUTS_LAYOUTS:
            raise self.error(f"`outputs_layout` must be free (any fully reduced layout, the default), replicated "
                             f"(every device holds each output whole) or even (in whole mesh axes that divide each "
                             f"dimension, as a JAX array), got {quote(layout)}", doc.line_of("outputs_layout"))
        pipeline = None
        if "pipeline" in doc:
            node = doc["pipeline"]
            line_of = node.line_of if isinstance(node, LineDict) else (lambda key: None)
            pipeline = read_pipeline(plain(node), lambda key: f"{self.source}:{(line_of(key) if key else None) or doc.line_of('pipeline')}")
        b = GraphBuilder(name, self._meshes(), source=self.source, cluster=plain(cluster), outputs_layout=layout,
                         pipeline=pipeline)
        if "model" in doc:
            for key in ("tensors", "ops", "outputs"):
                if key in doc:
                    raise self.error(f"`{key}` cannot be combined with `model` (a builder defines them)", doc.line_of(key))
            self._builder(b, doc["model"], doc.line_of("model"))
        else:
            self._tensors(b)
            self._ops(b)
        self._outputs(b)
        self._groups(b, "shard_as", b.shard_as)
        self._groups(b, "shard_like", b.shard_like)
        self._regions(b)
        self._manual_regions(b)
        self._patterns(b)
        fallback = doc.line_of("model") if "model" in doc else doc.line
        try:
            return b.build()
        except ModelError as e:
            if e.where is None:
                raise e.located(f"{self.source}:{fallback}") from None
            raise

    # -- meshes ---------------------------------------------------------------------------
    def _meshes(self) -> dict:
        doc = self.doc
        if "mesh" in doc and "meshes" in doc:
            raise self.error("give either `mesh` or `meshes`, not both", doc.line_of("meshes"))
        try:
            if "mesh" in doc:
                mesh = mesh_from_value(DEFAULT_MESH_NAME, doc["mesh"])
                return {mesh.name: mesh}
            if "meshes" not in doc:
                return {}
            table = doc["meshes"]
            if not isinstance(table, LineDict) or not table:
                raise self.error("`meshes` must map mesh names to meshes", doc.line_of("meshes"))
            out = {}
            for mesh_name, value in table.items():
                try:
                    out[str(mesh_name)] = mesh_from_value(str(mesh_name), value)
                except ModelError as e:
                    raise self.error(e.message, table.line_of(mesh_name)) from None
            return check_same_devices(out)
        except ModelError as e:
            if e.where is not None:
                raise
            key = "mesh" if "mesh" in doc else "meshes"
            raise self.error(e.message, doc.line_of(key)) from None

    # -- explicit tensors and ops -----------------------------------------------------------
    def _tensors(self, b: GraphBuilder) -> None:
        table = self.doc.get("tensors")
        if table is None:
            return
        if not isinstance(table, LineDict):
            raise self.error("`tensors` must map tensor names to {shape: [...], dtype, kind, sharding}",
                             self.doc.line_of("tensors"))
        for name, spec in table.items():
            line = table.line_of(name)
            if not isinstance(spec, LineDict):
                raise self.error(f"tensor {quote(name)} must be a mapping like {{shape: [64, 64], kind: param}}", line)
            for key in spec:
                if key not in TENSOR_KEYS:
                    raise self.error(
                        f"tensor {quote(name)} has unknown key {quote(key)}{_suggest(key, TENSOR_KEYS)} "
                        f"(keys: {', '.join(TENSOR_KEYS)})",
                        spec.line_of(key),
                    )
            if "shape" not in spec:
                raise self.error(f"tensor {quote(name)} needs a shape, e.g. shape: [64, 64] ([] for a scalar)", line)
            b.tensor(str(name), spec["shape"], spec.get("dtype", "f32"), spec.get("kind", "input"),
                     spec.get("sharding"), value=spec.get("value"), line=line)

    def _ops(self, b: GraphBuilder) -> None:
        ops = self.doc.get("ops")
        if ops is None:
            return
        if not isinstance(ops, LineList):
            raise self.error("`ops` must be a list of ops like {name: dense1, op: matmul, inputs: [x, w]}",
                             self.doc.line_of("ops"))
        for i, spec in enumerate(ops):
            line = ops.line_of(i)
            if not isinstance(spec, LineDict):
                raise self.error(f"ops entry {i} must be a mapping with at least op and inputs", line)
            label = f"op {quote(spec['name'])}" if "name" in spec else f"ops entry {i}"
            for key in ("op", "inputs"):
                if key not in spec:
                    raise self.error(f"{label} needs `{key}`", line)
            inputs = spec["inputs"]
            if isinstance(inputs, str):
                inputs = [inputs]
            if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
                raise self.error(f"{label}: inputs must be a list of tensor names, got {quote(plain(inputs))}", line)
            attrs = {str(k): plain(v) for k, v in spec.items() if k not in OP_KEYS}
            b.op(spec["op"], list(inputs), spec.get("output"), spec.get("name"),
                 strategy=plain(spec.get("strategy")), out_sharding=spec.get("out_sharding"), line=line, **attrs)

    # -- builders -------------------------------------------------------------------------
    def _builder(self, b: GraphBuilder, model: Any, line: int) -> None:
        if not isinstance(model, LineDict) or "builder" not in model:
            raise self.error(
                f"`model` must be a mapping with a builder, e.g. {{builder: gpt, layers: 12}} "
                f"(builders: {', '.join(builders.BUILDERS)})",
                line,
            )
        name = model["builder"]
        try:
            builders.get_builder(name)
        except ModelError as e:
            raise self.error(e.message, model.line_of("builder")) from None
        args = {}
        for key, value in model.items():
            if key == "builder":
                continue
            try:
                builders.check_arg(name, key, value)
            except ModelError as e:
                raise self.error(e.message, model.line_of(key)) from None
            args[key] = value
        try:
            builders.define(b, name, **args)
        except ModelError as e:
            if e.where is not None:
                raise
            raise self.error(e.message, model.line) from None

    # -- outputs, groups, patterns --------------------------------------------------------------
    def _names(self, value: Any, what: str, line: int) -> list[str]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(f"{what} must be a list of tensor names, got {quote(plain(value))}", line)
        return list(value)

    def _outputs(self, b: GraphBuilder) -> None:
        if "outputs" in self.doc:
            line = self.doc.line_of("outputs")
            b.outputs(*self._names(self.doc["outputs"], "`outputs`", line), line=line)

    def _groups(self, b: GraphBuilder, key: str, add) -> None:
        """``shard_as`` or ``shard_like`` (``key``): a list of groups of tensor names, each given to ``add``."""
        groups = self.doc.get(key)
        if groups is None:
            return
        if not isinstance(groups, LineList):
            raise self.error(f"`{key}` must be a list of groups like [[h1, h3]]", self.doc.line_of(key))
        if groups and all(isinstance(g, str) for g in groups):  # one group written without its brackets
            names = ", ".join(groups)
            fix = f"[[{names}]]" if len(names) <= QUOTE_CHARS else "[[a, b], [c, d]]"
            raise self.error(f"`{key}` is a list of groups, each a list of tensors sharded alike, not a list of "
                             f"tensors: write {key}: {fix}", self.doc.line_of(key))
        for i, group in enumerate(groups):
            line = groups.line_of(i)
            add(*self._names(group, f"a {key} group", line), line=line)

    def _regions(self, b: GraphBuilder) -> None:
        """``auto_axes`` / ``explicit_axes``: lists of {name, axes, ops, out_shardings | in_shardings}."""
        for kind, add, key in (("auto", b.auto_axes, "out_shardings"), ("explicit", b.explicit_axes, "in_shardings")):
            section = f"{kind}_axes"
            regions = self.doc.get(section)
            if regions is None:
                continue
            if not isinstance(regions, LineList):
                raise self.error(f"`{section}` must be a list of regions, each {{name, axes, ops, {key}}}",
                                 self.doc.line_of(section))
            for i, r in enumerate(regions):
                line = regions.line_of(i)
                if not isinstance(r, LineDict):
                    raise self.error(f"each `{section}` entry must be a mapping with name, axes, ops and {key}", line)
                unknown = [k for k in r if k not in ("name", "axes", "ops", key)]
                if unknown:
                    raise self.error(f"`{section}` region has unknown key {quote(unknown[0])}; its keys are name, axes, "
                                     f"ops and {key}", line)
                if "name" not in r:
                    raise self.error(f"`{section}` region needs a name", line)
                shardings = r.get(key)
                if shardings is None:
                    shardings = {}
                elif not isinstance(shardings, LineDict):
                    raise self.error(f"`{key}` of region {quote(plain(r['name']))} maps tensor names to shardings", line)
                add(str(plain(r["name"])), self._names(r.get("axes", []), "`axes`", line),
                    self._names(r.get("ops", []), "`ops`", line), {str(k): plain(v) for k, v in shardings.items()},
                    line=line)

    def _manual_regions(self, b: GraphBuilder) -> None:
        """``regions``: manual computation regions (:mod:`graphs.manual_regions`)."""
        regions = self.doc.get("regions")
        if regions is None:
            return
        if not isinstance(regions, LineList):
            raise self.error("`regions` must be a list of manual regions, each {name, manual_axes, inputs, "
                             "in_shardings, outputs, out_shardings, ops}", self.doc.line_of("regions"))
        for i, r in enumerate(regions):
            line = regions.line_of(i)
            if not isinstance(r, LineDict):
                raise self.error(f"each `regions` entry must be a mapping with {', '.join(REGION_KEYS)}", line)
            for key in r:
                if key not in REGION_KEYS:
                    raise self.error(f"region has unknown key {key!r}{_suggest(str(key), REGION_KEYS)} "
                                     f"(keys: {', '.join(REGION_KEYS)})", r.line_of(key))
            for key in REGION_KEYS:
                if key not in r:
                    label = f"region {plain(r['name'])!r}" if "name" in r else f"regions entry {i}"
                    raise self.error(f"{label} needs `{key}` (keys: {', '.join(REGION_KEYS)})", line)
            name = str(plain(r["name"]))
            lists = {}
            for key in ("manual_axes", "inputs", "outputs"):
                lists[key] = self._names(r[key], f"`{key}` of region {name!r}", r.line_of(key))
            for key in ("in_shardings", "out_shardings"):
                value = r[key]
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise self.error(f"`{key}` of region {name!r} must be a list of sharding texts like "
                                     f"'[{{\"tp\"}}, {{}}]', one per {key[:-10] or 'in'}put", r.line_of(key))
                lists[key] = list(value)
            ops = r["ops"]
            if not isinstance(ops, LineList) or not ops:
                raise self.error(f"`ops` of region {name!r} must be a non-empty list of body ops "
                                 "like {name: mm1, op: matmul, inputs: [x, w1], output: h}", r.line_of("ops"))
            body = []
            for k, spec in enumerate(ops):
                at = ops.line_of(k)
                if not isinstance(spec, LineDict):
                    raise self.error(f"region {name!r}: ops entry {k} must be a mapping with at least op and inputs",
                                     at)
                label = f"region {name!r}: body op {spec['name']!r}" if "name" in spec else \
                    f"region {name!r}: ops entry {k}"
                for key in ("op", "inputs"):
                    if key not in spec:
                        raise self.error(f"{label} needs `{key}`", at)
                body.append({**{str(k2): plain(v) for k2, v in spec.items()},
                             "inputs": self._names(spec["inputs"], f"{label}: inputs", at), "line": at})
            b.manual_region(name, lists["manual_axes"], lists["inputs"], lists["in_shardings"], lists["outputs"],
                            lists["out_shardings"], body, line=line)

    def _patterns(self, b: GraphBuilder) -> None:
        for key, apply in (("shardings", b.annotate_shardings), ("strategies", b.annotate_strategies)):
            table = self.doc.get(key)
            if table is None:
                continue
            if not isinstance(table, LineDict):
                raise self.error(f"`{key}` must map name patterns (globs like 'layer*.mlp.w1') to annotations",
                                 self.doc.line_of(key))
            apply({str(k): plain(v) for k, v in table.items()}, {str(k): table.line_of(k) for k in table})
