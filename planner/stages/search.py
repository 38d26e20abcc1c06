"""The pipeline search: devices, stages, microbatches, schedule, recomputation and ZeRO in one search.

Outer choices are enumerated: the factorisation of the devices into ``pp x dp x tp`` (``tp``
inside a node: a divisor of the cluster's devices per node), the microbatch size (a divisor of a
replica's batch up to :data:`MAX_MICROBATCH_SIZE`, so the microbatch count ``m = batch / (dp * size)``), the schedule with its virtual stages, the
recomputation policy and the ZeRO stage; every key the model's ``pipeline:`` pins is held.
Each layer is priced on the ``tp`` stage mesh once per microbatch size
(:func:`~planner.stages.profile.profile_layers`, one SPMD plan per pair, shared by every
configuration that uses it). For each outer choice the partition of the layers into
contiguous stages is exact: a depth-first search over the stages' first layers, pruned by a
lower bound of the step time that no schedule can beat (a device runs its ``2m`` actions one
at a time, starts after the first microbatch reaches it, ends before the last one's backward
has gone back through the earlier stages and then reduces its gradients), whose leaves are
bounded once more (a device's first backward waits for the first microbatch's forward through
every stage), then timed, and only a leaf that would win is priced in full by
:func:`~planner.stages.cost.evaluate` and kept if it fits the memory. Outer choices are
visited in order of a lower bound of their step time (the pipeline as balanced as whole layers
allow, :func:`least_share`, with no bubble), skipped when a device's busy time and gradient reduction already reach the best
step found, and the visit ends once that bound reaches it: the answer is the
configuration of least step time (ties: the first in the enumeration's order), as exhaustive
enumeration would find (``tests/stages/brute_force.py`` checks it), unless a partition search
reaches :data:`MAX_PARTITION_NODES` (many stages over many alike layers): it then moves single layers between
the stages of the best partition found (tried from the most even share of the work first) while the step gets
shorter, keeps it, and the plan says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from costmodels import RING, Cluster
from costmodels.units import format_bytes
from graphs.graph import ComputationGraph
from graphs.pipeline_spec import AUTO, PipelineSpec, RECOMPUTE, SCHEDULE_NAMES
from planner.errors import PlanningError, quote
from planner.ir.mesh import Mesh
from planner.progress import SILENT, Progress
from planner.stages.cost import (Config, Evaluation, bucket_time_s, bucketed, evaluate, links, memory_bytes, stage_sums,
                                 sync_time_s)
from planner.stages.layers import batch_size, layers_of, microbatched
from planner.stages.profile import LayerCost, profile_layers
from planner.stages.schedules import compiled, device_orders, ends

__all__ = ["KNOBS", "Searched", "search_pipeline"]

#: The most outer configurations one search enumerates (each is cheap: the partition search prunes).
MAX_CONFIGURATIONS = 1_000_000

KNOBS = ("pp", "tp", "microbatches", "schedule", "virtual_stages", "recompute", "zero")
"""The choices the report explains, each with the best configuration that chose otherwise."""


@dataclass(frozen=True)
class Searched:
    """The winner, its evaluation and layer costs, how many configurations were priced, and per knob the best
    configuration priced that chose another value (``{knob: (config, evaluation)}``; a configuration whose bound
    showed it could not win is not priced)."""

    config: Config
    evaluation: Evaluation
    costs: tuple[LayerCost, ...]
    layer_names: tuple[str, ...]
    priced: int
    outer: int
    runners_up: dict = field(default_factory=dict)
    exact: bool = True  # every partition search finished: no partition of any configuration tried is better
    budget_bytes: float = math.inf  # the memory per device every configuration had to fit
    # the configurations searched that gave no partition better than the best so far, each as (its config without
    # bounds, its lower bound, the least memory of its partitions priced (inf: none priced), the best step so far
    # (None: none yet)), in the order searched
    lost: tuple = ()
    # per knob, among the configurations never searched (their lower bound was no less than the winner's step), the
    # one of least bound that chose another value: {knob: (config without bounds, lower bound)}
    unsearched: dict = field(default_factory=dict)


#: The most nodes one partition search visits; past it the search polishes the best partition it has and keeps it
#: (the plan's ``partitions_exact`` is then false). Models small enough to enumerate never reach it. Interleaved
#: searches over many alike layers reach it whatever it is (their bounds leave out most of the bubble); the GPT-3
#: family's plans are as good at 250 nodes as at 4,000 (``benchmarks/pipeline.py``; the commit gives the figures).
MAX_PARTITION_NODES = 500

#: The most rounds of single-boundary moves that polish the best partition of a search stopped at its budget.
MAX_POLISH_ROUNDS = 8

#: Microbatch sizes the search tries: the divisors of a replica's batch up to this (larger microbatches only raise
#: the activation memory a pipeline holds and its bubble); a pinned microbatch count may give a larger one.
MAX_MICROBATCH_SIZE = 8


def _microbatch_sizes(per_replica: int) -> list[int]:
    return [d for d in _divisors(min(per_replica, MAX_MICROBATCH_SIZE)) if per_replica % d == 0] if per_replica else []


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _pin(spec: PipelineSpec, key: str):
    v = getattr(spec, key)
    return None if v == AUTO else v


def search_pipeline(graph: ComputationGraph, devices: int, cluster: Cluster, spec: PipelineSpec,
                    memory_budget: float | None = None, *, mesh: Mesh | None = None, search: str = "auto",
                    progress: Progress = SILENT, profiler: Callable | None = None) -> Searched:
    """The best pipeline configuration of ``graph`` on ``devices`` devices of ``cluster`` (module docstring).

    ``mesh`` (the model's mesh, when it has the pipeline axis and no device count was asked for) fixes the
    factorisation: ``pp`` its pipeline axis, ``dp`` its ``dp`` axis (1 without one), the stage mesh the rest.
    ``profiler(graph, stage_mesh, cluster)`` prices the layers (default: :func:`profile_layers` with ``search``).
    """
    budget = float(memory_budget) if memory_budget is not None else float(cluster.device_memory_bytes)
    layers = layers_of(graph)
    n_layers = len(layers)
    batch = batch_size(graph)
    profiler = profiler or (lambda g, m, c: profile_layers(g, m, c, search))
    factorisations = _factorisations(devices, cluster, spec, mesh, n_layers)
    profiles: dict[tuple, tuple[LayerCost, ...]] = {}
    outer = []
    for pp, dp, stage_axes in factorisations:
        if batch % dp:
            continue
        per_replica = batch // dp
        pinned_m = _pin(spec, "microbatches")
        sizes = [per_replica // pinned_m] if pinned_m and per_replica % pinned_m == 0 else \
            [] if pinned_m else _microbatch_sizes(per_replica)
        for size in sizes:
            m = per_replica // size
            for schedule, v in _schedules(spec, pp, m, n_layers):
                for policy in ([_pin(spec, "recompute")] if _pin(spec, "recompute") else RECOMPUTE):
                    for zero in ([_pin(spec, "zero")] if _pin(spec, "zero") is not None else
                                 ((0, 1, 2, 3) if dp > 1 else (0,))):
                        outer.append((pp, dp, stage_axes, size, m, schedule, v, policy, zero))
    if not outer:
        raise PlanningError(_nothing_to_try(graph, devices, batch, spec, n_layers))
    if len(outer) > MAX_CONFIGURATIONS:
        raise PlanningError(f"{len(outer)} pipeline configurations of model {quote(graph.name)} on {devices} devices "
                            f"is more than the {MAX_CONFIGURATIONS} the search enumerates; pin some of pipeline: "
                            f"(stages, microbatches, schedule)")
    # price each (stage mesh, microbatch size) once, then order outer choices by their bound
    bounded = []
    layer_times: dict[tuple, tuple] = {}  # (stage mesh, size, policy) -> per-layer forward, backward, work; sums
    shares: dict[tuple, float] = {}  # (per-layer times, parts) -> least_share of them

    def share(values: tuple, parts: int) -> float:
        if (values, parts) not in shares:
            shares[(values, parts)] = least_share(values, parts)
        return shares[(values, parts)]

    for choice in outer:
        pp, dp, stage_axes, size, m, schedule, v, policy, zero = choice
        key = (stage_axes, size)
        if key not in profiles:
            progress.stage(f"pricing the layers on a stage mesh of {_axes_text(stage_axes)} for microbatches of {size}")
            stage_mesh = Mesh.from_sizes("stage", dict(stage_axes))
            profiles[key] = profiler(microbatched(graph, size), stage_mesh, cluster)
        costs = profiles[key]
        if (key, policy) not in layer_times:
            fs = tuple(c.forward_s for c in costs)
            bs = tuple(c.backward_s + c.recompute(policy) for c in costs)
            layer_times[(key, policy)] = (fs, bs, tuple(f + b for f, b in zip(fs, bs)), sum(fs), sum(bs))
        fs, bs, work, fw, bw = layer_times[(key, policy)]

        # the bound of _best_partition's search with every stage as even as whole layers allow: no partition does
        # better (the busiest device's work, the slowest stage's forward and backward are sums of whole layers)
        stages = pp * v
        busy = m * share(work, pp)
        bound = max(busy, fw + bw + (m - 1) * max(share(fs, stages), share(bs, stages)))
        if v == 1 and m >= pp:  # the heaviest stage's device, as _best_partition bounds it
            bound = max(bound, fw + bw + (m - pp) * share(work, stages))
        bounded.append((bound, choice, busy))
    bounded.sort(key=lambda x: x[0])
    progress.stage(f"searching {len(bounded)} pipeline configurations")
    tally = {"priced": 0, "need": math.inf, "exact": True, "found": [], "lost": [], "searched": 0}
    schedules: dict[tuple, object] = {}  # (schedule, pp, m, v) -> compiled, shared by every configuration using it
    reductions: dict[tuple, tuple[float, float]] = {}  # (stage mesh, size, pp, dp, zero) -> (gathers, reduction)

    def best_of(candidates) -> tuple[Config, Evaluation] | None:
        best: tuple[Config, Evaluation] | None = None
        for lb, choice, busy in candidates:
            if best is not None and lb >= best[1].step_time_s:
                break
            tally["searched"] += 1
            pp, dp, stage_axes, size, m, schedule, v, policy, zero = choice
            costs = profiles[(stage_axes, size)]
            if best is not None:
                key = (stage_axes, size, pp, dp, zero)
                if key not in reductions:
                    reductions[key] = _reduction_bound(costs, cluster, pp, dp, stage_axes, size, zero)
                gathers, reduce = reductions[key]
                floor = busy + m * gathers + reduce
                if floor * (1.0 - 1e-12) >= best[1].step_time_s:
                    # a device's busy time with ZeRO-3's gathers and its gradient reduction: it cannot win (lost on
                    # time, not memory: no partition of it was priced, so no memory need is known)
                    tally["lost"].append((Config(*choice, ()), max(lb, floor), 0, best[1].step_time_s))
                    continue
            plan_key = (schedule, pp, m, v)
            if plan_key not in schedules:
                schedules[plan_key] = compiled(device_orders(schedule, pp, m, v))
            found, n, need, exact = _best_partition(costs, cluster, budget, pp, dp, stage_axes, size,
                                                    m, schedule, v, policy, zero,
                                                    None if best is None else best[1].step_time_s,
                                                    schedules[plan_key])
            tally["priced"] += n
            tally["need"] = min(tally["need"], need)
            tally["exact"] &= exact
            if found is not None:
                tally["found"].append(found)
                if best is None or found[1].step_time_s < best[1].step_time_s:
                    best = found
            else:
                tally["lost"].append((Config(*choice, ()), lb, need, None if best is None else best[1].step_time_s))
        return best

    best = best_of(bounded)
    if best is None:
        smallest = tally["need"]
        if smallest == math.inf:  # no partition came near: the model's state spread over every device
            static = sum(c.param_bytes * 2 + 8 * c.param_elements for c in next(iter(profiles.values())))
            smallest = static / devices
        raise PlanningError(_does_not_fit(graph, devices, budget, smallest, spec))
    config = best[0]
    key = (config.stage_axes, config.microbatch)
    ev = evaluate(config, profiles[key], cluster, full=True)
    won = {k: _knob(config, k) for k in KNOBS}
    runners_up = {}
    for k in KNOBS:  # among the configurations priced, the best that chose otherwise, knob by knob
        others = [(c, e) for c, e in tally["found"] if _knob(c, k) != won[k]]
        if others:
            runners_up[k] = min(others, key=lambda ce: ce[1].step_time_s)
    return Searched(config, ev, profiles[key], tuple(layer.name for layer in layers), tally["priced"], len(outer),
                    runners_up, tally["exact"], budget, tuple(tally["lost"]),
                    _unsearched(bounded[tally["searched"]:], won))


def _unsearched(rest, won: dict) -> dict:
    """Per knob, the first of ``rest`` (``(bound, choice, busy)`` by increasing bound) whose value differs from
    ``won``."""
    out = {}
    at = {"pp": 0, "tp": 2, "microbatches": 4, "schedule": 5, "virtual_stages": 6, "recompute": 7, "zero": 8}
    for lb, choice, *_ in rest:
        for k in KNOBS:
            if k not in out and choice[at[k]] != won[k]:
                out[k] = (Config(*choice, ()), lb)
        if len(out) == len(KNOBS):
            break
    return out


def _reduction_bound(costs, cluster, pp, dp, stage_axes, size, zero) -> tuple[float, float]:
    """What a device's busy time ``m * work / pp`` of the outer bound leaves out, whatever the partition: per
    microbatch, ZeRO-3's two gathers of the parameters over the devices (``gathers``), and once, the gradient
    reduction and the step's launch (``reduce``). The devices' sums are at least those of all the parameters (a
    collective's and Adam's time is a latency per call, then linear in the bytes, rounded up: the parts' times add up
    to at least the whole's), so their average is at least a ``pp``-th of them."""
    link = links(Config(pp, dp, stage_axes, size, 1, "gpipe", 1, "none", zero, ()), cluster)[1]
    grads = sum(c.param_bytes for c in costs)
    elements = sum(c.param_elements for c in costs)
    inside = sum(c.gradient_sync_s for c in costs)
    gathers = 2 * RING.all_gather(dp, -(-grads // dp), link).time_s / pp if zero == 3 and dp > 1 else 0.0
    return gathers, sync_time_s(grads, elements, inside, dp, zero, link, cluster) / pp \
        + cluster.roofline.step_overhead_s


def _knob(config: Config, knob: str):
    if knob == "tp":
        return config.stage_axes
    if knob == "microbatches":
        return config.microbatches
    return getattr(config, knob)


def _axes_text(stage_axes) -> str:
    return " x ".join(f"{n}={s}" for n, s in stage_axes) or "one device"


def _factorisations(devices: int, cluster: Cluster, spec: PipelineSpec, mesh: Mesh | None, n_layers: int):
    """``(pp, dp, stage axes)`` to try."""
    pinned_pp = _pin(spec, "stages")
    if mesh is not None:
        axis = spec.axis or "pp"
        sizes = {a.name: a.size for a in mesh.axes}
        if axis not in sizes:
            raise PlanningError(f"the pipeline axis {quote(axis)} is not an axis of mesh {mesh.short()}; name it in "
                                f"pipeline.axis, add it to the mesh, or plan with --devices N to let the planner "
                                f"build the mesh")
        pp = sizes[axis]
        if pinned_pp is not None and pinned_pp != pp:
            raise PlanningError(f"pipeline.stages is {pinned_pp} but the pipeline axis {quote(axis)} has {pp} devices; "
                                f"make them agree")
        if pp > n_layers:
            raise PlanningError(f"{pp} pipeline stages need at least {pp} layers, but the model has {n_layers}; use "
                                f"at most {n_layers} stages")
        dp = sizes.get("dp", 1) if axis != "dp" else 1
        rest = tuple((n, s) for n, s in sizes.items() if n not in (axis, "dp"))
        return [(pp, dp, rest or (("tp", 1),))]
    if pinned_pp is not None:
        if devices % pinned_pp:
            raise PlanningError(f"pipeline.stages is {pinned_pp}, which does not divide the {devices} devices; pin a "
                                f"divisor of {devices}")
        if pinned_pp > n_layers:
            raise PlanningError(f"{pinned_pp} pipeline stages need at least {pinned_pp} layers, but the model has "
                                f"{n_layers}; use at most {n_layers} stages")
    out = []
    for pp in ([pinned_pp] if pinned_pp else _divisors(devices)):
        if pp > n_layers:
            continue
        for tp in _divisors(cluster.devices_per_node):
            if (devices // pp) % tp:
                continue
            out.append((pp, devices // pp // tp, (("tp", tp),)))
    return out


def _schedules(spec: PipelineSpec, pp: int, m: int, n_layers: int):
    pinned = _pin(spec, "schedule")
    pinned_v = _pin(spec, "virtual_stages")
    for schedule in ([pinned] if pinned else SCHEDULE_NAMES):
        if schedule == "interleaved":
            if pp == 1 or m % pp:
                continue
            for v in ([pinned_v] if pinned_v else [v for v in (2, 3, 4) if pp * v <= n_layers]):
                if pp * v <= n_layers:
                    yield schedule, v
        elif pinned_v in (None, 1):
            yield schedule, 1


def _best_partition(costs, cluster, budget, pp, dp, stage_axes, size, m, schedule, v, policy, zero, incumbent,
                    plan_of=None):
    """The best contiguous partition for one outer choice: ``((config, evaluation) or None, leaves priced, the
    least memory need seen, whether the search finished)``. ``plan_of``: the schedule compiled (computed here
    when not given).

    Every bound below is a step time no completion of the partial partition beats, from the schedule's
    dependencies alone: a device's first action is the first microbatch's forward of its first stage, which waits
    for that forward through the earlier stages (``Fpre``); its last is the last microbatch's backward of its first
    stage, after which that backward still goes through the earlier stages (``Bpre``) before device 0 reduces its
    gradients; a device runs its ``2m`` actions one at a time and then reduces its own gradients. Gradient
    reductions only grow as a device's stages grow, so a partial device's is a bound too.
    """
    L = len(costs)
    S = pp * v
    sums = stage_sums(costs, policy)
    fwd, bwd = sums[0], sums[1]
    plan_of = plan_of or compiled(device_orders(schedule, pp, m, v))
    warmups = _warm_ups(plan_of.orders)
    base = Config(pp, dp, stage_axes, size, m, schedule, v, policy, zero, ())
    both = links(base, cluster)
    if bucketed(zero, dp):  # each layer's backward ends with its gradient bucket, as evaluate's stage times have it
        bwd = _with_buckets(bwd, costs, dp, both[1])
    overhead = cluster.roofline.step_overhead_s
    state = {"best": None, "bound": incumbent if incumbent is not None else math.inf, "priced": 0,
             "need": math.inf, "nodes": 0, "cut": False}

    gathered: dict[tuple[int, int], float] = {}

    def gather(a: int, b: int) -> float:
        """ZeRO-3's gather of a stage's parameters before its forward (and again before its backward)."""
        t = gathered.get((a, b))
        if t is None:
            t = gathered[(a, b)] = RING.all_gather(dp, -(-int(pbytes[b] - pbytes[a]) // dp), dp_link).time_s
        return t

    def leaf(bounds: tuple[int, ...]) -> None:
        # evaluate's stage times, sends and reductions, from what this search computed once
        F = [fwd[bounds[k + 1]] - fwd[bounds[k]] for k in range(S)]
        B = [bwd[bounds[k + 1]] - bwd[bounds[k]] for k in range(S)]
        if zero == 3 and dp > 1:
            for k in range(S):
                g = gather(bounds[k], bounds[k + 1])
                F[k], B[k] = F[k] + g, B[k] + g
        send = [sendt[bounds[k + 1]] for k in range(S - 1)]
        reduce = [sync(sum(pbytes[bounds[k + 1]] - pbytes[bounds[k]] for k in range(d, S, pp)),
                       sum(pelems[bounds[k + 1]] - pelems[bounds[k]] for k in range(d, S, pp)),
                       sum(gsync[bounds[k + 1]] - gsync[bounds[k]] for k in range(d, S, pp))) for d in range(pp)]
        if state["bound"] < math.inf:
            if (_first_backward_bound(F, B, send, reduce, m, warmups) + overhead) * keep >= state["bound"]:
                return
            state["priced"] += 1
            step = max(e + r for e, r in zip(ends(plan_of, F, B, send), reduce)) + overhead
            if step >= state["bound"]:
                return  # no better than the best: its memory is not needed (only a search where nothing fits reads it)
        else:
            state["priced"] += 1
        config = Config(**{**base.__dict__, "bounds": bounds})
        need = max(memory_bytes(config, costs, sums, plan_of))
        state["need"] = min(state["need"], need)
        if need > budget:
            return
        ev = evaluate(config, costs, cluster, sums, plan_of, both)
        if ev.step_time_s < state["bound"]:
            state["bound"] = ev.step_time_s
            state["best"] = (config, ev)

    # a bound is pruned when it reaches the best step time; the slack keeps rounding from pruning a tie's better twin
    keep = 1.0 - 1e-12
    total = (fwd[L] - fwd[0]) + (bwd[L] - bwd[0])
    work = [f + b for f, b in zip(fwd, bwd)]  # forward and backward work of layers 0 .. i-1
    pbytes, pelems = sums[3], sums[4]
    stash = sums[2]
    flight = plan_of.in_flight

    # memory a stage surely needs on its device, as prefix sums over layers: its parameters, gradients and Adam
    # moments after ZeRO, and the stash of its microbatches in flight (one stage per device: at the stage's peak;
    # several: at one moment, ``warm_held``) (the slack keeps rounding from refusing a stage that fits exactly)
    held = [(pbytes[i] / (dp if zero == 3 else 1) + pbytes[i] / (dp if zero >= 2 else 1)
             + 8 * pelems[i] / (dp if zero >= 1 else 1)) * keep for i in range(L + 1)]
    stashed = [x * keep for x in stash]
    # several stages per device: the microbatches of each stage its device holds just before its last forward ahead
    # of its first backward (one moment of the schedule, so a bound of the device's peak)
    warm_held = [0] * S
    for _, before in warmups:
        for k in before[:-1]:
            warm_held[k] += 1

    pp_link = both[0]
    sendt = [0.0] + [RING.collective_permute(costs[i - 1].send_bytes, pp_link).time_s for i in range(1, L + 1)]

    gsync = sums[5]
    dp_link = both[1]

    synced: dict[tuple, float] = {}

    def sync(p: float, e: float, g: float) -> float:
        key = (p, e, g)
        t = synced.get(key)
        if t is None:
            t = synced[key] = sync_time_s(p, e, g, dp, zero, dp_link, cluster)
        return t

    # forwards a device runs before its last one, one stage per device (GPipe: all of them; 1F1B: its warm-up,
    # then one backward after each): the last microbatch's forward waits for them, then goes through the later
    # stages and comes back
    warm = [m - 1 if schedule == "gpipe" else min(pp - k - 1, m - 1) for k in range(pp)] if v == 1 else None

    # per device: its stages' work, gradient bytes, elements and in-mesh reductions so far, and the Fpre and Bpre of
    # its first stage
    dev_work = [0.0] * pp
    dev_p = [0.0] * pp
    dev_e = [0.0] * pp
    dev_g = [0.0] * pp
    dev_fpre = [0.0] * pp
    dev_bpre = [0.0] * pp
    dev_held = [0.0] * pp  # the memory its stages surely hold (as ``held``)

    visits: dict[tuple, list[int]] = {}  # (first layer, stages left) -> candidate ends in visiting order

    def dfs(bounds: list[int], fpre: float, bpre: float, lb: float, sends: float, top: float, tail: float) -> None:
        """``fpre``/``bpre``: forward/backward work of the stages so far with their sends; ``top``: the largest
        forward or backward of one stage so far; ``lb``: the largest device bound so far; ``tail`` (one stage per
        device): the most that follows the previous stage's last backward, its backward through the earlier stages
        and a device's gradient reduction."""
        k = len(bounds) - 1  # stages assigned
        a = bounds[-1]
        state["nodes"] += 1
        if state["nodes"] > MAX_PARTITION_NODES:
            state["cut"] = True
            return
        if k == S:
            if a == L:
                leaf(tuple(bounds))
            return
        left = S - k
        d = k % pp
        first = k < pp  # the device's first stage
        f_d, b_d = (fpre, bpre) if first else (dev_fpre[d], dev_bpre[d])
        sync0_here = 0.0 if k == 0 or (v > 1 and d == 0) else sync(dev_p[0], dev_e[0], dev_g[0])
        receivers = 0 if left == 1 else left - 1 if v == 1 or left - 1 < pp else pp
        spread = 0.0  # the receiving devices' bounds without this stage (v > 1)
        if v > 1:
            for j in range(k + 1, k + 1 + receivers):
                e = j % pp
                spread += f_d + m * dev_work[d] + b_d if e == d else fpre + bpre if j < pp else \
                    dev_fpre[e] + m * dev_work[e] + dev_bpre[e]
        # a candidate end's bounds grow with it (its stage's work, memory and reduction) or shrink with it (the
        # work left for the later stages): once one end fails on either side, every end beyond it does
        hi_cut, lo_cut = L + 1, a
        in_flight = flight[k] if v == 1 else warm_held[k]
        key = (a, left)
        candidates = visits.get(key)
        if candidates is None:
            candidates = visits[key] = _order(a, L - (left - 1), left, work)
        for b in candidates:
            if b >= hi_cut or b <= lo_cut:
                continue
            if dev_held[d] + held[b] - held[a] + in_flight * (stashed[b] - stashed[a]) > budget:
                hi_cut = b
                continue
            f, bw = fwd[b] - fwd[a], bwd[b] - bwd[a]
            w = f + bw
            dw = dev_work[d] + w
            mine = sync(dev_p[d] + pbytes[b] - pbytes[a], dev_e[d] + pelems[b] - pelems[a],
                        dev_g[d] + gsync[b] - gsync[a])
            sync0 = mine if k == 0 or (v > 1 and d == 0) else sync0_here
            if v == 1:
                # this device's last backward, then either its reduction or the backward on to device 0 and that
                # device's reduction
                tail_k = mine if k == 0 else max(mine, tail)
                stage_lb = fpre + m * w + tail_k
            else:
                stage_lb = f_d + m * dw + max(mine, b_d + sync0)
            if (stage_lb + overhead) * keep >= state["bound"]:
                hi_cut = b
                continue
            remaining = (fwd[L] - fwd[b]) + (bwd[L] - bwd[b])
            if receivers:
                # the later stages' work lands on their devices: at least the average of those devices' bounds (one
                # stage per device: the heaviest later stage runs all its microbatches between the prefix's forward
                # and backward)
                low = ((fpre + bpre) * receivers if v == 1 else spread) + m * remaining
                if (low / receivers + sync0_here + overhead) * keep >= state["bound"]:
                    lo_cut = b
                    continue
            send = sendt[b] if k < S - 1 else 0.0
            # the last microbatch's forward and the first's backward pass every stage, one microbatch at a time
            # behind the others on the slowest stage: a flow shop, ending on device 0
            t = max(top, f, bw)
            if left > 1:
                t = max(t, (fwd[L] - fwd[b]) / (left - 1), (bwd[L] - bwd[b]) / (left - 1))
            flow = total + 2 * (sends + send) + (m - 1) * t
            if warm is not None:
                flow = max(flow, total + 2 * (sends + send) + (m - 1) * f + (m - 1 - warm[k]) * bw)
            flow += sync0
            f_next, b_next = fpre + f + send, bpre + bw + send
            rest = 0.0
            if receivers:  # as ``low``, with this stage's work and send
                if v == 1:
                    rest = f_next + b_next + m * remaining / receivers + sync0
                else:
                    unstarted = max(0, pp - 1 - k) if receivers == pp else 0  # devices whose first stage is later
                    grown = spread + (m * w if receivers == pp else 0.0) + unstarted * (w + 2 * send)
                    rest = (grown + m * remaining) / receivers + sync0
            bound = (max(lb, stage_lb, flow, rest) + overhead) * keep
            if bound >= state["bound"]:
                continue
            saved = (dev_work[d], dev_p[d], dev_e[d], dev_g[d], dev_fpre[d], dev_bpre[d], dev_held[d])
            dev_work[d] = dw
            dev_held[d] += held[b] - held[a] + (in_flight * (stashed[b] - stashed[a]) if v > 1 else 0.0)
            dev_p[d] += pbytes[b] - pbytes[a]
            dev_e[d] += pelems[b] - pelems[a]
            dev_g[d] += gsync[b] - gsync[a]
            if first:
                dev_fpre[d], dev_bpre[d] = fpre, bpre
            bounds.append(b)
            dfs(bounds, f_next, b_next, max(lb, stage_lb), sends + send, max(top, f, bw),
                (tail_k if v == 1 else 0.0) + bw + send)
            bounds.pop()
            dev_work[d], dev_p[d], dev_e[d], dev_g[d], dev_fpre[d], dev_bpre[d], dev_held[d] = saved

    dfs([0], 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    if state["cut"] and state["best"] is not None:
        # the search stopped at its budget: move one layer from a stage to another (every boundary between them
        # shifted by one; between neighbours first) while that gives a shorter step, each move priced as any leaf,
        # at most as many moves as the search's nodes
        moves = MAX_PARTITION_NODES
        for _ in range(MAX_POLISH_ROUNDS):
            start = state["best"][0].bounds
            for width in range(S - 1):
                for k in range(1, S - width):
                    j = k + width
                    for d in (-1, 1):
                        moved = start[:k] + tuple(x + d for x in start[k:j + 1]) + start[j + 1:]
                        if moves and all(moved[i] < moved[i + 1] for i in range(k - 1, j + 1)):
                            moves -= 1
                            leaf(moved)
            if state["best"][0].bounds == start or not moves:
                break
    return state["best"], state["priced"], state["need"], not state["cut"]


def _with_buckets(bwd, costs, dp: int, dp_link) -> list[float]:
    """The backward prefix sums ``bwd`` with each layer's gradient bucket (:func:`bucket_time_s`) added."""
    out, extra = [bwd[0]], 0.0
    for i, c in enumerate(costs):
        extra += bucket_time_s(c, dp, dp_link)
        out.append(bwd[i + 1] + extra)
    return out


def _warm_ups(orders) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """Per device: the stage of its first backward, and the stages of the forwards it runs before it."""
    out = []
    for order in orders:
        first = next(i for i, a in enumerate(order) if a.kind == "B")
        out.append((order[first].stage, tuple(a.stage for a in order[:first])))
    return tuple(out)


def _first_backward_bound(F, B, send, reduce, m, warmups) -> float:
    """A step time no schedule of a partition beats (the step's launch left out), from its stages' times ``F`` and
    ``B``, its sends and its devices' gradient reductions: device ``d``'s first backward, of the first microbatch
    through stage ``s``, waits both for the forwards the device runs before it and for that microbatch's forward
    through every stage and its backward back to ``s``; the device's other work follows it, and then its gradient
    reduction, or its last backward's way down to device 0 and that device's reduction."""
    S = len(F)
    pp = len(reduce)
    send = list(send) + [0.0]
    down = [0.0] * (S + 1)  # down[j]: the backward from the last stage's end to stage j's start, with the sends
    for j in range(S - 1, 0, -1):
        down[j - 1] = down[j] + B[j] + send[j - 1]
    through = sum(F) + sum(send)  # the first microbatch's forward through every stage
    best = 0.0
    fpre = bpre = 0.0
    for d in range(pp):
        stage, warm = warmups[d]
        before = sum(F[k] for k in warm)
        work = sum(F[k] + B[k] for k in range(d, S, pp))
        start = max(fpre + before, through + down[stage])
        end = start + m * work - before
        best = max(best, end + max(reduce[d], bpre + reduce[0] if d else reduce[d]))
        fpre += F[d] + send[d]
        bpre += B[d] + send[d]
    return best


#: The most distinct sums of whole layers :func:`least_share` enumerates; past it the bound is the plain average.
MAX_SHARE_SUMS = 4096


def least_share(values, parts: int) -> float:
    """The least sum of whole items of ``values`` that is at least their average over ``parts``: a lower bound
    of the largest part in any split of them into ``parts`` parts (the largest part is such a sum, and no part
    is below the average when every other is above it). Items of equal value are counted, not enumerated one by
    one, so a model of many alike layers has few sums; past :data:`MAX_SHARE_SUMS` sums, the average itself."""
    total = math.fsum(values)
    average = total / parts
    if parts <= 1 or not values:
        return total
    counts: dict[float, int] = {}
    for x in values:
        counts[x] = counts.get(x, 0) + 1
    sums = {0.0}
    for x, n in sorted(counts.items()):
        grown = {s + k * x for s in sums for k in range(n + 1)}
        if len(grown) > MAX_SHARE_SUMS:
            return average
        sums = grown
    # sums are rounded as the stage totals are (prefix differences): keep a relative slack so rounding never
    # lifts the bound above a partition's own total
    at_least = [s for s in sums if s >= average * (1.0 - 1e-9)]
    return min(at_least) * (1.0 - 1e-9) if at_least else average


def _order(lo_exclusive: int, hi: int, left: int, work) -> list[int]:
    """Stage ends ``lo+1 .. hi``, the one whose stage does closest to an even share of the work left (prefix sums
    ``work``) over the ``left`` stages first, then outwards (finds a good incumbent early: alike layers and a
    heavy head or light embedding are weighed by what they cost, not counted)."""
    a = lo_exclusive
    share = (work[-1] - work[a]) / left
    return sorted(range(a + 1, hi + 1), key=lambda b: (abs(work[b] - work[a] - share), b))


def _nothing_to_try(graph, devices, batch, spec, n_layers) -> str:
    pins = ", ".join(f"{k}: {v}" for k, v in spec.pinned().items()) or "none"
    return (f"no pipeline configuration of model {quote(graph.name)} on {devices} devices is possible with the pins "
            f"({pins}): the batch of {batch} must split over the data-parallel degree and the microbatches, the "
            f"stages may not exceed the {n_layers} layers, and the interleaved schedule needs microbatches a "
            f"multiple of the stages; unpin a key or change the batch")


def _does_not_fit(graph, devices, budget, need, spec) -> str:
    auto = [k for k in ("stages", "microbatches", "recompute", "zero") if getattr(spec, k) == AUTO]
    at_limit = "every free knob was tried up to its limit" if auto else "every knob is pinned"
    return (f"no pipeline configuration of model {quote(graph.name)} fits {format_bytes(budget)} per device on "
            f"{devices} devices: the smallest needs at least {format_bytes(need)} ({at_limit}: full recomputation, ZeRO 3 "
            f"and the most stages); plan on more devices, give a --memory-budget or a cluster with more memory, or "
            f"unpin pipeline keys")
