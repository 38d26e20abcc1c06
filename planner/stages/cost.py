"""The step time and the memory per device of one pipeline configuration.

A configuration (:class:`Config`) is the device factorisation ``pp x dp x stage mesh``,
the microbatch size and count, the schedule and its virtual stages, the recomputation
policy, the ZeRO stage and the partition of the layers into ``pp * v`` contiguous stages.
Given each layer's :class:`~planner.stages.profile.LayerCost` on the stage mesh:

Step time (:func:`evaluate`): the schedule's timeline
(:func:`~planner.stages.schedules.timeline`) with stage ``k``'s per-microbatch forward
``F_k`` (its layers' forwards, plus ZeRO-3's AllGather of its parameters over ``dp``),
backward ``B_k`` (their backwards, the recomputation the policy adds, ZeRO-3's second
AllGather, and under ZeRO 2 and 3 each layer's gradient bucket, :func:`bucket_time_s`),
and the CollectivePermute of the boundary activation over the pipeline axis between
stages; then, per device, once a step after its last backward (:func:`sync_time_s`): the
gradient reductions inside the stage mesh and the data-parallel reduction of its stages'
accumulated gradients (ZeRO 0: AllReduce; 1: ReduceScatter, then AllGather of the updated
parameters), or under ZeRO 2 only that AllGather (3: nothing, its buckets were reduced
during the backward), and Adam's update of the parameters it owns (memory-bound: each
element's parameter, gradient and two moments read, three written, in f32). The step ends
when the last device is done, plus the cluster's per-step launch overhead. A device's
reductions overlap the other devices' cool-down, never its own work: a bucket's
reductions run on the device between its layer's backward and the next layer's, which
keeps one bucket held at a time.

Gradient buckets (:func:`bucketed`: ZeRO 2 and 3 over ``dp > 1``, as DeepSpeed's ZeRO-2
reduces them): one bucket per layer. When a layer's backward of a microbatch begins, its
gradient buffer is made (zero, whole: the layer's parameter bytes); once the layer's
backward has run, the buffer is reduced inside the stage mesh (the layer's gradient
reductions), reduce-scattered over ``dp`` and added into the layer's ``1/dp`` accumulator
shard (:func:`layer_shard_bytes`: its flat buffer padded to a multiple of ``dp``
elements), and freed. A replica owns its shard of every layer: its optimizer state, and
under ZeRO 3 its parameters, are those shards. A step moves ``m`` bucket ReduceScatters
per layer instead of one per device; ZeRO 0 and 1 keep whole accumulators and one
reduction a step.

Memory per device (:func:`evaluate`), what the pipeline simulator holds (docs/training.md, "What a
device holds"): its stages' parameters (ZeRO 3: its shards), their gradient accumulators (ZeRO 0
and 1: whole, reduced once a step; 2 and 3: its shards of the buckets) and Adam's two f32 moments
(divided by ``dp`` from ZeRO stage 1), plus the activations at the schedule's worst moment
(:func:`~planner.stages.schedules.peak_bytes`, read at the order's
:func:`~planner.stages.schedules.held_moments`): the stash of every microbatch in flight, and while
an action runs what its microbatch holds at the action's worst instruction (:func:`stage_peaks`,
from each layer's walk of its program, :meth:`~planner.stages.profile.LayerCost.forward_peak`),
with ZeRO 3 the stage's parameters gathered whole for the action, and with ZeRO 2 and 3 during a
backward the bucket of the layer running.

So ZeRO 2 holds less than ZeRO 1 on device group ``d`` (its layers' parameter bytes ``G_i``, their
shards ``s_i``, ``dp`` dividing every layer's elements) whenever ``max_i G_i + sum_i s_i < sum_i G_i``:
a bucket is held only during its layer's backward, so ZeRO 2's peak is at most its shards, the largest
bucket and ZeRO 1's activation peak; the condition is also necessary when ZeRO 1's peak falls in the
largest bucket's backward. For ``n`` alike layers, ``1/n + 1/dp < 1``: never with one layer, not with two
at ``dp = 2`` (the bound ties), from three layers at ``dp = 2`` or two at ``dp >= 3``.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodels import RING, Cluster
from costmodels.compute import op_time_s
from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh
from planner.stages.profile import LayerCost
from planner.stages.schedules import Compiled, Timeline, compiled, device_orders, ends, peak_bytes_at, timeline

__all__ = ["ADAM_BYTES_PER_ELEMENT", "Config", "Evaluation", "bucket_time_s", "bucketed", "evaluate",
           "layer_shard_bytes", "memory_bytes", "shard_bytes", "stage_peaks", "stage_sums", "sync_time_s"]

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
    stash, parameter bytes and elements, gradient sync; then per layer ``i`` the stash of the layers before it
    plus its forward peak, and plus its backward peak (:func:`stage_peaks` of layers ``a .. b-1`` is the most of
    those over the stage, less the stash before layer ``a``)."""
    acc = [[0.0] * (len(costs) + 1) for _ in range(6)]
    for i, c in enumerate(costs):
        vals = (c.forward_s, c.backward_s + c.recompute(policy), c.stash(policy), c.param_bytes, c.param_elements,
                c.gradient_sync_s)
        for j, v in enumerate(vals):
            acc[j][i + 1] = acc[j][i] + v
    stash = acc[2]
    forward_at = tuple(int(stash[i]) + c.forward_peak(policy) for i, c in enumerate(costs))
    backward_at = tuple(int(stash[i]) + c.backward_peak(policy) for i, c in enumerate(costs))
    return tuple(tuple(a) for a in acc) + (forward_at, backward_at)


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
    sync = _syncs(config, costs, sums, dp_link, cluster)
    memory = memory_bytes(config, costs, sums, schedule)
    step = max(e + s for e, s in zip(finish, sync)) + cluster.roofline.step_overhead_s
    return Evaluation(step, tuple(memory), tuple(F), tuple(B), tuple(send), tuple(sync), tl)


