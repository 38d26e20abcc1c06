"""The redistribution engine's state bound: per-dimension terms in Python lists against numpy arrays.

``state_bound`` is called for most states an A* search reaches. It combines cached per-dimension
terms per device: in Python lists (no call overhead, linear in devices) or in numpy arrays (a
fixed overhead per call, then fast). This prints microseconds per call of each over meshes of 8
to 512 devices (a rank-4 tensor of 64^4, random pairs of shardings over every axis), median of
--repeat, which sets ``lower_bound.LOOP_DEVICES``.

    python benchmarks/bound.py [--pairs 300] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from planner.ir.mesh import Mesh
from planner.redistribution import lower_bound
from planner.redistribution.state import Pieces, State

MESHES = ({"a": 2, "b": 4}, {"a": 2, "b": 2, "c": 2, "d": 2}, {"a": 4, "b": 2, "c": 2, "d": 2}, {"a": 4, "b": 4, "c": 4},
          {"a": 2, "b": 4, "c": 16}, {"a": 8, "b": 8, "c": 8})


def random_state(rng: random.Random, pieces: int, rank: int) -> State:
    dims = [[] for _ in range(rank)]
    for p in range(pieces):
        k = rng.randrange(rank + 1)
        if k < rank:
            dims[k].insert(rng.randrange(len(dims[k]) + 1), p)
    return State(tuple(tuple(d) for d in dims))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'mesh':>10}  {'devices':>7}  {'lists us':>8}  {'arrays us':>9}  {'arrays/lists':>12}")
    for sizes in MESHES:
        mesh = Mesh.from_sizes("m", sizes)
        pc = Pieces.refine(mesh, (64, 64, 64, 64), [], False)
        rng = random.Random(0)
        pairs = [(random_state(rng, len(pc.refs), 4), random_state(rng, len(pc.refs), 4)) for _ in range(args.pairs)]
        for s, g in pairs:  # fill the per-dimension caches both use, then time the combination alone
            lower_bound._needs(pc, s, g)
            lower_bound._needs_arrays(pc, s, g)
        timing = {}
        for name, fn in (("lists", lower_bound._needs), ("arrays", lower_bound._needs_arrays)):
            runs = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                for s, g in pairs:
                    fn(pc, s, g)
                runs.append((time.perf_counter() - t0) / len(pairs) * 1e6)
            timing[name] = statistics.median(runs)
        short = "x".join(str(n) for n in sizes.values())
        print(f"{short:>10}  {mesh.size:>7}  {timing['lists']:>8.1f}  {timing['arrays']:>9.1f}  "
              f"{timing['arrays'] / timing['lists']:>12.2f}")
    print(f"\nlower_bound.LOOP_DEVICES = {lower_bound.LOOP_DEVICES}: lists up to it, arrays beyond")


if __name__ == "__main__":
    main()
