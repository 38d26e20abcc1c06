"""What each layer costs on a stage's mesh, for one microbatch: read off one SPMD plan.

The stage mesh is the model-parallel part of the devices (the axes other than the pipeline
and data-parallel ones). A model is planned on it once per microbatch size, with one
copy of each run of alike layers (:func:`~planner.stages.layers.representatives`: the
copies cost the same), by an existing search, for training; the plan is lowered to its
SPMD program (:func:`planner.partitioning.lower`), and every instruction is counted
against the layer of its op:

- ``forward_s``: the layer's forward compute and the forward redistributions its ops read through;
- ``backward_s``: its backward compute and the transposed redistributions bringing its
  cotangents home; the gradient reductions (phase ``gradient``) are ``gradient_sync_s``,
  run once a step on the gradients accumulated over the microbatches (a sum commutes
  with them);
- ``stash_bytes[policy]``: what one microbatch leaves on a device until its backward: the
  values the layer's backward reads (``none``), without the attention scores and softmax
  (``selective``: they are recomputed from the kept inputs of the attention core), or only
  the layer's inputs (``full``); ``recompute_s[policy]`` the forward time that recomputation
  adds to the backward;
- ``param_elements`` / ``param_bytes``: the layer's parameters held per device;
- ``send_bytes``: what one device sends on to the next layer (its boundary activations).

Annotations of the model that name axes outside the stage mesh (the data-parallel axis on
the batch) are dropped: the pipeline level owns those axes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from graphs.graph import ComputationGraph
from graphs.dtypes import dtype_itemsize
from graphs.ops.registry import get_op
from planner.errors import PlanningError
from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding
from planner.model.decision import Decision
from planner.model.options import Options
from planner.model.request import Request
from planner.partitioning import Backprop, Compute, Load, Redistribute, lower
from planner.searches import search_named
from planner.stages.layers import Layer, layers_of, representatives

__all__ = ["LayerCost", "POLICIES", "StageProgram", "attention_core", "profile_layers", "stage_program"]

POLICIES = ("none", "selective", "full")
"""Recomputation policies, cheapest in time first."""


@dataclass(frozen=True)
class LayerCost:
    """One layer's costs on the stage mesh for one microbatch (module docstring)."""

    name: str
    forward_s: float
    backward_s: float
    gradient_sync_s: float
    recompute_s: tuple[tuple[str, float], ...]
    stash_bytes: tuple[tuple[str, int], ...]
    param_elements: int
    param_bytes: int
    send_bytes: int
    largest_bytes: int  # the largest value the layer makes on a device (a transient of its forward or backward)
    flops: int  # the layer's forward FLOPs over the whole microbatch (all devices)

    def recompute(self, policy: str) -> float:
        return dict(self.recompute_s)[policy]

    def stash(self, policy: str) -> int:
        return dict(self.stash_bytes)[policy]


@dataclass(frozen=True)
class StageProgram:
    """The SPMD plan the layers are priced from: the model's ``layers``, each one's ``representatives`` index
    (the layer its numbers are read from), the ``reduced`` model (one copy of each run of alike layers, on the
    stage mesh) and the search's ``decision`` for it, a training step."""

    layers: tuple[Layer, ...]
    representatives: tuple[int, ...]
    reduced: ComputationGraph
    decision: Decision


def stage_program(graph: ComputationGraph, stage_mesh: Mesh, cluster, search: str = "auto",
                  time_limit: float | None = None) -> StageProgram:
    """The :class:`StageProgram` of ``graph`` (one microbatch's model) on ``stage_mesh``, planned by ``search``."""
    layers = layers_of(graph)
    reps = representatives(layers)
    reduced = _reduced(graph, layers, reps, stage_mesh)
    request = Request(reduced, stage_mesh, cluster, Options(training=True), time_limit)
    return StageProgram(layers, reps, reduced, search_named(search)(request))


