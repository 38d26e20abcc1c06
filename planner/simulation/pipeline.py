"""A pipelined training step (:mod:`planner.stages`) run on the numpy device simulator.

:func:`simulate_pipeline` executes a :class:`~planner.stages.plan.PipelinePlan` on the full mesh
``pp x dp x stage mesh``:

* **the intra-stage program** is the one the profile priced (:func:`~planner.stages.profile.profile_layers`):
  the model for one microbatch, one copy of each run of alike layers
  (:func:`~planner.stages.profile.stage_program`), planned on the stage mesh by the same search and lowered
  to its SPMD program. Each layer runs its representative's instructions with its own tensors (matched
  op by op): the ``Load``\\ s of what it reads, the forward ``Redistribute``\\ s its ops read through (owned
  by their first reader), its ``Compute``\\ s; backward, the transposed redistributions owned by its ops
  and its ``Backprop``\\ s; the gradient reductions (phase ``gradient``) once a step, on the gradients
  accumulated over the microbatches (a sum commutes with them);
* **the schedule**: every device group ``(d, r)`` (pipeline position ``d``, data-parallel replica ``r``)
  runs the actions of :func:`~planner.stages.schedules.device_orders` in its order, all replicas in
  lockstep; the actions are taken in the order of the plan's timeline (the schedule run with its stage
  times), so a message waits for its receiver as the plan says it does. A
  forward of stage ``k`` sends the values later stages read to stage ``k + 1``'s devices, a backward the
  cotangents of what it received back to stage ``k - 1``'s, each a CollectivePermute from device ``s`` of
  one group's stage mesh to device ``s`` of the other's;
* **recomputation**: ``full`` drops a layer's residuals as soon as its forward ran, keeping each layer's
  inputs, and reruns the layer's forward just before its backward; ``selective`` drops the residuals made
  in each layer's attention core (:func:`~planner.stages.profile.attention_core`) and reruns those ops
  just before the layer's backward from the values kept (the rerun's bytes are phase ``recompute``);
* **the data-parallel step**, per stage and stage-mesh device, over the replicas, on the flat buffer of the
  stage's parameters (each device's blocks, in layer and parameter order): ZeRO 0 accumulates the gradients
  whole over the microbatches, AllReduces them and every replica updates all of it; ZeRO 1 accumulates them
  whole, ReduceScatters them (the buffer padded to a multiple of ``dp``), each replica updates its shard (its
  optimizer state is that shard's), then AllGathers the updated parameters; ZeRO 2 and 3 reduce the gradients
  in buckets during the backward (:func:`~planner.stages.cost.bucketed`): a layer's whole gradient buffer is
  made when its backward of a microbatch begins and, once that backward has run on every replica, reduced
  inside the stage mesh, reduce-scattered over the replicas (the layer's flat buffer padded to a multiple of
  ``dp``), added into each replica's shard of that layer and freed; a replica owns its shard of every layer
  and updates those; ZeRO 2 then AllGathers the updated parameters, and ZeRO 3, which holds only its shards of
  the parameters, gathers the stage's parameters (AllGather) before each forward and each backward and drops
  them after;
* **one optimizer step** (:mod:`planner.simulation.optimizer`, SGD or Adam).

The result is checked against the single-device full-batch reference: the loss (the microbatches' losses
combined as the full batch's is: their mean or their sum), every parameter's gradient (summed over the
microbatches and replicas) and every updated parameter, to :data:`~planner.simulation.run.FLOAT_RTOL`.
Bytes are measured per phase and device group and compared with the plan's prediction: the forward,
backward, gradient and recompute phases with the priced program's redistributions, the sends with the
CollectivePermutes of each stage's boundary activation the cost model prices, the gradient sync and ZeRO's
gathers with its data-parallel collectives (:mod:`planner.stages.cost`). Memory is measured as the bytes
each device holds at the declared dtypes after every instruction and action (parameters or their shards,
gradient accumulators, the optimizer state, gathered parameters, every live activation, copy, residual and
cotangent; a message from a neighbouring stage from the start of the action that reads it: docs/training.md,
"What a device holds") at its worst moment, next to the plan's predicted memory per device.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from graphs.dtypes import dtype_itemsize
from graphs.evaluate import example_inputs, run_reference
from graphs.gradients import output_cotangents, reference_gradients
from planner.collectives import STEP_KINDS
from planner.errors import PlanningError, SimulationMismatch, quote
from planner.ir.mesh import Mesh
from planner.partitioning import (Backprop, Compute, Load, Redistribute, completed_key, cotangent_key, lower,
                                  transposed_key)
from planner.progress import SILENT, Progress
from planner.redistribution.transpose import cotangent_layout
from planner.simulation.collectives import Network
from planner.simulation.distributed import DistributedArray, replica_groups
from planner.simulation.local_ops import LocalContext
from planner.simulation.local_vjp import local_vjp
from planner.simulation.memory import residual_keys
from planner.simulation.optimizer import Optimizer, optimizer_named
from planner.simulation.pipeline_prediction import (MEMORY_PARTS, PIPELINE_PHASES, predicted_bytes,
                                                    predicted_held_activations, predicted_memory_parts)
from planner.simulation.reshard import execute
from planner.simulation.host_memory import keep_large_blocks_mapped
from planner.simulation.run import FLOAT_RTOL, add_cotangents, compare_values, frozen_block, run_compute
from planner.stages.cost import ADAM_BYTES_PER_ELEMENT, bucketed
from planner.stages.layers import layers_of, microbatched, representatives
from planner.stages.profile import attention_core, profile_layers, stage_program
from planner.stages.schedules import device_orders, timeline

__all__ = ["MEMORY_PARTS", "PIPELINE_PHASES", "PipelineSimulation", "simulate_pipeline"]

_INTRA = ("forward", "backward", "recompute", "gradient")  # the phases counted inside a stage mesh


@dataclass
class PipelineSimulation:
    """What :func:`simulate_pipeline` found (module docstring); ``phases[phase]`` has per device group the bytes a
    device of it received, measured and predicted; ``memory`` per device group the peak bytes a device held, measured
    and predicted."""

    ok: bool
    bytes_ok: bool
    memory_ok: bool
    devices: int
    optimizer: str
    dtype: str
    outputs: dict
    gradients: dict
    parameters: dict
    phases: dict
    memory: list
    collectives: dict
    max_abs_error: float
    max_rel_error: float
    time_s: float = 0.0

    def to_dict(self) -> dict:
        return {"ok": self.ok, "bytes_equal": self.bytes_ok, "memory_equal": self.memory_ok, "devices": self.devices,
                "optimizer": self.optimizer, "dtype": self.dtype, "max_abs_error": self.max_abs_error,
                "max_rel_error": self.max_rel_error, "outputs": self.outputs, "gradients": self.gradients,
                "parameters": self.parameters, "phases": self.phases, "memory": self.memory,
                "collectives": self.collectives, "time_s": self.time_s}


# -- the layers' instructions ------------------------------------------------------------------------------------

@dataclass
class _Layer:
    """One layer of the model with the instructions of its representative in the priced program; ``names`` maps the
    reduced model's tensor and op names the instructions use to this layer's own."""

    index: int
    forward: list
    backward: list
    gradient: list
    names: dict
    core: frozenset  # real names of the ops selective recomputation recomputes

    def __post_init__(self) -> None:
        # where the gradient completions of single readers leave their results (what :func:`_local` asks)
        self.joined = frozenset(completed_key(ins) for ins in self.gradient if ins.route)

    def name(self, t: str) -> str:
        return self.names.get(t, t)


def _instantiate(graph, reduced, program) -> tuple[list[_Layer], dict]:
    """Each layer of ``graph`` (one microbatch) with its representative's instructions, and the program's Loads by
    tensor."""
    layers = layers_of(graph)
    reps = representatives(layers)
    owner = {op: i for i, layer in enumerate(layers) if reps[i] == i for op in layer.ops}
    own: dict[int, dict[str, list]] = {i: {"forward": [], "backward": [], "gradient": []} for i in set(reps)}
    loads = {}
    for ins in program.instructions:
        if isinstance(ins, Load):
            loads[ins.tensor] = ins
        elif isinstance(ins, (Compute, Backprop)):
            own[owner[ins.op.name]]["forward" if isinstance(ins, Compute) else "backward"].append(ins)
        else:
            op = ins.readers[0] if ins.readers else ins.producer
            if op is None:
                continue
            own[owner[op]][ins.phase].append(ins)
    out = []
    for i, layer in enumerate(layers):
        r = reps[i]
        names = {}
        for mine, theirs in zip(layer.ops, layers[r].ops):
            real, red = graph.op(mine), reduced.op(theirs)
            names[red.name] = real.name
            names[red.output] = real.output
            for a, b in zip(red.inputs, real.inputs):
                if names.get(a, b) != b:
                    raise PlanningError(f"layer {quote(layer.name)} reads {quote(b)} where its alike layer reads "
                                        f"{quote(a)} for another tensor: the pipeline simulator cannot map it")
                names[a] = b
        core = frozenset(attention_core(graph, layer))
        out.append(_Layer(i, own[r]["forward"], own[r]["backward"], own[r]["gradient"], names, core))
    return out, loads


# -- the device groups --------------------------------------------------------------------------------------------

class _Pass:
    """One microbatch through one stage on one device group: its values, redistributed copies, residuals and
    cotangents, by the layer's own tensor names."""

    def __init__(self):
        self.values: dict[str, DistributedArray] = {}
        self.copies: dict[tuple, DistributedArray] = {}
        self.residuals: dict[tuple, tuple] = {}  # (op, kind, key) -> (tensor, array or None: the parameter)
        self.cot_in: dict[tuple, DistributedArray] = {}
        self.cot_out: dict[str, DistributedArray] = {}
        self.kept: set[str] = set()  # what full recomputation keeps: the values received and the inputs
        self.dropped: dict[tuple, tuple] = {}  # residuals selective recomputation dropped: key -> (tensor, layout)


