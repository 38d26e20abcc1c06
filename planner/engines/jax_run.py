"""Running a plan on JAX/XLA: compiled, run, checked against the reference, its collectives set beside the plan's.

:func:`run_on_jax` gives XLA the plan in one of two ways (``lowering``):

* ``shard_map`` (the default wherever the program can be one): the plan's per-device program as one
  ``jax.shard_map`` whose collectives are the plan's (:mod:`planner.engines.jax_spmd`, the module
  ``export --to jax-module`` writes), with training ``jax.vjp`` of it against the seeded output cotangents;
* ``constraints``: the graph as a ``jax.numpy`` function (:mod:`planner.engines.jax_ops`) on the mesh of the
  plan's JAX export, every input placed with a ``NamedSharding`` of its layout, every operand, result and
  output constrained (``with_sharding_constraint``) to the layout the plan gives it; a pending sum, or a value
  with a size-1 dimension split past its size (a slice's one position), has no ``PartitionSpec`` and is left to
  XLA (:attr:`JaxRunResult.unconstrained` lists them); with training
  ``jax.grad`` of ``L = sum_o <cotangent_o, output_o>`` (the reference's objective, :mod:`graphs.gradients`).

Either way it ``jax.jit`` s the step, runs it on the mesh's devices, and compares outputs (and gradients) with
the numpy reference (:func:`graphs.evaluate.run_reference`, :func:`graphs.gradients.reference_gradients`), both
from the same seeded data rounded to the declared dtypes; XLA computes in the declared dtypes (``f32``), the
reference in float64, so floats agree to the simulator's ``f32`` tolerance (:data:`FLOAT_RTOL`). Then it reads
the compiled program's collectives (:mod:`planner.engines.xla_hlo`) and sets them beside the plan's own (every
step of every redistribution of ``plan.program`` and every manual region's body collective, bytes per device
by the same convention). The run's memory is estimated before JAX starts and checked again once XLA has
compiled (:mod:`planner.engines.run_memory`).

It also times the compiled step (:func:`time_step`): the first run's outputs are the ones checked, and it is
also the first warm-up; then ``repeat`` timed runs of the whole step (forward, or forward and backward), each
until ``block_until_ready``, whose median is the measured step time, set beside the plan's prediction
(:func:`predicted_step_time_s`). The timed runs' results are dropped: timing changes nothing that is checked.

With constraints, a manual region (``graph.manual_regions``) runs as one ``jax.shard_map`` in place of its flattened ops
(:mod:`planner.engines.jax_regions`), as soon as its inputs are computed.

Legal models are read as the simulator reads them (:mod:`planner.simulation.run`): an input, parameter or constant
listed as an output is its own value, as placed; a parameter the program never differentiates has a zero gradient,
and one listed as an output also gets its seeded cotangent; integer and bool outputs take no cotangent. A model
whose reference values are not finite where they are compared is refused (:func:`check_finite`), and so is a run
whose values are not finite where the float64 reference's are: the declared dtype cannot hold them (f16 above 65,504).

JAX is imported here, on the first call, with the host devices the mesh needs (:mod:`planner.engines.jax_env`).
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from graphs.dtypes import is_float
from graphs.evaluate import example_inputs, non_finite, run_reference
from graphs.gradients import check_differentiable, output_cotangents, reference_gradients, requires_grad
from planner.engines.jax_env import ensure_devices
from planner.engines.jax_ops import jax_op, jnp_dtype
from planner.engines.jax_regions import run_region
from planner.engines.jax_spmd import load_module, lowering_problem, uneven_layout
from planner.engines.run_memory import check_compiled_memory, check_run_memory
from planner.simulation.host_memory import release_free_memory
from planner.errors import EngineError, ModelError, quote
from planner.engines.xla_hlo import KINDS, XlaCollective, collectives
from planner.ir.mesh import Mesh as PlanMesh
from planner.partitioning.program import Backprop, Compute, Redistribute
from planner.simulation.collectives import groups
from planner.simulation.run import FLOAT_RTOL, check_finite, compare_values
from planner.notations.jax import from_partition_spec

#: Tolerance of XLA's floats against the float64 reference, by declared dtype (XLA computes in it).
TOLERANCE = {"f32": FLOAT_RTOL["f32"], "f16": 1e-2, "bf16": 1e-2}
#: Timed runs of the compiled step by default (``shardplan run --repeat``); the measured step time is their median.
REPEAT = 5
#: Untimed runs before the timed ones (the checked run is the first): first-call costs stay out of the median.
WARMUP = 1


def predicted_step_time_s(plan) -> float:
    """The step time the plan's report predicts, in seconds: its totals' ``step_time_s``, the length of the
    step's schedule under the plan's ``--overlap`` (:mod:`planner.partitioning.schedule`)."""
    return plan.totals.step_time_s


@dataclass(frozen=True, slots=True)
class PlannedCollective:
    """One collective step of the plan's program (``kind`` in our names: ``AllGather`` ...)."""

    phase: str
    tensor: str
    kind: str
    axes: str
    replica_groups: tuple[tuple[int, ...], ...]
    bytes_per_device: int

    def to_dict(self) -> dict:
        return {"phase": self.phase, "tensor": self.tensor, "kind": self.kind, "axes": self.axes,
                "replica_groups": [list(g) for g in self.replica_groups], "bytes_per_device": self.bytes_per_device}


