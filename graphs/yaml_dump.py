"""Writing a :class:`~graphs.graph.ComputationGraph` as a model file (the format of ``docs/model-format.md``).

:func:`dump_model` is the inverse of :func:`~graphs.yaml_format.load_model_text`: the text it
returns loads back into a graph with the same meshes, tensors, ops (canonical attributes,
strategies, out-shardings), outputs, groups, axis regions and manual regions (written as their body ops
on local shapes, the flattened names undone). Every tensor and op is one line
in flow style, as the hand-written configs are; an op may carry a comment (where it came from).
Output is deterministic: the same graph gives byte-identical text.

>>> from graphs.graph_builder import GraphBuilder
>>> from graphs.yaml_format import load_model_text
>>> b = GraphBuilder("tiny", {"x": 2})
>>> a = b.tensor("a", [4, 8], sharding='[{"x"}, {}]')
>>> s = b.const("s", [], value=0.5)
>>> y = b.op("mul", [a, s], output="y", name="scale")
>>> text = dump_model(b.build(), comments={"scale": "model.py:3"})
>>> print(text)
name: tiny
mesh: {x: 2}
tensors:
  a: {shape: [4, 8], dtype: f32, kind: input, sharding: '[{"x"}, {}]'}
  s: {shape: [], dtype: f32, kind: const, value: 0.5}
ops:
  - {name: scale, op: mul, inputs: [a, s], output: y}  # model.py:3
outputs: [y]
<BLANKLINE>
>>> load_model_text(text).tensor("y").shape
(4, 8)
"""

from __future__ import annotations

from typing import Any, Mapping

import yaml

from graphs.graph import ComputationGraph
from graphs.meshes import DEFAULT_MESH_NAME
from planner.ir import Mesh, TensorSharding
from planner.ir.mesh import AxisType


