"""What XLA compiles for a concatenate or a slice along a sharded dimension, next to what we plan for it.

Each case is a JAX program on 8 host CPU devices whose operands are sharded along the concatenated (sliced)
dimension and whose result is constrained to keep that dimension sharded, as Shardy's propagation leaves it
(Shardy's rule for ``stablehlo.concatenate`` maps the concatenated dimension of every operand and of the
result to one factor, ``kNeedReplication`` unless every operand is a slice, and propagates along it;
moving the axes to the first other dimension they divide is what XLA 0.10.2 compiles).
Printed per case: XLA's collectives (kind and bytes per device, read by :mod:`planner.engines.xla_hlo`,
costmodels/collectives.py's convention) and the plan's for the same traced program with ``--search ilp``
and ``--search propagate``.

XLA's algorithm, as observed with JAX 0.10.2 (SPMD partitioner):

- concatenate along a sharded dimension: each operand is resharded by an AllToAll that moves the
  concatenated dimension's axes to another dimension, the operands are concatenated locally, and the
  result goes back by one more AllToAll (3 AllToAll for two operands), whatever the operand sizes;
- slice of a sharded dimension (a prefix or a middle window): the result's blocks are gathered from the
  devices holding them by CollectivePermutes of whole and partial input blocks (a windowed reshard: its
  halo exchange), no AllGather; a slice with a stride dividing the block (``x[:, ::2]``) is local: no
  collective.

Where no other dimension divides by the axes (6 rows over 8 devices), XLA AllGathers each operand along
the concatenated dimension and each device slices its block of the local result.

Our concat and slice rules have one permutation factor for that dimension, as Shardy's, and the op
exchanges blocks itself as XLA does (planner/model/op_collectives.py; a slice's permutes are XLA's halo
exchange, planner/model/halo_exchange.py), so the propagate plan moves XLA's bytes; bfs and ilp weigh the
exchanges against gathering. (A slice whose result is then replicated: the plan gathers the input, XLA
permutes then gathers the result.)

    python benchmarks/xla_concat_slice.py [--json]

``--json`` prints one JSON line instead: per case, ``xla``, ``ilp`` and ``propagate``, each a list of
``[kind, bytes per device]`` in program order (tests/benchmarks/test_xla_concat_slice.py reads it).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cases(jax, jnp, P):
    """name -> (function, mesh key, [(operand shape, spec)], result spec)."""
    cat1 = lambda x, y: jnp.concatenate([x, y], axis=1)  # noqa: E731
    cat0 = lambda x, y: jnp.concatenate([x, y], axis=0)  # noqa: E731
    d = P(None, "d")
    return {
        "concat equal 1d": (cat1, "1d", [((16, 16), d), ((16, 16), d)], d),
        "concat unequal 1d": (cat1, "1d", [((16, 16), d), ((16, 32), d)], d),
        "concat 8+24 1d": (cat1, "1d", [((16, 8), d), ((16, 24), d)], d),
        "concat large 1d": (cat1, "1d", [((2048, 2048), d), ((2048, 2048), d)], d),
        "concat rows 2d": (cat0, "2d", [((8, 32), P("dp")), ((8, 32), P("dp"))], P("dp")),
        "concat both 2d": (cat1, "2d", [((16, 16), P("dp", "tp")), ((16, 16), P("dp", "tp"))], P("dp", "tp")),
        "concat three 1d": (lambda x, y, z: jnp.concatenate([x, y, z], axis=1), "1d",
                            [((16, 16), d), ((16, 8), d), ((16, 24), d)], d),
        "concat 3-d 1d": (lambda x, y: jnp.concatenate([x, y], axis=2), "1d",
                          [((4, 8, 16), P(None, None, "d")), ((4, 8, 8), P(None, None, "d"))], P(None, None, "d")),
        "concat gathered 1d": (cat1, "1d", [((6, 16), d), ((6, 8), d)], d),
        "slice large prefix": (lambda x: x[:, :2048], "1d", [((2048, 4096), d)], d),
        "slice prefix": (lambda x: x[:, :16], "1d", [((16, 32), d)], d),
        "slice middle": (lambda x: x[:, 8:24], "1d", [((16, 32), d)], d),
        "slice prefix to replicated": (lambda x: x[:, :16], "1d", [((16, 32), d)], P()),
    }


def _text(collectives) -> str:
    return " + ".join(f"{kind} {nbytes}" for kind, nbytes in collectives) or "-"


def measure() -> dict:
    """Per case: XLA's collectives and the plan's (ilp, propagate), each ``[kind, bytes per device]``."""
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.path.insert(0, str(ROOT))
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from planner.api import plan
    from planner.engines.jax_run import planned_collectives
    from planner.engines.xla_hlo import collectives as xla_collectives
    from planner.frontends.jax import trace_function

    auto = jax.sharding.AxisType.Auto
    meshes = {"1d": jax.make_mesh((8,), ("d",), axis_types=(auto,)),
              "2d": jax.make_mesh((2, 4), ("dp", "tp"), axis_types=(auto, auto))}
    rows = {}
    for name, (fn, mesh_key, specs, out_spec) in cases(jax, jnp, P).items():
        mesh = meshes[mesh_key]
        out = NamedSharding(mesh, out_spec)
        constrained = lambda *a, fn=fn, out=out: jax.lax.with_sharding_constraint(fn(*a), out)  # noqa: E731
        args = [jax.ShapeDtypeStruct(shape, jnp.float32) for shape, _ in specs]
        shardings = [NamedSharding(mesh, spec) for _, spec in specs]
        compiled = jax.jit(constrained, in_shardings=shardings).lower(*args).compile()
        row = {"xla": [[c.our_kind, c.bytes_per_device] for c in xla_collectives(compiled.as_text(), mesh.size)]}
        graph = trace_function(constrained, *args, mesh=mesh, shardings=shardings).graph
        for search in ("ilp", "propagate"):
            row[search] = [[c.kind, c.bytes_per_device] for c in planned_collectives(plan(graph, search=search))]
        rows[name] = row
    return rows


def main(argv: list[str]) -> None:
    rows = measure()
    if "--json" in argv:
        print(json.dumps(rows, sort_keys=True))
        return
    print(f"{'case':28} {'XLA':44} {'plan ilp':28} plan propagate")
    for name, row in rows.items():
        print(f"{name:28} {_text(row['xla']):44} {_text(row['ilp']):28} {_text(row['propagate'])}")


if __name__ == "__main__":
    main(sys.argv[1:])
