"""An upper bound of the memory a simulation holds, computed from the lowered program without allocating.

:func:`simulation_memory` adds up, on byte counts alone, what :func:`planner.simulation.run.simulate`
holds in its one process:

* **the reference** (:func:`reference_peak_bytes`): the seeded inputs, parameters and constants, the
  reference's forward values (dropped after their last reader unless an output or, with training, a VJP
  reads them), the cotangents and gradients of its backward, and :data:`TRANSIENT_FACTOR` times the largest
  array of the op at hand for its temporaries. What the device run then still reads stays held beside it:
  the seeded data (devices' blocks of a source are views of it), the output cotangents, the reference's
  outputs and gradients;
* **every device's blocks**: the simulator keeps one padded block per device of every live value (values,
  the copies redistributions make for their readers, the residuals a ``Backprop`` will read, cotangents on
  their way home, gradients), so a replicated value counts once per device. The walk replays the
  simulator's own bookkeeping (:func:`last_uses`, :func:`last_copy_uses`, :func:`residual_keys`); during an
  instruction it adds what the instruction makes: a redistribution's intermediate layouts and the pieces
  its collectives exchange, a result, a sum of cotangents, and one device's temporaries of a local op;
* **the comparison**: each output and gradient assembled whole and compared with the reference.

Replicas share one block in the simulator and a source's blocks are views of the seeded data, so the real
peak is usually well below this figure; it is a bound, not a prediction: it holds
``SimulationResult.peak_device_bytes`` (the busiest device, measured) times the devices, plus the reference.

Floats count at the simulation's float type (``--dtype``), integers and bools at 8 bytes (numpy may widen
them), every block :data:`BLOCK_OVERHEAD_BYTES` more for its numpy object, and the simulator's other objects
:data:`OBJECTS_BYTES`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from graphs.dtypes import is_float
from graphs.gradients import backward_schedule
from graphs.ops.collectives import is_collective
from graphs.ops.registry import get_op
from planner.limits import format_bytes
from planner.partitioning import Backprop, Compute, Load, Redistribute, completed_key, cotangent_key, transposed_key
from planner.redistribution.transpose import cotangent_layout
from planner.simulation.local_vjp import local_vjp_inputs

#: An op's reference, local instance or VJP allocates temporaries of at most this many times its largest array.
TRANSIENT_FACTOR = 3
#: Bytes of an integer or bool element, whatever its declared dtype (numpy may compute it in int64).
NON_FLOAT_BYTES = 8
#: Bytes of one device's block besides its data: the numpy array object, its shape and strides, its list slot.
BLOCK_OVERHEAD_BYTES = 256
#: The simulator's Python objects besides the blocks: its bookkeeping, caches of replica groups and index ranges.
OBJECTS_BYTES = 16 * 2**20
#: Arrays made to compare one output or gradient with the reference, in its full size: the assembled tensor,
#: the mask of elements seen, and the differences, magnitudes and tolerances of the comparison.
COMPARE_COPIES = 7


@dataclass(frozen=True)
class SimulationMemory:
    """The parts of :func:`simulation_memory`'s bound, in bytes."""

    reference: int  # the reference's peak, while it runs
    kept: int  # what stays held from it while the devices run (seeded data, cotangents, reference results)
    devices_peak: int  # every device's blocks and the instruction's temporaries at the device run's peak
    per_device: int  # the most one device holds after an instruction (bounds SimulationResult.peak_device_bytes)
    devices: int

    @property
    def total(self) -> int:
        return OBJECTS_BYTES + max(self.reference, self.kept + self.devices_peak)

    def text(self) -> str:
        return (f"{self.devices:,} devices holding up to {format_bytes(self.per_device)} each, "
                f"{format_bytes(self.devices_peak)} with temporaries, beside {format_bytes(self.kept)} kept from the "
                f"single-device reference, which peaks at {format_bytes(self.reference)}")


def element_bytes(dtype: str, float_itemsize: int) -> int:
    """Bytes of one element of a tensor of declared ``dtype`` in a simulation computing floats at ``float_itemsize``."""
    return float_itemsize if is_float(dtype) else NON_FLOAT_BYTES


