"""``--mesh`` over a model's own mesh: the model's annotations keep their axes, matched by name.

A model's annotations name its mesh's axes (``'[{"dp"}, {"tp"}]'``). Planning the model
on another mesh (``shardplan plan MODEL --mesh ...``, ``plan(model, mesh=...)``) keeps
what they mean only if the new mesh has axes of those names, so the rule is:

* every axis an annotation of the model's default mesh uses must exist, by name, in
  the new mesh, or the override is refused (a :class:`~planner.errors.PlanningError`
  naming the axes, the first annotation using them and its line): renaming axes
  behind the user's back would shard ``dp`` where ``tp`` was meant;
* when they all exist, every annotation is moved to the new mesh **by name**: ``"dp"``
  stays ``"dp"``, whatever its size or position on the new mesh (an annotation that
  does not fit the new sizes — a sub-axis ``"d":(1)2`` of an axis now of size 3 — is
  refused naming the tensor).

The model's axis types (``axis_types: {x: Explicit}``) go with the names too
(:func:`with_model_types`): the text form of ``--mesh`` cannot state a type, so an axis
the override leaves Auto takes the type the model gives the axis of that name.

The model's other meshes (``meshes:``) are not overridden: annotations on them are
planned through the device-equivalence translation as before
(:func:`planner.model.annotations.translate`).

>>> from graphs import load_model_text
>>> from planner.ir.text import parse_mesh_spec
>>> g = load_model_text('''
... name: tiny
... mesh: {dp: 2, tp: 4}
... tensors:
...   a: {shape: [8, 8], kind: input, sharding: '[{"dp"}, {}]'}
... ops:
...   - {name: act, op: relu, inputs: [a], output: y}
... ''')
>>> str(on_mesh(g, parse_mesh_spec("tp=4,dp=2", default_name="mesh")).tensor("a").sharding)
'sharding<@mesh, [{"dp"}, {}]>'
>>> on_mesh(g, parse_mesh_spec("a=2,b=4", default_name="mesh"))
Traceback (most recent call last):
...
planner.errors.PlanningError: --mesh a=2,b=4 has no axis "dp", which the model's annotations use (first: tensor 'a' at <string>:5); --mesh keeps annotations by axis name: name its axes as the model's mesh @mesh does, e.g. --mesh dp=2,tp=4
"""

from __future__ import annotations

from dataclasses import replace

from graphs.graph import ComputationGraph
from planner.errors import PlanningError, ShardingError
from planner.ir.mesh import AxisType, Mesh

__all__ = ["on_mesh", "with_model_types"]


def on_mesh(graph: ComputationGraph, mesh: Mesh) -> ComputationGraph:
    """``graph`` with its default mesh replaced by ``mesh``, annotations kept by axis name (module docstring)."""
    if not graph.meshes or mesh in graph.meshes.values():
        return graph
    default = graph.mesh
    uses = _axis_uses(graph, default)
    names = {a.name for a in mesh.axes}
    missing = list(dict.fromkeys(axis for axis, _ in uses if axis not in names))
    if missing:
        first = next(where for axis, where in uses if axis in missing)
        listed = ", ".join(f'"{a}"' for a in missing)
        axis_word = "axis" if len(missing) == 1 else "axes"
        raise PlanningError(
            f"--mesh {mesh.short()} has no {axis_word} {listed}, which the model's annotations use (first: {first}); "
            f"--mesh keeps annotations by axis name: name its axes as the model's mesh @{default.name} does, "
            f"e.g. --mesh {_suggestion(default, mesh)}"
        )
    if not uses or (mesh.axes == default.axes and mesh.devices == default.devices and mesh.name == default.name):
        return graph  # nothing to move, or the same mesh
    meshes = {mesh.name: mesh, **{k: m for k, m in graph.meshes.items() if k not in (default.name, mesh.name)}}

    def moved(sharding, what: str, line: int | None):
        if sharding is None or sharding.mesh != default:
            return sharding
        try:
            return replace(sharding, mesh=mesh)
        except ShardingError as e:
            raise PlanningError(f"{what}{_at(graph, line)}: its sharding {sharding.dims_text()} does not fit --mesh "
                                f"{mesh.short()}: {e.message}; annotate for the new sizes or plan on the model's mesh "
                                f"({default.short()})") from None

    tensors = [replace(t, sharding=moved(t.sharding, f"tensor {t.name!r}", t.line))
               for t in graph.tensors.values() if t.kind != "activation"]
    ops = [replace(op, out_sharding=moved(op.out_sharding, f"op {op.name!r} out_sharding", op.line))
           for op in graph.ops]
    regions = [replace(r, shardings=tuple((t, moved(s, f"region {r.name!r} tensor {t!r}", r.line))
                                          for t, s in r.shardings))
               for r in graph.axis_regions]
    return ComputationGraph(graph.name, meshes, tensors, ops, graph.outputs, graph.shard_as,
                            shard_like=graph.shard_like, axis_regions=regions, cluster=graph.cluster,
                            outputs_layout=graph.outputs_layout, source=graph.source)


