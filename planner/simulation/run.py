"""Simulating a whole plan (SPEC §7): the SPMD program on N numpy devices vs one device.

:func:`simulate` draws seeded data for every input, parameter and constant, runs
the single-device numpy reference, then runs the lowered program
(``plan.program``, the same program the plan's numbers are read from) on the
simulator: every ``Load`` cuts blocks from the data, every forward
``Redistribute`` executes its collectives for real (counting the bytes each
device receives) and keeps the new copy for every op that reads that layout,
every ``Compute`` runs the op's local instance on each device. The outputs are
assembled (pending sums added) and compared with the reference. With
``--training`` plans the forward pass is simulated; the backward communication
is priced by the plan but not executed.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from graphs.dtypes import is_float
from graphs.evaluate import example_inputs, run_reference
from planner.errors import SimulationMismatch
from planner.partitioning import Compute, Load, Redistribute
from planner.simulation.collectives import Network
from planner.simulation.distributed import DistributedArray
from planner.simulation.local_ops import LocalContext, local_compute
from planner.simulation.reshard import execute

# Both the reference and the simulated devices compute in float64 (bytes are still
# counted at each tensor's declared dtype), so float results agree to rounding.
FLOAT_RTOL = 1e-9


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
    forward_only: bool = False
    peak_device_bytes: int = 0  # the most any simulated device held at once (its blocks only)

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
        }
        if self.forward_only:
            out["note"] = "training plan: the forward pass is simulated; backward costs are predicted only"
        return out


def simulate(plan, seed: int = 0) -> SimulationResult:
    """Run ``plan`` on the simulator and compare with the single-device reference."""
    start = time.perf_counter()
    program = plan.program
    graph = plan.outcome.model.graph
    feeds = example_inputs(graph, seed=seed)
    reference = run_reference(graph, feeds)
    local_feeds = feeds
    n = program.mesh.size
    net = Network(n)
    counts: Counter = Counter()
    values: dict[str, DistributedArray] = {}
    readers: dict[tuple, DistributedArray] = {}  # (tensor, layout) -> redistributed copy, shared by its readers
    last_use = _last_uses(program)
    last_copy_use = _last_copy_uses(program)
    peak = 0
    for step, ins in enumerate(program.instructions):
        if isinstance(ins, Load):
            values[ins.tensor] = DistributedArray.from_global(local_feeds[ins.tensor], ins.layout)
        elif isinstance(ins, Redistribute):
            if ins.phase != "forward":
                continue  # backward: priced, not executed
            out, _ = execute(ins.plan, values[ins.tensor], net)
            counts.update(s.kind for s in ins.plan.steps if s.kind != "Slice")
            if not ins.readers:
                values[ins.tensor] = out
            else:
                readers[(ins.tensor, ins.plan.destination)] = out
        else:
            values[ins.op.output] = _compute(ins, values, readers)
            for key in [k for k in readers if last_copy_use.get(k, -1) <= step]:
                del readers[key]
        peak = max(peak, _held(values, readers, n))
        for t in [t for t in values if last_use.get(t, -1) <= step and t not in program.outputs]:
            del values[t]  # free a tensor after its last reader, as a device would
    report, ok, max_abs, max_rel = {}, True, 0.0, 0.0
    for name in program.outputs:
        got = values[name].to_global()
        want = reference[name]
        err = float(np.max(np.abs(got - want))) if got.size else 0.0
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        rel = err / scale if scale else err
        if is_float(graph.tensor(name).dtype):
            good = bool(np.allclose(got, want, rtol=FLOAT_RTOL, atol=FLOAT_RTOL * max(scale, 1.0)))
        else:
            good = bool(np.array_equal(got, want))
        report[name] = {"ok": good, "max_abs_error": err, "max_rel_error": rel}
        ok &= good
        max_abs, max_rel = max(max_abs, err), max(max_rel, rel)
    return SimulationResult(
        ok=ok,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        devices=n,
        measured_comm_bytes_per_device=net.bytes_per_device,
        predicted_comm_bytes_per_device=program.comm_bytes_per_device("forward"),
        collectives=dict(sorted(counts.items())),
        time_s=time.perf_counter() - start,
        outputs=report,
        forward_only=program.training,
        peak_device_bytes=peak,
    )


def _last_uses(program) -> dict[str, int]:
    """Index of the last instruction that reads each tensor."""
    last: dict[str, int] = {}
    for i, ins in enumerate(program.instructions):
        if isinstance(ins, Compute):
            for t in ins.op.inputs:
                last[t] = i
        elif isinstance(ins, Redistribute) and ins.phase == "forward":
            last[ins.tensor] = max(last.get(ins.tensor, -1), i)
    return last


def _last_copy_uses(program) -> dict[tuple, int]:
    """Index of the last instruction that reads each redistributed copy ``(tensor, layout)``."""
    last: dict[tuple, int] = {}
    for i, ins in enumerate(program.instructions):
        if isinstance(ins, Compute):
            for k, t in enumerate(ins.op.inputs):
                last[(t, ins.strategy.operands[k])] = i
    return last


def _held(values, readers, n: int) -> int:
    """Bytes the busiest device holds: every live block it has (views of shared inputs count too)."""
    per_device = np.zeros(n, dtype=np.int64)
    for arr in list(values.values()) + list(readers.values()):
        for d, b in enumerate(arr.blocks):
            per_device[d] += b.nbytes
    return int(per_device.max(initial=0))


def _compute(ins: Compute, values, readers) -> DistributedArray:
    op, s = ins.op, ins.strategy
    operands = []
    for k, t in enumerate(op.inputs):
        arr = readers.get((t, s.operands[k]), values[t])
        if arr.sharding.layout_only() != s.operands[k]:
            raise SimulationMismatch(
                f"op {op.name!r} reads {t!r} laid out as {arr.sharding} but its strategy needs {s.operands[k]}: "
                "the program lacks a redistribution"
            )
        operands.append(arr)
    n = s.result.mesh.size
    blocks = []
    for d in range(n):
        ctx = LocalContext.for_device(s.operands, ins.in_shapes, s.result, ins.out_shape, d)
        blocks.append(local_compute(op, ins.rule, [a.blocks[d] for a in operands], ctx))
    return DistributedArray(s.result, tuple(ins.out_shape), blocks)
