"""Benchmark of planning time against depth: is it linear in the number of layers (issue 11)?

Plans the gpt builder (hidden 768, 12 heads, seq 1024, batch 8, vocab 50257, mesh dp=2 x
tp=4, no annotations) at growing depths with bfs and ilp, forward only and with
training, and prints per (layers, search, mode) the median wall seconds of --repeat
whole ``plan()`` calls, each cold (right after ``planner.clear_caches()``), the
seconds per layer, and the marginal seconds per layer added since the previous depth
(flat when time is linear; the first rows carry the fixed costs).

    python benchmarks/depth.py [--bfs-layers 48 96 192 384 768] [--ilp-layers 48 96 192 384]
                               [--modes forward training] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

from common import clear_caches, gpt

from planner.api import plan


def cold_seconds(layers: int, search: str, training: bool, repeat: int) -> float:
    """Median wall seconds of ``repeat`` cold ``plan()`` calls."""
    times = []
    for _ in range(repeat):
        clear_caches()
        t0 = time.perf_counter()
        plan(gpt(layers), search=search, training=training)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bfs-layers", type=int, nargs="*", default=[48, 96, 192, 384, 768])
    parser.add_argument("--ilp-layers", type=int, nargs="*", default=[48, 96, 192, 384])
    parser.add_argument("--modes", nargs="+", choices=("forward", "training"), default=["forward", "training"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # an ILP fallback note would interleave with the table
    plan(gpt(1), search="ilp", training=True)  # imports (SciPy, PuLP, HiGHS) are not what is measured
    print(f"{'layers':>6}  {'search':>6}  {'mode':>8}  {'seconds':>8}  {'s/layer':>8}  {'marginal s/layer':>16}")
    for search, depths in (("bfs", args.bfs_layers), ("ilp", args.ilp_layers)):
        for mode in args.modes:
            previous = None
            for layers in sorted(depths):
                t = cold_seconds(layers, search, mode == "training", args.repeat)
                marginal = f"{(t - previous[1]) / (layers - previous[0]):16.4f}" if previous else f"{'':>16}"
                print(f"{layers:>6}  {search:>6}  {mode:>8}  {t:8.2f}  {t / layers:8.4f}  {marginal}", flush=True)
                previous = (layers, t)
    print(f"\nwall seconds of whole plan() calls, each cold (after planner.clear_caches()), median of {args.repeat}; "
          "marginal: seconds per layer added since the previous depth (flat when planning time is linear)")


if __name__ == "__main__":
    main()
