"""The step time and the memory per device of one pipeline configuration.

A configuration (:class:`Config`) is the device factorisation ``pp x dp x stage mesh``,
the microbatch size and count, the schedule and its virtual stages, the recomputation
policy, the ZeRO stage and the partition of the layers into ``pp * v`` contiguous stages.
Given each layer's :class:`~planner.stages.profile.LayerCost` on the stage mesh:

Step time (:func:`evaluate`): the schedule's timeline
(:func:`~planner.stages.schedules.timeline`) with stage ``k``'s per-microbatch forward
``F_k`` (its layers' forwards, plus ZeRO-3's AllGather of its parameters over ``dp``),
backward ``B_k`` (their backwards, the recomputation the policy adds, and ZeRO-3's second
AllGather), and the CollectivePermute of the boundary activation over the pipeline axis
between stages; then, per device, once a step after its last backward: the gradient
reductions inside the stage mesh, the data-parallel reduction of its stages' accumulated
gradients (ZeRO 0: AllReduce; 1 and 2: ReduceScatter, then AllGather of the updated
parameters; 3: ReduceScatter) and Adam's update of the parameters it owns (memory-bound:
each element's parameter, gradient and two moments read, three written, in f32). The step
ends when the last device is done, plus the cluster's per-step launch overhead. A device's
reductions overlap the other devices' cool-down.

Memory per device (:func:`evaluate`): its stages' parameters, gradient accumulators and
Adam's two f32 moments (divided by ``dp`` from ZeRO stage 3, 2 and 1 respectively; ZeRO 3
adds the largest layer's gathered parameters), plus the activations of the microbatches
in flight at the schedule's worst moment (:func:`~planner.stages.schedules.peak_bytes`, read at the order's
:func:`~planner.stages.schedules.held_moments`):
each stage's stash per microbatch, and while an action runs, the stash it is building and
its largest value (forward), or twice its largest value and, with recomputation, the
recomputed stash of one layer (backward).
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodels import RING, Cluster
from costmodels.compute import op_time_s
from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh
from planner.stages.profile import LayerCost
from planner.stages.schedules import Compiled, Timeline, compiled, device_orders, ends, peak_bytes_at, timeline

__all__ = ["ADAM_BYTES_PER_ELEMENT", "Config", "Evaluation", "evaluate", "memory_bytes", "stage_sums"]

#: Adam's two moments, kept in f32.
ADAM_BYTES_PER_ELEMENT = 8
#: Adam's update reads a parameter, its gradient and both moments and writes three of them, in f32.
ADAM_UPDATE_BYTES_PER_ELEMENT = 7 * 4
#: FLOPs of Adam's update per element (moments, bias corrections, the step).
ADAM_UPDATE_FLOPS_PER_ELEMENT = 12


@dataclass(frozen=True)
class Config:
    """One pipeline configuration (module docstring). ``bounds[k]`` is the first layer of stage ``k``;
    ``bounds[-1]`` is the number of layers."""

    pp: int
    dp: int
    stage_axes: tuple[tuple[str, int], ...]
    microbatch: int
    microbatches: int
    schedule: str
    virtual_stages: int
    recompute: str
    zero: int
    bounds: tuple[int, ...]

    @property
    def stages(self) -> int:
        return self.pp * self.virtual_stages

    def stage_layers(self, k: int) -> range:
        return range(self.bounds[k], self.bounds[k + 1])


@dataclass(frozen=True)
class Evaluation:
    """A configuration's step time, memory per device, and the parts they are made of."""

    step_time_s: float
    memory_bytes_per_device: tuple[int, ...]  # per pipeline device group
    forward_s: tuple[float, ...]  # per stage, one microbatch
    backward_s: tuple[float, ...]
    send_s: tuple[float, ...]
    sync_s: tuple[float, ...]  # per device group, once a step
    timeline: Timeline | None  # the schedule run action by action (None while searching: ends only)

    @property
    def peak_memory_bytes(self) -> int:
        return max(self.memory_bytes_per_device)


def full_mesh(pp: int, dp: int, stage_axes) -> Mesh:
    """The devices as ``pp x dp x stage axes`` (the stage axes innermost: inside a node first)."""
    return Mesh.from_sizes("pipeline", {"pp": pp, "dp": dp, **dict(stage_axes)})


def stage_sums(costs: tuple[LayerCost, ...], policy: str) -> tuple:
    """Prefix sums over layers, so a stage's totals are two lookups: forward, backward with recomputation,
    stash, parameter bytes and elements, gradient sync."""
    acc = [[0.0] * (len(costs) + 1) for _ in range(6)]
    for i, c in enumerate(costs):
        vals = (c.forward_s, c.backward_s + c.recompute(policy), c.stash(policy), c.param_bytes, c.param_elements,
                c.gradient_sync_s)
        for j, v in enumerate(vals):
            acc[j][i + 1] = acc[j][i] + v
    return tuple(tuple(a) for a in acc)


def links(config: Config, cluster: Cluster) -> tuple:
    """The links of the pipeline axis and of the data-parallel axis on ``config``'s devices."""
    mesh = full_mesh(config.pp, config.dp, config.stage_axes)
    return cluster.link_for(mesh, (AxisRef("pp"),)), cluster.link_for(mesh, (AxisRef("dp"),))


