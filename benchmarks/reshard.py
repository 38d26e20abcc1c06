"""Benchmark of the redistribution engine: plan quality on the exhaustive suites, and speed.

1. Issue 4's 2-D suite (mesh x=2,y=4) and issue 11's 3-D suite (meshes x=2,y=2,z=2 and
   x=2,y=4,z=2), divisible and non-divisible shapes: per shape the ratio of plan bytes to
   the lower bound (median, maximum, summed), the pairs above 1.0, the time to plan and
   to verify every pair on the simulator (every plan must execute with measured bytes
   == predicted), and a comparison with the exhaustive Dijkstra the engine used before
   its A* (``reshard(..., _exhaustive=True)``): pairs whose bytes differ, pairs whose
   steps differ at all, the worst ratio of engine bytes to exhaustive bytes, and plans
   the engine could not prove (``plan.exact`` False: a search ran out of budget).
2. Timing (medians, caches cleared before each measurement): the work of
   ``shardplan reshard`` after its imports (the search, default pieces primes and objective
   bytes, then the plan's report with its lower bound) on issue 11's cases and on random
   pairs of shardings of 4-axis meshes (issue 11's 2x2x2x2 and 4x4x2x2, and 4x2x2x2,
   8x4x2x2, 4x4x4x4, 8x8x8x8); the whole command ``shardplan reshard`` (CPU seconds of a
   fresh process, imports included) on each mesh's slowest pairs (``--commands``); and
   ``reshard_for_planning`` (time, whole axes: the planner's cost tables) per distinct pair
   on 2-, 3- and 4-axis meshes.

    python benchmarks/reshard.py [--repeat 3] [--pairs] [--pieces primes|axes]
                                 [--only 2d,3d,timing] [--every N]
                                 [--random N] [--seed S] [--commands N]

``--every N`` compares only every N-th pair with the exhaustive search (it is slow);
``--pieces axes`` measures the suites with the planner's whole-axis search.
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import statistics
import time
from pathlib import Path

from costmodels import load_cluster
from planner.caches import clear_caches
from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding
from planner.ir.text import parse_sharding
from planner.redistribution import reshard, reshard_for_planning
from planner.simulation.reshard import verify

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suites are the tests' (tests/redistribution/suite.py)
from tests.redistribution.suite import MESH, MESHES_3D, SHAPES, pairs  # noqa: E402


def run(suite, shape, repeat, pieces="primes"):
    """Plans of every pair (plan time: median over ``repeat`` cold runs) and their verification."""
    plan_times = []
    for _ in range(repeat):
        clear_caches("redistribution plans")  # the engine's plans only: its state caches stay warm
        t0 = time.perf_counter()
        plans = [reshard(shape, "f32", s, d, pieces=pieces) for s, d in suite]
        plan_times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    checks = [verify(p) for p in plans]
    t_verify = time.perf_counter() - t0
    bad = [(p.source.dims_text(), p.destination.dims_text(), c.message) for c, p in zip(checks, plans)
           if not (c.verified and c.measured_bytes_per_device == p.bytes_per_device)]
    assert not bad, bad[:5]
    return plans, statistics.median(plan_times), t_verify


def versus_exhaustive(plans, every, pieces):
    """Against the exhaustive search on every ``every``-th plan: pairs compared, pairs with more
    bytes (and the worst ratio), with fewer bytes (and the best ratio), with other steps at all;
    and the plans not proven to be the exhaustive search's (``plan.exact`` False)."""
    compared = worse = better = steps_differ = 0
    worst = best = 1.0
    for p in plans[::every]:
        e = reshard(p.shape, p.dtype, p.source, p.destination, pieces=pieces, _exhaustive=True)
        compared += 1
        ratio = p.bytes_per_device / e.bytes_per_device if e.bytes_per_device else 1.0
        worse += ratio > 1
        better += ratio < 1
        worst, best = max(worst, ratio), min(best, ratio)
        if [(s.kind, s.axes, s.dims, s.bytes_per_device, s.pairs) for s in p.steps] != \
                [(s.kind, s.axes, s.dims, s.bytes_per_device, s.pairs) for s in e.steps]:
            steps_differ += 1
    return compared, worse, worst, better, best, steps_differ, sum(not p.exact for p in plans)


