"""The ``xla`` redistribution policy (``--search propagate``'s) against what XLA compiles for the same reshard.

Each reshard is its own program, compiled by JAX on 8 host CPU devices: the value pinned in the source layout by a
constraint on Auto axes (so that propagation moves nothing else), then returned in the destination layout. Its
collectives are read from the compiled HLO (``planner.engines.xla_hlo``: kind and bytes one device receives) and
compared, in order, with the policy's steps (its local slices left out); the engine's cheapest plan (``bfs``,
``ilp``, ``auto``) is compared beside it. Per mesh and shape: how many pairs agree exactly and by kind (bytes
summed per kind), and the pairs where the policy differs.

    python benchmarks/xla_reshard.py [--cases 2x4:16x32 2x2x2:16x32:300 ...] [--seed 0] [--show 10]

A case is ``MESH:SHAPE[:N]``: every ordered pair of distinct layouts (each dimension an ordered tuple of mesh
axes, no axis twice), or ``N`` of them drawn with ``--seed``. Meshes name their axes ``dp, tp`` (two axes) or
``a, b, c`` (three) or ``d`` (one). Needs ``pip install -e ".[jax]"``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from costmodels import load_cluster  # noqa: E402
from planner.ir import parse_mesh, parse_sharding  # noqa: E402
from planner.redistribution import reshard_for_planning  # noqa: E402
from planner.redistribution.xla_policy import reshard_like_xla  # noqa: E402

#: XLA's HLO opcodes as the planner's collective kinds
KINDS = {"all-gather": "AllGather", "all-to-all": "AllToAll", "all-reduce": "AllReduce",
         "reduce-scatter": "ReduceScatter", "collective-permute": "CollectivePermute"}

#: one process compiles every pair of a case: argv[2] is ``[mesh sizes, axis names, shape, [[source, dest], ...]]``
#: with layouts as lists of axis lists; prints one list of ``[kind, bytes]`` per pair
RESHARDS = """
import json, sys
import jax, jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from planner.engines.xla_hlo import collectives
sizes, names, shape, cases = json.loads(sys.argv[2])
mesh = jax.make_mesh(tuple(sizes), tuple(names), axis_types=(AxisType.Auto,) * len(sizes))
s = lambda spec: NamedSharding(mesh, P(*[tuple(d) if d else None for d in spec]))
out = []
for a, b in cases:
    f = jax.jit(lambda x: jax.lax.with_sharding_constraint(x * 2, s(a)), in_shardings=s(a), out_shardings=s(b))
    hlo = f.lower(jax.ShapeDtypeStruct(tuple(shape), jnp.float32)).compile().as_text()
    out.append([[c.kind, c.bytes_per_device] for c in collectives(hlo, len(jax.devices()))])
print(json.dumps(out))
"""

AXES = {1: ("d",), 2: ("dp", "tp"), 3: ("a", "b", "c")}


def layouts(names, rank: int) -> list:
    """Every layout of a rank-``rank`` tensor on mesh axes ``names``: per dimension an ordered tuple of axes, no
    axis twice."""
    orders = [list(p) for r in range(len(names) + 1) for c in itertools.combinations(names, r)
              for p in itertools.permutations(c)]
    return [combo for combo in itertools.product(orders, repeat=rank)
            if len([a for d in combo for a in d]) == len({a for d in combo for a in d})]


def text(layout) -> str:
    return "[" + ", ".join("{" + ", ".join(f'"{a}"' for a in d) + "}" for d in layout) + "]"


def moves(plan) -> list[tuple[str, int]]:
    """A plan's collectives as ``(kind, bytes per device)``, its local slices left out."""
    return [(s.kind, s.bytes_per_device) for s in plan.steps if s.kind != "Slice"]


def xla_moves(sizes, names, shape, pairs) -> list[list[tuple[str, int]]]:
    """What XLA compiles for each pair (JAX on 8 host CPU devices, in a child process)."""
    from tests.jax_devices import run_on_eight_devices

    out = run_on_eight_devices(RESHARDS, json.dumps([list(sizes), list(names), list(shape), pairs]))
    return [[(KINDS[kind], n) for kind, n in moves_] for moves_ in out]


def compare(sizes, names, shape, pairs, cluster=None) -> list[dict]:
    """Per pair: the layouts, XLA's moves, the ``xla`` policy's and the engine's cheapest."""
    cluster = cluster or load_cluster(None)
    mesh = parse_mesh("@m = <[" + ", ".join(f'"{n}"={k}' for n, k in zip(names, sizes)) + "]>")
    rows = []
    for (a, b), xla in zip(pairs, xla_moves(sizes, names, shape, pairs)):
        src, dst = parse_sharding(text(a), mesh), parse_sharding(text(b), mesh)
        rows.append({"source": text(a), "destination": text(b), "xla": xla,
                     "policy": moves(reshard_like_xla(tuple(shape), "f32", src, dst, cluster)),
                     "cheapest": moves(reshard_for_planning(tuple(shape), "f32", src, dst, cluster))})
    return rows


def _by_kind(ms) -> dict[str, int]:
    out: dict[str, int] = {}
    for kind, n in ms:
        out[kind] = out.get(kind, 0) + n
    return out


def _case(spec: str, seed: int):
    parts = spec.split(":")
    sizes = tuple(int(n) for n in parts[0].split("x"))
    shape = tuple(int(n) for n in parts[1].split("x"))
    names = AXES[len(sizes)]
    every = layouts(names, len(shape))
    pairs = [(a, b) for a in every for b in every if a != b]
    if len(parts) > 2:
        random.Random(seed).shuffle(pairs)
        pairs = pairs[:int(parts[2])]
    return sizes, names, shape, pairs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["2x4:16x32", "2x2x2:16x32:300", "2x2x2:8x8x16:300",
                                                       "2x4:8x8x16:300", "4x2:16x8x16:200"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=10, help="differing pairs listed per case")
    args = parser.parse_args(argv)
    print(f"{'case':<20} {'pairs':>5} {'policy exact':>12} {'policy by kind':>14} {'cheapest exact':>14}")
    shown = []
    for spec in args.cases:
        sizes, names, shape, pairs = _case(spec, args.seed)
        rows = compare(sizes, names, shape, [[list(map(list, a)), list(map(list, b))] for a, b in pairs])
        exact = sum(r["policy"] == r["xla"] for r in rows)
        kind = sum(_by_kind(r["policy"]) == _by_kind(r["xla"]) for r in rows)
        cheapest = sum(r["cheapest"] == r["xla"] for r in rows)
        print(f"{spec:<20} {len(rows):>5} {exact:>12} {kind:>14} {cheapest:>14}")
        shown += [(spec, r) for r in rows if r["policy"] != r["xla"]][:args.show]
    for spec, r in shown:
        print(f"{spec}: {r['source']} -> {r['destination']}: XLA {r['xla']}, policy {r['policy']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