def memory_bytes(config: Config, costs: tuple[LayerCost, ...], sums=None, schedule: Compiled | None = None) -> list[int]:
    """:func:`evaluate`'s memory per device group alone (what a search checks before the step time)."""
    sums = sums or stage_sums(costs, config.recompute)
    stash, pbytes, pelems, forward_at, backward_at = sums[2], sums[3], sums[4], sums[6], sums[7]
    schedule = schedule or _compiled(config)
    dp = config.dp
    S = config.stages
    buckets = bucketed(config.zero, dp)
    work_f, work_b, stash_k = [], [], []
    for k in range(S):
        a, b = config.bounds[k], config.bounds[k + 1]
        s = int(stash[b] - stash[a])
        stash_k.append(s)
        # stage_peaks, from the prefix sums; a layer's gradient bucket is held through its backward
        forward_peak = max(forward_at[a:b]) - int(stash[a]) if b > a else 0
        if buckets:
            backward_peak = max((backward_at[i] + costs[i].param_bytes for i in range(a, b)), default=int(stash[a])) \
                - int(stash[a])
        else:
            backward_peak = max(backward_at[a:b]) - int(stash[a]) if b > a else 0
        gathered = int(pbytes[b] - pbytes[a]) if config.zero == 3 and dp > 1 else 0
        work_f.append(forward_peak + gathered)
        work_b.append(backward_peak - s + gathered)  # the schedule's walk holds the microbatch's own stash already
    memory = []
    for d in range(config.pp):
        mine = range(d, S, config.pp)
        if buckets:  # its shards of every bucket (module docstring)
            layers = [i for k in mine for i in config.stage_layers(k)]
            grads = sum(layer_shard_bytes(costs[i], dp) for i in layers)
            owned = sum(-(-costs[i].param_elements // dp) for i in layers)
            params = grads if config.zero == 3 else sum(costs[i].param_bytes for i in layers)
        else:  # accumulated whole over the microbatches, reduced once a step
            grads = sum(int(pbytes[config.bounds[k + 1]] - pbytes[config.bounds[k]]) for k in mine)
            elems = [int(pelems[config.bounds[k + 1]] - pelems[config.bounds[k]]) for k in mine]
            owned = sum(-(-e // dp) for e in elems) if config.zero >= 1 else sum(elems)
            params = grads
        adam = ADAM_BYTES_PER_ELEMENT * owned
        acts = peak_bytes_at(schedule.moments[d], stash_k, work_f, work_b)
        memory.append(params + grads + adam + acts)
    return memory


def _compiled(config: Config) -> Compiled:
    return compiled(device_orders(config.schedule, config.pp, config.microbatches, config.virtual_stages))


def _stage_times(config: Config, costs, sums, pp_link, dp_link) -> tuple[list[float], list[float], list[float]]:
    """Per stage, one microbatch's forward and backward time (with ZeRO-3's gathers and ZeRO 2 and 3's gradient
    buckets), and per boundary the send."""
    fwd, bwd, pbytes = sums[0], sums[1], sums[3]
    dp = config.dp
    buckets = bucketed(config.zero, dp)
    F, B, send = [], [], []
    S = config.stages
    for k in range(S):
        a, b = config.bounds[k], config.bounds[k + 1]
        f, bw = fwd[b] - fwd[a], bwd[b] - bwd[a]
        if config.zero == 3 and dp > 1:  # parameters gathered before the forward and again for the backward
            shard = sum(layer_shard_bytes(costs[i], dp) for i in range(a, b)) if buckets else \
                -(-int(pbytes[b] - pbytes[a]) // dp)
            gather = RING.all_gather(dp, shard, dp_link).time_s
            f, bw = f + gather, bw + gather
        if buckets:
            bw += sum(bucket_time_s(costs[i], dp, dp_link) for i in range(a, b))
        F.append(f)
        B.append(bw)
        if k < S - 1:
            send.append(RING.collective_permute(costs[b - 1].send_bytes, pp_link).time_s if b > a else 0.0)
    return F, B, send


def _syncs(config: Config, costs, sums, dp_link, cluster: Cluster) -> list[float]:
    """Per device group, its work once a step after its last backward (:func:`sync_time_s`; with gradient buckets,
    of the shards it owns)."""
    pbytes, pelems, gsync = sums[3], sums[4], sums[5]
    dp = config.dp
    out = []
    for d in range(config.pp):
        mine = [k for k in range(config.stages) if k % config.pp == d]
        if bucketed(config.zero, dp):
            layers = [i for k in mine for i in config.stage_layers(k)]
            out.append(_step_end_s(sum(layer_shard_bytes(costs[i], dp) for i in layers),
                                   sum(-(-costs[i].param_elements // dp) for i in layers), 0.0, dp, config.zero,
                                   dp_link, cluster))
            continue
        # each stage's flat buffer is sharded on its own
        parts = [(int(pbytes[config.bounds[k + 1]] - pbytes[config.bounds[k]]),
                  int(pelems[config.bounds[k + 1]] - pelems[config.bounds[k]])) for k in mine]
        inside = sum(gsync[config.bounds[k + 1]] - gsync[config.bounds[k]] for k in mine)
        owned = sum(-(-e // dp) for _, e in parts) if config.zero >= 1 else sum(e for _, e in parts)
        out.append(_step_end_s(sum(shard_bytes(b, e, dp) for b, e in parts), owned, inside, dp, config.zero, dp_link,
                               cluster))
    return out


def stage_peaks(costs: tuple[LayerCost, ...], a: int, b: int, policy: str) -> tuple[int, int]:
    """The most activation bytes one microbatch holds on a device while the stage of layers ``a .. b-1`` runs its
    forward, and its backward: over the stage's layers, the stash of the layers before each one plus what that
    layer holds at its worst instruction (:meth:`~planner.stages.profile.LayerCost.forward_peak`)."""
    before = forward = backward = 0
    for i in range(a, b):
        c = costs[i]
        forward = max(forward, before + c.forward_peak(policy))
        backward = max(backward, before + c.backward_peak(policy))
        before += c.stash(policy)
    return forward, backward


def bucketed(zero: int, dp: int) -> bool:
    """Whether the gradients go to the data-parallel replicas in buckets during the backward, one per layer, into
    ``1/dp`` accumulator shards (ZeRO 2 and 3 over more than one replica; module docstring) rather than accumulating
    whole until one reduction a step."""
    return zero >= 2 and dp > 1


def shard_bytes(nbytes: int, elements: int, dp: int) -> int:
    """The bytes of one replica's shard of a flat buffer of ``elements`` elements and ``nbytes`` bytes: its elements
    padded to a multiple of ``dp``, divided by ``dp``, at its bytes per element (one dtype a buffer, as the
    simulator's flat buffers take)."""
    if elements == 0:
        return 0
    return -(-int(elements) // dp) * (int(nbytes) // int(elements))


def layer_shard_bytes(cost: LayerCost, dp: int) -> int:
    """:func:`shard_bytes` of a layer's gradient (or parameter) buffer on a device: one replica's shard of its
    bucket."""
    return shard_bytes(cost.param_bytes, cost.param_elements, dp)


def bucket_time_s(cost: LayerCost, dp: int, dp_link) -> float:
    """One microbatch's gradient bucket of a layer, right after the layer's backward and before the next layer's
    (module docstring): its gradient reductions inside the stage mesh, then the ReduceScatter of its buffer over
    ``dp`` (a ring of :func:`layer_shard_bytes` shards). A layer without parameters has none."""
    if cost.param_bytes == 0:
        return 0.0
    return cost.gradient_sync_s + RING.reduce_scatter(dp, layer_shard_bytes(cost, dp), dp_link).time_s


def sync_time_s(grad_bytes: int, elements: int, inside_s: float, dp: int, zero: int, dp_link, cluster: Cluster) -> float:
    """A device's work once a step after its last backward: the stage mesh's gradient reductions (``inside_s``), the
    data-parallel reduction of ``grad_bytes`` of accumulated gradients under ZeRO stage ``zero``, and Adam's update of
    the ``elements`` it owns; with gradient buckets (:func:`bucketed`) the reductions ran during the backward, and
    ZeRO 2 AllGathers the updated parameters. Shards are ``1/dp`` of the whole, rounded up (the padding of each
    stage's or bucket's elements, :func:`shard_bytes`, can only add to them). Non-decreasing in each of its
    arguments."""
    return _step_end_s(-(-int(grad_bytes) // dp), -(-int(elements) // dp) if zero >= 1 else int(elements),
                       0.0 if bucketed(zero, dp) else inside_s, dp, zero, dp_link, cluster)


def _step_end_s(shard_bytes: int, owned: int, inside_s: float, dp: int, zero: int, dp_link, cluster: Cluster) -> float:
    """:func:`sync_time_s` from a replica's shard of the gradients and the elements it updates."""
    t = inside_s
    if dp > 1:
        if bucketed(zero, dp):
            t += RING.all_gather(dp, shard_bytes, dp_link).time_s if zero == 2 else 0.0
        elif zero == 0:
            t += RING.all_reduce(dp, shard_bytes, dp_link).time_s
        else:
            t += RING.reduce_scatter(dp, shard_bytes, dp_link).time_s
            if zero == 1:
                t += RING.all_gather(dp, shard_bytes, dp_link).time_s
    return t + op_time_s(ADAM_UPDATE_FLOPS_PER_ELEMENT * owned, ADAM_UPDATE_BYTES_PER_ELEMENT * owned, "f32", False,
                         cluster)