def suite_table(title, meshes, args) -> list:
    print(f"{title}: f32, pieces {args.pieces}; vs exhaustive on every {args.every} pair(s)\n")
    print(f"{'mesh':>11}  {'shape':>7}  {'pairs':>5}  {'median':>6}  {'max':>6}  {'summed':>6}  {'>1.0':>4}  "
          f"{'plan s':>7}  {'verify s':>8}  {'cmp':>5}  {'worse':>5}  {'worst':>5}  {'better':>6}  {'best':>5}  "
          f"{'steps':>5}  {'inexact':>7}")
    total_bytes = total_bound = 0
    above = []
    for mesh in meshes:
        suite = list(pairs(mesh))
        for shape in SHAPES:
            plans, t_plan, t_verify = run(suite, shape, args.repeat, args.pieces)
            ratios = [p.ratio for p in plans]
            b = sum(p.bytes_per_device for p in plans)
            lb = sum(p.lower_bound_bytes_per_device for p in plans)
            total_bytes += b
            total_bound += lb
            worse = [p for p in plans if p.ratio > 1.0]
            above += worse
            n, more, worst, fewer, best, steps, inexact = versus_exhaustive(plans, args.every, args.pieces)
            print(f"{mesh.short():>11}  {'x'.join(map(str, shape)):>7}  {len(plans):>5}  "
                  f"{statistics.median(ratios):>6.3f}  {max(ratios):>6.2f}  {b / lb:>6.3f}  {len(worse):>4}  "
                  f"{t_plan:>7.3f}  {t_verify:>8.3f}  {n:>5}  {more:>5}  {worst:>5.3f}  {fewer:>6}  {best:>5.3f}  "
                  f"{steps:>5}  {inexact:>7}")
    print(f"{'suite':>11}  {'':>7}  {'':>5}  {'':>6}  {'':>6}  {total_bytes / total_bound:>6.3f}\n")
    return above


def _random_sharding(mesh: Mesh, rank: int, rng: random.Random, unreduced: bool) -> TensorSharding:
    dims: list[list[str]] = [[] for _ in range(rank)]
    pending = []
    names = list(mesh.axis_names)
    rng.shuffle(names)
    for name in names:
        place = rng.choice(["R", *range(rank)] + (["U"] if unreduced else []))
        if place == "U":
            pending.append(name)
        elif place != "R":
            dims[place].append(name)
    return TensorSharding.build(mesh, dims, unreduced=pending)


