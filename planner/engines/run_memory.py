"""How much memory ``shardplan run`` needs, estimated from the plan before JAX starts.

A run holds, in one process (on a CPU-only machine every device of the mesh is a host device, its
buffers in the same memory):

* **the runtime**: Python, numpy, JAX and XLA, and XLA's compilation of the step (which grows with the
  number of ops, forward and backward): :data:`RUNTIME_BYTES` plus :data:`COMPILE_BYTES_PER_OP` per op and
  pass;
* **the host data**: every input, parameter and constant (and with training every output's cotangent)
  drawn in float64 (8 B an element) and kept rounded to its declared dtype;
* **XLA's buffers on every device**: the device's blocks of the arguments, its outputs and its temporary
  buffers (``compiled.memory_analysis()``: ``argument + output + temp``). Before compiling these are
  bounded by the plan's own memory per device (``plan.totals.memory_bytes_per_device``: every value the
  plan's program holds on a device, none freed, parameters with their gradients and Adam state) times
  :data:`XLA_PLAN_FACTOR`, plus :data:`XLA_FULL_TENSORS` times the largest tensor's full size (with
  constraints: where XLA cannot go from one sharding to another it replicates the tensor first); in one
  ``shard_map`` of the plan's program XLA holds the program's values, so :data:`SHARD_MAP_PLAN_FACTOR` and
  :data:`SHARD_MAP_FULL_TENSORS` bound it. On the configs here XLA's bytes
  per device are 0.06 to 1.4 times the plan's figure (``benchmarks/run_memory/README.md``);
* **the single-device reference** (:func:`graphs.evaluate.run_reference`,
  :func:`graphs.gradients.reference_gradients`): floats in float64. :func:`reference_peak_bytes` replays
  the reference's own bookkeeping (a forward value is dropped after its last reader unless an output or a
  VJP reads it, a cotangent once its producer's VJP used it) on byte counts, adding
  :data:`TRANSIENT_FACTOR` times the largest operand or result of the op at hand for the temporaries of its
  ``reference``/``vjp``.

XLA's host devices run on threads of their own, and glibc's allocator keeps what a thread frees in that
thread's arena, where another thread does not reuse it: what the compilation and each run of the step free
would stay resident beside the next run's buffers. ``run`` hands those free pages back to the system after
compiling and after every run of the step (:func:`planner.simulation.host_memory.release_free_memory`).

The estimate is their sum: the run never holds all of them at once (the reference runs once XLA's
temporaries are gone), so it is an upper bound of the peak, not a prediction of it.
:func:`check_run_memory` refuses a run whose estimate exceeds the machine's memory
(:func:`planner.limits.check_run_bytes`) before anything is allocated, naming a ``--memory-budget`` per device
under which the estimate would fit; once XLA has compiled the step,
:func:`check_compiled_memory` checks again with XLA's own per-device figure, before running it.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

from graphs.dtypes import dtype_itemsize, is_float
from planner.errors import quote
from planner import limits
from planner.limits import check_run_bytes, format_bytes
from planner.simulation.memory import TRANSIENT_FACTOR, reference_peak_bytes  # noqa: F401  (named by the docstring)

#: Python, numpy, JAX and XLA once imported, with the host devices started.
RUNTIME_BYTES = 384 * 2**20
#: XLA's compilation, per op of the graph and per pass (forward; backward with training).
COMPILE_BYTES_PER_OP = 2**20
#: With constraints, XLA's bytes per device are at most this many times the plan's memory per device ...
XLA_PLAN_FACTOR = 2
#: ... plus this many copies of the largest tensor, whole (a replicate-then-slice XLA falls back on).
XLA_FULL_TENSORS = 2
#: In one shard_map of the plan's program XLA holds the program's own values (the plan's memory counts each
#: once, none freed), plus the largest tensor once for a collective's or fusion's scratch.
SHARD_MAP_PLAN_FACTOR = 1
SHARD_MAP_FULL_TENSORS = 1
#: Bytes of an element of the float64 reference.
REFERENCE_FLOAT_BYTES = 8

#: Packages whose presence makes JAX run on an accelerator by default (its buffers then are not this machine's).
ACCELERATOR_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm7_plugin", "jax_rocm60_plugin", "libtpu")

HINT = ("run a smaller version of the model (fewer layers, a smaller batch, sequence or hidden size), or plan it to "
        "need less memory per device (--search ilp --memory-budget BYTES)")


@dataclass(frozen=True)
class RunMemory:
    """The parts of :func:`estimate_run_memory`'s bound, in bytes."""

    runtime: int
    host_data: int
    xla: int            # all devices together
    reference: int
    devices: int
    on_host: bool = True  # whether XLA's buffers are in this machine's memory (host devices)

    @property
    def total(self) -> int:
        return self.runtime + self.host_data + self.xla + self.reference

    def text(self) -> str:
        xla = (f"{format_bytes(self.xla)} of XLA buffers on {self.devices} devices" if self.on_host
               else f"XLA's buffers on the {self.devices} accelerators not counted")
        return (f"{xla}, {format_bytes(self.reference)} "
                f"for the float64 reference, {format_bytes(self.host_data)} of data, "
                f"{format_bytes(self.runtime)} for JAX and the compilation")