@dataclass(frozen=True)
class JaxRunResult:
    """What running a plan on XLA gave: the checks, and both sides' collectives."""

    ok: bool
    devices: int
    platform: str                       # the JAX backend that ran it: cpu, gpu, tpu
    training: bool
    outputs: dict                       # output -> {"ok", "max_abs_error", "max_rel_error"}
    gradients: dict                     # param -> the same (training only)
    planned: tuple[PlannedCollective, ...]
    xla: tuple[XlaCollective, ...]
    predicted_comm_bytes_per_device: int
    unconstrained: tuple[str, ...] = ()  # values left to XLA: no PartitionSpec says them (_unconstrained)
    lowering: str = "constraints"       # how the plan was given to XLA: shard_map or constraints
    lowering_note: str = ""             # why auto fell back to constraints
    time_s: float = 0.0
    hlo_text: str = field(default="", repr=False)
    step_times_s: tuple[float, ...] = ()  # each timed run of the compiled step, in order
    predicted_step_time_s: float = 0.0  # the plan's (predicted_step_time_s)

    @property
    def measured_step_time_s(self) -> float | None:
        """The median of the timed runs (None when none ran)."""
        return statistics.median(self.step_times_s) if self.step_times_s else None

    @property
    def prediction_ratio(self) -> float | None:
        """Measured over predicted step time (None when either is missing or the prediction is zero)."""
        measured = self.measured_step_time_s
        if measured is None or not self.predicted_step_time_s:
            return None
        return measured / self.predicted_step_time_s

    @property
    def xla_comm_bytes_per_device(self) -> int:
        return sum(c.bytes_per_device for c in self.xla)

    @property
    def ratio(self) -> float | None:
        """XLA's bytes over the predicted bytes (None when the plan predicts none)."""
        pred = self.predicted_comm_bytes_per_device
        return self.xla_comm_bytes_per_device / pred if pred else None

    def by_kind(self) -> dict[str, dict]:
        """Per collective kind (our names, alphabetical): count and bytes on each side, and their ratio."""
        out: dict[str, dict] = {}
        for kind in sorted(set(KINDS.values())):
            ours = [c for c in self.planned if c.kind == kind]
            theirs = [c for c in self.xla if c.our_kind == kind]
            if not ours and not theirs:
                continue
            pb, xb = sum(c.bytes_per_device for c in ours), sum(c.bytes_per_device for c in theirs)
            out[kind] = {"predicted_count": len(ours), "predicted_bytes_per_device": pb,
                         "xla_count": len(theirs), "xla_bytes_per_device": xb, "ratio": xb / pb if pb else None}
        return out

    def verdict(self) -> list[str]:
        """Sentences on where XLA moved more or less than predicted, and where it chose other collectives."""
        pred, xla = self.predicted_comm_bytes_per_device, self.xla_comm_bytes_per_device
        if xla == pred:
            lines = [f"XLA moved the predicted bytes: {xla:,} B per device"]
        elif pred == 0:
            lines = [f"XLA moved {xla:,} B per device where the plan predicts none"]
        else:
            lines = [f"XLA moved {'more' if xla > pred else 'less'} than predicted: {xla:,} B vs {pred:,} B per "
                     f"device ({xla / pred:.4f}x)"]
        for kind, k in self.by_kind().items():
            if (k["xla_count"], k["xla_bytes_per_device"]) != (k["predicted_count"], k["predicted_bytes_per_device"]):
                lines.append(f"{kind}: XLA {k['xla_count']} ({k['xla_bytes_per_device']:,} B), "
                             f"plan {k['predicted_count']} ({k['predicted_bytes_per_device']:,} B)")
        sliced = [c for c in self.xla if c.kind == "all-reduce" and c.sliced_after]
        if sliced and self.lowering == "constraints":  # in a shard_map, a slice after a psum is the plan's
            lines.append(f"{len(sliced)} of XLA's all-reduces ({sum(c.bytes_per_device for c in sliced):,} B) are "
                         "dynamic-sliced by their reader: reduce-scatters XLA did not form (they move half)")
        ours = {c.kind for c in self.planned}
        theirs = {c.our_kind for c in self.xla}
        if ours != theirs:
            only_xla, only_ours = sorted(theirs - ours), sorted(ours - theirs)
            parts = ([f"XLA uses {', '.join(only_xla)}, the plan none"] if only_xla else []) + \
                    ([f"the plan uses {', '.join(only_ours)}, XLA none"] if only_ours else [])
            lines.append("XLA chose other collectives: " + "; ".join(parts))
        return lines

    def to_dict(self) -> dict:
        out = {
            "ok": self.ok,
            "devices": self.devices,
            "platform": self.platform,
            "outputs": self.outputs,
            "predicted_comm_bytes_per_device": self.predicted_comm_bytes_per_device,
            "xla_comm_bytes_per_device": self.xla_comm_bytes_per_device,
            "ratio": self.ratio,
            "by_kind": self.by_kind(),
            "predicted_collectives": [c.to_dict() for c in self.planned],
            "xla_collectives": [c.to_dict() for c in self.xla],
            "unconstrained": list(self.unconstrained),
            "lowering": self.lowering,
            "lowering_note": self.lowering_note,
            "verdict": self.verdict(),
            "time_s": self.time_s,
            "predicted_step_time_s": self.predicted_step_time_s,
            "measured_step_time_s": self.measured_step_time_s,
            "step_times_s": list(self.step_times_s),
            "prediction_ratio": self.prediction_ratio,
        }
        if self.training:
            out["gradients"] = self.gradients
        return out


