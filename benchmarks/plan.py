"""Benchmark of the whole search on the gpt builder: enumeration, cost tables, BFS and ILP.

For 12, 24 and 48 layers (hidden 768, 12 heads, seq 1024, batch 8, vocab 50257, mesh
dp=2 x tp=4, no annotations) prints the number of ops, the ILP's variables, and the
wall time of a whole ``plan()`` call for bfs and for ilp, median of --repeat runs, both
truly cold (right after ``planner.clear_caches()``: enumeration and cost tables included)
and warm (the same call again with the caches the cold run filled).

    python benchmarks/plan.py [--layers 12 24 48] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import clear_caches, gpt

from planner.api import plan

def field(obj, name: str, default=None):
    """``obj[name]`` or ``obj.name`` (the Plan's reports were dicts and are becoming objects)."""
    if obj is None:
        return default
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def timed(layers: int, search: str, repeat: int):
    """Median seconds of a cold and of a warm ``plan()`` call, and the plan."""
    times, p = {"cold": [], "warm": []}, None
    for _ in range(repeat):
        clear_caches()
        for run in ("cold", "warm"):
            t0 = time.perf_counter()
            p = plan(gpt(layers), search=search)
            times[run].append(time.perf_counter() - t0)
    return statistics.median(times["cold"]), statistics.median(times["warm"]), p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[12, 24, 48])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'layers':>6}  {'ops':>5}  {'bfs cold s':>10}  {'bfs warm s':>10}  {'ilp cold s':>10}  {'ilp warm s':>10}  "
          f"{'ilp solve s':>11}  {'variables':>9}  {'bfs objective':>13}  {'ilp objective':>13}  {'ilp/bfs':>7}")
    for layers in args.layers:
        t_bfs, w_bfs, p_bfs = timed(layers, "bfs", args.repeat)
        t_ilp, w_ilp, p_ilp = timed(layers, "ilp", args.repeat)
        solver = p_ilp.solver
        bfs_objective, ilp_objective = field(p_bfs.totals, "objective"), field(p_ilp.totals, "objective")
        print(f"{layers:>6}  {len(p_bfs.ops):>5}  {t_bfs:>10.2f}  {w_bfs:>10.2f}  {t_ilp:>10.2f}  {w_ilp:>10.2f}  "
              f"{field(solver, 'time_s', float('nan')):>11.2f}  "
              f"{field(solver, 'variables', 0):>9}  {bfs_objective:>13.6g}  {ilp_objective:>13.6g}  "
              f"{ilp_objective / bfs_objective:>7.3f}")
    print("\ntimes are whole plan() calls; cold: right after planner.clear_caches(), warm: the same call")
    print("again with the caches the cold run filled; median of", args.repeat)


if __name__ == "__main__":
    main()
