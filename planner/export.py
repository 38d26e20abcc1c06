"""Exporting a plan to the notations frameworks read: JAX, Shardy, PyTorch DTensor, MindSpore.

:func:`export` turns a :class:`~planner.report.Plan` into plain data keyed by tensor and by op,
from the plan's own shardings (each tensor's layout, each op's operand and result layouts under
its strategy) through the one view of each notation (:mod:`planner.views`):

* ``jax``: the mesh (axis names, shape, device order) and a ``PartitionSpec`` per tensor and per
  op operand and result, as JAX prints it (``partition_spec``: ``"P('x', None)"``) and as data a
  program passes to ``P`` (``partition_spec_entries``: ``["x", null]``, a list where several axes
  split one dimension). A ``PartitionSpec`` names whole mesh axes only, so when the plan uses
  sub-axes (``"d":(1)2``) the mesh is exported split: each cut axis becomes consecutive axes
  (``d_0`` = 2, ``d_1`` = 4), which keeps the device order, and ``split_axes`` says so. A pending
  sum (an op's result before its reduction) is given as ``unreduced`` axes beside its spec; ``outputs``
  gives each graph output's spec as the plan delivers it (after any reduction of a pending sum);
* ``shardy``: the ``sdy.mesh`` declaration and the ``#sdy.sharding<...>`` attribute text, which
  is our own notation (seed 000), sub-axes and pending sums included;
* ``dtensor``: the ``DeviceMesh`` shape and dimension names and the placements per tensor
  (``Shard(d)``, ``Replicate()``, ``Partial()``; ``placement_objects`` gives them as data,
  ``{"type": "Shard", "dim": 0}``, ``{"type": "Replicate"}``, ``{"type": "Partial", "reduce_op": "sum"}``), the mesh split as for JAX where sub-axes are
  used; a dimension split by two mesh dims carries the caveat that DTensor shards it over mesh
  dims left to right;
* ``mindspore``: the strategy per op (split counts per operand dimension) and the layout
  (device matrix, tensor map) per tensor; a pending sum (an op's result before the AllReduce
  MindSpore inserts) is the layout without it and ``pending_sum_over`` its axes.

A sharding a notation cannot express is refused with :class:`~planner.errors.NotExpressibleError`
naming the tensor (or op) and why, rather than exported approximately.
"""

from __future__ import annotations

from typing import Callable

from planner.errors import NotExpressibleError, quote
from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh
from planner.ir.sharding import DimSharding, TensorSharding
from planner.notations.dtensor import placement_objects, to_placements
from planner.notations.jax import partition_spec_entries, to_partition_spec
from planner.notations.mindspore import to_tensor_layout
from planner.partitioning.split_mesh import split_mesh, split_names

FORMATS = ("jax", "shardy", "dtensor", "mindspore")


def export(plan, to: str) -> dict:
    """The plan in notation ``to`` (one of :data:`FORMATS`), as JSON-ready data (see the module docstring)."""
    if to not in FORMATS:
        raise NotExpressibleError(f"unknown export format {quote(to)}; use one of {', '.join(FORMATS)}")
    return {"jax": _jax, "shardy": _shardy, "dtensor": _dtensor, "mindspore": _mindspore}[to](plan)


def _named(what: str, fn: Callable, *args):
    try:
        return fn(*args)
    except NotExpressibleError as e:
        raise NotExpressibleError(f"{what}: {e.message}") from None


def _layouts(plan):
    """Every sharding the plan exports: (tensor name, layout) and (op, operand layouts, result layout)."""
    tensors = [(name, t.sharding.layout_only(), t) for name, t in plan.tensors.items()]
    ops = [(o.name, [s.layout_only() for s in o.operand_shardings], o.result_sharding.layout_only()) for o in plan.ops]
    return tensors, ops


def _head(plan, to: str) -> dict:
    return {"format": to, "model": plan.model, "search": plan.search}


# -- JAX ------------------------------------------------------------------------------------------

def _mesh_data(split: Mesh, pieces, names_key: str, why: str) -> dict:
    """The exported mesh: axis names (under ``names_key``), shape, device order, and where it was split."""
    mesh = {names_key: [a.name for a in split.axes], "shape": [a.size for a in split.axes],
            "device_ids": list(split.devices)}
    split_axes = {name: [n for _, _, n in ps] for name, ps in pieces.items() if len(ps) > 1}
    if split_axes:
        mesh["split_axes"] = split_axes
        mesh["note"] = (f"{why}, so the mesh is split where the plan uses sub-axes: "
                        + "; ".join(f"{k} = {' x '.join(v)}" for k, v in split_axes.items())
                        + " (same device order, row-major)")
    return mesh


def _on_split(s: TensorSharding, split: Mesh, pieces) -> TensorSharding:
    def names(ref: AxisRef) -> tuple[AxisRef, ...]:
        return tuple(AxisRef(n) for n in split_names(ref, s.mesh, pieces))

    dims = tuple(DimSharding(tuple(n for ref in d.axes for n in names(ref)), d.is_open) for d in s.dims)
    return TensorSharding(split, dims, tuple(n for r in s.replicated for n in names(r)),
                          tuple(n for r in s.unreduced for n in names(r)))


