"""Benchmark of the whole search on the gpt builder: enumeration, cost tables, BFS and ILP.

For 12, 24 and 48 layers (hidden 768, 12 heads, seq 1024, batch 8, vocab 50257, mesh
dp=2 x tp=4, no annotations) prints the number of ops, the ILP's variables, and the
wall time of a whole ``plan()`` call for bfs and for ilp (median of --repeat runs;
each run starts from cold caches so the enumeration and cost tables are included).

    python benchmarks/plan.py [--layers 12 24 48] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import clear_caches, gpt

from planner.api import plan

def timed(layers: int, search: str, repeat: int):
    times, p = [], None
    for _ in range(repeat):
        clear_caches()
        t0 = time.perf_counter()
        p = plan(gpt(layers), search=search)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[12, 24, 48])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'layers':>6}  {'ops':>5}  {'bfs s':>7}  {'ilp s':>7}  {'ilp solve s':>11}  {'variables':>9}  "
          f"{'bfs objective':>13}  {'ilp objective':>13}  {'ilp/bfs':>7}")
    for layers in args.layers:
        t_bfs, p_bfs = timed(layers, "bfs", args.repeat)
        t_ilp, p_ilp = timed(layers, "ilp", args.repeat)
        solver = p_ilp.solver or {}
        print(f"{layers:>6}  {len(p_bfs.ops):>5}  {t_bfs:>7.2f}  {t_ilp:>7.2f}  {solver.get('time_s', float('nan')):>11.2f}  "
              f"{solver.get('variables', 0):>9}  {p_bfs.totals['objective']:>13.6g}  {p_ilp.totals['objective']:>13.6g}  "
              f"{p_ilp.totals['objective'] / p_bfs.totals['objective']:>7.3f}")
    print("\ntimes are whole plan() calls from cold caches, median of", args.repeat)


if __name__ == "__main__":
    main()