class _Group:
    """Device group ``(d, r)``: its resident parameters (or ZeRO 3 shards), gradient accumulators, optimizer state
    and the microbatches in flight, and its networks for the intra-stage phases."""

    def __init__(self, d: int, r: int, size: int):
        self.d, self.r, self.size = d, r, size
        self.params: dict[str, DistributedArray] = {}
        self.param_cot: dict[tuple, DistributedArray] = {}
        self.grads: dict[str, DistributedArray] = {}
        self.shards: dict[int, list[np.ndarray]] = {}  # stage -> per stage-mesh device, its flat shard (ZeRO 3)
        # layer -> per stage-mesh device, its shard of the layer's flat gradient accumulator (gradient buckets)
        self.grad_shards: dict[int, list[np.ndarray]] = {}
        self.state_bytes = 0  # optimizer state per device
        self.passes: dict[tuple[int, int], _Pass] = {}
        # messages from the neighbouring stages, by the action that reads them ("F" or "B", stage, microbatch): in
        # flight until that action begins and takes them (docs/training.md, "What a device holds")
        self.inbox: dict[tuple[str, int, int], dict[str, DistributedArray]] = {}
        self.nets = {phase: Network(size) for phase in _INTRA}
        self.counts = {phase: Counter() for phase in _INTRA}
        self.peak = 0
        self.peak_parts = dict.fromkeys(MEMORY_PARTS, 0)
        self.held_peak = 0  # the most activation bytes a device holds between two of its actions


@dataclass
class _Setup:
    graph: object
    layers: list
    loads: dict
    saved: dict
    config: object
    itemsize: dict  # tensor -> declared bytes per element
    float_dtype: object
    timeline: object = None  # the plan's schedule run with its stage times
    stage_times: tuple = ()  # every stage's forward and backward time
    feeds: list = field(default_factory=list)  # per (replica, microbatch): the microbatch's inputs
    cotangents: list = field(default_factory=list)


