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
- ``send_bytes``: what one device sends on to the next layer (its boundary activations);
- ``forward_peak_bytes[policy]`` / ``backward_peak_bytes[policy]``: the most one microbatch holds on a
  device while the layer's forward (its recomputation and backward) runs, walked instruction by
  instruction as the pipeline simulator holds values, copies, residuals and cotangents (docs/training.md,
  "What a device holds").

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
from planner.partitioning import (Backprop, Compute, Load, Redistribute, completed_key, cotangent_key, lower,
                                  transposed_key)
from planner.redistribution.transpose import cotangent_layout
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
    largest_bytes: int  # the largest value the layer makes on a device
    flops: int  # the layer's forward FLOPs over the whole microbatch (all devices)
    # per policy, the most bytes one microbatch holds on a device while the layer's forward (its backward, with the
    # recomputation before it) runs, beside the stash of the layers before it in its stage (:class:`_Holding`)
    forward_peak_bytes: tuple[tuple[str, int], ...] = ()
    backward_peak_bytes: tuple[tuple[str, int], ...] = ()

    def recompute(self, policy: str) -> float:
        return dict(self.recompute_s)[policy]

    def stash(self, policy: str) -> int:
        return dict(self.stash_bytes)[policy]

    def forward_peak(self, policy: str) -> int:
        """The most bytes held during the layer's forward (beside earlier layers' stash); a cost made without a
        program to walk (a synthetic profile) counts its stash and its largest value."""
        peaks = dict(self.forward_peak_bytes)
        return peaks[policy] if policy in peaks else self.stash(policy) + self.largest_bytes

    def backward_peak(self, policy: str) -> int:
        """The most bytes held during the layer's recomputation and backward (beside earlier layers' stash),
        its own stash included; without a program walked, its stash, twice its largest value and what
        recomputation makes again beside what the policy kept."""
        peaks = dict(self.backward_peak_bytes)
        if policy in peaks:
            return peaks[policy]
        redo = 0 if policy == "none" else self.stash("none") - (self.stash("selective") if policy == "selective" else 0)
        return self.stash(policy) + 2 * self.largest_bytes + redo


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
        if isinstance(ins, (Compute, Backprop)):
            owner = ins.op.name
        elif isinstance(ins, Redistribute):
            owner = ins.readers[0] if ins.readers else ins.producer
        else:
            continue
        if owner in layer_of_op:
            phase = "forward" if isinstance(ins, Compute) else "backward" if isinstance(ins, Backprop) else ins.phase
            costs[layer_of_op[owner]].sequence[phase].append(ins)
    peaks = {}
    for r in kept:
        peaks[r] = {}
        for policy in POLICIES:
            holding = _Holding(reduced, program, kept[r].ops, costs[r].sequence, attention_core(reduced, kept[r]),
                               policy)
            peaks[r][policy] = (holding.forward(), holding.backward())
    out = []
    for i, layer in enumerate(layers):
        r = reps[i]
        cost = _cost(reduced, kept[r], costs[r], layer.name, program)
        out.append(replace(cost, forward_peak_bytes=tuple((p, f) for p, (f, _) in peaks[r].items()),
                           backward_peak_bytes=tuple((p, b) for p, (_, b) in peaks[r].items())))
    return tuple(out)


class _Tally:
    def __init__(self):
        self.forward = self.backward = self.gradient = 0.0
        self.largest = 0
        self.ops: dict[str, Compute] = {}
        self.backprops: list[Backprop] = []
        self.sequence: dict[str, list] = {"forward": [], "backward": [], "gradient": []}  # in program order


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


# -- what one microbatch holds on a device while a layer runs ------------------------------------------------------