def planned_collectives(plan) -> tuple[PlannedCollective, ...]:
    """Every collective of ``plan.program`` in program order: each step of each redistribution (local ``Slice``
    steps move nothing and are left out) and each op's own collective (a Compute's ``collectives``, forward; a
    Backprop's, backward: tensor the op's operand,
    whose cotangent it makes)."""
    out = []
    for r in plan.program.instructions:
        if isinstance(r, (Compute, Backprop)):
            phase = "forward" if isinstance(r, Compute) else "backward"
            out += [_op_collective(r, c, phase) for c in r.collectives]
            continue
        if not isinstance(r, Redistribute):
            continue
        for step in r.plan.steps:
            if step.kind == "Slice":
                continue
            if step.kind == "CollectivePermute":
                members = tuple(tuple(int(d) for d in pair) for pair in step.pairs)
            else:
                members = tuple(tuple(int(d) for d in g) for g in groups(step.before, step.axes))
            out.append(PlannedCollective(r.phase, r.tensor, step.kind, ", ".join(map(str, step.axes)), members,
                                         step.bytes_per_device))
    return tuple(out)


def _op_collective(ins, c, phase: str) -> PlannedCollective:
    """An op's own collective as the plan's: its groups are the devices that differ only in its axes (member
    order its linear index, row-major over the axes); a region's permute's pairs are each group's ``perm`` pairs
    that move (reversed backward, its transpose), as device ids; a halo permute's are its own. Backward, the
    tensor is the operand whose cotangent it makes."""
    members = [tuple(int(d) for d in g) for g in groups(ins.strategy.result, list(c.axes))]
    if c.pairs:  # a slice's halo permute: its own pairs
        members = list(c.pairs)
    elif c.kind == "CollectivePermute":
        perm = [(int(s), int(d)) for s, d in ins.op.attr("perm") if s != d]
        perm = perm if phase == "forward" else [(d, s) for s, d in perm]
        members = [(g[s], g[d]) for g in members for s, d in perm]
    tensor = ins.op.output if phase == "forward" else ins.op.inputs[c.operand]
    axes = ", ".join(map(str, c.axes))
    return PlannedCollective(phase, tensor, c.kind, axes, tuple(members), c.bytes_per_device)