def with_model_types(graph: ComputationGraph, mesh: Mesh) -> Mesh:
    """``mesh`` (an override) with each Auto axis typed as the model's default mesh types the axis of that name.

    >>> from graphs import load_model_text
    >>> from planner.ir.text import parse_mesh_spec
    >>> g = load_model_text("name: t\\nmeshes:\\n  m: {axes: {x: 2, y: 4}, axis_types: {x: Explicit}}\\n"
    ...                     "tensors:\\n  a: {shape: [8], kind: input}\\nops:\\n  - {name: r, op: relu, inputs: [a], output: b}\\n")
    >>> [(a.name, a.type.value) for a in with_model_types(g, parse_mesh_spec("y=2,x=4", default_name="m")).axes]
    [('y', 'Auto'), ('x', 'Explicit')]
    """
    if not graph.meshes or mesh in graph.meshes.values():  # one of the model's own meshes keeps its own types
        return mesh
    types = {a.name: a.type for a in graph.mesh.axes if a.type != AxisType.AUTO}
    keep = {a.name: types[a.name] for a in mesh.axes if a.type == AxisType.AUTO and a.name in types}
    return mesh.with_types(keep) if keep else mesh


def _axis_uses(graph: ComputationGraph, mesh: Mesh) -> list[tuple[str, str]]:
    """Every (axis name, where) an annotation on ``mesh`` uses, in model order."""
    uses: list[tuple[str, str]] = []

    def add(sharding, where: str) -> None:
        if sharding is None or sharding.mesh != mesh:
            return
        refs = [a for d in sharding.dims for a in d.axes] + list(sharding.replicated) + list(sharding.unreduced)
        uses.extend((r.name, where) for r in refs)

    for t in graph.tensors.values():
        if t.kind != "activation":
            add(t.sharding, f"tensor {t.name!r}{_at(graph, t.line, 'at')}")
    for op in graph.ops:
        add(op.out_sharding, f"op {op.name!r} out_sharding{_at(graph, op.line, 'at')}")
    for r in graph.axis_regions:
        uses.extend((a, f"region {r.name!r}{_at(graph, r.line, 'at')}") for a in r.axes)
        for t, s in r.shardings:
            add(s, f"region {r.name!r} tensor {t!r}{_at(graph, r.line, 'at')}")
    return uses


def _at(graph: ComputationGraph, line: int | None, word: str = "") -> str:
    if not line:
        return ""
    place = f"{graph.source or '<string>'}:{line}"
    return f" {word} {place}" if word else f" ({place})"


def _suggestion(model_mesh: Mesh, mesh: Mesh) -> str:
    """The model's axis names with the new mesh's sizes when the counts agree, else the model's mesh."""
    if len(model_mesh.axes) == len(mesh.axes):
        return ",".join(f"{a.name}={b.size}" for a, b in zip(model_mesh.axes, mesh.axes))
    return model_mesh.short()