def reference_peak_bytes(graph, training: bool, float_itemsize: int = 8) -> int:
    """The most the single-device reference (:func:`graphs.evaluate.run_reference`,
    :func:`graphs.gradients.reference_gradients`) holds at once, floats at ``float_itemsize`` bytes, replaying
    its bookkeeping on byte counts (see the module docstring); a body tensor of a manual region counts once per
    manual coordinate."""
    size: dict[str, int] = {name: t.numel * element_bytes(t.dtype, float_itemsize) for name, t in graph.tensors.items()}
    for region in getattr(graph, "manual_regions", None) or ():
        copies = math.prod(region.manual_sizes(graph.mesh))
        for op_name in region.ops:
            if region.role(op_name) == "body":
                out = graph.op(op_name).output
                size[out] *= copies
    ops = graph.ops
    outputs = set(graph.outputs)

    def transient(op) -> int:
        return TRANSIENT_FACTOR * max([size[op.output], *(size[t] for t in op.inputs)])

    # the seeds: the float outputs (output_cotangents seeds every one of them)
    seeds = [o for o in outputs if is_float(graph.tensor(o).dtype)] if training else []
    backward, residual_until, last_read = backward_schedule(graph, seeds)
    keep = set(residual_until) | outputs

    values = {name for name, t in graph.tensors.items() if t.kind != "activation"}
    held = sum(size[t] for t in values)
    peak = held
    for k, op in enumerate(ops):
        values.add(op.output)
        held += size[op.output]
        peak = max(peak, held + transient(op))
        for t in set(op.inputs) | {op.output}:
            if last_read.get(t, -1) <= k and t not in keep and t in values:
                values.discard(t)
                held -= size[t]
    if not training:
        return peak
    # backward: every float output's cotangent seeded at once, each popped by its producer's VJP, which adds
    # its operands' cotangents (a sum where one is already there); residuals dropped after their last VJP
    cots = {o for o in outputs if is_float(graph.tensor(o).dtype)}
    held += sum(size[o] for o in cots)
    peak = max(peak, held)
    releases: dict[int, list[str]] = {}
    for t, k in residual_until.items():
        releases.setdefault(k, []).append(t)
    for k in sorted(backward, reverse=True):
        op = ops[k]
        if op.output in cots:
            peak = max(peak, held + transient(op) + sum(size[op.inputs[i]] for i in backward[k]))
            cots.discard(op.output)
            held -= size[op.output]
            for i in backward[k]:
                t = op.inputs[i]
                if t not in cots:
                    cots.add(t)
                    held += size[t]
        for t in releases.get(k, ()):
            if t not in outputs and t in values:
                values.discard(t)
                held -= size[t]
    # the gradients of parameters no cotangent reached are zeros the caller gets as well
    held += sum(size[t.name] for t in graph.tensors_of_kind("param") if t.name not in cots)
    return max(peak, held)


def simulation_memory(program, graph, float_itemsize: int) -> SimulationMemory:
    """An upper bound of what simulating ``program`` (lowered from ``graph``) holds, floats at ``float_itemsize``
    bytes (see the module docstring)."""
    training = program.training
    nbytes = {name: t.numel * element_bytes(t.dtype, float_itemsize) for name, t in graph.tensors.items()}
    sources = sum(nbytes[t.name] for t in graph.tensors.values() if t.kind != "activation")
    float_outputs = [o for o in dict.fromkeys(graph.outputs) if is_float(graph.tensor(o).dtype)]
    largest_draw = max((t.numel * 8 for t in graph.tensors.values() if t.kind != "activation"), default=0)
    # the seeded data is drawn in float64, one tensor at a time, before it is cast
    reference = max(reference_peak_bytes(graph, training, float_itemsize), sources + largest_draw)
    kept = sources + sum(nbytes[o] for o in dict.fromkeys(graph.outputs))
    if training:
        kept += sum(nbytes[o] for o in float_outputs)  # the seeded cotangents
        kept += sum(nbytes[t.name] for t in graph.tensors_of_kind("param"))  # the reference gradients
    walk = _DeviceWalk(program, graph, float_itemsize)
    walk.run()
    return SimulationMemory(reference=reference, kept=kept, devices_peak=walk.peak, per_device=walk.per_device,
                            devices=program.mesh.size)


