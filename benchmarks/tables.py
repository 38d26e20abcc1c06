"""Benchmark of strategy enumeration and per-edge cost tables (SPEC §6.1-6.2).

For the gpt builder (mesh dp=2 x tp=4) prints, per layer count, the number of ops,
the candidates enumerated in all, the edges and their class-table entries, and the
time to enumerate and to build every table from cold caches (median of --repeat),
plus the distinct redistributions the engine planned (the work the caches save:
identical layers share their tables).

    python benchmarks/tables.py [--layers 1 12 48] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from costmodels import load_cluster
from graphs import load_model_text
from planner.enumeration import enumerate_strategies, search_pieces
from planner.propagation.build import build_model
from planner.redistribution.engine import _reshard  # its size: the distinct redistributions planned
from planner.rules.registry import rule_for

from common import clear_caches, gpt

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 12, 48])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cluster = load_cluster(None)
    print(f"{'layers':>6}  {'ops':>5}  {'candidates':>10}  {'edges':>6}  {'table cells':>11}  "
          f"{'enumerate s':>11}  {'build s':>8}  {'distinct reshards':>17}")
    for layers in args.layers:
        graph = load_model_text(gpt(layers))
        enum_t, build_t = [], []
        for _ in range(args.repeat):
            clear_caches()
            t0 = time.perf_counter()
            pieces = search_pieces(graph.mesh)
            for op in graph.ops:
                rule = rule_for(op, [graph.tensor(t).shape for t in op.inputs], graph.tensor(op.output).shape)
                enumerate_strategies(rule, graph.mesh, pieces)
            enum_t.append(time.perf_counter() - t0)
            clear_caches()
            t0 = time.perf_counter()
            m = build_model(graph, graph.mesh, cluster)
            build_t.append(time.perf_counter() - t0)
        reshards = _reshard.cache_info().currsize
        cells = sum(e.class_cost.size for e in m.problem.edges)
        print(f"{layers:>6}  {len(graph.ops):>5}  {m.problem.variables:>10}  {len(m.problem.edges):>6}  {cells:>11}  "
              f"{statistics.median(enum_t):>11.3f}  {statistics.median(build_t):>8.3f}  {reshards:>17}")
    print("\nbuild s: enumeration, constraints, every edge's cost table (redistribution engine) and node costs,")
    print("from cold caches; median of", args.repeat)


if __name__ == "__main__":
    main()