LOWERINGS = ("auto", "shard_map", "constraints")


def run_on_jax(plan, *, devices: int | None = None, seed: int = 0, lowering: str = "auto",
               repeat: int = REPEAT, warmup: int = WARMUP) -> JaxRunResult:
    """Run ``plan`` on XLA through JAX and compare with the numpy reference (see the module docstring).

    ``lowering``: ``shard_map`` (the program, every collective as the plan lists it:
    :mod:`planner.engines.jax_spmd`), ``constraints`` (every value constrained to its layout, the
    collectives left to XLA) or ``auto`` (``shard_map`` where the program can be one, else constraints).
    ``warmup`` (>= 1, the checked run included) and ``repeat`` (>= 1): the untimed and timed runs of the step."""
    if lowering not in LOWERINGS:
        raise EngineError(f"unknown lowering {lowering!r}: use one of {', '.join(LOWERINGS)}")
    if repeat < 1 or warmup < 1:
        raise EngineError(f"the step runs at least once warm and once timed: got warmup {warmup}, repeat {repeat}; "
                          "give both >= 1")
    start = time.perf_counter()
    size = plan.mesh.size
    why = lowering_problem(plan) if lowering != "constraints" else None
    # the constraints lowering leaves a size-1 dimension split past its size to XLA (_constrained), not the rest
    uneven = uneven_layout(plan, positions=lowering == "constraints" or bool(why))
    if uneven and (lowering == "constraints" or why):
        because = "--lowering constraints places every value with a NamedSharding" if lowering == "constraints" \
            else f"the shard_map lowering cannot hold it: {why}"
        raise EngineError(f"{uneven}, and a NamedSharding splits only evenly ({because}): give the tensor a size the "
                          "mesh axes divide, or plan on a mesh whose axes divide it (--mesh)"
                          + (", or run with --lowering shard_map (it pads as the plan does)" if not why else ""))
    if lowering == "shard_map" and why:
        raise EngineError(f"--lowering shard_map: {why}; run with --lowering constraints (or auto)")
    used = "constraints" if lowering == "constraints" or why else "shard_map"
    estimate = check_run_memory(plan, used)  # before JAX starts: refuse what this machine cannot hold
    jax = ensure_devices(size if devices is None else devices, size)
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    graph = plan.graph
    program = plan.program
    if program.training:
        check_differentiable(graph)
    exported = plan.export("jax")
    m = exported["mesh"]
    our_mesh = PlanMesh.from_sizes(plan.mesh.name, list(zip(m["axis_names"], m["shape"])), m["device_ids"])
    mesh = Mesh(np.array(jax.devices()[:size])[m["device_ids"]].reshape(m["shape"]), tuple(m["axis_names"]))

    def sharding(entry: dict, rank: int):
        """NamedSharding of an exported spec; None for a pending sum (no PartitionSpec says it)."""
        if entry.get("unreduced"):
            return None
        return _named(from_partition_spec(entry["partition_spec"], our_mesh, rank), mesh, NamedSharding,
                      PartitionSpec)

    def rank(t: str) -> int:
        return len(graph.tensor(t).shape)

    # data: the reference's, rounded (by numpy, on the host) to the declared dtypes, so both sides start from the
    # same values; the reference's float64 copies are made once XLA's buffers are gone
    def rounded(values: dict) -> dict:
        return {n: np.asarray(v).astype(jnp_dtype(graph.tensor(n).dtype), copy=False) for n, v in values.items()}

    feeds = rounded(example_inputs(graph, seed=seed))
    cots = rounded(output_cotangents(graph, seed=seed)) if program.training else {}

    flags = requires_grad(graph)
    if used == "shard_map":
        module = load_module(plan)
        mesh = module["make_mesh"](jax.devices()[:size])
        placed = module["place"]({n: x for n, x in feeds.items() if n in module["SOURCES"]}, mesh)
        params = {n: x for n, x in placed.items() if graph.tensor(n).kind == "param"}
        others = {n: x for n, x in placed.items() if n not in params}
        step = module["raw_step"](mesh)
        args = (params, others)
        pending = {o: int(np.prod([mesh.shape[a] for a in axes])) for o, axes in module["PENDING"].items()}
        if program.training:  # a pending output's cotangent once per stacked partial
            args += ({n: jax.device_put(module["padded"](n, np.broadcast_to(c, (pending[n], *c.shape)) if n in pending
                                                      else c), NamedSharding(mesh, module["OUTPUTS"][n]))
                      for n, c in cots.items() if n in module["OUTPUTS"]},)
    else:
        hops = _regroup_hops(program, [a.name for a in plan.mesh.axes] == list(m["axis_names"]), mesh,
                             NamedSharding, PartitionSpec)
        step, args = _constrained_step(jax, jnp, graph, program, exported, mesh, feeds, cots, flags, sharding, rank,
                                       NamedSharding, PartitionSpec, hops)
    compiled = (step if used == "shard_map" else jax.jit(step)).lower(*args).compile()
    check_compiled_memory(compiled, plan, estimate.runtime + estimate.host_data + estimate.reference,
                          on_host=jax.devices()[0].platform == "cpu")
    text = compiled.as_text()
    release_free_memory()  # what compiling freed, before the step's buffers are allocated
    outs, grads = compiled(*args)
    # on the host, and every device buffer dropped before the reference runs
    outs, grads = ({n: np.asarray(x) for n, x in d.items()} for d in (outs, grads))
    release_free_memory()
    # the checked values are on the host: the other runs only time the step (the checked run was the first warm-up)
    step_times = time_step(jax, compiled, args, warmup=warmup - 1, repeat=repeat)
    if used == "shard_map":
        outs = {o: module["unpadded"](o, v) for o, v in outs.items()}
        grads = {n: module["unpadded"](n, g) for n, g in grads.items()}
        outs = {o: _add_partials(v) if o in pending else v for o, v in outs.items()}
        # an input, parameter or constant listed as an output: the program returns only what it computes, and the
        # value is the one placed; a parameter's seeded cotangent is its own term of L, added to its gradient
        outs.update({o: feeds[o] for o in graph.outputs if o not in outs})
        if program.training:
            grads.update({n: np.asarray(grads[n], np.float64) + cots[n] if n in grads else cots[n]
                          for n in cots if n not in module["OUTPUTS"] and graph.tensor(n).kind == "param"})
    del compiled, step, args
    placed = params = others = module = None  # noqa: F841 (the shard_map lowering's device arrays)
    jax.clear_caches()  # the compiled step, held by jit's cache, is not needed by the reference
    gc.collect()
    ref_feeds, ref_cots = _reference_data(graph, feeds), _reference_data(graph, cots)
    del feeds, cots

    if program.training:
        reference, ref_grads = reference_gradients(graph, ref_feeds, ref_cots)
    else:
        reference, ref_grads = run_reference(graph, ref_feeds, keep=graph.outputs), {}
    check_finite(graph, ref_feeds, reference, ref_grads, f"seed {seed}, the run's data in float64")
    # a parameter the program never differentiates (no op reads it, or only ops without a gradient): zero
    grads = {n: grads[n] if n in grads else np.zeros(g.shape, g.dtype) for n, g in ref_grads.items()}
    _check_overflow(graph, outs, grads, reference, ref_grads)
    outputs = {o: _check(outs[o], reference[o], graph.tensor(o).dtype) for o in dict.fromkeys(graph.outputs)}
    gradients = {n: _check(grads[n], g, graph.tensor(n).dtype) for n, g in ref_grads.items()}
    return JaxRunResult(
        ok=all(e["ok"] for e in (*outputs.values(), *gradients.values())),
        devices=size,
        platform=jax.devices()[0].platform,
        training=program.training,
        outputs=outputs,
        gradients=gradients,
        planned=planned_collectives(plan),
        xla=collectives(text, size),
        predicted_comm_bytes_per_device=program.comm_bytes_per_device(),
        unconstrained=_unconstrained(exported, graph) if used == "constraints" else (),
        lowering=used,
        lowering_note=why or "",
        time_s=time.perf_counter() - start,
        hlo_text=text,
        step_times_s=step_times,
        predicted_step_time_s=predicted_step_time_s(plan),
    )