class _DeviceWalk:
    """The simulator's run (``planner.simulation.run``) replayed on one device's byte counts: every array is an
    id with the bytes of one device's block (blocks are padded, so every device's is the same size)."""

    def __init__(self, program, graph, float_itemsize: int):
        self.program, self.graph, self.itemsize = program, graph, float_itemsize
        self.n = program.mesh.size
        self.size: dict[int, int] = {}  # array id -> bytes of one device's block
        self.values: dict[str, int] = {}
        self.copies: dict[tuple, int] = {}
        self.residuals: dict[tuple, int] = {}
        self.cot_in: dict[tuple, int] = {}
        self.cot_out: dict[str, int] = {}
        self.gradients: dict[str, int] = {}
        self.peak = 0  # bytes, all devices, during an instruction
        self.per_device = 0  # bytes one device holds once an instruction ran
        seeded = {o for o in graph.outputs if is_float(graph.tensor(o).dtype)} if program.training else set()
        self.seeded = seeded

    def block(self, layout, shape, tensor: str) -> int:
        """Bytes of one device's block of ``tensor`` laid out as ``layout``."""
        return math.prod(layout.local_shape(shape)) * element_bytes(self.graph.tensor(tensor).dtype, self.itemsize)

    def new(self, nbytes: int) -> int:
        ident = len(self.size)
        self.size[ident] = nbytes
        return ident

    def live(self) -> set[int]:
        out = set(self.values.values()) | set(self.copies.values()) | set(self.residuals.values())
        return out | set(self.cot_in.values()) | set(self.cot_out.values()) | set(self.gradients.values())

    def held(self) -> int:
        return sum(self.size[i] for i in self.live())

    def account(self, before: set[int], made: int, arrays: int, per_device_scratch: int = 0,
                one_device: int = 0) -> None:
        """One instruction's peak: what was held before it, the ``made`` bytes (``arrays`` arrays) it makes on every
        device, ``per_device_scratch`` more bytes on every device while it runs, ``one_device`` bytes of one
        device's temporaries."""
        held = sum(self.size[i] for i in before)
        self.per_device = max(self.per_device, held + made)
        blocks = (len(before) + arrays) * self.n * BLOCK_OVERHEAD_BYTES
        self.peak = max(self.peak, self.n * (held + made + per_device_scratch) + blocks + one_device)

    def run(self) -> None:
        program = self.program
        last_use, last_copy_use, saved = last_uses(program), last_copy_uses(program), residual_keys(program)
        for step, ins in enumerate(program.instructions):
            self.run_one(ins, saved)
            if isinstance(ins, Compute):
                for key in [k for k in self.copies if last_copy_use.get(k, -1) <= step]:
                    del self.copies[key]
            for t in [t for t in self.values if last_use.get(t, -1) <= step and t not in program.outputs]:
                del self.values[t]
        # the comparison: each output and gradient assembled whole and compared, one at a time
        compared = [self.graph.tensor(t) for t in (*program.outputs, *self.gradients)]
        widest = max((t.numel * max(element_bytes(t.dtype, self.itemsize), self.itemsize) for t in compared), default=0)
        self.account(self.live(), 0, 0, one_device=COMPARE_COPIES * widest)

    def redistribute(self, ins: Redistribute, tensor: str) -> tuple[int, int]:
        """``(bytes of the result's block, bytes more while the steps run)`` of ``ins``'s steps on one device: a
        step holds its input (an intermediate, after the first), its output, and the pieces its collective
        exchanges, cuts or adds up before it assembles the output, at most as large as the larger of the two."""
        shape = self.graph.tensor(tensor).shape
        size = self.block(ins.plan.source, shape, tensor)
        running = 0
        for k, step in enumerate(ins.plan.steps):
            out = self.block(step.after, shape, tensor)
            running = max(running, (size if k else 0) + out + max(size, out))
            size = out
        return size, max(running - size, 0)

    def run_one(self, ins, saved) -> None:
        before = self.live()
        if isinstance(ins, Load):
            ident = self.new(self.block(ins.layout, ins.shape, ins.tensor))
            self.account(before, self.size[ident], 1)
            self.values[ins.tensor] = ident
        elif isinstance(ins, Redistribute) and ins.phase == "forward":
            if not ins.plan.steps:
                out = self.values[ins.tensor]
                self.account(before, 0, 0)
            else:
                nbytes, scratch = self.redistribute(ins, ins.tensor)
                out = self.new(nbytes)
                self.account(before, nbytes, 1, scratch)
            if not ins.readers:
                self.values[ins.tensor] = out
            else:
                self.copies[(ins.tensor, ins.plan.destination)] = out
        elif isinstance(ins, Redistribute):
            self.backward_redistribute(ins, before)
        elif isinstance(ins, Compute):
            self.compute(ins, saved, before)
        else:
            self.backprop(ins, before)

    def compute(self, ins: Compute, saved, before: set[int]) -> None:
        op, s = ins.op, ins.strategy
        operands = [self.copies.get((t, s.operands[k]), self.values.get(t)) for k, t in enumerate(op.inputs)]
        result = self.block(s.result, ins.out_shape, op.output)
        reads = [self.block(s.operands[k], ins.in_shapes[k], t) for k, t in enumerate(op.inputs)]
        # a manual region's collective exchanges every device's blocks at once; any other op runs one device
        # (one replica group) at a time
        scratch = sum(reads) + result if is_collective(op) else 0
        self.account(before, result, 1, scratch, TRANSIENT_FACTOR * max([result, *reads]))
        self.values[op.output] = self.new(result)
        for key in saved.get(op.name, ()):
            ident = self.values[key[1]] if key[0] == "result" else operands[key[1]]
            if ident is not None:
                self.residuals[(op.name,) + key] = ident

    def backward_redistribute(self, ins: Redistribute, before: set[int]) -> None:
        t = ins.tensor
        made, arrays = 0, 0
        if not ins.readers:  # the seeded cotangent of a graph output
            if t not in self.seeded:
                return
            arr = self.new(self.block(ins.plan.source, self.graph.tensor(t).shape, t))
            made, arrays = self.size[arr], 1
        else:
            arr = self.cot_in.pop(transposed_key(ins), None)
            if arr is None:
                return  # the simulator reports the missing cotangent itself
        if ins.plan.steps:
            nbytes, scratch = self.redistribute(ins, t)
            out = self.new(nbytes)
            made, arrays = made + nbytes, arrays + 1
        else:
            out, scratch = arr, 0
        joins = completed_key(ins)  # one reader's cotangent completed: added to the others' of its layout
        home, key = (self.cot_in, joins) if joins is not None else \
            (self.gradients if self.graph.producer(t) is None else self.cot_out, t)
        if key in home:  # a sum of cotangents: both addends and the sum at once
            total = self.new(self.size[out])
            made, arrays = made + self.size[total], arrays + 1
            out = total
        self.account(before, made, arrays, scratch)
        home[key] = out

    def backprop(self, ins: Backprop, before: set[int]) -> None:
        op = ins.op
        cot = self.cot_out.pop(op.output, None)
        for k in range(len(op.inputs)):
            self.residuals.pop((op.name, "operand", k), None)
        self.residuals.pop((op.name, "result", op.output), None)
        if cot is None:
            return
        made, arrays, reads = 0, 0, [self.size[cot]]
        for j, (k, layout) in enumerate(zip(ins.wrt, ins.cotangents)):
            t = op.inputs[k]
            grad = self.block(layout, ins.in_shapes[k], t)
            reads.append(grad)
            key = cotangent_key(ins, j)
            for _ in range(2 if key in self.cot_in else 1):  # a sum of two cotangents: the addends and the sum
                ident = self.new(grad)
                made, arrays = made + grad, arrays + 1
            self.cot_in[key] = ident
        reads += [self.block(ins.strategy.operands[k], ins.in_shapes[k], t) for k, t in enumerate(op.inputs)]
        reads.append(self.block(ins.strategy.result, ins.out_shape, op.output))
        self.account(before, made, arrays, 0, TRANSIENT_FACTOR * max(reads))