def evaluate(config: Config, costs: tuple[LayerCost, ...], cluster: Cluster, sums=None,
             schedule: Compiled | None = None, pp_dp_links=None, full: bool = False) -> Evaluation:
    """The step time and memory of ``config`` (module docstring). ``sums``, ``schedule`` and ``pp_dp_links`` are
    what the search computes once for many partitions; ``full`` also runs the schedule action by action
    (:attr:`Evaluation.timeline`)."""
    sums = sums or stage_sums(costs, config.recompute)
    pp_link, dp_link = pp_dp_links or links(config, cluster)
    F, B, send = _stage_times(config, costs, sums, pp_link, dp_link)
    schedule = schedule or _compiled(config)
    tl = timeline(schedule.orders, F, B, send) if full else None
    finish = ends(schedule, F, B, send)
    sync = _syncs(config, sums, dp_link, cluster)
    memory = memory_bytes(config, costs, sums, schedule)
    step = max(e + s for e, s in zip(finish, sync)) + cluster.roofline.step_overhead_s
    return Evaluation(step, tuple(memory), tuple(F), tuple(B), tuple(send), tuple(sync), tl)


def memory_bytes(config: Config, costs: tuple[LayerCost, ...], sums=None, schedule: Compiled | None = None) -> list[int]:
    """:func:`evaluate`'s memory per device group alone (what a search checks before the step time)."""
    sums = sums or stage_sums(costs, config.recompute)
    stash, pbytes, pelems = sums[2], sums[3], sums[4]
    schedule = schedule or _compiled(config)
    dp = config.dp
    S = config.stages
    work_f, work_b, stash_k = [], [], []
    for k in range(S):
        a, b = config.bounds[k], config.bounds[k + 1]
        largest = max((costs[i].largest_bytes for i in range(a, b)), default=0)
        s = int(stash[b] - stash[a])
        stash_k.append(s)
        work_f.append(s + largest)
        redo = max((costs[i].stash("none") for i in range(a, b)), default=0) if config.recompute != "none" else 0
        work_b.append(2 * largest + redo)
    memory = []
    for d in range(config.pp):
        mine = range(d, S, config.pp)
        grad = sum(int(pbytes[config.bounds[k + 1]] - pbytes[config.bounds[k]]) for k in mine)
        elems = sum(int(pelems[config.bounds[k + 1]] - pelems[config.bounds[k]]) for k in mine)
        owned = -(-elems // dp) if config.zero >= 1 else elems
        params = -(-grad // dp) if config.zero == 3 else grad
        grads = -(-grad // dp) if config.zero >= 2 else grad
        adam = ADAM_BYTES_PER_ELEMENT * owned
        gathered = max((costs[i].param_bytes for k in mine for i in config.stage_layers(k)), default=0) \
            if config.zero == 3 and dp > 1 else 0
        acts = peak_bytes_at(schedule.moments[d], stash_k, work_f, work_b)
        memory.append(params + grads + adam + gathered + acts)
    return memory


def _compiled(config: Config) -> Compiled:
    return compiled(device_orders(config.schedule, config.pp, config.microbatches, config.virtual_stages))


def _stage_times(config: Config, costs, sums, pp_link, dp_link) -> tuple[list[float], list[float], list[float]]:
    """Per stage, one microbatch's forward and backward time (with ZeRO-3's gathers), and per boundary the send."""
    fwd, bwd, pbytes = sums[0], sums[1], sums[3]
    dp = config.dp
    F, B, send = [], [], []
    S = config.stages
    for k in range(S):
        a, b = config.bounds[k], config.bounds[k + 1]
        f, bw = fwd[b] - fwd[a], bwd[b] - bwd[a]
        if config.zero == 3 and dp > 1:  # parameters gathered before the forward and again for the backward
            gather = RING.all_gather(dp, -(-int(pbytes[b] - pbytes[a]) // dp), dp_link).time_s
            f, bw = f + gather, bw + gather
        F.append(f)
        B.append(bw)
        if k < S - 1:
            send.append(RING.collective_permute(costs[b - 1].send_bytes, pp_link).time_s if b > a else 0.0)
    return F, B, send


def _syncs(config: Config, sums, dp_link, cluster: Cluster) -> list[float]:
    """Per device group, its work once a step after its last backward (:func:`sync_time_s`)."""
    pbytes, pelems, gsync = sums[3], sums[4], sums[5]
    out = []
    for d in range(config.pp):
        mine = [k for k in range(config.stages) if k % config.pp == d]
        grad = sum(int(pbytes[config.bounds[k + 1]] - pbytes[config.bounds[k]]) for k in mine)
        elems = sum(int(pelems[config.bounds[k + 1]] - pelems[config.bounds[k]]) for k in mine)
        inside = sum(gsync[config.bounds[k + 1]] - gsync[config.bounds[k]] for k in mine)
        out.append(sync_time_s(grad, elems, inside, config.dp, config.zero, dp_link, cluster))
    return out


def sync_time_s(grad_bytes: int, elements: int, inside_s: float, dp: int, zero: int, dp_link, cluster: Cluster) -> float:
    """A device's work once a step after its last backward: the stage mesh's gradient reductions (``inside_s``), the
    data-parallel reduction of ``grad_bytes`` of accumulated gradients under ZeRO stage ``zero``, and Adam's update of
    the ``elements`` it owns. Increasing in each of its arguments."""
    t = inside_s
    if dp > 1:
        shard = -(-int(grad_bytes) // dp)
        if zero == 0:
            t += RING.all_reduce(dp, shard, dp_link).time_s
        else:
            t += RING.reduce_scatter(dp, shard, dp_link).time_s
            if zero in (1, 2):
                t += RING.all_gather(dp, shard, dp_link).time_s
    owned = -(-int(elements) // dp) if zero >= 1 else int(elements)
    return t + op_time_s(ADAM_UPDATE_FLOPS_PER_ELEMENT * owned, ADAM_UPDATE_BYTES_PER_ELEMENT * owned, "f32", False,
                         cluster)
