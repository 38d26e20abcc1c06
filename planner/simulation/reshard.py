"""Running a redistribution plan on the simulator and checking what it produced."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from graphs.dtypes import dtype_itemsize, numpy_dtype
from planner.errors import SimulationMismatch
from planner.ir.layout import same_layout
from planner.limits import check_simulation_bytes
from planner.redistribution.steps import ReshardPlan
from planner.simulation.collectives import Network, run_step
from planner.simulation.distributed import DistributedArray


@dataclass(frozen=True, slots=True)
class Verification:
    """Outcome of executing a plan: exact result?, and the bytes devices really received."""

    verified: bool
    measured_bytes_per_device: int
    predicted_bytes_per_device: int
    per_step_bytes: tuple[int, ...]
    message: str = ""


def execute(plan: ReshardPlan, arr: DistributedArray, net: Network | None = None) -> tuple[DistributedArray, Network]:
    """Run every step of ``plan`` on ``arr`` (which must be laid out as the plan's source).

    Bytes are counted at the plan's declared dtype (a bf16 tensor simulated in
    float32 still counts 2 bytes per element); pass ``net`` to accumulate.
    """
    net = net if net is not None else Network(arr.mesh.size)
    net.itemsize = dtype_itemsize(plan.dtype)
    for step in plan.steps:
        arr = run_step(arr, step, net)
    return arr, net


def verify(plan: ReshardPlan, seed: int = 0) -> Verification:
    """Execute ``plan`` on random integer-valued data and compare bit for bit.

    The source is built with uneven partial sums when it has pending reductions. A
    :class:`~planner.errors.SimulationMismatch` while executing (a device lacks elements
    of its new block ...) is a failed verification whose ``message`` says why.
    """
    dtype = numpy_dtype(plan.dtype)
    # at least: the integer draws (8 bytes an element), the source in its dtype, the devices' blocks
    elements = math.prod(plan.shape)
    check_simulation_bytes(elements * (8 + 2 * np.dtype(dtype).itemsize),
                           f"verifying a redistribution of a {'x'.join(map(str, plan.shape))} {plan.dtype} tensor",
                           "leave out --verify, or verify the same shardings on a smaller shape")
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        x = rng.integers(0, 2, size=plan.shape).astype(bool)
    else:
        x = rng.integers(-50, 50, size=plan.shape).astype(dtype)
    arr = DistributedArray.from_global(x, plan.source, rng=None if dtype == np.bool_ else rng)
    try:
        out, net = execute(plan, arr)
        got = out.to_global()
    except SimulationMismatch as e:
        return Verification(False, 0, plan.bytes_per_device, (), str(e))
    per_step = tuple(int(s.max(initial=0)) for s in net.per_step)
    layout_ok = same_layout(out.sharding, plan.destination, plan.shape)
    exact = bool(np.array_equal(got, x))
    ok = layout_ok and exact
    message = "" if ok else ("wrong layout" if not layout_ok else "values differ from the source")
    return Verification(ok, net.bytes_per_device, plan.bytes_per_device, per_step, message)
