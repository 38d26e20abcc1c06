"""Benchmark of strategy enumeration and per-edge cost tables (SPEC §6.1-6.2).

For the gpt builder (mesh dp=2 x tp=4) prints, per layer count, the number of ops,
the candidates enumerated in all, the edges and their class-table entries, and the
time to enumerate and to build the model, truly cold (after ``planner.clear_caches()``)
and warm (the same call again, caches kept), and to fill every cell of its lazy cost tables
(cold), median of --repeat, plus the distinct
redistributions the engine planned (the work the caches save: identical layers
share their tables) and the searches they took (alike problems, the same up to the order
of their dimensions, share one search).

    python benchmarks/tables.py [--layers 1 12 48] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

from costmodels import load_cluster
from graphs import load_model_text
from planner.enumeration import enumerate_strategies, search_pieces
from planner.caches import cache_stats
from planner.model.build import build_model
from planner.rules.registry import rule_for

from common import clear_caches, gpt

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 12, 48])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cluster = load_cluster(None)
    print(f"{'layers':>6}  {'ops':>5}  {'candidates':>10}  {'edges':>6}  {'table cells':>11}  "
          f"{'enumerate cold s':>16}  {'enumerate warm s':>16}  {'build cold s':>12}  {'build warm s':>12}  "
          f"{'fill cold s':>11}  {'distinct reshards':>17}  {'searches':>8}")
    for layers in args.layers:
        graph = load_model_text(gpt(layers))
        enum_t = {"cold": [], "warm": []}
        build_t = {"cold": [], "warm": []}
        fill_t = []

        def enumerate_all():
            pieces = search_pieces(graph.mesh)
            for op in graph.ops:
                rule = rule_for(op, [graph.tensor(t).shape for t in op.inputs], graph.tensor(op.output).shape)
                enumerate_strategies(rule, graph.mesh, pieces)

        for _ in range(args.repeat):
            clear_caches()
            for run in ("cold", "warm"):
                t0 = time.perf_counter()
                enumerate_all()
                enum_t[run].append(time.perf_counter() - t0)
            clear_caches()
            for run in ("cold", "warm"):
                t0 = time.perf_counter()
                m = build_model(graph, graph.mesh, cluster)
                build_t[run].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            m.problem.dense()  # every cell of the lazy tables: the redistributions the ILP reads
            fill_t.append(time.perf_counter() - t0)
        reshards = cache_stats()["redistribution plans"]["size"]
        searches = cache_stats()["canonical redistribution searches"]["size"]
        cells = sum(math.prod(e.class_cost.shape) for e in m.problem.edges)  # lazy tables have a shape only
        med = statistics.median
        print(f"{layers:>6}  {len(graph.ops):>5}  {m.problem.variables:>10}  {len(m.problem.edges):>6}  {cells:>11}  "
              f"{med(enum_t['cold']):>16.3f}  {med(enum_t['warm']):>16.3f}  {med(build_t['cold']):>12.3f}  "
              f"{med(build_t['warm']):>12.3f}  {med(fill_t):>11.3f}  {reshards:>17}  {searches:>8}")
    print("\nbuild s: enumeration, constraints, node costs and every edge's lazy cost table (no cell computed yet);")
    print("fill s: every cell of those tables computed (the redistribution engine), as the ILP reads them.")
    print("cold: right after planner.clear_caches(); warm: the same call again with the caches it filled;")
    print("median of", args.repeat)


if __name__ == "__main__":
    main()