def _jax(plan) -> dict:
    tensors, ops = _layouts(plan)
    outputs = [(name, s.layout_only()) for name, s in plan.program.outputs.items()]
    everything = ([s for _, s, _ in tensors] + [s for _, ins, out in ops for s in (*ins, out)]
                  + [s for _, s in outputs])
    split, pieces = split_mesh(plan.mesh, [ref for s in everything for ref in s.used_axes()])

    def spec(what: str, s: TensorSharding) -> dict:
        on = _on_split(s, split, pieces)
        entries = _named(what, partition_spec_entries, on.with_unreduced(()))
        out = {"partition_spec": to_partition_spec(on.with_unreduced(())), "partition_spec_entries": entries}
        if on.unreduced:
            out["unreduced"] = [a.name for a in on.unreduced]
        return out

    mesh = _mesh_data(split, pieces, "axis_names", "a PartitionSpec names whole mesh axes only")
    return {**_head(plan, "jax"), "mesh": mesh,
            "tensors": {name: {"shape": list(t.shape), "dtype": t.dtype, **spec(f"tensor {quote(name)}", s)}
                        for name, s, t in tensors},
            "ops": {name: {"operands": [spec(f"op {quote(name)} operand {k}", s) for k, s in enumerate(ins)],
                           "result": spec(f"op {quote(name)} result", out)} for name, ins, out in ops},
            "outputs": {name: spec(f"output {quote(name)}", s) for name, s in outputs}}


# -- Shardy ---------------------------------------------------------------------------------------

def _sdy_mesh(mesh: Mesh) -> str:
    axes = "[" + ", ".join(f'"{a.name}"={a.size}' for a in mesh.axes) + "]"
    ids = "" if mesh.device_ids is None else f", device_ids=[{', '.join(map(str, mesh.device_ids))}]"
    return f"sdy.mesh @{mesh.name} = <{axes}{ids}>"


def _sdy(s: TensorSharding) -> str:
    return f"#sdy.{s}"


def _shardy(plan) -> dict:
    tensors, ops = _layouts(plan)
    return {**_head(plan, "shardy"), "meshes": [_sdy_mesh(m) for m in plan.meshes],
            "tensors": {name: {"sharding": _sdy(s)} for name, s, _ in tensors},
            "ops": {name: {"operands": [_sdy(s) for s in ins], "result": _sdy(out)} for name, ins, out in ops}}


# -- DTensor --------------------------------------------------------------------------------------

def _dtensor(plan) -> dict:
    tensors, ops = _layouts(plan)
    everything = [s for _, s, _ in tensors] + [s for _, ins, out in ops for s in (*ins, out)]
    split, pieces = split_mesh(plan.mesh, [ref for s in everything for ref in s.used_axes()])  # DeviceMesh dims are whole too: split as for JAX

    def entry(what: str, s: TensorSharding, shape) -> dict:
        on = _on_split(s, split, pieces)
        objects = _named(what, placement_objects, on, shape)
        out = {"placements": to_placements(on, shape), "placement_objects": objects}
        several = [d for d, dim in enumerate(on.dims) if len(dim.axes) > 1]
        if several:
            out["caveat"] = (f"dimension{'s' if len(several) > 1 else ''} {', '.join(map(str, several))} "
                             "split by several mesh dims: DTensor shards over them left to right (mesh order)")
        return out

    graph = plan.graph
    mesh = _mesh_data(split, pieces, "dim_names", "placements name whole mesh dims only")
    return {**_head(plan, "dtensor"), "mesh": mesh,
            "tensors": {name: {"shape": list(t.shape), **entry(f"tensor {quote(name)}", s, t.shape)}
                        for name, s, t in tensors},
            "ops": {name: {"operands": [entry(f"op {quote(name)} operand {k}", s, graph.tensor(t).shape)
                                        for k, (s, t) in enumerate(zip(ins, graph.op(name).inputs))],
                           "result": entry(f"op {quote(name)} result", out, graph.tensor(graph.op(name).output).shape)}
                    for name, ins, out in ops}}


# -- MindSpore ------------------------------------------------------------------------------------

def _mindspore(plan) -> dict:
    tensors, _ = _layouts(plan)

    def layout(name: str, s: TensorSharding) -> dict:
        # a pending sum is the op's output before MindSpore's inserted AllReduce: its layout, and the axes
        matrix, tensor_map = _named(f"tensor {quote(name)}", to_tensor_layout, s.with_unreduced(()))
        out = {"device_matrix": matrix, "tensor_map": tensor_map}
        if s.unreduced:
            out["pending_sum_over"] = [str(a) for a in s.unreduced]
        return out

    return {**_head(plan, "mindspore"), "device_num": plan.mesh.size,
            "tensors": {name: layout(name, s) for name, s, _ in tensors},
            "ops": {o.name: {"strategy": [list(x) for x in o.strategy.splits]} for o in plan.ops}}
