"""Simulating a whole plan: the SPMD program on N numpy devices vs one device.

:func:`simulate` draws seeded data for every input, parameter and constant, runs
the single-device numpy reference, then runs the lowered program
(``plan.program``, the same program the plan's numbers are read from) on the
simulator: every ``Load`` cuts blocks from the data, every forward
``Redistribute`` executes its collectives for real (counting the bytes each
device receives) and keeps the new copy for every op that reads that layout,
every ``Compute`` runs the op's local instance on each device. The outputs are
assembled (pending sums added) and compared with the reference.

A training plan's program continues with the forward program transposed (seed
004, :mod:`planner.partitioning.program`): each graph output gets a seeded
cotangent (:func:`graphs.gradients.output_cotangents`), every backward
``Redistribute`` (a transposed redistribution) executes for real, every
``Backprop`` runs the op's local VJP on each device
(:mod:`planner.simulation.local_vjp`), and every parameter's gradient is assembled
and compared with the single-device reference gradient
(:func:`graphs.gradients.reference_gradients`). Bytes are measured per phase
(forward, backward, gradient) and must equal the program's.

Legal models the program does not spell out are read as the reference reads them:

* a graph output that is an input, parameter or constant is its own value, as loaded;
* a cotangent that nothing sends (the result of an op that reaches no output, or only
  through ops without a gradient such as a cast to an integer) is zero: the program's
  backward still runs on it, so its bytes are measured as predicted;
* a parameter the program never differentiates (no op reads it, or only ops without a
  gradient) has a zero gradient, as in the reference; a parameter listed as an output
  also gets its seeded cotangent, since ``L`` holds ``<cotangent, parameter>``;
* values that are not finite where they are compared (a nan constant, a division by
  zero) are the model's, not a disagreement: :func:`check_finite` refuses them, naming
  where they first appear, before the devices run. Intermediate infinities that vanish
  (a ``-inf`` attention mask) are fine; numpy's warnings about them are silenced.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from graphs.dtypes import is_float
from graphs.evaluate import example_inputs, non_finite, non_finite_origin, run_reference
from graphs.gradients import check_differentiable, output_cotangents, reference_gradients
from planner.errors import ModelError, PlanningError, SimulationMismatch, quote
from planner.limits import check_simulation_memory
from planner.partitioning import (Backprop, Compute, Load, Redistribute, completed_key, cotangent_key,
                                  transposed_key)
from planner.progress import SILENT, Progress, counted
from planner.redistribution.transpose import cotangent_layout
from planner.simulation.collectives import Network
from planner.simulation.distributed import DistributedArray, replica_groups
from planner.simulation.host_memory import keep_large_blocks_mapped
from planner.simulation.local_ops import LocalContext, local_compute
from planner.simulation.local_vjp import local_vjp
from planner.simulation.manual import run_collective
from planner.simulation.memory import last_copy_uses, last_uses, residual_keys, simulation_memory
from graphs.ops.collectives import is_collective
from planner.simulation.reshard import execute
from planner.simulation import permutation, statistics

# The reference and the simulated devices compute in the same float type (bytes are
# still counted at each tensor's declared dtype), so float results agree to its
# rounding: 1e-9 relative in float64; in float32 (``--dtype f32``, for speed) sums of
# thousands of products differ from the reference's order by ~1e-5 relative.
FLOAT_RTOL = {"f64": 1e-9, "f32": 1e-4}


@dataclass
class SimulationResult:
    ok: bool
    max_abs_error: float
    max_rel_error: float
    devices: int
    measured_comm_bytes_per_device: int
    predicted_comm_bytes_per_device: int
    collectives: dict
    time_s: float
    outputs: dict = field(default_factory=dict)  # output -> {"ok", "max_abs_error", "max_rel_error"}
    peak_device_bytes: int = 0  # the most any simulated device held at once (its blocks only)
    gradients: dict = field(default_factory=dict)  # param -> {"ok", "max_abs_error", "max_rel_error"}
    phases: dict = field(default_factory=dict)  # phase -> measured / predicted bytes, collectives
    training: bool = False
    dtype: str = "f64"

    def to_dict(self) -> dict:
        out = {
            "ok": self.ok,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "devices": self.devices,
            "measured_comm_bytes_per_device": self.measured_comm_bytes_per_device,
            "predicted_comm_bytes_per_device": self.predicted_comm_bytes_per_device,
            "collectives": self.collectives,
            "time_s": self.time_s,
            "outputs": self.outputs,
            "peak_device_bytes": self.peak_device_bytes,
            "phases": self.phases,
            "dtype": self.dtype,
        }
        if self.training:
            out["gradients"] = self.gradients
        return out


def simulate(plan, seed: int = 0, *, dtype: str = "f64", progress: Progress | None = None) -> SimulationResult:
    """Run ``plan`` on the simulator and compare with the single-device reference.

    A training plan runs forward and backward: its gradients are compared with the
    reference's. ``dtype`` is what floats are computed in: ``"f64"`` (exact to
    rounding) or ``"f32"`` (faster, looser: :data:`FLOAT_RTOL`). ``progress`` (a
    :class:`~planner.progress.Progress`) hears the stages and one step per instruction run.
    """
    progress = progress or SILENT
    start = time.perf_counter()
    keep_large_blocks_mapped()
    if dtype not in FLOAT_RTOL:
        raise PlanningError(f"--dtype must be one of {', '.join(FLOAT_RTOL)}, got {dtype!r}")
    float_dtype = np.float64 if dtype == "f64" else np.float32
    graph = plan.graph
    program = plan.program
    check_simulation_memory(simulation_memory(program, graph, np.dtype(float_dtype).itemsize),
                            f"simulating model {quote(graph.name)} on {program.mesh.size:,} devices in {dtype}",
                            "simulate a smaller version of the model (fewer layers, a smaller batch or sequence) or "
                            "on a smaller mesh" + (", or use --dtype f32 (half the memory)" if dtype == "f64" else ""))
    if program.training:
        check_differentiable(graph)
    feeds = example_inputs(graph, seed=seed, float_dtype=float_dtype)
    cotangents = output_cotangents(graph, seed=seed, float_dtype=float_dtype) if program.training else {}
    progress.stage("computing the single-device reference")
    if program.training:
        reference, ref_grads = reference_gradients(graph, feeds, cotangents)
    else:
        reference, ref_grads = _outputs_only(graph, feeds), {}
    check_finite(graph, feeds, reference, ref_grads, f"seed {seed}, {dtype}")
    progress.stage(f"running the program on {program.mesh.size} simulated devices")
    sim = _Run(program, graph, feeds, cotangents, float_dtype)
    with np.errstate(all="ignore"):  # the model's own infinities (a -inf mask) are computed without warnings
        sim.run(progress)
    rtol = FLOAT_RTOL[dtype]
    report, ok, max_abs, max_rel = {}, True, 0.0, 0.0
    for name in dict.fromkeys(graph.outputs):
        # an input, parameter or constant listed as an output is delivered as loaded (as given when no op reads it)
        got = sim.values[name].to_global() if name in sim.values else feeds[name]
        entry = compare_values(got, reference[name], graph.tensor(name).dtype, rtol)
        report[name] = entry
        ok &= entry["ok"]
        max_abs, max_rel = max(max_abs, entry["max_abs_error"]), max(max_rel, entry["max_rel_error"])
    gradients = {}
    for name, want in ref_grads.items():
        arr = sim.gradients.get(name)
        # no gradient instruction: the program never differentiates this parameter, so its gradient is zero
        got = np.zeros(want.shape, want.dtype) if arr is None else arr.to_global()
        if name in cotangents:  # a parameter listed as an output: L holds <its cotangent, its value>
            got = got + cotangents[name]
        gradients[name] = compare_values(got, want, graph.tensor(name).dtype, rtol)
        ok &= gradients[name]["ok"]
        max_abs = max(max_abs, gradients[name]["max_abs_error"])
        max_rel = max(max_rel, gradients[name]["max_rel_error"])
    phases = {}
    for phase in (PHASES if program.training else ("forward",)):
        phases[phase] = {
            "measured_comm_bytes_per_device": sim.nets[phase].bytes_per_device,
            "predicted_comm_bytes_per_device": program.comm_bytes_per_device(phase),
            "collectives": dict(sorted(sim.counts[phase].items())),
        }
    total = Counter()
    for c in sim.counts.values():
        total.update(c)
    return SimulationResult(
        ok=ok,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        devices=program.mesh.size,
        measured_comm_bytes_per_device=sum(p["measured_comm_bytes_per_device"] for p in phases.values()),
        predicted_comm_bytes_per_device=sum(p["predicted_comm_bytes_per_device"] for p in phases.values()),
        collectives=dict(sorted(total.items())),
        time_s=time.perf_counter() - start,
        outputs=report,
        peak_device_bytes=sim.peak,
        gradients=gradients,
        phases=phases,
        training=program.training,
        dtype=dtype,
    )


PHASES = ("forward", "backward", "gradient")


def _outputs_only(graph, feeds) -> dict:
    return run_reference(graph, feeds, keep=graph.outputs)


#: What a model whose compared values are not finite is told to change.
FINITE_ADVICE = ("shardplan checks a plan on finite values only: give constants finite values and keep every op's "
                 "result finite for random inputs (no division by zero, a layernorm or rmsnorm eps above 0)")


def check_finite(graph, feeds, reference: dict, gradients: dict, data: str) -> None:
    """ModelError when a value the check compares (an output, or a gradient of the reference) holds a nan or an
    infinity: the model's values are not finite, whatever the plan. It names the first output (else gradient)
    that does and where its non-finite values first appear (:func:`graphs.evaluate.non_finite_origin`), at that
    op's or tensor's line. ``data`` says which data the reference ran on (``"seed 0, f64"``)."""
    for name in dict.fromkeys(graph.outputs):
        bad = non_finite(reference[name])
        if bad:
            what, where = non_finite_origin(graph, feeds, name)
            raise ModelError(f"the model's values are not finite: output {quote(name)} holds {bad} in the "
                             f"single-device reference ({data}); they first appear in {what}; {FINITE_ADVICE}",
                             where=where)
    for name, grad in gradients.items():
        bad = non_finite(grad)
        if bad:
            t = graph.tensor(name)
            where = None if t.line is None else f"{graph.source or '<string>'}:{t.line}"
            raise ModelError(f"the model's gradients are not finite: the gradient of param {quote(name)} holds {bad} "
                             f"in the single-device reference ({data}), though every output is finite; "
                             f"{FINITE_ADVICE}", where=where)


def compare_values(got: np.ndarray, want: np.ndarray, dtype: str, rtol: float) -> dict:
    """``{"ok", "max_abs_error", "max_rel_error"}`` of ``got`` against the reference ``want`` of a tensor of
    declared ``dtype``: floats agree to ``rtol`` (absolute ``rtol`` times the reference's scale, at least 1),
    integers and bools exactly. The one comparison the simulator and the engines (:mod:`planner.engines`) use.
    The errors are measured in float64 (bools as 0 and 1); a nan or an infinity in ``got`` where ``want`` is
    finite is an error of nan or inf, never a numpy warning."""
    got, want = np.asarray(got), np.asarray(want)
    with np.errstate(all="ignore"):
        wide = want.astype(np.float64, copy=False)  # no copy of a float64 reference: outputs can be gigabytes
        diff = np.abs(got.astype(np.float64, copy=False) - wide)
        err = float(np.max(diff)) if diff.size else 0.0
        del diff
        scale = float(np.max(np.abs(wide))) if want.size else 0.0
        rel = err / scale if scale else err
        if is_float(dtype):
            good = bool(np.allclose(got, want, rtol=rtol, atol=rtol * max(scale, 1.0)))
        else:
            good = bool(np.array_equal(got, want))
    return {"ok": good, "max_abs_error": err, "max_rel_error": rel}


class _Run:
    """One execution of a program on the simulated devices (forward, then backward with training).

    Forward values are freed after their last use, except the residuals a later
    :class:`Backprop` reads (its operands as read, its result), which are freed
    once it ran; cotangents are freed as soon as they are passed on.
    """

    def __init__(self, program, graph, feeds, cotangents, float_dtype=np.float64):
        self.program, self.graph, self.feeds, self.cotangents = program, graph, feeds, cotangents
        self.float_dtype = float_dtype
        self.n = program.mesh.size
        self.nets = {phase: Network(self.n) for phase in PHASES}
        self.counts = {phase: Counter() for phase in PHASES}
        self.values: dict[str, DistributedArray] = {}
        self.copies: dict[tuple, DistributedArray] = {}  # (tensor, layout) -> copy shared by its readers
        self.residuals: dict[tuple, DistributedArray] = {}  # what a Backprop will read
        self.cot_in: dict[tuple, DistributedArray] = {}  # (tensor, cotangent layout) -> readers' cotangents
        self.kept_statistics: dict[str, list] = {}  # op -> per device, a sharded normalisation's statistics
        self.cot_out: dict[str, DistributedArray] = {}  # tensor -> its cotangent, home
        self.gradients: dict[str, DistributedArray] = {}
        self.seeds: set[int] = {id(a) for a in cotangents.values()}  # never written into
        self.peak = 0
        # op -> the operands its Backprop sends cotangents to
        self.differentiates = {ins.op.name: {ins.op.inputs[k] for k in ins.wrt}
                               for ins in program.instructions if isinstance(ins, Backprop)}

    def run(self, progress: Progress = SILENT) -> None:
        program = self.program
        last_use = last_uses(program)
        last_copy_use = last_copy_uses(program)
        saved = residual_keys(program)
        keep = set(program.outputs) | set(self.graph.outputs)
        for step, ins in enumerate(counted(progress, "simulating", program.instructions)):
            self._run_one(ins, saved)  # a method: its locals (operand blocks...) die with each instruction
            if isinstance(ins, Compute):
                for key in [k for k in self.copies if last_copy_use.get(k, -1) <= step]:
                    del self.copies[key]
            self.peak = max(self.peak, self._held())
            for t in [t for t in self.values if last_use.get(t, -1) <= step and t not in keep]:
                del self.values[t]  # free a tensor after its last reader, as a device would

    def _run_one(self, ins, saved) -> None:
        if isinstance(ins, Load):
            self.values[ins.tensor] = DistributedArray.from_global(self.feeds[ins.tensor], ins.layout)
        elif isinstance(ins, Redistribute) and ins.phase == "forward":
            out = self._execute(ins, self.values[ins.tensor])
            if not ins.readers:
                self.values[ins.tensor] = out
            else:
                self.copies[(ins.tensor, ins.plan.destination)] = out
        elif isinstance(ins, Redistribute):
            self._backward_redistribute(ins)
        elif isinstance(ins, Compute):
            operands = _operands(ins, self.values, self.copies)
            region = self.graph.region_of_op(ins.op.name) if self.graph.manual_regions else None
            if region is None and statistics.sharded_statistic(ins.rule, ins.strategy):
                self.values[ins.op.output] = self._compute_statistics(ins, operands)
            elif region is None and permutation.sharded_permutation(ins.rule, ins.strategy):
                out = permutation.forward(ins, operands, self.nets["forward"])
                self.counts["forward"].update(c.kind for c in ins.collectives)
                self.values[ins.op.output] = DistributedArray(out.sharding, out.shape,
                                                              [frozen_block(b) for b in out.blocks])
            else:
                self.values[ins.op.output] = run_compute(ins, operands) if region is None else \
                    self._compute_in_region(ins, operands)
            for key in saved.get(ins.op.name, ()):
                self.residuals[(ins.op.name,) + key] = (self.values[key[1]] if key[0] == "result"
                                                        else operands[key[1]])
        else:
            self._backprop(ins)

    def _compute_statistics(self, ins: Compute, operands) -> DistributedArray:
        """A normalisation over a sharded axis (:mod:`planner.simulation.statistics`): partial statistics,
        AllReduces across the groups (bytes counted), each device's own block finished."""
        blocks, kept = statistics.forward(ins, operands, self.nets["forward"])
        self.counts["forward"].update(c.kind for c in ins.collectives)
        if self.program.training:
            self.kept_statistics[ins.op.name] = kept
        s = ins.strategy
        return DistributedArray(s.result, tuple(ins.out_shape), [frozen_block(b) for b in blocks])

    def _compute_in_region(self, ins: Compute, operands) -> DistributedArray:
        """An op of a manual region (:mod:`planner.simulation.manual`): boundary ops pass blocks through,
        collectives run across their groups (bytes counted), body ops run on every device's own block."""
        op, s = ins.op, ins.strategy
        if op.op in ("manual_enter", "manual_exit"):
            blocks = list(operands[0].blocks)
        elif is_collective(op):
            blocks = run_collective(op, [a.blocks for a in operands][0] if operands else [None] * self.n,
                                    s.result.mesh, self.nets["forward"], ins.dtype)
            for c in ins.collectives:
                self.counts["forward"][c.kind] += 1
        else:
            blocks = []
            for d in range(self.n):
                ctx = LocalContext.for_device(s.operands, ins.in_shapes, s.result, ins.out_shape, d)
                blocks.append(local_compute(op, ins.rule, [a.blocks[d] for a in operands], ctx))
        varying = op.op != "manual_exit"
        return DistributedArray(s.result, tuple(ins.out_shape), [frozen_block(b) for b in blocks], varying)

    def _execute(self, ins: Redistribute, arr: DistributedArray) -> DistributedArray:
        out, _ = execute(ins.plan, arr, self.nets[ins.phase])
        self.counts[ins.phase].update(s.kind for s in ins.plan.steps if s.kind != "Slice")
        return out

    def _backward_redistribute(self, ins: Redistribute) -> None:
        t = ins.tensor
        if not ins.readers:  # the seeded cotangent of a graph output
            if t not in self.cotangents:
                return
            arr = DistributedArray.from_global(self.cotangents[t], ins.plan.source)
            self.seeds.update(id(b if b.base is None else b.base) for b in arr.blocks)
        else:
            arr = self.cot_in.pop(transposed_key(ins), None)
            if arr is None:
                if any(t in self.differentiates.get(r, ()) for r in ins.readers):
                    raise SimulationMismatch(f"the backward of {', '.join(ins.readers)} left no cotangent of {t!r} "
                                             f"laid out as {ins.plan.source}: the program lacks a Backprop")
                # its readers have no gradient (a cast to an integer): nothing flows back, a zero cotangent
                arr = self._zeros(ins.plan.source, self.graph.tensor(t).shape)
        out = self._execute(ins, arr)
        joins = completed_key(ins)
        if joins is not None:  # one reader's cotangent completed: added to the others' of its layout
            self.cot_in[joins] = add_cotangents(self.cot_in.get(joins), out)
            return
        home = self.gradients if self.graph.producer(t) is None else self.cot_out
        home[t] = add_cotangents(home.get(t), out)

    def _backprop(self, ins: Backprop) -> None:
        op, s = ins.op, ins.strategy
        cot = self.cot_out.pop(op.output, None)
        operands = [self.residuals.pop((op.name, "operand", k), None) for k in range(len(op.inputs))]
        result = self.residuals.pop((op.name, "result", op.output), None)
        if cot is None:  # no output depends on this op's result through a gradient: a zero cotangent
            cot = self._zeros(cotangent_layout(s.result), ins.out_shape)
        if cot.sharding != cotangent_layout(s.result):
            raise SimulationMismatch(f"op {op.name!r}'s result cotangent is laid out as {cot.sharding}, but its "
                                     f"backward reads {cotangent_layout(s.result)}")
        region = self.graph.region_of_op(op.name) if self.graph.manual_regions else None
        if region is not None:
            self._backprop_in_region(ins, cot, operands, result)
            return
        if statistics.sharded_statistic(ins.rule, s):
            per_device = statistics.backward(ins, cot, self.kept_statistics.pop(op.name), self.nets["backward"])
            self.counts["backward"].update(c.kind for c in ins.collectives)
            per_device = [[frozen_block(g) for g in grads] for grads in per_device]
            self._send_cotangents(ins, per_device)
            return
        if permutation.sharded_permutation(ins.rule, s):
            per_device = permutation.backward(ins, cot, self.nets["backward"])
            self.counts["backward"].update(c.kind for c in ins.collectives)
            self._send_cotangents(ins, [[frozen_block(g) for g in grads] for grads in per_device])
            return
        per_device: list = [None] * self.n
        layouts = tuple(s.operands) + (s.result, cot.sharding) + tuple(ins.cotangents)
        shapes = tuple(ins.in_shapes) + (tuple(ins.out_shape),) * 2 + tuple(ins.in_shapes[k] for k in ins.wrt)
        for members in replica_groups(layouts, shapes):
            d = members[0]
            ctx = LocalContext.for_device(s.operands, ins.in_shapes, s.result, ins.out_shape, d)
            block = cot.blocks[d]
            donate = self._donatable(cot, block, members)
            if donate:
                if block.base is not None:
                    block.base.flags.writeable = True
                block.flags.writeable = True
            grads = [frozen_block(g) for g in local_vjp(op, ins.rule, [None if a is None else a.blocks[d] for a in operands],
                                                   None if result is None else result.blocks[d], block, ctx,
                                                   ins.wrt, donate=donate)]
            for e in members:
                per_device[e] = grads
        self._send_cotangents(ins, per_device)

    def _send_cotangents(self, ins: Backprop, per_device) -> None:
        """The operands' cotangents (``per_device[d][j]``: device ``d``'s block of ``ins.wrt[j]``'s) to their
        transposed redistributions."""
        for j, (k, layout) in enumerate(zip(ins.wrt, ins.cotangents)):
            arr = DistributedArray(layout, tuple(ins.in_shapes[k]), [per_device[d][j] for d in range(self.n)])
            key = cotangent_key(ins, j)
            self.cot_in[key] = add_cotangents(self.cot_in.get(key), arr)

    def _backprop_in_region(self, ins: Backprop, cot: DistributedArray, operands, result) -> None:
        """The backward of an op of a manual region, per device (blocks differ over manual coordinates):
        boundary ops pass the cotangent's blocks through, a collective runs its transpose across its groups
        (bytes counted in the backward phase), a body op runs its local VJP on every device."""
        op, s = ins.op, ins.strategy
        if not ins.wrt:
            return
        if op.op in ("manual_enter", "manual_exit"):
            per_device = [[b] for b in cot.blocks]
        elif is_collective(op):
            blocks = run_collective(op, cot.blocks, s.result.mesh, self.nets["backward"], ins.dtype, transposed=True)
            for c in ins.collectives:
                self.counts["backward"][c.kind] += 1
            per_device = [[b] for b in blocks]
        else:
            per_device = []
            for d in range(self.n):
                ctx = LocalContext.for_device(s.operands, ins.in_shapes, s.result, ins.out_shape, d)
                per_device.append(list(local_vjp(op, ins.rule, [None if a is None else a.blocks[d] for a in operands],
                                                 None if result is None else result.blocks[d], cot.blocks[d], ctx,
                                                 ins.wrt, donate=False)))
        for j, (k, layout) in enumerate(zip(ins.wrt, ins.cotangents)):
            arr = DistributedArray(layout, tuple(ins.in_shapes[k]), [frozen_block(per_device[d][j]) for d in range(self.n)],
                                   op.op != "manual_enter")
            key = cotangent_key(ins, j)
            self.cot_in[key] = add_cotangents(self.cot_in.get(key), arr)

    def _zeros(self, layout, shape) -> DistributedArray:
        """A zero cotangent laid out as ``layout`` (never written into: it is one array all blocks view)."""
        zeros = np.zeros(tuple(shape), dtype=self.float_dtype)
        self.seeds.add(id(zeros))
        return DistributedArray.from_global(zeros, layout)

    def _donatable(self, cot: DistributedArray, block, members) -> bool:
        """Whether ``block`` (of a cotangent nothing else will read) is this replica group's alone, so the
        VJP may write its result into it: an array the backward made (not a seeded cotangent), held by
        exactly ``members``, sharing memory with no other device's block."""
        if not isinstance(block, np.ndarray) or block.ndim == 0:
            return False
        owner = block if block.base is None else block.base
        if not isinstance(owner, np.ndarray) or not owner.flags.owndata or id(owner) in self.seeds:
            return False
        inside = set(members)
        for e, other in enumerate(cot.blocks):
            if (e in inside) != (other is block) or (e not in inside and np.may_share_memory(other, block)):
                return False
        return True

    def _held(self) -> int:
        """Bytes the busiest device holds: every live block (views of shared inputs count too)."""
        per_device = np.zeros(self.n, dtype=np.int64)
        for store in (self.values, self.copies, self.cot_in, self.cot_out, self.gradients):
            for arr in store.values():
                for d, b in enumerate(arr.blocks):
                    per_device[d] += b.nbytes
        seen = set()
        for arr in self.residuals.values():
            if id(arr) in seen or any(arr is v for v in self.values.values()) or \
                    any(arr is v for v in self.copies.values()):
                continue
            seen.add(id(arr))
            for d, b in enumerate(arr.blocks):
                per_device[d] += b.nbytes
        return int(per_device.max(initial=0))


def add_cotangents(acc: DistributedArray | None, arr: DistributedArray) -> DistributedArray:
    """``acc + arr`` blockwise (same layout: pending sums add too); ``arr`` when there is no ``acc``."""
    if acc is None:
        return arr
    if acc.sharding != arr.sharding:
        raise SimulationMismatch(f"cannot add cotangents laid out as {acc.sharding} and {arr.sharding}")
    return DistributedArray(acc.sharding, acc.shape, [a + b for a, b in zip(acc.blocks, arr.blocks)],
                            acc.varying or arr.varying)


def _operands(ins: Compute, values, copies) -> list[DistributedArray]:
    op, s = ins.op, ins.strategy
    operands = []
    for k, t in enumerate(op.inputs):
        arr = copies.get((t, s.operands[k]), values[t])
        if arr.sharding.layout_only() != s.operands[k]:
            raise SimulationMismatch(
                f"op {op.name!r} reads {t!r} laid out as {arr.sharding} but its strategy needs {s.operands[k]}: "
                "the program lacks a redistribution"
            )
        operands.append(arr)
    return operands


def run_compute(ins: Compute, operands) -> DistributedArray:
    """Op ``ins`` on every device from its operands' blocks (one local instance per group of devices holding the
    same blocks, shared by them, read-only)."""
    op, s = ins.op, ins.strategy
    n = s.result.mesh.size
    blocks: list = [None] * n
    for members in replica_groups(tuple(a.sharding for a in operands) + (s.result,),
                                  tuple(ins.in_shapes) + (tuple(ins.out_shape),)):
        d = members[0]
        ctx = LocalContext.for_device(s.operands, ins.in_shapes, s.result, ins.out_shape, d)
        block = frozen_block(local_compute(op, ins.rule, [a.blocks[d] for a in operands], ctx))
        for e in members:
            blocks[e] = block
    return DistributedArray(s.result, tuple(ins.out_shape), blocks)


def frozen_block(block: np.ndarray) -> np.ndarray:
    """``block``, read-only: replicas share it, so nothing may write into it in place."""
    block = np.asarray(block)
    block.flags.writeable = False
    return block