def _check_overflow(graph, outs: dict, grads: dict, reference: dict, ref_grads: dict) -> None:
    """ModelError for the first output (else gradient) XLA computed as a nan or an infinity where the float64
    reference's is finite (the reference's all are: :func:`check_finite`): the declared dtype cannot hold it."""
    for what, got, want in (("output", outs, reference), ("gradient of param", grads, ref_grads)):
        for name, value in got.items():
            bad = non_finite(value) if name in want else None
            if bad:
                t = graph.tensor(name)
                producer = graph.producer(name)
                line = t.line if producer is None else graph.op(producer).line
                raise ModelError(
                    f"on XLA, the {what} {quote(name)} ({t.dtype}) holds {bad} where the float64 reference is "
                    f"finite: the model's values overflow {t.dtype}; scale the inputs or parameters down, or declare "
                    "the tensors on that path in a wider dtype (f32)",
                    where=None if line is None else f"{graph.source or '<string>'}:{line}")


def time_step(jax, compiled, args: tuple, *, warmup: int, repeat: int) -> tuple[float, ...]:
    """Seconds of each of ``repeat`` runs of ``compiled(*args)``, after ``warmup`` untimed ones: each timed from
    the call until every result is ready on every device (``jax.block_until_ready``); results dropped at once, and the
    memory each run freed handed back to the system (:func:`~planner.simulation.host_memory.release_free_memory`)."""
    for _ in range(warmup):
        jax.block_until_ready(compiled(*args))
        release_free_memory()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        results = jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - start)
        del results
        release_free_memory()  # untimed: what the run freed, before the next run allocates
    return tuple(times)