def _plain(value: Any) -> Any:
    """Tuples (also nested) as lists, so YAML writes them as sequences."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _flow(value: Any) -> str:
    """One value in YAML flow style on one line (``{shape: [4, 8], kind: input}``)."""
    text = yaml.safe_dump(_plain(value), default_flow_style=True, sort_keys=False, width=float("inf"))
    return text.strip().removesuffix("...").strip()


def _mesh_value(mesh: Mesh) -> Any:
    """``{x: 2, y: 4}``, or the full mapping when the mesh has a device order or typed axes."""
    sizes = {a.name: a.size for a in mesh.axes}
    types = {a.name: a.type.value for a in mesh.axes if a.type is not AxisType.AUTO}
    if mesh.device_ids is None and not types:
        return sizes
    full: dict[str, Any] = {"axes": sizes}
    if mesh.device_ids is not None:
        full["device_ids"] = list(mesh.device_ids)
    if types:
        full["axis_types"] = types
    return full


def _sharding_text(s: TensorSharding, default: Mesh | None) -> str:
    return s.dims_text() if default is not None and s.mesh == default else str(s)


def _op_entry(op, text, comments: Mapping[str, str], names: Mapping[str, str] | None = None,
              skip: tuple[str, ...] = ()) -> str:
    """One op as a flow mapping (``names`` renames its tensors and itself; ``skip`` drops attributes)."""
    rename = (lambda n: n) if names is None else (lambda n: names.get(n, n))  # noqa: E731
    attrs = {k: v for k, v in op.attrs_dict.items() if k not in skip}
    entry = {"name": rename(op.name), "op": op.op, "inputs": [rename(t) for t in op.inputs],
             "output": rename(op.output), **attrs}
    if op.strategy is not None:
        entry["strategy"] = op.strategy
    if op.out_sharding is not None:
        entry["out_sharding"] = text(op.out_sharding)
    note = comments.get(op.name)
    return _flow(entry) + (f"  # {' '.join(note.split())}" if note else "")


def _region_lines(graph: ComputationGraph, r, text, comments: Mapping[str, str]) -> list[str]:
    """A manual region as written: its body ops on local shapes, reading the region's inputs and writing
    its outputs by their outer names (the flattened ``region/`` names and boundary ops undone)."""
    names = {arg: outer for arg, outer in zip(r.arguments, r.inputs)}
    names.update({res: outer for res, outer in zip(r.results, r.outputs)})
    prefix = f"{r.name}/"
    for t in r.body_tensors:
        names.setdefault(t, t.removeprefix(prefix))
    for o in r.ops:
        names.setdefault(o, o.removeprefix(prefix))
    head = {"name": r.name, "manual_axes": r.manual_axes, "inputs": r.inputs,
            "in_shardings": [text(s) for s in r.in_shardings], "outputs": r.outputs,
            "out_shardings": [text(s) for s in r.out_shardings]}
    lines = [f"  - name: {_flow(r.name)}"] + [f"    {k}: {_flow(v)}" for k, v in head.items() if k != "name"]
    lines.append("    ops:")
    # the region fills group_size from the mesh: a model file may not give it
    lines += ["      - " + _op_entry(graph.op(o), text, comments, names, skip=("group_size",)) for o in r.ops]
    return lines


def dump_model(graph: ComputationGraph, comments: Mapping[str, str] | None = None) -> str:
    """The model file of ``graph`` (see the module docstring); ``comments`` maps op names to a note."""
    comments = comments or {}
    meshes = list(graph.meshes.values())
    default = meshes[0] if meshes else None
    text = lambda s: _sharding_text(s, default)  # noqa: E731
    lines = [f"name: {_flow(graph.name)}"]
    if len(meshes) == 1 and meshes[0].name == DEFAULT_MESH_NAME:
        lines.append(f"mesh: {_flow(_mesh_value(meshes[0]))}")
    elif meshes:
        lines.append("meshes:")
        lines += [f"  {_flow(m.name)}: {_flow(_mesh_value(m))}" for m in meshes]
    if graph.cluster is not None:
        lines.append(f"cluster: {_flow(graph.cluster)}")
    if graph.pipeline is not None:
        lines.append(f"pipeline: {_flow(graph.pipeline.to_dict())}")
    if graph.outputs_layout != "free":
        lines.append(f"outputs_layout: {graph.outputs_layout}")
    declared = [t for t in graph.tensors.values() if t.kind != "activation"]
    if declared:
        lines.append("tensors:")
    for t in declared:
        entry: dict[str, Any] = {"shape": t.shape, "dtype": t.dtype, "kind": t.kind}
        if t.sharding is not None:
            entry["sharding"] = text(t.sharding)
        if t.value is not None:
            entry["value"] = t.value
        lines.append(f"  {_flow(t.name)}: {_flow(entry)}")
    in_region = {o for r in graph.manual_regions for o in r.ops + r.enter_ops + r.exit_ops}
    outer = [op for op in graph.ops if op.name not in in_region]
    if outer:
        lines.append("ops:")
    for op in outer:
        lines.append("  - " + _op_entry(op, text, comments))
    if graph.manual_regions:
        lines.append("regions:")
    for r in graph.manual_regions:
        lines += _region_lines(graph, r, text, comments)
    lines.append(f"outputs: {_flow(graph.outputs)}")
    for key, groups in (("shard_as", graph.shard_as), ("shard_like", graph.shard_like)):
        if groups:
            lines.append(f"{key}: {_flow(groups)}")
    for kind in ("auto", "explicit"):
        regions = [r for r in graph.axis_regions if r.kind == kind]
        if regions:
            lines.append(f"{kind}_axes:")
        for r in regions:
            entry = {"name": r.name, "axes": r.axes, "ops": r.ops,
                     r.boundary_key: {t: text(s) for t, s in r.shardings}}
            lines.append(f"  - {_flow(entry)}")
    return "\n".join(lines) + "\n"
