"""The pipeline search's oracle: every configuration and every partition priced, the least step time that fits."""

import itertools
import math

from graphs.pipeline_spec import RECOMPUTE, SCHEDULE_NAMES
from planner.stages.cost import Config, evaluate
from planner.stages.search import MAX_MICROBATCH_SIZE


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def brute_force(profiles, n_layers, devices, batch, devices_per_node, cluster, budget):
    """``profiles[(stage_axes, size)]`` -> layer costs. Returns (step time, config) of the best fitting one."""
    best = (math.inf, None)
    for pp in divisors(devices):
        for tp in divisors(devices_per_node):
            if (devices // pp) % tp or pp > n_layers:
                continue
            dp = devices // pp // tp
            if batch % dp:
                continue
            stage_axes = (("tp", tp),)
            for size in [d for d in divisors(batch // dp) if d <= MAX_MICROBATCH_SIZE]:
                m = batch // dp // size
                costs = profiles[(stage_axes, size)]
                for schedule in SCHEDULE_NAMES:
                    vs = [1] if schedule != "interleaved" else \
                        ([v for v in (2, 3, 4) if pp * v <= n_layers] if pp > 1 and m % pp == 0 else [])
                    for v in vs:
                        S = pp * v
                        for policy in RECOMPUTE:
                            for zero in ((0, 1, 2, 3) if dp > 1 else (0,)):
                                for cuts in itertools.combinations(range(1, n_layers), S - 1):
                                    bounds = (0, *cuts, n_layers)
                                    c = Config(pp, dp, stage_axes, size, m, schedule, v, policy, zero, bounds)
                                    ev = evaluate(c, costs, cluster)
                                    if ev.peak_memory_bytes <= budget and ev.step_time_s < best[0]:
                                        best = (ev.step_time_s, c)
    return best