def _add_partials(value: np.ndarray) -> np.ndarray:
    """A pending output as the plan delivers it, on the host: its stacked partials added up (floats in float64)."""
    return value.astype(np.float64).sum(axis=0) if value.dtype.kind == "f" else value.sum(axis=0)


def _regroup_hops(program, whole_axes: bool, mesh, NamedSharding, PartitionSpec) -> dict:
    """Per ``(op, operand index)`` whose forward move goes through the reading dot's device groups (the ``xla``
    policy's regroup, :func:`~planner.redistribution.xla_policy.regrouped`): the layouts its steps pass through
    before the operand's, as NamedShardings. Constrained one after another, they have XLA make the plan's moves:
    a dot operand constrained straight to its layout is resharded by XLA's general route, not its dot partitioner's
    grouped one. Left out (XLA's own route then) when the exported mesh splits the plan's axes or a hop holds a
    sub-axis: a PartitionSpec names whole axes of the exported mesh only."""
    if not whole_axes:
        return {}
    through: dict[tuple, list] = {}
    for ins in program.instructions:
        if isinstance(ins, Redistribute) and ins.phase == "forward" and ins.regroup:
            layouts = [step.after for step in ins.steps[:-1]]
            if all(ref.is_full for s in layouts for ref in s.used_axes()):
                for reader in ins.readers:
                    through[(reader, ins.tensor, ins.destination)] = layouts
    hops = {}
    for ins in program.instructions:
        if isinstance(ins, Compute):
            for k, t in enumerate(ins.op.inputs):
                layouts = through.get((ins.op.name, t, ins.strategy.operands[k]))
                if layouts:
                    hops[(ins.op.name, k)] = [_named(s, mesh, NamedSharding, PartitionSpec) for s in layouts]
    return hops


def _named(layout, mesh, NamedSharding, PartitionSpec):
    """``layout`` (whole axes of ``mesh``'s names) as a NamedSharding on the JAX ``mesh``."""
    return NamedSharding(mesh, PartitionSpec(*(
        None if not d.axes else d.axes[0].name if len(d.axes) == 1 else tuple(a.name for a in d.axes)
        for d in layout.dims)))