def random_pairs(mesh: Mesh, n: int, seed: int = 0):
    """``n`` random (shape, source, destination) of rank 2 to 4, shapes divisible or not."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        rank = rng.choice([2, 3, 4])
        shape = tuple(rng.choice([64, 128, 32, 6, 10, 7]) for _ in range(rank))
        source = _random_sharding(mesh, rank, rng, rng.random() < 0.3)
        out.append((shape, source, _random_sharding(mesh, rank, rng, False)))
    return out


def _cold(fn, repeat):
    times = []
    for _ in range(repeat):
        clear_caches()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


#: The 4-axis meshes of the timing section: issue 11's two, and larger or uneven ones.
FOUR_AXES = ({"a": 2, "b": 2, "c": 2, "d": 2}, {"a": 4, "b": 4, "c": 2, "d": 2}, {"a": 4, "b": 2, "c": 2, "d": 2},
             {"a": 8, "b": 4, "c": 2, "d": 2}, {"a": 4, "b": 4, "c": 4, "d": 4}, {"a": 8, "b": 8, "c": 8, "d": 8})


def _command_cpu(cmd) -> float:
    """CPU seconds (user + system) of one run of ``cmd`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _command_work(shape, a, b):
    """What ``shardplan reshard`` computes after its imports: the plan and its report (with the
    lower bound it is scored against)."""
    plan = reshard(shape, "f32", a, b)
    plan.to_dict()
    return plan


def timing_table(args) -> None:
    print("timing: the work of `shardplan reshard` after its imports (search in primes for bytes, then the "
          f"report with its lower bound), caches cleared, median of {args.repeat}; random pairs of seed "
          f"{args.seed}\n")
    print(f"{'case':>44}  {'pairs':>5}  {'median s':>8}  {'max s':>6}  {'>0.5 s':>6}  {'inexact':>7}  {'summed':>6}")
    fixed = [
        ('x=4,y=4,z=4', (256, 256, 64), '[{"x", "y"}, {"z"}, {}]', '[{"z"}, {"y"}, {"x"}]'),
        ('x=32,y=32', (1024, 1024), '[{"x"}, {"y"}]', '[{"y"}, {"x"}]'),
    ]
    for spec, shape, src, dst in fixed:
        mesh = Mesh.from_sizes("m", {k: int(v) for k, v in (kv.split("=") for kv in spec.split(","))})
        a, b = parse_sharding(src, mesh), parse_sharding(dst, mesh)
        t, plan = _cold(lambda: _command_work(shape, a, b), args.repeat)
        name = f"{spec} {'x'.join(map(str, shape))} {src}->{dst}"
        print(f"{name[:44]:>44}  {1:>5}  {t:>8.3f}  {t:>6.3f}  {int(t > 0.5):>6}  {int(not plan.exact):>7}  "
              f"{plan.bytes_per_device / plan.lower_bound_bytes_per_device:>6.3f}")
    slowest = []
    for sizes in FOUR_AXES:
        mesh = Mesh.from_sizes("m", sizes)
        times, inexact, moved, bound = [], 0, 0, 0
        for shape, a, b in random_pairs(mesh, args.random, args.seed):
            t, plan = _cold(lambda: _command_work(shape, a, b), 1)
            times.append((t, shape, a, b))
            inexact += not plan.exact
            moved += plan.bytes_per_device
            bound += plan.lower_bound_bytes_per_device
        name = f"{mesh.short()} random pairs (rank 2-4)"
        seconds = [t for t, *_ in times]
        print(f"{name:>44}  {len(times):>5}  {statistics.median(seconds):>8.3f}  {max(seconds):>6.3f}  "
              f"{sum(t > 0.5 for t in seconds):>6}  {inexact:>7}  {moved / bound:>6.3f}")
        slowest += [(mesh, r) for r in sorted(times, key=lambda r: -r[0])[:args.commands]]
    print(f"\nthe whole command `shardplan reshard` on each mesh's {args.commands} slowest pair(s) above: CPU "
          f"seconds of the process (user + system, imports included), median of {args.repeat}\n")
    print(f"{'mesh':>16}  {'shape':>12}  {'work s':>8}  {'command s':>9}  pair")
    for mesh, (t, shape, a, b) in slowest:
        spec = ",".join(f"{ax.name}={ax.size}" for ax in mesh.axes)
        cmd = [sys.executable, "-m", "planner", "reshard", "--mesh", spec, "--shape", "x".join(map(str, shape)),
               "--from", a.dims_text(), "--to", b.dims_text()]
        runs = [_command_cpu(cmd) for _ in range(args.repeat)]
        print(f"{mesh.short():>16}  {'x'.join(map(str, shape)):>12}  {t:>8.3f}  {statistics.median(runs):>9.3f}  "
              f"{a.dims_text()} -> {b.dims_text()}")
    print("\nreshard_for_planning (time, whole axes) per distinct pair: suite pairs of a rank-2 tensor 64x32, "
          f"caches cleared once, median of {args.repeat}\n")
    print(f"{'mesh':>16}  {'pairs':>5}  {'ms / pair':>9}")
    cluster = load_cluster(None)  # the default cluster, as reshard() uses
    meshes = ({"x": 2, "y": 4}, {"x": 2, "y": 2, "z": 2}, {"x": 2, "y": 4, "z": 2}, {"a": 2, "b": 2, "c": 2, "d": 2})
    for sizes in meshes:
        mesh = Mesh.from_sizes("mesh", sizes)
        suite = list(pairs(mesh))
        random.Random(0).shuffle(suite)
        suite = suite[:args.planning]
        t, _ = _cold(lambda: [reshard_for_planning((64, 32), "f32", s, d, cluster) for s, d in suite], args.repeat)
        print(f"{mesh.short():>16}  {len(suite):>5}  {1e3 * t / len(suite):>9.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pairs", action="store_true", help="list every pair above ratio 1.0")
    parser.add_argument("--pieces", choices=("primes", "axes"), default="primes",
                        help="the suites' search space (default primes, as shardplan reshard)")
    parser.add_argument("--only", default="2d,3d,timing", help="sections to run, of 2d,3d,timing")
    parser.add_argument("--every", type=int, default=1, help="compare every N-th pair with the exhaustive search")
    parser.add_argument("--random", type=int, default=150, help="random 4-axis pairs timed per mesh")
    parser.add_argument("--seed", type=int, default=0, help="of the random 4-axis pairs")
    parser.add_argument("--commands", type=int, default=1,
                        help="the slowest random pairs per mesh also timed as whole commands")
    parser.add_argument("--planning", type=int, default=600, help="suite pairs timed per mesh for planning")
    args = parser.parse_args()
    sections = set(args.only.split(","))
    above = []
    if "2d" in sections:
        above += suite_table(f"2-D suite, mesh {MESH.short()}, {len(list(pairs()))} pairs per shape", [MESH], args)
    if "3d" in sections:
        above += suite_table("3-D suite, " + ", ".join(f"mesh {m.short()}" for m in MESHES_3D) +
                             f", {len(list(pairs(MESHES_3D[0])))} pairs per mesh and shape", MESHES_3D, args)
    if above:
        print("summed = sum of plan bytes / sum of lower bounds; plan s / verify s = wall time for all pairs;")
        print("cmp = pairs compared with the exhaustive search; worse / better = of them, with more / fewer bytes")
        print("than its plan, worst / best = the extreme ratios of engine to exhaustive bytes; steps = with other")
        print("steps at all; inexact = plans whose search ran out of budget (not proven the exhaustive's)\n")
        if args.pairs:
            print("pairs above 1.0 (ratio, mesh, shape, from -> to: steps)")
            for p in sorted(above, key=lambda p: -p.ratio):
                steps = ", ".join(f"{s.kind}{'{' + ','.join(map(str, s.axes)) + '}' if s.axes else ''}" for s in p.steps)
                print(f"  {p.ratio:5.2f}  {p.source.mesh.short():>11}  {'x'.join(map(str, p.shape)):>5}  "
                      f"{p.source.dims_text()} -> {p.destination.dims_text()}: {steps}")
            print()
        else:
            print(f"{len(above)} pairs above 1.0; list them with --pairs\n")
    if "timing" in sections:
        timing_table(args)


if __name__ == "__main__":
    main()
