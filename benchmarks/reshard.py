"""Benchmark of the redistribution engine over issue 4's exhaustive suite.

Prints, per shape and for the whole suite, the ratio of plan bytes to the lower
bound (median, maximum, summed), every pair above 1.0, and the time to plan and
to verify all pairs on the simulator (median of --repeat runs, plan cache cleared).

    python benchmarks/reshard.py [--repeat 3] [--pairs] [--pieces primes|axes]

``--pieces axes`` measures the faster whole-axis search the planner's cost tables use.
"""

from __future__ import annotations

import argparse
import statistics
import time

from planner.redistribution import reshard
from planner.redistribution.engine import _reshard
from planner.redistribution.suite import MESH, SHAPES, pairs
from planner.simulation.reshard import verify


def run(shape, repeat, pieces="primes"):
    suite = list(pairs())
    plan_times, verify_times = [], []
    for _ in range(repeat):
        _reshard.cache_clear()
        t0 = time.perf_counter()
        plans = [reshard(shape, "f32", s, d, pieces=pieces) for s, d in suite]
        plan_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        checks = [verify(p) for p in plans]
        verify_times.append(time.perf_counter() - t0)
    assert all(c.verified and c.measured_bytes_per_device == p.bytes_per_device for c, p in zip(checks, plans))
    return plans, statistics.median(plan_times), statistics.median(verify_times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pairs", action="store_true", help="list every pair above ratio 1.0")
    parser.add_argument("--pieces", choices=("primes", "axes"), default="primes",
                        help="the engine's search space (default primes, as shardplan reshard)")
    args = parser.parse_args()
    print(f"mesh {MESH.short()}, {len(list(pairs()))} (source, destination) pairs per shape, f32, "
          f"pieces {args.pieces}\n")
    header = f"{'shape':>7}  {'pairs':>5}  {'median':>6}  {'max':>6}  {'summed':>6}  {'>1.0':>4}  {'plan s':>7}  {'verify s':>8}"
    print(header)
    total_bytes = total_bound = 0
    above = []
    for shape in SHAPES:
        plans, t_plan, t_verify = run(shape, args.repeat, args.pieces)
        ratios = [p.ratio for p in plans]
        b = sum(p.bytes_per_device for p in plans)
        lb = sum(p.lower_bound_bytes_per_device for p in plans)
        total_bytes += b
        total_bound += lb
        worse = [p for p in plans if p.ratio > 1.0]
        above += worse
        name = "x".join(map(str, shape))
        print(f"{name:>7}  {len(plans):>5}  {statistics.median(ratios):>6.3f}  {max(ratios):>6.2f}  "
              f"{b / lb:>6.3f}  {len(worse):>4}  {t_plan:>7.3f}  {t_verify:>8.3f}")
    print(f"{'suite':>7}  {'':>5}  {'':>6}  {'':>6}  {total_bytes / total_bound:>6.3f}")
    print("\nsummed = sum of plan bytes / sum of lower bounds; plan s / verify s = wall time for all pairs")
    if args.pairs:
        print("\npairs above 1.0 (ratio, shape, from -> to: steps)")
        for p in sorted(above, key=lambda p: -p.ratio):
            steps = ", ".join(f"{s.kind}{'{' + ','.join(map(str, s.axes)) + '}' if s.axes else ''}" for s in p.steps)
            print(f"  {p.ratio:5.2f}  {'x'.join(map(str, p.shape)):>5}  {p.source.dims_text()} -> "
                  f"{p.destination.dims_text()}: {steps}")
    else:
        print(f"\n{len(above)} pairs above 1.0; list them with --pairs")


if __name__ == "__main__":
    main()