def _constrained_step(jax, jnp, graph, program, exported, mesh, feeds, cots, flags, sharding, rank, NamedSharding,
                      PartitionSpec, hops=None):
    """The plan as a ``jax.numpy`` function, every value constrained to its planned sharding (pending sums
    left to XLA), a dot operand the plan moves through the dot's device groups first to each layout it passes
    (``hops``, :func:`_regroup_hops`): ``(step, args)``."""
    hops = hops or {}
    constrain = jax.lax.with_sharding_constraint

    def placement(name: str):
        """Where the plan places an input, parameter or constant: its layout; replicated for one no op reads (the
        plan gives it none), which is placed only when it is an output or a trained parameter."""
        entry = exported["tensors"].get(name)
        return NamedSharding(mesh, PartitionSpec()) if entry is None else sharding(entry, rank(name))

    def delivered(o: str):
        """Where an output is delivered: the plan's output layout, or (for an input, parameter or constant listed
        as an output) where it is placed."""
        return sharding(exported["outputs"][o], rank(o)) if o in exported["outputs"] else placement(o)

    def forward(sources: dict) -> dict:
        values = dict(sources)
        done: set[str] = set()
        for op in graph.ops:
            region = graph.region_of_op(op.name)
            if region is not None:  # the whole region, as one shard_map, once its inputs are there
                if region.name not in done and all(t in values for t in region.inputs):
                    values.update(run_region(region, graph, exported, mesh, values, sharding))
                    done.add(region.name)
                continue
            spec = exported["ops"][op.name]
            operands = []
            for k, t in enumerate(op.inputs):
                s = sharding(spec["operands"][k], rank(t))
                value = values[t]
                for hop in hops.get((op.name, k), ()):
                    value = _constrained(constrain, value, hop)
                operands.append(_constrained(constrain, value, s))
            result = jax_op(op.op)(operands, op.attrs_dict)
            s = sharding(spec["result"], rank(op.output))
            values[op.output] = _constrained(constrain, result, s)
        return {o: _constrained(constrain, values[o], delivered(o)) for o in graph.outputs}

    placed = {name: jax.device_put(x, placement(name)) for name, x in feeds.items()
              if name in exported["tensors"] or name in graph.outputs or flags[name]}
    params = {n: x for n, x in placed.items() if graph.tensor(n).kind == "param" and flags[n]}
    others = {n: x for n, x in placed.items() if n not in params}
    if program.training:
        placed_cots = {n: jax.device_put(c, delivered(n)) for n, c in cots.items()}

        def objective(p, rest, c):
            outs = forward({**p, **rest})
            return sum(jnp.sum(c[o] * outs[o]) for o in c), outs

        def step(p, rest, c):
            (_, outs), grads = jax.value_and_grad(objective, has_aux=True)(p, rest, c)
            return outs, {n: _constrained(constrain, g, placement(n)) for n, g in grads.items()}

        args = (params, others, placed_cots)
    else:
        def step(p, rest):
            return forward({**p, **rest}), {}

        args = (params, others)
    return step, args


def _unconstrained(exported: dict, graph) -> tuple[str, ...]:
    """The values the run leaves to XLA: every op operand, result and output the plan has as a pending sum, or with
    a size-1 dimension split past its size (:func:`_constrained`)."""
    mesh = dict(zip(exported["mesh"]["axis_names"], exported["mesh"]["shape"]))

    def left(entry: dict, tensor: str) -> bool:
        if entry.get("unreduced"):
            return True
        return any(n == 1 and math.prod(mesh[a] for a in ([e] if isinstance(e, str) else e or [])
                                        if a in mesh) > 1
                   for n, e in zip(graph.tensor(tensor).shape, entry["partition_spec_entries"]))

    out = []
    for op in graph.ops:
        spec = exported["ops"][op.name]
        out += [f"{op.name} operand {k} ({t})" for k, t in enumerate(op.inputs) if left(spec["operands"][k], t)]
        if left(spec["result"], op.output):
            out.append(f"{op.name} result ({op.output})")
    return tuple(out + [f"output {o}" for o in graph.outputs if exported["outputs"].get(o, {}).get("unreduced")])


def _reference_data(graph, values: dict) -> dict:
    """The reference's copies of the rounded data: floats in float64, the rest as they are."""
    return {n: v.astype(np.float64) if is_float(graph.tensor(n).dtype) else v for n, v in values.items()}


def _constrained(constrain, value, sharding):
    """``value`` constrained to ``sharding``; as it is where there is none (a pending sum) or where it splits a
    dimension unevenly (a size-1 dimension split past its size, which a NamedSharding cannot say: XLA places it,
    as Shardy places a slice of one position)."""
    if sharding is None or not _divides(sharding, value.shape):
        return value
    return constrain(value, sharding)


def _divides(sharding, shape) -> bool:
    """Whether the NamedSharding ``sharding`` splits every dimension of ``shape`` evenly."""
    sizes = dict(sharding.mesh.shape)
    for n, entry in zip(shape, tuple(sharding.spec) + (None,) * (len(shape) - len(sharding.spec))):
        names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        k = 1
        for name in names:
            k *= sizes[name]
        if n % k:
            return False
    return True


def _check(got, want: np.ndarray, dtype: str) -> dict:
    got = np.asarray(got)
    if is_float(dtype):
        got = got.astype(np.float64)
    return compare_values(got, np.asarray(want), dtype, TOLERANCE.get(dtype, 0.0))
