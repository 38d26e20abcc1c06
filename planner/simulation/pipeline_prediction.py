"""What a pipelined plan predicts its simulated step moves and holds, in the simulator's terms.

The pipeline simulator (:mod:`planner.simulation.pipeline`) measures bytes per phase and device group and memory
per device by part; these functions give the prediction of each from the plan's configuration
(:class:`~planner.stages.cost.Config`), its layers' costs (:class:`~planner.stages.profile.LayerCost`) and the priced
stage-mesh program's redistributions, as :mod:`planner.stages.cost` prices them:

* :func:`predicted_bytes`: inside a stage mesh, each layer's redistributions (forward and backward every
  microbatch, the gradient reductions once a step, or every microbatch in its gradient bucket under ZeRO 2 and 3,
  full recomputation's forward again); between stages, the CollectivePermute of each stage's boundary activation
  and of its cotangent; over the data-parallel replicas, the gradient sync of the cost model's ZeRO stage (ZeRO 2
  and 3: every microbatch's ReduceScatter of each layer's bucket, and ZeRO 2's AllGather of the updated parameters
  once a step) and ZeRO 3's AllGather of a stage's parameters before each forward and each backward;
* :func:`predicted_memory_parts`: the cost model's memory per device by part (docs/training.md, "What a device
  holds");
* :func:`predicted_held_activations`: the stash of the microbatches in flight between two actions.
"""

from __future__ import annotations

from costmodels import RING
from planner.stages.cost import ADAM_BYTES_PER_ELEMENT, bucketed, layer_shard_bytes, links, shard_bytes, stage_peaks
from planner.partitioning import Redistribute
from planner.stages.schedules import device_orders, peak_bytes

__all__ = ["MEMORY_PARTS", "PIPELINE_PHASES", "predicted_bytes", "predicted_held_activations",
           "predicted_memory_parts"]

PIPELINE_PHASES = ("forward", "backward", "recompute", "gradient", "sends", "gradient_sync", "zero_gathers")
"""Where the simulated pipeline's bytes are counted: inside a stage mesh (forward, backward, recompute, gradient),
between stages (sends: boundary activations and their cotangents), over the data-parallel replicas (gradient_sync,
zero_gathers)."""

MEMORY_PARTS = ("parameters", "gradients", "optimizer_state", "activations")
"""What a device holds, by part: its parameters (ZeRO 3: its shards and the stage's gathered parameters), gradient
accumulators, optimizer state, and the microbatches' activations, residuals and cotangents (those received from the
neighbouring stages included, from the start of the action that reads them)."""


def predicted_bytes(c, instructions, costs, cluster) -> dict[str, list[int]]:
    """Per phase (:data:`PIPELINE_PHASES`), per device group, the bytes a device of it receives in one step of
    configuration ``c``; ``instructions[i]`` is layer ``i``'s ``(forward, backward, gradient)`` instructions of the
    priced stage-mesh program."""
    m, dp = c.microbatches, c.dp
    buckets = bucketed(c.zero, dp)
    pp_link, dp_link = links(c, cluster)
    out = {phase: [0] * c.pp for phase in PIPELINE_PHASES}

    def moved(seq) -> int:
        return sum(ins.plan.bytes_per_device for ins in seq if isinstance(ins, Redistribute))

    for k in range(c.stages):
        d = k % c.pp
        for i in c.stage_layers(k):
            forward, backward, gradient = instructions[i]
            out["forward"][d] += m * moved(forward)
            out["backward"][d] += m * moved(backward)
            out["gradient"][d] += (m if buckets else 1) * moved(gradient)
            if c.recompute == "full":
                out["recompute"][d] += m * moved(forward)
            if buckets and costs[i].param_bytes:
                out["gradient_sync"][d] += m * RING.reduce_scatter(dp, layer_shard_bytes(costs[i], dp),
                                                                   dp_link).bytes_per_device
        a, b = c.bounds[k], c.bounds[k + 1]
        if k > 0:  # the activation from stage k - 1
            out["sends"][d] += m * RING.collective_permute(costs[a - 1].send_bytes, pp_link).bytes_per_device
        if k < c.stages - 1:  # the cotangent from stage k + 1
            out["sends"][d] += m * RING.collective_permute(costs[b - 1].send_bytes, pp_link).bytes_per_device
        if c.zero == 3 and dp > 1:
            shard = sum(layer_shard_bytes(costs[i], dp) for i in range(a, b))
            out["zero_gathers"][d] += 2 * m * RING.all_gather(dp, shard, dp_link).bytes_per_device
    for d in range(c.pp):
        layers = [i for k in range(c.stages) if k % c.pp == d for i in c.stage_layers(k)]
        if buckets:
            if c.zero == 2:
                shard = sum(layer_shard_bytes(costs[i], dp) for i in layers)
                out["gradient_sync"][d] += RING.all_gather(dp, shard, dp_link).bytes_per_device
        elif dp > 1:  # each stage's flat buffer sharded on its own
            shard = sum(shard_bytes(sum(costs[i].param_bytes for i in c.stage_layers(k)),
                                    sum(costs[i].param_elements for i in c.stage_layers(k)), dp)
                        for k in range(d, c.stages, c.pp))
            if c.zero == 0:
                out["gradient_sync"][d] = RING.all_reduce(dp, shard, dp_link).bytes_per_device
            else:
                out["gradient_sync"][d] = RING.reduce_scatter(dp, shard, dp_link).bytes_per_device + \
                    RING.all_gather(dp, shard, dp_link).bytes_per_device
    return out