def residual_keys(program) -> dict[str, tuple]:
    """Per op with a Backprop: the forward values its VJP reads (operands as read, result)."""
    out = {}
    for ins in program.instructions:
        if isinstance(ins, Backprop):
            keys = [("operand", k) for k in local_vjp_inputs(ins.op.op, ins.wrt, len(ins.op.inputs))]
            if get_op(ins.op.op).vjp_reads_result:
                keys.append(("result", ins.op.output))
            out[ins.op.name] = tuple(keys)
    return out


def last_uses(program) -> dict[str, int]:
    """Index of the last instruction that reads each tensor."""
    last: dict[str, int] = {}
    for i, ins in enumerate(program.instructions):
        if isinstance(ins, Compute):
            for t in ins.op.inputs:
                last[t] = i
        elif isinstance(ins, Redistribute) and ins.phase == "forward":
            last[ins.tensor] = max(last.get(ins.tensor, -1), i)
    return last


def last_copy_uses(program) -> dict[tuple, int]:
    """Index of the last instruction that reads each redistributed copy ``(tensor, layout)``."""
    last: dict[tuple, int] = {}
    for i, ins in enumerate(program.instructions):
        if isinstance(ins, Compute):
            for k, t in enumerate(ins.op.inputs):
                last[(t, ins.strategy.operands[k])] = i
    return last
