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

:func:`export_pipeline` exports a pipelined training plan (:mod:`planner.stages`) in JAX's notation: the
whole mesh ``pp x dp x`` the stage axes (device ids row-major, so device group ``d`` is the devices at
``pp`` position ``d``), the stages (layers, op names, device group, virtual-stage chunk, the boundary
activations they receive and send), the schedule as each device group's ordered actions, the microbatches,
recomputation and ZeRO, and per stage the layouts the stage's SPMD plan gives its tensors and ops, in the
``jax`` format above on the stage mesh. That SPMD plan is the one the pipeline's costs were read from: one
microbatch's model with one copy of each run of alike layers (:func:`planner.stages.profile.stage_program`);
a layer that is a copy takes its original's layouts under its own names.
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
from planner.stages.plan import PipelinePlan
from planner.stages.profile import StageProgram
from planner.stages.schedules import device_orders

FORMATS = ("jax", "shardy", "dtensor", "mindspore")
PIPELINE_FORMATS = ("jax",)
"""The notations a pipelined plan exports to: the stage assignment and schedule are JAX's shard_map over ``pp``."""


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


# -- a pipelined plan in JAX's notation --------------------------------------------------------

#: The names the exported mesh gives the pipeline and data-parallel axes (the stage axes keep theirs).
PIPELINE_AXIS, DATA_AXIS = "pp", "dp"
ACTION_KINDS = {"F": "forward", "B": "backward"}
#: What ZeRO's stages 1, 2 and 3 shard over the data-parallel axis, each adding one.
ZERO_SHARDED = ("optimizer_state", "gradients", "parameters")


def export_pipeline(pipeline: PipelinePlan, stage, staged: StageProgram, graph, to: str = "jax") -> dict:
    """``pipeline`` in notation ``to`` (one of :data:`PIPELINE_FORMATS`) as JSON-ready data (module docstring).

    ``stage`` is the :class:`~planner.report.Plan` of ``staged.decision`` (the stages' SPMD plan on the stage
    mesh) and ``graph`` the model cut to one microbatch, whose names the stages are exported under."""
    if to not in PIPELINE_FORMATS:
        raise NotExpressibleError(f"a pipelined plan exports to {', '.join(PIPELINE_FORMATS)} only, not {quote(to)}: "
                                  f"its stage assignment and schedule are written for JAX; use --to jax")
    c = pipeline.config
    spmd = _jax(stage)
    stage_mesh = spmd["mesh"]
    clash = [n for n in stage_mesh["axis_names"] if n in (PIPELINE_AXIS, DATA_AXIS)]
    if clash:
        raise NotExpressibleError(f"the stage mesh has an axis named {quote(clash[0])}, the name the exported mesh "
                                  f"gives the {'pipeline' if clash[0] == PIPELINE_AXIS else 'data-parallel'} axis; "
                                  f"rename that axis of the model's mesh")
    full = Mesh.from_sizes("pipeline", [(PIPELINE_AXIS, c.pp), (DATA_AXIS, c.dp),
                                        *zip(stage_mesh["axis_names"], stage_mesh["shape"])])
    ids = list(full.devices)
    group = len(ids) // c.pp
    mesh = {"axis_names": [a.name for a in full.axes], "shape": [a.size for a in full.axes], "device_ids": ids,
            "pipeline_axis": PIPELINE_AXIS, "data_parallel_axis": DATA_AXIS, "stage_axes": stage_mesh["axis_names"]}
    if "split_axes" in stage_mesh:
        mesh["split_axes"], mesh["note"] = stage_mesh["split_axes"], stage_mesh["note"]
    orders = device_orders(c.schedule, c.pp, c.microbatches, c.virtual_stages)
    groups = [{"index": d, "devices": ids[d * group:(d + 1) * group],
               "stages": [k for k in range(c.stages) if k % c.pp == d],
               "actions": [{"kind": ACTION_KINDS[a.kind], "microbatch": a.microbatch, "stage": a.stage,
                            "chunk": a.stage // c.pp} for a in order]} for d, order in enumerate(orders)]
    ops, tensors = _priced_names(staged, graph)
    stages = [_pipeline_stage(k, c, pipeline.stages[k].layers, staged, graph, spmd, ops, tensors)
              for k in range(c.stages)]
    return {"format": to, "model": pipeline.model, "search": stage.search, "cluster": pipeline.cluster,
            "devices": pipeline.devices, "mesh": mesh,
            "pipeline": {"degree": c.pp, "data_parallel": c.dp, "schedule": c.schedule,
                         "microbatches": c.microbatches, "microbatch_size": c.microbatch,
                         "virtual_stages": c.virtual_stages, "recompute": c.recompute, "zero_stage": c.zero,
                         "zero_sharded": list(ZERO_SHARDED[:c.zero]),
                         "step_time_s": pipeline.step_time_s,
                         "memory_bytes_per_device": pipeline.evaluation.peak_memory_bytes,
                         "device_groups": groups, "stages": stages}}


def _priced_names(staged: StageProgram, graph) -> tuple[dict, dict]:
    """Each op's and tensor's name in the priced SPMD plan, by its name in the model: a layer that is a copy of an
    earlier one maps position by position onto it."""
    ops, tensors = {}, {}
    for layer, r in zip(staged.layers, staged.representatives):
        for mine, theirs in zip(layer.ops, staged.layers[r].ops):
            ops[mine] = theirs
            a, b = graph.op(mine), graph.op(theirs)
            tensors[a.output] = b.output
            for x, y in zip(a.inputs, b.inputs):
                if graph.tensor(x).kind != "activation":  # parameters and the model's inputs
                    tensors.setdefault(x, y)
    return ops, tensors


def _pipeline_stage(k: int, c, layer_names, staged: StageProgram, graph, spmd: dict, ops: dict, tensors: dict) -> dict:
    """Stage ``k``: where it runs, what it receives and sends, and its SPMD layouts under the model's own names (a
    received activation in the layout its producer sends it in)."""
    layers = [staged.layers[i] for i in c.stage_layers(k)]
    own = [o for layer in layers for o in layer.ops]
    mine = set(own)
    made = {graph.op(o).output for o in own}
    receives = list(dict.fromkeys(t for layer in layers for t in layer.receives if t not in made))
    sends = [t for layer in layers for t in layer.sends if any(reader not in mine for reader, _ in graph.consumers(t))]
    held = list(dict.fromkeys([*receives, *(t for o in own for t in (*graph.op(o).inputs, graph.op(o).output))]))
    return {"index": k, "device_group": k % c.pp, "chunk": k // c.pp, "layers": list(layer_names),
            "ops": own, "receives": receives, "sends": sends, "recompute": c.recompute,
            "spmd": {"mesh": spmd["mesh"],
                     "tensors": {t: spmd["tensors"][tensors[t]] for t in held if tensors.get(t) in spmd["tensors"]},
                     "ops": {o: spmd["ops"][ops[o]] for o in own},
                     "outputs": {t: spmd["outputs"][tensors[t]] for t in graph.outputs
                                 if t in made and tensors[t] in spmd["outputs"]}}}


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
