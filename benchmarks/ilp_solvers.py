"""Benchmark of the ILP's two solvers (HiGHS, CBC) on synthetic transformer-shaped problems.

Each problem repeats one layer template of 20 nodes (LayerNorm, Q/K/V, attention,
output projection, residual add, MLP ...) ``--layers`` times, each node with 10 to
60 candidates whose results fall into 8 layouts (edge costs in class form), chain
edges inside a layer plus the two residual edges, and the elementwise ops
(softmax, GeLU, dropout-like scaling) following their operand. Every size is
solved unshrunk (``full``: the solvers' real workload) and shrunk (``shrunk``:
followers folded, layers tied), and the table gives the model size, the solver
time and the whole :func:`solve_ilp` call (model building included) for HiGHS and
CBC, median of ``--repeat`` runs (a run stopped by ``--time-limit`` shows its
gap instead), and whether both proved the same optimum.

A second table, for contrast, solves random problems that are *not* transformer
shaped: chains with skip edges and dense random class costs, whose LP relaxations
are far from integral (``--dense`` node counts, one seed each).

    python benchmarks/ilp_solvers.py [--layers 12 24 48] [--dense 20 30 40] [--repeat 3]
        [--time-limit 120] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from planner.searches.ilp import SolverFailed, solve_ilp
from planner.model.problem import Edge, Node, SearchProblem

LAYOUTS = 8
MiB = 2**20

# (name, operand indices within the layer; -1 = the previous layer's output, follows operand?)
TEMPLATE = (
    ("ln1", (-1,), False), ("q", (0,), False), ("k", (0,), False), ("v", (0,), False),
    ("q_scale", (1,), True), ("scores", (4, 2), False), ("mask_add", (5,), True),
    ("softmax", (6,), True), ("attn_v", (7, 3), False), ("merge_heads", (8,), False),
    ("out_proj", (9,), False), ("residual1", (10, -1), False), ("ln2", (11,), False),
    ("mlp_up", (12,), False), ("mlp_gate", (12,), False), ("gelu", (13,), True),
    ("gated", (15, 14), False), ("mlp_down", (16,), False), ("scale", (17,), True),
    ("residual2", (18, 11), False),
)


def transformer_problem(layers: int, seed: int = 0) -> SearchProblem:
    """``layers`` copies of :data:`TEMPLATE` with identical costs, chained by the residual stream."""
    rng = np.random.default_rng(seed)
    width = len(TEMPLATE)
    sizes = [int(rng.integers(10, 61)) for _ in range(width)]
    out_layout = [rng.integers(0, LAYOUTS, n) for n in sizes]
    cost = [rng.uniform(1e-5, 1e-3, n) for n in sizes]
    memory = [rng.integers(1, 512, n) * MiB for n in sizes]
    redistribution = rng.uniform(1e-5, 2e-4, (LAYOUTS, LAYOUTS)) * (1 - np.eye(LAYOUTS))
    operand_layout = {(k, pos): rng.integers(0, LAYOUTS, sizes[k])
                      for k, (_, operands, _) in enumerate(TEMPLATE) for pos in range(len(operands))}
    follow_maps = {k: rng.integers(0, sizes[k], sizes[operands[0]])
                   for k, (_, operands, follows) in enumerate(TEMPLATE) if follows}
    nodes, edges = [], []
    for layer in range(layers):
        base = layer * width
        for k, (name, operands, follows) in enumerate(TEMPLATE):
            parent = base + operands[0] if follows else None
            nodes.append(Node(f"layer{layer}.{name}", cost[k], memory[k], follows=parent,
                              follow_map=follow_maps.get(k), layer=(name, layer)))
            for pos, src in enumerate(operands):
                if src == -1 and layer == 0:
                    continue
                u = base - 1 if src == -1 else base + src
                u_k = width - 1 if src == -1 else src
                edges.append(Edge(u, base + k, out_layout[u_k], operand_layout[k, pos], redistribution))
    return SearchProblem(tuple(nodes), tuple(edges))


def dense_problem(count: int, seed: int = 0, candidates: int = 10, classes: int = 4) -> SearchProblem:
    """A chain with skip edges (+2, +5) and dense random class costs: a hard MIP of few nodes."""
    rng = np.random.default_rng(seed)
    nodes = tuple(Node(f"n{i}", rng.uniform(0, 1e-3, candidates)) for i in range(count))
    edges = tuple(Edge(i, j, rng.integers(0, classes, candidates), rng.integers(0, classes, candidates),
                       rng.uniform(0, 1e-3, (classes, classes)))
                  for i in range(count) for j in (i + 1, i + 2, i + 5) if j < count)
    return SearchProblem(nodes, edges)


def measure(problem: SearchProblem, solver: str, shrink: bool, repeat: int, limit: float):
    """``(cell text, result or None, report)``: median solver and total time of ``repeat`` runs.

    A run that hits ``limit`` ends the repeats: the cell then gives the gap.
    """
    solver_times, total_times = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            result = solve_ilp(problem, solver=solver, shrink=shrink, time_limit=limit)
        except SolverFailed as failed:
            return f">{limit:g} no solution", None, failed.report
        total_times.append(time.perf_counter() - start)
        solver_times.append(result.report.time_s)
        if not result.report.optimal:
            gap = "?" if result.report.gap is None else f"{result.report.gap:.1%}"
            return f">{limit:g} gap {gap}", result, result.report
    cell = f"{statistics.median(solver_times):.3f} ({statistics.median(total_times):.3f})"
    return cell, result, result.report


def header(size: str) -> str:
    return (f"{size:>6} {'model':>6} {'nodes':>5} {'solved':>6} {'vars':>6} {'rows':>6}  "
            f"{'HiGHS s (total)':>18}  {'CBC s (total)':>18}  {'same objective':>14}")


def row(size: int, model: str, problem: SearchProblem, shrink: bool, repeat: int, limit: float) -> str:
    """One table row: both solvers on ``problem``."""
    h_cell, highs, r = measure(problem, "highs", shrink, repeat, limit)
    c_cell, cbc, _ = measure(problem, "cbc", shrink, repeat, limit)
    if highs and cbc and highs.report.optimal and cbc.report.optimal:
        same = str(abs(highs.objective - cbc.objective) <= 1e-9 * abs(highs.objective))
    else:
        same = "n/a"
    return (f"{size:>6} {model:>6} {len(problem.nodes):>5} {r.nodes_solved:>6} {r.variables:>6} {r.constraints:>6}  "
            f"{h_cell:>18}  {c_cell:>18}  {same:>14}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[12, 24, 48])
    parser.add_argument("--dense", type=int, nargs="*", default=[20, 30, 40])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=120.0, help="per solver run, seconds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(header("layers"))
    for layers in args.layers:
        problem = transformer_problem(layers, args.seed)
        for shrink in (False, True):
            print(row(layers, "shrunk" if shrink else "full", problem, shrink, args.repeat, args.time_limit))
    if args.dense:
        print("\n" + header("dense"))
        for count in args.dense:
            print(row(count, "full", dense_problem(count, args.seed), False, args.repeat, args.time_limit))
    print("\nseconds: median solver call (PuLP's hand-over to the solver included), in brackets the whole")
    print(f"solve_ilp call; >{args.time_limit:g}: stopped by the time limit, with the gap left")


if __name__ == "__main__":
    main()
