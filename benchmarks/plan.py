"""Benchmark of the whole search on the gpt builder: enumeration, cost tables, BFS and ILP.

Three tables:

* ``depth`` (default): for 12, 24 and 48 layers (hidden 768, 12 heads, seq 1024,
  batch 8, vocab 50257, mesh dp=2 x tp=4, no annotations) the number of ops, the
  ILP's variables, and the wall time of a whole ``plan()`` call for propagate (cold),
  bfs and ilp, median of --repeat runs, both truly cold (right after
  ``planner.clear_caches()``) and warm (the same call again);
* ``--meshes``: issue 11's meshes (2,2,2), (2,4,8), (4,4,4), (2,2,2,2), (8,8,8) with
  the gpt builder at hidden 1024, 16 heads, seq 1024, batch 8: propagate, bfs and ilp, forward
  and ``--training``, at each of ``--layers`` (default 1, 48, 192): seconds of
  ``plan()`` and peak memory of the process, each run a fresh process (cold), median
  of --repeat;
* ``--axes``: the same model (``--layers``, default 4) on meshes of 1 to 6 axes of
  size 2: seconds per axis count and the exponent of a power law fitted to them
  (polynomial growth: seconds ~ axes ** k);
* ``--searches``: the candidates for the default search side by side on every file in
  ``configs/`` and on the gpt builder at ``--layers`` (default 12, 48; hidden 1024, 2x4 mesh)
  pinned as ``benchmarks/xla_compile.py`` pins it and unpinned (no ``shardings:``), forward and
  training: per candidate (``bfs``, ``ilp --solver highs``, ``ilp --solver elimination``, ``auto``)
  the CPU seconds (user + sys) of the whole ``shardplan plan`` command in a fresh process, median
  of --repeat, and its objective over the ILP's optimum (``ilp --solver highs``).

    python benchmarks/plan.py [--layers 12 24 48] [--repeat 3]
    python benchmarks/plan.py --meshes [--layers 1 48 192] [--repeat 3]
    python benchmarks/plan.py --axes [--layers 4] [--repeat 3]
    python benchmarks/plan.py --searches [--layers 12 48] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time

from common import clear_caches, gpt

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
            from planner.api import plan

            p = plan(gpt(layers), search=search)
            times[run].append(time.perf_counter() - t0)
    return statistics.median(times["cold"]), statistics.median(times["warm"]), p


MESHES = ((2, 2, 2), (2, 4, 8), (4, 4, 4), (2, 2, 2, 2), (8, 8, 8))

GPT_1024 = """
name: gpt{layers}
mesh: {{{mesh}}}
model: {{builder: gpt, layers: {layers}, hidden: 1024, heads: 16, seq: 1024, batch: 8, vocab: 50257}}
"""


def mesh_text(sizes) -> str:
    return ", ".join(f"a{i}: {n}" for i, n in enumerate(sizes))


def child(args) -> None:
    """One cold ``plan()`` in this process; prints seconds, peak memory and the plan's figures as JSON."""
    import resource

    t0 = time.perf_counter()
    from planner.api import plan as plan_

    sizes = tuple(int(n) for n in args.mesh.split("x"))
    p = plan_(GPT_1024.format(layers=args.child_layers, mesh=mesh_text(sizes)), search=args.search,
              training=args.training)
    seconds = time.perf_counter() - t0
    space = p.search_space
    print(json.dumps({"s": seconds, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "objective": p.totals.objective, "ops": len(p.ops),
                      # rule-based propagation has no axis phases and no bound: nan
                      "phases": len(space.phases) if space else float("nan"),
                      "over_bound": space.to_dict(p.totals.objective)["objective_over_bound"] if space else float("nan")}))