def profile_layers(graph: ComputationGraph, stage_mesh: Mesh, cluster, search: str = "auto",
                   time_limit: float | None = None) -> tuple[LayerCost, ...]:
    """Each layer's :class:`LayerCost` (one per layer of :func:`layers_of`, alike layers sharing their numbers)."""
    staged = stage_program(graph, stage_mesh, cluster, search, time_limit)
    layers, reps, reduced, decision = staged.layers, staged.representatives, staged.reduced, staged.decision
    program = lower(decision.model, decision.choice)
    kept = {i: layers[i] for i in set(reps)}
    layer_of_op = {op: i for i, layer in kept.items() for op in layer.ops}
    costs = {i: _Tally() for i in kept}
    for ins in program.instructions:
        if isinstance(ins, Compute):
            t = costs[layer_of_op[ins.op.name]]
            t.forward += ins.forward_time_s
            t.backward += ins.backward_time_s
            t.largest = max(t.largest, _local_bytes(ins.out_shape, ins.strategy.result, ins.dtype))
            t.ops[ins.op.name] = ins
        elif isinstance(ins, Redistribute):
            owner = ins.readers[0] if ins.readers else ins.producer
            if owner is None or owner not in layer_of_op:
                continue
            t = costs[layer_of_op[owner]]
            if ins.phase == "forward":
                t.forward += ins.time_s
            elif ins.phase == "backward":
                t.backward += ins.time_s
            else:
                t.gradient += ins.time_s
        elif isinstance(ins, Backprop):
            t = costs[layer_of_op[ins.op.name]]
            t.backprops.append(ins)
    out = []
    for i, layer in enumerate(layers):
        r = reps[i]
        out.append(_cost(reduced, kept[r], costs[r], layer.name, program))
    return tuple(out)


class _Tally:
    def __init__(self):
        self.forward = self.backward = self.gradient = 0.0
        self.largest = 0
        self.ops: dict[str, Compute] = {}
        self.backprops: list[Backprop] = []


def _local_bytes(shape, sharding: TensorSharding, dtype: str) -> int:
    n = 1
    for d in sharding.local_shape(shape):
        n *= d
    return n * dtype_itemsize(dtype)


def _cost(graph: ComputationGraph, layer: Layer, t: _Tally, name: str, program) -> LayerCost:
    # what each backward reads: its operands as read (their layouts) and, for some ops, its result
    residual: dict[tuple[str, object], int] = {}
    for bp in t.backprops:
        opdef = get_op(bp.op.op)
        ins = t.ops[bp.op.name]
        for k in opdef.vjp_inputs(bp.wrt, len(bp.op.inputs)):
            tensor = bp.op.inputs[k]
            residual[(tensor, ins.strategy.operands[k])] = _local_bytes(ins.in_shapes[k], ins.strategy.operands[k],
                                                                        graph.tensor(tensor).dtype)
        if opdef.vjp_reads_result:
            residual[(bp.op.output, ins.strategy.result)] = _local_bytes(ins.out_shape, ins.strategy.result, ins.dtype)
    core = attention_core(graph, layer)
    made_in_core = {graph.op(op).output for op in core}
    params = {t_ for t_ in layer.params}
    loaded = {i.tensor: i.layout for i in program.instructions if isinstance(i, Load) and i.tensor in params}
    # parameters are held anyway: not part of the stash, unless the backward reads a copy in another layout (a
    # weight gathered for its op), which each microbatch keeps until its backward
    kept = {k: v for k, v in residual.items() if k[0] not in params or loaded.get(k[0], k[1]) != k[1]}
    none = sum(kept.values())
    selective = sum(v for k, v in kept.items() if k[0] not in made_in_core)
    received = {}
    own = set(layer.ops)
    for op_name in layer.ops:
        ins = t.ops[op_name]
        for k, tensor in enumerate(ins.op.inputs):
            spec = graph.tensor(tensor)
            if spec.kind == "input" or (spec.kind == "activation" and graph.producer(tensor) not in own):
                received[tensor] = max(received.get(tensor, 0), _local_bytes(ins.in_shapes[k], ins.strategy.operands[k],
                                                                             graph.tensor(tensor).dtype))
    full = sum(received.values())
    core_forward = sum(t.ops[op].forward_time_s for op in core)
    elements = 0
    pbytes = 0
    for op_name in layer.ops:
        ins = t.ops[op_name]
        for k, tensor in enumerate(ins.op.inputs):
            if tensor in params:
                params.discard(tensor)
                # held as loaded: a parameter the plan gathers before each use is held (and its gradient,
                # optimizer state and data-parallel sync are) in its smaller loaded layout
                layout = loaded.get(tensor, ins.strategy.operands[k])
                shape = layout.local_shape(ins.in_shapes[k])
                n = 1
                for d in shape:
                    n *= d
                elements += n
                pbytes += n * dtype_itemsize(graph.tensor(tensor).dtype)
    send = 0
    for tensor in layer.sends:
        producer = t.ops[graph.producer(tensor)]
        send += _local_bytes(producer.out_shape, producer.strategy.result, producer.dtype)
    flops = sum(graph.op_flops(op) for op in layer.ops)
    return LayerCost(name, t.forward, t.backward, t.gradient,
                     (("none", 0.0), ("selective", core_forward), ("full", t.forward)),
                     (("none", none), ("selective", min(selective, none)), ("full", min(full, none))),
                     elements, pbytes, send, t.largest, flops)