def predicted_memory_parts(c, costs, d: int, total: int, adam: bool) -> dict[str, int]:
    """The cost model's memory of device group ``d`` (:func:`planner.stages.cost.evaluate`, ``total``, which counts
    Adam's moments) by part (:data:`MEMORY_PARTS`): its parameters (ZeRO 3: its shards and the parameters of the
    stage whose action is at the peak, gathered), its gradient accumulators (whole; ZeRO 2 and 3: its shards and,
    when the peak is in a backward, the bucket of the layer running then), Adam's two moments (none without
    ``adam``), and the activations, the rest of ``total``."""
    layers = [i for k in range(c.stages) if k % c.pp == d for i in c.stage_layers(k)]
    grad = sum(costs[i].param_bytes for i in layers)
    elems = sum(costs[i].param_elements for i in layers)
    dp = c.dp
    gathered, bucket = _held_at_peak(c, costs, d)
    if bucketed(c.zero, dp):
        grads = sum(layer_shard_bytes(costs[i], dp) for i in layers) + bucket
        owned = sum(-(-costs[i].param_elements // dp) for i in layers)
        params = grads - bucket if c.zero == 3 else grad
    else:
        grads = grad
        owned = sum(-(-sum(costs[i].param_elements for i in c.stage_layers(k)) // dp)
                    for k in range(d, c.stages, c.pp)) if c.zero >= 1 else elems
        params = grad
    moments = ADAM_BYTES_PER_ELEMENT * owned
    return {"parameters": params + gathered, "gradients": grads, "optimizer_state": moments if adam else 0,
            "activations": total - params - gathered - grads - moments}


def _held_at_peak(c, costs, d: int) -> tuple[int, int]:
    """At device group ``d``'s most bytes (the schedule's walk of :func:`planner.stages.cost.evaluate`, the first
    moment at the peak): the parameters gathered whole (ZeRO 3: the stage's whose action runs) and the gradient
    bucket held (ZeRO 2 and 3 in a backward: that of the first layer, in the backward's order, at the action's
    worst)."""
    gathers, buckets = c.zero == 3 and c.dp > 1, bucketed(c.zero, c.dp)
    stash, work_f, work_b, gathered, bucket = [], [], [], [], []
    for k in range(c.stages):
        a, b = c.bounds[k], c.bounds[k + 1]
        s = sum(costs[i].stash(c.recompute) for i in range(a, b))
        g = sum(costs[i].param_bytes for i in range(a, b)) if gathers else 0
        forward, backward = stage_peaks(costs, a, b, c.recompute)
        held_bucket = 0
        if buckets:  # the layer whose backward, with its bucket, holds the most; the backward runs the last first
            before = [sum(costs[i].stash(c.recompute) for i in range(a, j)) for j in range(a, b)]
            at = [before[j - a] + costs[j].backward_peak(c.recompute) + costs[j].param_bytes for j in range(a, b)]
            backward = max(at, default=0)
            held_bucket = next((costs[j].param_bytes for j in reversed(range(a, b)) if at[j - a] == backward), 0)
        stash.append(s)
        work_f.append(forward + g)
        work_b.append(backward - s + g)
        gathered.append(g)
        bucket.append(held_bucket)
    held, peak, at = 0, None, (0, 0)
    for action in device_orders(c.schedule, c.pp, c.microbatches, c.virtual_stages)[d]:
        k = action.stage
        total = held + (work_f[k] if action.kind == "F" else work_b[k])
        if peak is None or total > peak:
            peak, at = total, (gathered[k], bucket[k] if action.kind == "B" else 0)
        held += stash[k] if action.kind == "F" else -stash[k]
    return at


def predicted_held_activations(c, costs, d: int) -> int:
    """The cost model's activations of device group ``d`` between two of its actions: the stash of every
    microbatch in flight (:func:`~planner.stages.schedules.peak_bytes` without the actions' own work)."""
    stash = [sum(costs[i].stash(c.recompute) for i in c.stage_layers(k)) for k in range(c.stages)]
    order = device_orders(c.schedule, c.pp, c.microbatches, c.virtual_stages)[d]
    return peak_bytes(order, stash, [0] * c.stages, [0] * c.stages)