def run_child(sizes, layers, search, training, repeat) -> dict:
    """Median over ``repeat`` fresh processes of :func:`child`'s figures."""
    runs = []
    for _ in range(repeat):
        cmd = [sys.executable, __file__, "--child", "--mesh", "x".join(map(str, sizes)), "--child-layers",
               str(layers), "--search", search] + (["--training"] if training else [])
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def mesh_table(layers_list, repeat) -> None:
    print(f"{'mesh':>9}  {'devices':>7}  {'layers':>6}  {'ops':>5}  {'search':>9}  {'phase':>8}  {'phases':>6}  "
          f"{'plan s':>7}  {'peak MB':>7}  {'objective s':>11}  {'/bound':>7}")
    for sizes in MESHES:
        for layers in layers_list:
            for search in ("propagate", "bfs", "ilp"):
                for training in (False, True):
                    r = run_child(sizes, layers, search, training, repeat)
                    print(f"{'x'.join(map(str, sizes)):>9}  {math.prod(sizes):>7}  {layers:>6}  {int(r['ops']):>5}  "
                          f"{search:>9}  {'training' if training else 'forward':>8}  {r['phases']:>6.0f}  "
                          f"{r['s']:>7.2f}  {r['rss'] / 1e6:>7.0f}  {r['objective']:>11.4g}  {r['over_bound']:>7.2f}",
                          flush=True)
    print("\nplan s: a whole plan() call in a fresh process (imports included), median of", repeat,
          "; peak MB: the process's peak resident memory; /bound: objective over the lower bound of the "
          "unrestricted problem")


def axes_table(layers, repeat) -> None:
    print(f"{'axes':>4}  {'devices':>7}  {'search':>6}  {'phases':>6}  {'plan s':>7}  {'peak MB':>7}")
    seconds: dict[str, list[tuple[int, float]]] = {"bfs": [], "ilp": []}
    for n in range(1, 7):
        for search in ("bfs", "ilp"):
            r = run_child((2,) * n, layers, search, False, repeat)
            seconds[search].append((n, r["s"]))
            print(f"{n:>4}  {2 ** n:>7}  {search:>6}  {int(r['phases']):>6}  {r['s']:>7.2f}  {r['rss'] / 1e6:>7.0f}",
                  flush=True)
    for search, points in seconds.items():
        xs = [math.log(n) for n, _ in points]
        ys = [math.log(t) for _, t in points]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        print(f"{search}: seconds ~ axes ** {k:.2f} (least squares on log-log, 1 to 6 axes)")


CANDIDATES = (("bfs", ()), ("ilp", ("--solver", "highs")), ("ilp", ("--solver", "elimination")), ("auto", ()))
"""The searches --searches compares: (search, extra flags); the second is the ILP's optimum."""


def candidate_name(search: str, flags: tuple[str, ...]) -> str:
    return f"{search} {flags[-1]}" if flags else search


def searches_models(layers_list) -> list[tuple[str, str]]:
    """(name, YAML text) of every config and of the gpt at each depth, pinned and unpinned."""
    import glob
    import os

    from xla_compile import MODEL, SIZES

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    models = []
    for path in sorted(glob.glob(os.path.join(root, "configs", "*.yaml"))):
        with open(path) as f:
            models.append((os.path.basename(path), f.read()))
    for layers in layers_list:
        pinned = MODEL.format(layers=layers, **SIZES)
        models.append((f"gpt{layers} pinned", pinned))
        models.append((f"gpt{layers} unpinned", pinned.split("shardings:")[0]))
    return models