def attention_core(graph: ComputationGraph, layer: Layer) -> tuple[str, ...]:
    """The ops of ``layer`` selective recomputation recomputes (Megatron's core attention): each contraction of two
    activations on the matmul units (the scores, ``q @ k``) and the ops its result flows through up to the next such
    contraction (scaling, masking, softmax), that one excluded: products with weights are never recomputed."""
    ops = set(layer.ops)

    def activation_product(name: str) -> bool:
        op = graph.op(name)
        return get_op(op.op).matmul_units and len(op.inputs) >= 2 and \
            all(graph.tensor(t).kind == "activation" for t in op.inputs)

    core: list[str] = []
    for name in layer.ops:
        if not activation_product(name):
            continue
        chain, frontier = [name], [name]
        while frontier:
            nxt = []
            for op_name in frontier:
                for reader, _ in graph.consumers(graph.op(op_name).output):
                    if reader in ops and reader not in chain and not activation_product(reader) \
                            and not get_op(graph.op(reader).op).matmul_units:
                        chain.append(reader)
                        nxt.append(reader)
            frontier = nxt
        # a chain that never reaches another product of activations is no attention core (a plain weight path)
        ends = {reader for op_name in chain for reader, _ in graph.consumers(graph.op(op_name).output)}
        if any(r in ops and activation_product(r) for r in ends):
            core.extend(chain)
    return tuple(dict.fromkeys(sorted(core, key=layer.ops.index)))


def _reduced(graph: ComputationGraph, layers, reps, mesh: Mesh) -> ComputationGraph:
    """``graph`` with one copy of each run of alike layers, on ``mesh``, annotations restricted to its axes."""
    rename: dict[str, str] = {}
    for i, layer in enumerate(layers):
        r = reps[i]
        if r == i:
            continue
        for mine, theirs in zip(layer.ops, layers[r].ops):
            rename[graph.op(mine).output] = graph.op(theirs).output
    kept_ops = [op for i, layer in enumerate(layers) if reps[i] == i for op in layer.ops]
    names = {a.name for a in mesh.axes}
    ops = []
    for name in kept_ops:
        op = graph.op(name)
        ops.append(replace(op, inputs=tuple(rename.get(t, t) for t in op.inputs),
                           out_sharding=_restricted(op.out_sharding, mesh, names), strategy=None))
    used = {t for op in ops for t in op.inputs}
    tensors = [replace(t, sharding=_restricted(t.sharding, mesh, names)) for t in graph.tensors.values()
               if t.kind != "activation" and t.name in used]
    outputs = tuple(dict.fromkeys(rename.get(t, t) for t in graph.outputs))
    try:
        return ComputationGraph(graph.name, {mesh.name: mesh}, tensors, ops, outputs, cluster=graph.cluster,
                                outputs_layout=graph.outputs_layout, source=graph.source)
    except Exception as e:  # a model the reduction cannot express is a planning limit, said plainly
        raise PlanningError(f"model {graph.name!r} cannot be priced layer by layer on the stage mesh "
                            f"{mesh.short()}: {e}") from None


def _restricted(sharding: TensorSharding | None, mesh: Mesh, names: set[str]) -> TensorSharding | None:
    if sharding is None:
        return None
    dims = [[a for a in d.axes if a.name in names] for d in sharding.dims]
    return TensorSharding.build(mesh, dims, unreduced=[a for a in sharding.unreduced if a.name in names])