def xla_on_host() -> bool:
    """Whether JAX will run on host (CPU) devices, said without importing it: the first of ``JAX_PLATFORMS``
    where that is set, else whether no accelerator plugin (:data:`ACCELERATOR_PLUGINS`) is installed."""
    platforms = os.environ.get("JAX_PLATFORMS", "").strip()
    if platforms:
        return platforms.split(",")[0].strip() == "cpu"
    return not any(importlib.util.find_spec(name) is not None for name in ACCELERATOR_PLUGINS)


def _factors(lowering: str) -> tuple[int, int]:
    return ((SHARD_MAP_PLAN_FACTOR, SHARD_MAP_FULL_TENSORS) if lowering == "shard_map"
            else (XLA_PLAN_FACTOR, XLA_FULL_TENSORS))


def estimate_run_memory(plan, lowering: str = "constraints") -> RunMemory:
    """An upper bound of the peak memory of ``run_on_jax(plan)`` under ``lowering`` (``shard_map`` or
    ``constraints``), from the plan alone (see the module docstring)."""
    graph = plan.graph
    training = bool(plan.program.training)
    devices = plan.mesh.size
    passes = 2 if training else 1
    runtime = RUNTIME_BYTES + COMPILE_BYTES_PER_OP * passes * len(graph.ops)
    sources = [t for t in graph.tensors.values() if t.kind != "activation"]
    if training:
        sources += [graph.tensor(o) for o in dict.fromkeys(graph.outputs) if is_float(graph.tensor(o).dtype)]
    host = sum(t.numel * (REFERENCE_FLOAT_BYTES + dtype_itemsize(t.dtype)) for t in sources)
    largest = max((t.numel * dtype_itemsize(t.dtype) for t in graph.tensors.values()), default=0)
    factor, copies = _factors(lowering)
    per_device = factor * int(plan.totals.memory_bytes_per_device) + copies * largest
    on_host = xla_on_host()
    return RunMemory(runtime=runtime, host_data=host, xla=devices * per_device if on_host else 0,
                     reference=reference_peak_bytes(graph, training), devices=devices, on_host=on_host)


def check_run_memory(plan, lowering: str = "constraints") -> RunMemory:
    """:func:`estimate_run_memory`, or :class:`~planner.errors.LimitError` (exit 2) naming it when it exceeds
    the machine's memory (:func:`planner.limits.check_run_bytes`)."""
    estimate = estimate_run_memory(plan, lowering)
    what = "training" if plan.program.training else "running"
    check_run_bytes(estimate.total, f"{what} model {quote(plan.graph.name)} on JAX ({estimate.text()})",
                    _hint(plan, estimate, lowering))
    return estimate


def _hint(plan, estimate: RunMemory, lowering: str) -> str:
    """:data:`HINT`, with the per-device budget under which the estimate would fit this machine where there is one."""
    graph = plan.graph
    largest = max((t.numel * dtype_itemsize(t.dtype) for t in graph.tensors.values()), default=0)
    room = limits.machine_memory_bytes() - estimate.runtime - estimate.host_data - estimate.reference
    factor, copies = _factors(lowering)
    budget = (room // estimate.devices - copies * largest) // factor
    if budget < 2**20 or not estimate.on_host:
        return HINT
    budget = 2 ** (budget.bit_length() - 1)  # a round figure below it
    return HINT.replace("BYTES", format_bytes(budget).replace(" ", ""))


def check_compiled_memory(compiled, plan, host_bytes: int, on_host: bool = True) -> int:
    """XLA's own bytes for the compiled step on all devices (``argument + output + temp`` per device, from
    ``compiled.memory_analysis()``) plus ``host_bytes``; :class:`~planner.errors.LimitError` before the step runs
    when that exceeds the machine's memory. 0 where XLA does not say, or its devices are not the host's
    (``on_host`` false: an accelerator's buffers are in its own memory)."""
    if not on_host:
        return 0
    try:
        stats = compiled.memory_analysis()
        per_device = stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes
    except (AttributeError, NotImplementedError, TypeError, RuntimeError):
        return 0
    xla = plan.mesh.size * int(per_device)
    check_run_bytes(xla + host_bytes,
                    f"the compiled step of model {quote(plan.graph.name)} ({format_bytes(xla)} of XLA buffers on "
                    f"{plan.mesh.size} devices, {format_bytes(host_bytes)} besides)", HINT)
    return xla