def simulate_pipeline(graph, plan, cluster, *, search: str = "auto", seed: int = 0, dtype: str = "f64",
                      optimizer: str | Optimizer = "sgd", progress: Progress | None = None) -> PipelineSimulation:
    """Run ``plan`` (a :class:`~planner.stages.plan.PipelinePlan` of ``graph`` on ``cluster``, its stage meshes
    planned by ``search``) on the simulator and check it against the single-device reference (module docstring)."""
    progress = progress or SILENT
    start = time.perf_counter()
    keep_large_blocks_mapped()
    if dtype not in FLOAT_RTOL:
        raise PlanningError(f"--dtype must be one of {', '.join(FLOAT_RTOL)}, got {dtype!r}")
    opt = optimizer if isinstance(optimizer, Optimizer) else optimizer_named(optimizer)
    float_dtype = np.float64 if dtype == "f64" else np.float32
    c = plan.config
    mb_graph = microbatched(graph, c.microbatch)
    stage_mesh = Mesh.from_sizes("stage", dict(c.stage_axes))
    progress.stage(f"planning the stage mesh {stage_mesh.short()} as the profile did")
    staged = stage_program(mb_graph, stage_mesh, cluster, search)
    reduced, decision = staged.reduced, staged.decision
    program = lower(decision.model, decision.choice)
    costs = profile_layers(mb_graph, stage_mesh, cluster, search)
    layers, loads = _instantiate(mb_graph, reduced, program)
    S = c.stages
    stage_of = {}
    for k in range(S):
        for i in c.stage_layers(k):
            stage_of[i] = k
    setup = _Setup(mb_graph, layers, loads, residual_keys(program), c,
                   {t.name: dtype_itemsize(t.dtype) for t in graph.tensors.values()}, float_dtype,
                   plan.evaluation.timeline, tuple(plan.evaluation.forward_s) + tuple(plan.evaluation.backward_s))
    # the data: the full batch, cut into dp replicas of m microbatches each
    feeds = example_inputs(graph, seed=seed, float_dtype=float_dtype)
    cotangents = output_cotangents(graph, seed=seed, float_dtype=float_dtype)
    progress.stage("computing the single-device reference")
    reference, ref_grads = reference_gradients(graph, feeds, cotangents)
    per_replica = c.microbatches * c.microbatch
    for r in range(c.dp):
        for j in range(c.microbatches):
            lo = r * per_replica + j * c.microbatch
            setup.feeds.append({n: (v[lo:lo + c.microbatch] if graph.tensor(n).kind == "input" else v)
                                for n, v in feeds.items()})
    weights = _output_weights(graph, mb_graph, reference, setup.feeds)
    for r in range(c.dp):
        for j in range(c.microbatches):
            lo = r * per_replica + j * c.microbatch
            cots = {}
            for n, v in cotangents.items():
                cots[n] = v * weights[n] if weights.get(n) is not None else v[lo:lo + c.microbatch]
            setup.cotangents.append(cots)
    run = _PipelineRun(setup, stage_mesh, stage_of, opt)
    progress.stage(f"running {S} stages on {c.pp * c.dp * stage_mesh.size} simulated devices")
    with np.errstate(all="ignore"):
        run.run()
    rtol = FLOAT_RTOL[dtype]
    # the loss and the other outputs, combined over the microbatches as the full batch combines them
    outputs, ok, max_abs, max_rel = {}, True, 0.0, 0.0

    def note(entry):
        nonlocal ok, max_abs, max_rel
        ok &= entry["ok"]
        max_abs, max_rel = max(max_abs, entry["max_abs_error"]), max(max_rel, entry["max_rel_error"])
        return entry

    for name in dict.fromkeys(graph.outputs):
        parts = [run.outputs[(r, j)][name] for r in range(c.dp) for j in range(c.microbatches)]
        w = weights.get(name)
        got = sum(p * w for p in parts) if w is not None else np.concatenate(parts)
        outputs[name] = note(compare_values(got, reference[name], graph.tensor(name).dtype, rtol))
    gradients = {n: note(compare_values(run.synced[n], ref_grads[n], graph.tensor(n).dtype, rtol))
                 for n in ref_grads if n in run.synced}
    missing = [n for n in ref_grads if n not in run.synced]
    if missing:
        raise SimulationMismatch(f"the pipeline produced no gradient of {', '.join(missing[:3])}")
    parameters = {}
    for n, want in ref_grads.items():
        expect, _ = opt.step(feeds[n], want, opt.init(feeds[n]))
        parameters[n] = note(compare_values(run.updated[n], expect, graph.tensor(n).dtype, rtol))
    phases, bytes_ok = _phases(run, layers, costs, cluster, c)
    memory, memory_ok = [], True
    for d in range(c.pp):
        busiest = max((g for g in run.groups if g.d == d), key=lambda g: g.peak)
        measured = busiest.peak
        parts = predicted_memory_parts(c, costs, d, plan.evaluation.memory_bytes_per_device[d], opt.name == "adam")
        predicted = sum(parts.values())  # the cost model's memory, less Adam's moments with SGD
        memory.append({"device_group": d, "measured_peak_bytes_per_device": measured,
                       "predicted_bytes_per_device": predicted, "equal": measured == predicted,
                       "measured_parts": busiest.peak_parts,
                       "predicted_parts": parts,
                       "measured_held_activations": max(g.held_peak for g in run.groups if g.d == d),
                       "predicted_held_activations": predicted_held_activations(c, costs, d)})
        memory_ok &= measured == predicted
    counts = Counter()
    for g in run.groups:
        for cnt in g.counts.values():
            counts.update(cnt)
    counts.update(run.counts)
    return PipelineSimulation(ok, bytes_ok, memory_ok, c.pp * c.dp * stage_mesh.size, opt.name, dtype, outputs,
                              gradients, parameters, phases, memory, dict(sorted(counts.items())), max_abs, max_rel,
                              time.perf_counter() - start)


def _output_weights(graph, mb_graph, reference, feeds) -> dict:
    """Per output: ``None`` when it has the batch as dimension 0 (its microbatches are its rows), else the weight of
    each microbatch's value in the full batch's: ``1 / count`` when the full value is their mean, 1 when it is their
    sum (PlanningError when it is neither)."""
    batch = next(t.shape[0] for t in graph.tensors.values() if t.kind == "input" and t.shape)
    out = {}
    parts = None
    for name in dict.fromkeys(graph.outputs):
        shape = graph.tensor(name).shape
        if shape and shape[0] == batch and mb_graph.tensor(name).shape[0] != batch:
            out[name] = None
            continue
        if parts is None:
            parts = [run_reference(mb_graph, f, keep=mb_graph.outputs) for f in feeds]
        total = sum(p[name] for p in parts)
        want = reference[name]
        if np.allclose(total / len(parts), want, rtol=1e-9, atol=1e-12):
            out[name] = 1.0 / len(parts)
        elif np.allclose(total, want, rtol=1e-9, atol=1e-12):
            out[name] = 1.0
        else:
            raise PlanningError(f"output {quote(name)} of model {quote(graph.name)} is neither the mean nor the sum "
                                f"of its microbatches' values (nor has the batch as dimension 0): a pipeline cannot "
                                f"compute it from microbatches")
    return out


def _phases(run, layers, costs, cluster, c) -> tuple[dict, bool]:
    """Per phase and device group, the bytes a device received, measured and predicted (module docstring)."""
    predicted = predicted_bytes(c, [(layer.forward, layer.backward, layer.gradient) for layer in layers], costs,
                                cluster)
    out, ok = {}, True
    for phase in PIPELINE_PHASES:
        rows = []
        for d in range(c.pp):
            if phase in _INTRA:
                measured = max(g.nets[phase].bytes_per_device for g in run.groups if g.d == d)
            else:
                measured = max(int(run.received[phase][run.device(d, r, s)]) for r in range(c.dp)
                               for s in range(run.size))
            rows.append({"device_group": d, "measured_comm_bytes_per_device": measured,
                         "predicted_comm_bytes_per_device": predicted[phase][d]})
            ok &= measured == predicted[phase][d]
        out[phase] = rows
    return out, ok


# -- the run ------------------------------------------------------------------------------------------------------