def searches_table(layers_list, repeat) -> None:
    import os
    import tempfile

    from xla_compile import cpu_run

    names = [candidate_name(s, f) for s, f in CANDIDATES]
    print(f"{'model':>24}  {'mode':>8}  " + "  ".join(f"{n + ' s':>17}  {'/opt':>6}" for n in names))
    worst = {n: 1.0 for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in searches_models(layers_list):
            path = os.path.join(tmp, name.replace(" ", "_") + ("" if name.endswith(".yaml") else ".yaml"))
            with open(path, "w") as f:
                f.write(text)
            for training in (False, True):
                cells = []
                for search, flags in CANDIDATES:
                    cmd = [sys.executable, "-m", "planner", "plan", path, "--search", search, *flags, "--format",
                           "json"] + (["--training"] if training else [])
                    runs = [cpu_run(cmd) for _ in range(repeat)]
                    cells.append((statistics.median(cpu for cpu, _ in runs),
                                  json.loads(runs[-1][1])["totals"]["objective"]))
                optimum = cells[1][1]
                line = f"{name:>24}  {'training' if training else 'forward':>8}  "
                parts = []
                for n, (cpu, objective) in zip(names, cells):
                    ratio = objective / optimum if optimum > 0 else (1.0 if objective == 0 else float("inf"))
                    worst[n] = max(worst[n], ratio)
                    parts.append(f"{cpu:>17.2f}  {ratio:>6.3f}")
                print(line + "  ".join(parts), flush=True)
    print("\ns: CPU seconds (user + sys) of the whole command in a fresh process, median of", repeat,
          "; /opt: objective over the ILP's optimum (ilp --solver highs)")
    print("worst /opt: " + ", ".join(f"{n} {w:.4f}" for n, w in worst.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+")
    parser.add_argument("--repeat", type=int, help="runs per figure, the median reported (default 3; --searches 1)")
    parser.add_argument("--meshes", action="store_true", help="issue 11's 3-D and 4-D mesh table")
    parser.add_argument("--axes", action="store_true", help="growth with the number of mesh axes")
    parser.add_argument("--searches", action="store_true",
                        help="the default search's candidates on every config and the gpt, pinned and unpinned")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mesh", help=argparse.SUPPRESS)
    parser.add_argument("--child-layers", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--search", help=argparse.SUPPRESS)
    parser.add_argument("--training", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    repeat = args.repeat or 3
    if args.child:
        child(args)
    elif args.meshes:
        mesh_table(args.layers or [1, 48, 192], repeat)
    elif args.axes:
        axes_table((args.layers or [4])[0], repeat)
    elif args.searches:
        searches_table(args.layers or [12, 48], args.repeat or 1)
    else:
        depth_table(args.layers or [12, 24, 48], repeat)


def depth_table(layers_list, repeat) -> None:
    print(f"{'layers':>6}  {'ops':>5}  {'prop cold s':>11}  {'bfs cold s':>10}  {'bfs warm s':>10}  {'ilp cold s':>10}  "
          f"{'ilp warm s':>10}  {'ilp solve s':>11}  {'variables':>9}  {'prop objective':>14}  {'bfs objective':>13}  "
          f"{'ilp objective':>13}  {'ilp/bfs':>7}")
    for layers in layers_list:
        t_prop, _, p_prop = timed(layers, "propagate", repeat)
        t_bfs, w_bfs, p_bfs = timed(layers, "bfs", repeat)
        t_ilp, w_ilp, p_ilp = timed(layers, "ilp", repeat)
        solver = p_ilp.solver
        bfs_objective, ilp_objective = field(p_bfs.totals, "objective"), field(p_ilp.totals, "objective")
        print(f"{layers:>6}  {len(p_bfs.ops):>5}  {t_prop:>11.2f}  {t_bfs:>10.2f}  {w_bfs:>10.2f}  {t_ilp:>10.2f}  "
              f"{w_ilp:>10.2f}  {field(solver, 'time_s', float('nan')):>11.2f}  "
              f"{field(solver, 'variables', 0):>9}  {p_prop.totals.objective:>14.6g}  {bfs_objective:>13.6g}  "
              f"{ilp_objective:>13.6g}  {ilp_objective / bfs_objective:>7.3f}")
    print("\ntimes are whole plan() calls; cold: right after planner.clear_caches(), warm: the same call")
    print("again with the caches the cold run filled; median of", repeat)


if __name__ == "__main__":
    main()