class _Holding:
    """What one microbatch's pass through a layer holds on a device, instruction by instruction, as the pipeline
    simulator holds it (docs/training.md, "What a device holds"): the values made and received, the redistributed
    copies, the residuals its backward reads, the cotangents on their way home. Each array is a token with its bytes;
    one array held under several names counts once. :meth:`forward` and :meth:`backward` walk the layer's
    instructions and give the most bytes held after any of them, the stash of the layers before not included."""

    def __init__(self, graph: ComputationGraph, program, layer_ops: tuple[str, ...], instructions: dict, core,
                 policy: str):
        self.graph, self.policy = graph, policy
        self.ops = set(layer_ops)
        self.forward_seq = instructions["forward"]
        self.backward_seq = instructions["backward"]
        self.core = set(core)
        self.loads = {i.tensor: i for i in program.instructions if isinstance(i, Load)}
        self.made_by = {i.op.output: i for i in program.instructions if isinstance(i, Compute)}
        self.saved = {i.op.name: _vjp_reads(i) for i in program.instructions if isinstance(i, Backprop)}
        self.params = {n for n, t in graph.tensors.items() if t.kind == "param"}
        reads = [t for op in layer_ops for t in graph.op(op).inputs]
        made = tuple(graph.op(op).output for op in layer_ops)
        self.receives = tuple(dict.fromkeys(t for t in reads if t not in made and graph.tensor(t).kind == "activation"))
        inputs = {t for t in reads if graph.tensor(t).kind == "input"}
        # what later layers read, held until the layer ends (then theirs), and the model's outputs
        self.sends = tuple(t for t in made if any(r not in self.ops for r, _ in graph.consumers(t)))
        self.keep = set(self.sends) | (set(made) & set(graph.outputs))
        self.kept = set(self.receives) | inputs if policy == "full" else set()
        self.sizes: dict[int, int] = {}
        self.values: dict[str, int] = {}
        self.copies: dict[tuple, int] = {}
        self.residuals: dict[tuple, tuple] = {}  # key -> (tensor, token or None: a parameter held anyway)
        self.layouts: dict[int, object] = {}
        self.dropped: dict[tuple, tuple] = {}
        self.cot_in: dict[tuple, int] = {}
        self.cot_out: dict[str, int] = {}

    def _new(self, shape, layout, tensor: str) -> int:
        token = len(self.sizes)
        self.sizes[token] = _local_bytes(shape, layout, self.graph.tensor(tensor).dtype)
        self.layouts[token] = layout.layout_only()
        return token

    def held(self) -> int:
        tokens = set(self.values.values()) | set(self.copies.values()) | set(self.cot_in.values()) | \
            set(self.cot_out.values()) | {tok for _, tok in self.residuals.values() if tok is not None}
        return sum(self.sizes[t] for t in tokens)

    def _residual_with(self, tensor: str, layout):
        for t, tok in self.residuals.values():
            if t == tensor and tok is not None and self.layouts[tok] == layout:
                return tok
        return None

    def _value(self, tensor: str):
        """The token of ``tensor`` as read: a held value, a parameter (None), or an input loaded now."""
        if tensor in self.values:
            return self.values[tensor]
        if tensor in self.params:
            return None
        load = self.loads[tensor]
        self.values[tensor] = self._new(load.shape, load.layout, tensor)
        return self.values[tensor]

    def _run_forward(self, sequence, keep, keep_copies, recomputing: bool, layer_done=None) -> int:
        last = {}
        for n, ins in enumerate(sequence):
            if isinstance(ins, Compute):
                for k, t in enumerate(ins.op.inputs):
                    last[t] = n
                    last[(t, ins.strategy.operands[k])] = n
            elif isinstance(ins, Redistribute):
                last[ins.tensor] = max(last.get(ins.tensor, -1), n)
        peak = 0
        for n, ins in enumerate(sequence):
            if isinstance(ins, Redistribute):
                self._redistribute(ins, recomputing)
            else:
                self._compute(ins, recomputing)
            peak = max(peak, self.held())
            for t in [t for t in self.values if last.get(t, -1) <= n and t not in keep and t not in self.kept]:
                del self.values[t]
            for key in [key for key in self.copies if last.get(key, -1) <= n and key not in keep_copies]:
                del self.copies[key]
        if layer_done is not None:
            layer_done()
        return peak

    def _redistribute(self, ins: Redistribute, recomputing: bool) -> None:
        real, dest = ins.tensor, ins.plan.destination
        if ins.readers and (real, dest) in self.copies:
            return
        if ins.readers and recomputing:
            held = self._residual_with(real, dest)
            if held is not None:
                self.copies[(real, dest)] = held
                return
        if real not in self.values and real not in self.params and \
                self._residual_with(real, ins.plan.source) is None:
            self._value(real)
        out = self._new(self.graph.tensor(real).shape, dest, real)
        if ins.readers:
            self.copies[(real, dest)] = out
        else:
            self.values[real] = out

    def _compute(self, ins: Compute, recomputing: bool) -> None:
        op, s = ins.op, ins.strategy
        operands = []
        for k, t in enumerate(op.inputs):
            tok = self.copies.get((t, s.operands[k]))
            if tok is None and recomputing and t not in self.values and t not in self.params:
                tok = self._residual_with(t, s.operands[k])
            if tok is None:
                tok = self._value(t)
            operands.append(tok)
        result = self._new(ins.out_shape, s.result, op.output)
        self.values[op.output] = result
        for key in self.saved.get(op.name, ()):
            if key[0] == "result":
                self.residuals[(op.name, "result")] = (op.output, result)
            else:
                self.residuals[(op.name, "operand", key[1])] = (op.inputs[key[1]], operands[key[1]])

    def _drop_recomputed(self) -> None:
        if self.policy == "full":
            self.residuals.clear()
        elif self.policy == "selective":
            core_made = {self.graph.op(op).output for op in self.core}
            made = {key: (t, self.layouts[tok]) for key, (t, tok) in self.residuals.items()
                    if t in core_made and tok is not None}
            self.dropped.update(made)
            for key in made:
                del self.residuals[key]

    def forward(self) -> int:
        """The most bytes held after any instruction of the layer's forward; then what it hands on leaves it."""
        for t in self.receives:
            producer = self.made_by[t]
            self.values[t] = self._new(producer.out_shape, producer.strategy.result, t)
        peak = self._run_forward(self.forward_seq, self.keep, set(), False, self._drop_recomputed)
        for t in list(self.values):
            if t not in self.kept:
                del self.values[t]
        return peak

    def backward(self) -> int:
        """After :meth:`forward`: the most bytes held after any instruction of the layer's recomputation and
        backward, starting from its stash and the cotangents of what it sent."""
        for t in self.sends:
            producer = self.made_by[t]
            self.cot_out[t] = self._new(producer.out_shape, producer.strategy.result.with_unreduced(()), t)
        peak = self.held()
        if self.policy != "none":
            only = self.core if self.policy == "selective" else self.ops
            sequence = [ins for ins in self.forward_seq if _reruns(ins, only)]
            keep = {t for t, _ in self.dropped.values()}
            keep_copies = set(self.dropped.values())
            peak = max(peak, self._run_forward(sequence, keep, keep_copies, True))
            for key, (t, layout) in self.dropped.items():
                tok = self.copies.get((t, layout))
                if tok is None and t in self.values and self.layouts[self.values[t]] == layout:
                    tok = self.values[t]
                self.residuals[key] = (t, tok)
            self.dropped.clear()
            made = {self.graph.op(op).output for op in self.ops}
            for t in [t for t in self.values if t in made]:
                del self.values[t]
            for key in [key for key in self.copies if key in keep_copies]:
                del self.copies[key]
            peak = max(peak, self.held())
        for ins in self.backward_seq:
            if isinstance(ins, Redistribute):
                real = ins.tensor
                if self.graph.producer(real) is None and real in self.params:
                    pass  # a parameter's cotangent, accumulated with the gradients
                elif not ins.readers:
                    if real in self.graph.outputs and self.graph.producer(real) is not None:
                        out = self._new(self.graph.tensor(real).shape, ins.plan.destination, real)
                        self.cot_out[real] = out
                elif completed_key(ins) is not None:  # one reader's cotangent completed, joining the others'
                    self.cot_in.pop(transposed_key(ins), None)
                    self.cot_in[completed_key(ins)] = self._new(self.graph.tensor(real).shape, ins.plan.destination,
                                                                real)
                else:
                    self.cot_in.pop(transposed_key(ins), None)
                    if self.graph.producer(real) is not None:
                        self.cot_out[real] = self._new(self.graph.tensor(real).shape, ins.plan.destination, real)
            else:
                op = ins.op
                self.cot_out.pop(op.output, None)
                for k in range(len(op.inputs)):
                    self.residuals.pop((op.name, "operand", k), None)
                self.residuals.pop((op.name, "result"), None)
                for j, (k, layout) in enumerate(zip(ins.wrt, ins.cotangents)):
                    t = op.inputs[k]
                    if t in self.params:
                        continue
                    self.cot_in[cotangent_key(ins, j)] = self._new(ins.in_shapes[k], layout, t)
            peak = max(peak, self.held())
        return peak


def _vjp_reads(bp: Backprop) -> tuple:
    """The forward values ``bp``'s local VJP reads: operands (as read) and, for some ops, the result."""
    opdef = get_op(bp.op.op)
    reads = opdef.local_vjp_reads if opdef.local_vjp_reads is not None else opdef.vjp_inputs(tuple(bp.wrt),
                                                                                           len(bp.op.inputs))
    keys = [("operand", k) for k in reads]
    if opdef.vjp_reads_result:
        keys.append(("result", bp.op.output))
    return tuple(keys)


def _reruns(ins, only) -> bool:
    """Whether recomputation reruns ``ins``: a Compute of an op in ``only``, or a forward redistribution one reads
    or makes."""
    if isinstance(ins, Compute):
        return ins.op.name in only
    return ins.producer is not None and ins.producer in only or any(r in only for r in ins.readers)