class _PipelineRun:
    """The step on every device group (module docstring)."""

    def __init__(self, setup: _Setup, stage_mesh: Mesh, stage_of: dict, opt: Optimizer):
        self.s = setup
        self.c = setup.config
        self.size = stage_mesh.size
        self.stage_of = stage_of
        self.opt = opt
        c = self.c
        self.groups = [_Group(d, r, self.size) for d in range(c.pp) for r in range(c.dp)]
        self.received = {p: np.zeros(c.pp * c.dp * self.size, dtype=np.int64)
                         for p in ("sends", "gradient_sync", "zero_gathers")}
        self.counts = Counter()
        self.outputs: dict[tuple, dict] = {}
        self.synced: dict[str, np.ndarray] = {}
        self.updated: dict[str, np.ndarray] = {}
        graph = setup.graph
        self.params_of = {k: [] for k in range(c.stages)}  # stage -> [(layer, param real name, Load)]
        for k in range(c.stages):
            for i in c.stage_layers(k):
                layer = setup.layers[i]
                seen = set()
                for red, load in setup.loads.items():
                    real = layer.name(red)
                    if graph.tensor(real).kind == "param" and real not in seen and self._reads(layer, red):
                        seen.add(real)
                        self.params_of[k].append((layer, real, load))
        self.buckets = bucketed(c.zero, c.dp)  # gradients reduced layer by layer during the backward
        self.params_of_layer = {}  # layer -> [(param real name, Load)]
        for k in range(c.stages):
            for layer, real, load in self.params_of[k]:
                self.params_of_layer.setdefault(layer.index, []).append((real, load))
        self.load_of = {}  # a source tensor (its own name) -> how the program loads it
        for layer in setup.layers:
            for red, load in setup.loads.items():
                self.load_of.setdefault(layer.name(red), load)
        # what each stage reads from earlier stages: sent on by the stage before
        self.receives = {k: [] for k in range(c.stages)}
        model_layers = self.model_layers = layers_of(graph)
        # per layer, what full recomputation keeps: the activations it receives and the inputs it reads
        self.inputs_of = [set(layer.receives) | {t for op in layer.ops for t in graph.op(op).inputs
                                                 if graph.tensor(t).kind == "input"} for layer in model_layers]
        producer_stage = {graph.op(op).output: self.stage_of[i] for i, layer in enumerate(model_layers)
                          for op in layer.ops}
        for k in range(c.stages):
            for i in c.stage_layers(k):
                for op in model_layers[i].ops:
                    for t in graph.op(op).inputs:
                        src = producer_stage.get(t)
                        if src is None or src == k or t in self.receives[k]:
                            continue
                        if src != k - 1:
                            raise PlanningError(f"stage {k} reads {quote(t)} from stage {src}: the pipeline simulator "
                                                f"sends values only to the next stage")
                        self.receives[k].append(t)

    @staticmethod
    def _reads(layer: _Layer, red: str) -> bool:
        return any(red in ins.op.inputs for ins in layer.forward if isinstance(ins, Compute)) or any(
            ins.tensor == red for ins in layer.forward if isinstance(ins, Redistribute))

    def device(self, d: int, r: int, s: int) -> int:
        return (d * self.c.dp + r) * self.size + s

    def group(self, d: int, r: int) -> _Group:
        return self.groups[d * self.c.dp + r]

    # -- the whole step --

    def run(self) -> None:
        c = self.c
        # the plan's own timeline says which device runs what when (so which messages wait for their receiver);
        # a schedule of stages taking no time is ordered as if each took a second
        tl = self.s.timeline
        if tl is None or min(self.s.stage_times, default=0.0) <= 0.0:
            tl = timeline(device_orders(c.schedule, c.pp, c.microbatches, c.virtual_stages), [1.0] * c.stages,
                          [1.0] * c.stages)
        actions = sorted(((start, d, n, a) for d, runs in enumerate(tl.runs) for n, (a, start, _) in enumerate(runs)),
                         key=lambda x: (x[0], x[1], x[2]))
        for g in self.groups:
            self._load_params(g)
        self._account_all()
        for _, d, _, a in actions:
            if c.zero == 3 and c.dp > 1:
                self._gather(d, a.stage)
            if a.kind == "F":
                for r in range(c.dp):
                    self._forward(self.group(d, r), a.stage, a.microbatch)
            else:
                self._backward(d, a.stage, a.microbatch)
            if c.zero == 3 and c.dp > 1:
                for r in range(c.dp):
                    self._drop_gathered(self.group(d, r), a.stage)
            self._account_all(between=True)
        if not self.buckets:  # the gradient reductions inside the stage mesh, once a step
            for g in self.groups:
                for k in range(g.d, c.stages, c.pp):
                    for i in c.stage_layers(k):
                        layer = self.s.layers[i]
                        for ins in layer.gradient:
                            if not _local(ins, layer):
                                self._param_redistribute(g, layer, ins, "gradient")
                self._account(g)
        self._sync()
        self._account_all()

    # -- parameters --

    def _load_params(self, g: _Group) -> None:
        c = self.c
        for k in range(c.stages):
            if k % c.pp != g.d:
                continue
            for layer, real, load in self.params_of[k]:
                g.params[real] = DistributedArray.from_global(self.s.feeds[0][real].astype(self.s.float_dtype),
                                                              load.layout)
                if not self.buckets:  # the gradient accumulators, held whole all step
                    self._zero_gradient(g, layer, real, load)
            if self.buckets:  # a shard of each layer's accumulator
                for i in c.stage_layers(k):
                    if i in self.params_of_layer:
                        n = self._padded(self._elements(self.params_of_layer[i])) // c.dp
                        g.grad_shards[i] = [np.zeros(n, dtype=self.s.float_dtype) for _ in range(self.size)]
            if c.zero == 3 and c.dp > 1:
                flats = self._flat(g, k, lambda name: g.params[name])
                g.shards[k] = [self._scatter(k, f, g.r) for f in flats]
                for _, real, _ in self.params_of[k]:
                    del g.params[real]
        if c.zero >= 1 and c.dp > 1:
            owned = sum(self._padded(n) // c.dp for k in range(c.stages) if k % c.pp == g.d for n in self._pieces(k))
        else:
            owned = sum(math.prod(ld.layout.local_shape(ld.shape)) for k in range(c.stages) if k % c.pp == g.d
                        for _, _, ld in self.params_of[k])
        g.state_bytes = ADAM_BYTES_PER_ELEMENT * owned if self.opt.name == "adam" else 0

    def _zero_gradient(self, g: _Group, layer: _Layer, real: str, load) -> None:
        """A parameter's zero gradient accumulator: in its layout, or where its cotangents are added up until its
        reduction inside the stage mesh."""
        pending = [ins for ins in layer.gradient if layer.name(ins.tensor) == real and not _local(ins, layer)]
        for ins in pending:
            g.param_cot.setdefault(_real_key(transposed_key(ins), real),
                                   _zeros(ins.plan.source, load.shape, self.s.float_dtype))
        if not pending:
            g.grads[real] = _zeros(load.layout, load.shape, self.s.float_dtype)

    @staticmethod
    def _elements(params) -> int:
        """The elements a stage-mesh device holds of ``params`` (``(name, Load)`` pairs)."""
        return sum(math.prod(ld.layout.local_shape(ld.shape)) for _, ld in params)

    def _pieces(self, k: int) -> list[int]:
        """The elements of each piece of stage ``k``'s flat buffer that is sharded over ``dp`` on its own: each
        layer's with gradient buckets, else the whole stage's."""
        if self.buckets:
            return [self._elements(self.params_of_layer[i]) for i in self.c.stage_layers(k)
                    if i in self.params_of_layer]
        return [self._elements([(real, ld) for _, real, ld in self.params_of[k]])]

    def _scatter(self, k: int, flat: np.ndarray, r: int) -> np.ndarray:
        """Replica ``r``'s shards of stage ``k``'s flat buffer: its shard of each piece, in order."""
        out, at = [], 0
        for n in self._pieces(k):
            out.append(self._shard(flat[at:at + n], r))
            at += n
        return np.concatenate(out) if out else flat[:0]

    def _unscatter(self, k: int, parts: list[np.ndarray]) -> np.ndarray:
        """Stage ``k``'s flat buffer from every replica's :meth:`_scatter` (``parts[r]``)."""
        out, at = [], 0
        for n in self._pieces(k):
            size = self._padded(n) // self.c.dp
            out.append(np.concatenate([part[at:at + size] for part in parts])[:n])
            at += size
        return np.concatenate(out) if out else parts[0][:0]

    def _padded(self, n: int) -> int:
        return -(-n // self.c.dp) * self.c.dp

    def _shard(self, flat: np.ndarray, r: int) -> np.ndarray:
        n = self._padded(flat.size) // self.c.dp
        out = np.zeros(n, dtype=flat.dtype)
        piece = flat[r * n:(r + 1) * n]
        out[:piece.size] = piece
        return out

    def _flat(self, g: _Group, k: int, array_of) -> list[np.ndarray]:
        """Per stage-mesh device, the stage's parameters' blocks (as ``array_of`` gives them) flattened in order."""
        return [np.concatenate([array_of(real).blocks[s].reshape(-1) for _, real, _ in self.params_of[k]]
                               or [np.zeros(0, self.s.float_dtype)]) for s in range(self.size)]

    def _unflat(self, k: int, flats: list[np.ndarray]) -> dict[str, DistributedArray]:
        out = {}
        at = 0
        for _, real, load in self.params_of[k]:
            local = tuple(load.layout.local_shape(load.shape))
            n = math.prod(local)
            out[real] = DistributedArray(load.layout, tuple(load.shape),
                                         [frozen_block(f[at:at + n].reshape(local)) for f in flats])
            at += n
        return out

    def _gather(self, d: int, k: int) -> None:
        """ZeRO 3: every replica of group ``d`` gathers stage ``k``'s parameters from the replicas' shards."""
        c = self.c
        net = _Net(self.received["zero_gathers"], self._itemsize_of_stage(k))
        gathered = [[None] * self.size for _ in range(c.dp)]
        for s in range(self.size):
            members = [self.device(d, r, s) for r in range(c.dp)]
            items = [((r,), self.group(d, r).shards[k][s]) for r in range(c.dp)]
            got = STEP_KINDS["AllGather"].kernel(net, members, items)
            for r in range(c.dp):
                gathered[r][s] = self._unscatter(k, [a for _, a in got[r]])
        self.counts["AllGather"] += 1
        for r in range(c.dp):
            self.group(d, r).params.update(self._unflat(k, gathered[r]))

    def _drop_gathered(self, g: _Group, k: int) -> None:
        for _, real, _ in self.params_of[k]:
            g.params.pop(real, None)

    def _itemsize_of_stage(self, k: int) -> int:
        sizes = {self.s.itemsize[real] for _, real, _ in self.params_of[k]}
        if len(sizes) > 1:
            raise PlanningError(f"stage {k}'s parameters mix dtypes: the simulator's flat buffers take one")
        return sizes.pop() if sizes else 4

    # -- actions --

    def _pass(self, g: _Group, k: int, j: int) -> _Pass:
        return g.passes.setdefault((k, j), _Pass())

    def _feeds(self, g: _Group, j: int) -> dict:
        return self.s.feeds[g.r * self.c.microbatches + j]

    def _forward(self, g: _Group, k: int, j: int) -> None:
        """Stage ``k``'s forward of microbatch ``j`` on ``g``; then the stage's sends, and what recomputation drops."""
        P = self._pass(g, k, j)
        P.values.update(g.inbox.pop(("F", k, j), {}))
        c = self.c
        sequence = [(layer, ins) for i in c.stage_layers(k) for layer in (self.s.layers[i],) for ins in layer.forward]
        sends = set(self.receives.get(k + 1, ())) if k + 1 < c.stages else set()
        if c.recompute == "full":  # every layer's inputs are kept
            P.kept = {t for i in c.stage_layers(k) for t in self.inputs_of[i]}
        self._run_forward(g, P, sequence, "forward", j, sends | set(self.s.graph.outputs), set(), False,
                          lambda i: self._drop_recomputed(P, i))
        if any(o in P.values for o in self.s.graph.outputs):
            out = self.outputs.setdefault((g.r, j), {})
            for o in self.s.graph.outputs:
                if o in P.values:
                    out[o] = P.values.pop(o).to_global()
        if k + 1 < c.stages:
            nxt = self.group((k + 1) % c.pp, g.r)
            box = nxt.inbox.setdefault(("F", k + 1, j), {})
            for t in self.receives[k + 1]:
                box[t] = self._send(P.values.pop(t), g, nxt, self.s.itemsize[t])
        self._account(g)

    def _drop_recomputed(self, P: _Pass, i: int) -> None:
        """Once layer ``i``'s forward ran: the residuals its recomputation makes again are not kept (``full``: all of
        them, the layer's inputs being kept; ``selective``: those its attention core made)."""
        if self.c.recompute == "none":
            return
        ops = set(self.model_layers[i].ops)
        if self.c.recompute == "full":
            made = {key: (t, None) for key, (t, arr) in P.residuals.items() if key[0] in ops}
        else:
            core_made = {self.s.graph.op(op).output for op in self.s.layers[i].core}
            made = {key: (t, arr.sharding.layout_only()) for key, (t, arr) in P.residuals.items()
                    if key[0] in ops and t in core_made and arr is not None}
            P.dropped.update(made)
        for key in made:
            del P.residuals[key]

    def _recompute(self, g: _Group, k: int, j: int, i: int) -> None:
        """Before layer ``i``'s backward: rerun its forward from its kept inputs (``full``) or its attention core from
        the residuals kept (``selective``), making the residuals its backward reads again."""
        P = self._pass(g, k, j)
        layer = self.s.layers[i]
        only = _ALL if self.c.recompute == "full" else layer.core
        sequence = [(layer, ins) for ins in layer.forward if _reruns(layer, ins, only)]
        ops = set(self.model_layers[i].ops)
        dropped = {key: v for key, v in P.dropped.items() if key[0] in ops}
        keep = {t for t, _ in dropped.values()}
        keep_copies = set(dropped.values())
        self._run_forward(g, P, sequence, "recompute", j, keep, keep_copies, True)
        for key, (t, layout) in dropped.items():
            arr = P.copies.get((t, layout)) or (P.values.get(t) if t in P.values and
                                                P.values[t].sharding.layout_only() == layout else None)
            if arr is None:
                raise SimulationMismatch(f"recomputation did not make {t!r} laid out as {layout} again")
            P.residuals[key] = (t, arr)
            del P.dropped[key]
        # what the rerun made beyond the residuals (the layer's outputs) is not needed again
        made = {self.s.graph.op(op).output for op in ops}
        for t in [t for t in P.values if t in made]:
            del P.values[t]
        for key in [key for key in P.copies if key in keep_copies]:
            del P.copies[key]
        self._account(g)

    def _run_forward(self, g, P, sequence, phase, j, keep, keep_copies, recomputing, layer_done=None) -> None:
        """Run ``sequence`` (``(layer, forward instruction)`` pairs), freeing each value and copy after its last reader
        unless it is to be kept; ``layer_done(i)`` once layer ``i``'s last instruction ran."""
        last = _last_uses(sequence)
        for n, (layer, ins) in enumerate(sequence):
            if layer_done is not None and n and sequence[n - 1][0].index != layer.index:
                layer_done(sequence[n - 1][0].index)
            if isinstance(ins, Redistribute):
                self._forward_redistribute(g, P, layer, ins, phase, j)
            else:
                self._compute(g, P, layer, ins, j, recomputing=recomputing)
            self._account(g)
            for t in [t for t in P.values if last.get(t, -1) <= n and t not in keep and t not in P.kept]:
                del P.values[t]
            for key in [key for key in P.copies if last.get(key, -1) <= n and key not in keep_copies]:
                del P.copies[key]
        if layer_done is not None and sequence:
            layer_done(sequence[-1][0].index)

    def _send(self, arr: DistributedArray, src: _Group, dst: _Group, itemsize: int) -> DistributedArray:
        """CollectivePermute of ``arr`` from ``src``'s stage-mesh devices to ``dst``'s (device ``s`` to device ``s``)."""
        net = _Net(self.received["sends"], itemsize)
        got = STEP_KINDS["CollectivePermute"].kernel(
            net, [(self.device(src.d, src.r, s), self.device(dst.d, dst.r, s), arr.blocks[s]) for s in range(self.size)])
        self.counts["CollectivePermute"] += 1
        return DistributedArray(arr.sharding, arr.shape,
                                [got[self.device(dst.d, dst.r, s)] for s in range(self.size)], arr.varying)

    def _value(self, g: _Group, P: _Pass, real: str, j: int, layout=None) -> DistributedArray:
        if real in P.values:
            return P.values[real]
        if real in g.params:
            return g.params[real]
        load = self._load_of(real)
        if load is None:
            raise SimulationMismatch(f"the pipeline has no value of {real!r} where it is read")
        arr = DistributedArray.from_global(self._feeds(g, j)[real], load.layout)
        P.values[real] = arr
        return arr

    def _load_of(self, real: str):
        return self.load_of.get(real)

    def _forward_redistribute(self, g, P, layer, ins, phase, j) -> None:
        real = layer.name(ins.tensor)
        if ins.readers and (real, ins.plan.destination) in P.copies:
            return
        if ins.readers and phase == "recompute":
            held = _residual_with(P, real, ins.plan.destination)
            if held is not None:
                P.copies[(real, ins.plan.destination)] = held
                return
        arr = None if real in P.values or real in g.params else _residual_with(P, real, ins.plan.source)
        if arr is None:
            arr = self._value(g, P, real, j)
        out, _ = execute(ins.plan, arr, g.nets[phase])
        g.counts[phase].update(s.kind for s in ins.plan.steps if s.kind != "Slice")
        if not ins.readers:
            P.values[real] = out
        else:
            P.copies[(real, ins.plan.destination)] = out

    def _compute(self, g, P, layer, ins: Compute, j: int, recomputing: bool) -> None:
        op, s = ins.op, ins.strategy
        operands = []
        for k, t in enumerate(op.inputs):
            real = layer.name(t)
            arr = P.copies.get((real, s.operands[k]))
            if arr is None and recomputing and real not in P.values and real not in g.params:
                arr = _residual_with(P, real, s.operands[k])
            if arr is None:
                arr = self._value(g, P, real, j)
            if arr.sharding.layout_only() != s.operands[k]:
                raise SimulationMismatch(f"op {layer.name(op.name)!r} reads {real!r} laid out as {arr.sharding} but "
                                         f"its strategy needs {s.operands[k]}")
            operands.append(arr)
        result = run_compute(ins, operands)
        out = layer.name(op.output)
        P.values[out] = result
        real_op = layer.name(op.name)
        for key in self.s.saved.get(op.name, ()):
            if key[0] == "result":
                P.residuals[(real_op, "result")] = (out, result)
            else:
                t = layer.name(op.inputs[key[1]])
                arr = operands[key[1]]
                # a parameter read as held is read again from the group when the backward runs (ZeRO 3 gathers it)
                P.residuals[(real_op, "operand", key[1])] = (t, None if g.params.get(t) is arr else arr)

    def _backward(self, d: int, k: int, j: int) -> None:
        """Stage ``k``'s backward of microbatch ``j`` on every replica of device group ``d``, layer by layer, each
        layer's gradient bucket reduced over the replicas once they all ran it; then the sends back."""
        c = self.c
        groups = [self.group(d, r) for r in range(c.dp)]
        passes = []
        for g in groups:
            P = self._pass(g, k, j)
            P.cot_out.update(g.inbox.pop(("B", k, j), {}))
            passes.append(P)
        for i in reversed(c.stage_layers(k)):
            for g, P in zip(groups, passes):
                self._backward_layer(g, P, k, j, i)
            if self.buckets and i in self.params_of_layer:
                self._reduce_bucket(groups, i)
        for g, P in zip(groups, passes):
            if k > 0:
                prev = self.group((k - 1) % c.pp, g.r)
                box = prev.inbox.setdefault(("B", k - 1, j), {})
                for t in self.receives[k]:
                    cot = P.cot_out.pop(t, None)
                    if cot is None:
                        raise SimulationMismatch(f"stage {k}'s backward left no cotangent of {t!r} to send back")
                    box[t] = self._send(cot, g, prev, self.s.itemsize[t])
            del g.passes[(k, j)]
            self._account(g)

    def _backward_layer(self, g: _Group, P: _Pass, k: int, j: int, i: int) -> None:
        """Layer ``i``'s recomputation and backward of microbatch ``j`` on ``g`` (with gradient buckets, into its
        bucket, made first)."""
        c = self.c
        layer = self.s.layers[i]
        if self.buckets and i in self.params_of_layer:
            for real, load in self.params_of_layer[i]:
                self._zero_gradient(g, layer, real, load)
            self._account(g)
        if c.recompute != "none":
            self._recompute(g, k, j, i)
        for ins in layer.backward:
            if isinstance(ins, Redistribute):
                if self.s.graph.producer(layer.name(ins.tensor)) is None and \
                        self.s.graph.tensor(layer.name(ins.tensor)).kind == "param":
                    self._param_redistribute(g, layer, ins, "backward")
                else:
                    self._backward_redistribute(g, P, layer, ins, j)
            else:
                self._backprop(g, P, layer, ins)
                for grad in layer.gradient:  # slicing the parameters' cotangents home as they come
                    if _local(grad, layer):
                        self._param_redistribute(g, layer, grad, "gradient")
            self._account(g)
        if c.recompute == "full":
            earlier = {t for e in range(c.bounds[k], i) for t in self.inputs_of[e]}
            for t in [t for t in P.values if t in self.inputs_of[i] and t not in earlier]:
                del P.values[t]
                P.kept.discard(t)

    def _reduce_bucket(self, groups: list[_Group], i: int) -> None:
        """Layer ``i``'s gradient bucket on every replica of a device group: reduced inside the stage mesh,
        reduce-scattered over the replicas, added into each one's shard of the layer's accumulator, then freed."""
        layer = self.s.layers[i]
        names = [real for real, _ in self.params_of_layer[i]]
        for g in groups:
            for ins in layer.gradient:
                if not _local(ins, layer):
                    self._param_redistribute(g, layer, ins, "gradient")
            self._account(g)
        dp = self.c.dp
        net = _Net(self.received["gradient_sync"], self._itemsize_of_stage(self.stage_of[i]))
        for s in range(self.size):
            members = [self.device(g.d, g.r, s) for g in groups]
            flats = [np.concatenate([self._grad(g, name).blocks[s].reshape(-1) for name in names]) for g in groups]
            owned = STEP_KINDS["ReduceScatter"].kernel(net, members, [[self._shard(f, q) for q in range(dp)]
                                                                      for f in flats])
            for g, mine in zip(groups, owned):
                g.grad_shards[i][s] = g.grad_shards[i][s] + mine
        self.counts["ReduceScatter"] += 1
        for g in groups:
            for name in names:
                g.grads.pop(name, None)
            self._account(g)

    def _backward_redistribute(self, g, P, layer, ins, j) -> None:
        real = layer.name(ins.tensor)
        if not ins.readers:
            cots = self.s.cotangents[g.r * self.c.microbatches + j]
            if real not in cots:
                return
            arr = DistributedArray.from_global(np.asarray(cots[real], dtype=self.s.float_dtype), ins.plan.source)
        else:
            arr = P.cot_in.pop(_real_key(transposed_key(ins), real), None)
            if arr is None:
                arr = _zeros(ins.plan.source, self.s.graph.tensor(real).shape, self.s.float_dtype)
        out, _ = execute(ins.plan, arr, g.nets["backward"])
        g.counts["backward"].update(s.kind for s in ins.plan.steps if s.kind != "Slice")
        if completed_key(ins) is not None:  # one reader's cotangent completed: added to the others' of its layout
            key = _real_key(completed_key(ins), real)
            P.cot_in[key] = add_cotangents(P.cot_in.get(key), out)
            return
        if self.s.graph.producer(real) is None:
            return  # an input's cotangent: nothing to send it to
        P.cot_out[real] = add_cotangents(P.cot_out.get(real), out)

    def _param_redistribute(self, g, layer, ins, phase) -> None:
        """A transpose bringing a parameter's cotangents home: backward ones every microbatch, gradient reductions
        once a step on the accumulated cotangents, except those that only slice (no bytes), which run every
        microbatch so that the gradient accumulates in the parameter's own layout."""
        real = layer.name(ins.tensor)
        arr = g.param_cot.pop(_real_key(transposed_key(ins), real), None)
        if arr is None:
            return
        out, _ = execute(ins.plan, arr, g.nets[phase])
        g.counts[phase].update(s.kind for s in ins.plan.steps if s.kind != "Slice")
        if completed_key(ins) is not None:  # one reader's cotangent completed: added to the others' of its layout
            key = _real_key(completed_key(ins), real)
            g.param_cot[key] = add_cotangents(g.param_cot.get(key), out)
            return
        g.grads[real] = add_cotangents(g.grads.get(real), out)

    def _backprop(self, g, P, layer, ins: Backprop) -> None:
        op, s = ins.op, ins.strategy
        real_op, out = layer.name(op.name), layer.name(op.output)
        cot = P.cot_out.pop(out, None)
        operands = []
        for k in range(len(op.inputs)):
            entry = P.residuals.pop((real_op, "operand", k), None)
            if entry is None:
                operands.append(None)
            else:
                operands.append(g.params[entry[0]] if entry[1] is None else entry[1])
        result = P.residuals.pop((real_op, "result"), (None, None))[1]
        if cot is None:
            cot = _zeros(cotangent_layout(s.result), ins.out_shape, self.s.float_dtype)
        n = s.result.mesh.size
        per_device: list = [None] * n
        layouts = tuple(s.operands) + (s.result, cot.sharding) + tuple(ins.cotangents)
        shapes = tuple(ins.in_shapes) + (tuple(ins.out_shape),) * 2 + tuple(ins.in_shapes[k] for k in ins.wrt)
        for members in replica_groups(layouts, shapes):
            d = members[0]
            ctx = LocalContext.for_device(s.operands, ins.in_shapes, s.result, ins.out_shape, d)
            grads = [frozen_block(x) for x in local_vjp(op, ins.rule, [None if a is None else a.blocks[d] for a in operands],
                                                   None if result is None else result.blocks[d], cot.blocks[d], ctx,
                                                   ins.wrt, donate=False)]
            for e in members:
                per_device[e] = grads
        for jj, (k, layout) in enumerate(zip(ins.wrt, ins.cotangents)):
            t = layer.name(op.inputs[k])
            arr = DistributedArray(layout, tuple(ins.in_shapes[k]), [per_device[d][jj] for d in range(n)])
            key = _real_key(cotangent_key(ins, jj), t)
            store = g.param_cot if self.s.graph.tensor(t).kind == "param" else P.cot_in
            store[key] = add_cotangents(store.get(key), arr)

    # -- the data-parallel step --

    def _sync(self) -> None:
        c = self.c
        dp = c.dp
        for k in range(c.stages):
            d = k % c.pp
            if not self.params_of[k]:
                continue
            net = _Net(self.received["gradient_sync"], self._itemsize_of_stage(k))
            if self.buckets:  # reduce-scattered during the backward: each replica's shards of the stage's layers
                shards = [[np.concatenate([self.group(d, r).grad_shards[i][s] for i in c.stage_layers(k)
                                           if i in self.params_of_layer]) for s in range(self.size)]
                          for r in range(dp)]
            else:
                grads = [self._flat(self.group(d, r), k, lambda name, r=r: self._grad(self.group(d, r), name))
                         for r in range(dp)]
            if c.zero == 3 and dp > 1:
                params = [self.group(d, r).shards[k] for r in range(dp)]
            else:
                params = [self._flat(self.group(d, r), k, lambda name, r=r: self.group(d, r).params[name])
                          for r in range(dp)]
            summed_full = [None] * self.size
            new_params = [[None] * self.size for _ in range(dp)]
            for s in range(self.size):
                members = [self.device(d, r, s) for r in range(dp)]
                if dp == 1 or c.zero == 0:
                    summed = STEP_KINDS["AllReduce"].kernel(net, members, [grads[r][s] for r in range(dp)]) \
                        if dp > 1 else [grads[0][s]]
                    summed_full[s] = summed[0]
                    for r in range(dp):
                        new_params[r][s] = self.opt.step(params[r][s], summed[r], self.opt.init(params[r][s]))[0]
                    continue
                if self.buckets:
                    owned = [shards[r][s] for r in range(dp)]
                else:
                    chunks = [[self._scatter(k, grads[r][s], q) for q in range(dp)] for r in range(dp)]
                    owned = STEP_KINDS["ReduceScatter"].kernel(net, members, chunks)
                summed_full[s] = self._unscatter(k, owned)
                updated = []
                for r in range(dp):
                    mine = params[r][s] if c.zero == 3 else self._scatter(k, params[r][s], r)
                    updated.append(self.opt.step(mine, owned[r], self.opt.init(mine))[0])
                if c.zero == 3:
                    for r in range(dp):
                        new_params[r][s] = updated[r]
                    continue
                got = STEP_KINDS["AllGather"].kernel(net, members, [((r,), updated[r]) for r in range(dp)])
                for r in range(dp):
                    new_params[r][s] = self._unscatter(k, [a for _, a in got[r]])
            if dp > 1:
                self.counts.update({"AllReduce": 1} if c.zero == 0 else {"ReduceScatter": 1, "AllGather": 1}
                                   if c.zero == 1 else {"AllGather": 1} if c.zero == 2 else {})
            for name, arr in self._unflat(k, summed_full).items():
                self.synced[name] = arr.to_global()
            if c.zero == 3 and dp > 1:
                whole = [self._unscatter(k, [new_params[r][s] for r in range(dp)]) for s in range(self.size)]
                for name, arr in self._unflat(k, whole).items():
                    self.updated[name] = arr.to_global()
                for r in range(dp):
                    self.group(d, r).shards[k] = new_params[r]
            else:
                for r in range(dp):
                    arrays = self._unflat(k, new_params[r])
                    for name, arr in arrays.items():
                        value = arr.to_global()
                        if r == 0:
                            self.updated[name] = value
                        elif not np.array_equal(value, self.updated[name]):
                            raise SimulationMismatch(f"replicas 0 and {r} hold different updates of {name!r}")
                    self.group(d, r).params.update(arrays)

    def _grad(self, g: _Group, name: str) -> DistributedArray:
        arr = g.grads.get(name)
        if arr is None:  # never differentiated: a zero gradient
            load = next(ld for k in self.params_of for _, real, ld in self.params_of[k] if real == name)
            arr = _zeros(load.layout, load.shape, self.s.float_dtype)
        return arr

    # -- memory --

    def _account_all(self, between: bool = False) -> None:
        for g in self.groups:
            self._account(g, between)

    def _account(self, g: _Group, between: bool = False) -> None:
        """The bytes a device of ``g`` holds now, at the declared dtypes, by part (:data:`MEMORY_PARTS`); the group's
        peak and its parts then."""
        seen: dict[int, tuple] = {}

        def add(arr, tensor, part):
            if arr is not None and id(arr) not in seen:
                seen[id(arr)] = (arr, self.s.itemsize[tensor], part)

        for t, a in g.params.items():
            add(a, t, "parameters")
        for (t, *_), a in g.param_cot.items():
            add(a, t, "gradients")
        for t, a in g.grads.items():
            add(a, t, "gradients")
        for P in g.passes.values():
            for t, a in P.values.items():
                add(a, t, "activations")
            for (t, _), a in P.copies.items():
                add(a, t, "activations")
            for t, a in P.residuals.values():
                add(a, t, "activations")
            for (t, *_), a in P.cot_in.items():
                add(a, t, "activations")
            for t, a in P.cot_out.items():
                add(a, t, "activations")
        per_device = [dict.fromkeys(MEMORY_PARTS, 0) for _ in range(self.size)]
        for arr, itemsize, part in seen.values():
            for s, b in enumerate(arr.blocks):
                per_device[s][part] += b.size * itemsize
        for k, shards in g.shards.items():
            for s, b in enumerate(shards):
                per_device[s]["parameters"] += b.size * self._itemsize_of_stage(k)
        for i, shards in g.grad_shards.items():
            for s, b in enumerate(shards):
                per_device[s]["gradients"] += b.size * self._itemsize_of_stage(self.stage_of[i])
        for parts in per_device:
            parts["optimizer_state"] = g.state_bytes
            if between:
                g.held_peak = max(g.held_peak, parts["activations"])
            total = sum(parts.values())
            if total > g.peak:
                g.peak, g.peak_parts = total, dict(parts)


class _Net:
    """A :class:`Network`-like counter of what each global device receives (one array per phase)."""

    def __init__(self, received: np.ndarray, itemsize: int):
        self.received, self.itemsize = received, itemsize

    def begin_step(self) -> None:
        pass

    def send(self, src: int, dst: int, data: np.ndarray) -> np.ndarray:
        if src != dst:
            self.received[dst] += data.size * self.itemsize
        out = data.view()
        out.flags.writeable = False
        return out


class _AllOps:
    def __contains__(self, item) -> bool:
        return True


_ALL = _AllOps()


def _local(ins: Redistribute, layer: _Layer) -> bool:
    """Whether a gradient redistribution moves no bytes (its steps only slice) and takes on no reader's completed
    cotangent (a completion runs once a step, so what it joins waits for it)."""
    return all(step.kind == "Slice" for step in ins.plan.steps) and transposed_key(ins) not in layer.joined


def _reruns(layer: _Layer, ins, only) -> bool:
    """Whether recomputation reruns ``ins``: a Compute of an op in ``only``, or a forward redistribution read by one."""
    if isinstance(ins, Compute):
        return layer.name(ins.op.name) in only
    return ins.producer is not None and layer.name(ins.producer) in only or \
        bool(ins.readers) and any(layer.name(r) in only for r in ins.readers)


def _last_uses(sequence) -> dict:
    """Per tensor (real name) and per copy ``(tensor, layout)``: the index of the last instruction of ``sequence``
    that reads it."""
    last = {}
    for n, (layer, ins) in enumerate(sequence):
        if isinstance(ins, Compute):
            for k, t in enumerate(ins.op.inputs):
                last[layer.name(t)] = n
                last[(layer.name(t), ins.strategy.operands[k])] = n
        elif isinstance(ins, Redistribute):
            last[layer.name(ins.tensor)] = max(last.get(layer.name(ins.tensor), -1), n)
    return last


def _residual_with(P: _Pass, tensor: str, layout):
    for t, arr in P.residuals.values():
        if t == tensor and arr is not None and arr.sharding.layout_only() == layout:
            return arr
    return None


def _zeros(layout, shape, float_dtype) -> DistributedArray:
    return DistributedArray.from_global(np.zeros(tuple(shape), dtype=float_dtype), layout)


def _real_key(key: tuple, real: str) -> tuple:
    """A cotangent's key (:func:`~planner.partitioning.cotangent_key`) with its tensor named as in this layer."""
    return (real, *key[1:])
