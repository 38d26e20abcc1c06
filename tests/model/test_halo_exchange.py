"""XLA's halo exchange of a sliced dimension (planner/model/halo_exchange.py): every device gets its whole
window, and the permutes are the ones XLA 0.10.2 compiles (their kinds and buffer sizes, read from its HLO on 8
host devices), over a grid of sizes, windows and device counts."""

import json

import pytest

from planner.model.halo_exchange import halo_permutes
from tests.jax_devices import run_on_eight_devices

#: (input size, result size, window start, devices): every multiple-of-p size pair up to 24, from two to four starts each
GRID = [(n, m, s, p) for p in (2, 4, 8) for n in (p * k for k in range(2, 25 // p + 1)) for m in range(p, n, p)
        for s in range(0, n - m + 1, max(1, (n - m) // 2))]


def test_every_device_receives_its_whole_window_from_distinct_pairs():
    for n, m, s, p in GRID:
        permutes = halo_permutes(n, m, -s, p)
        assert permutes is not None, (n, m, s, p)  # evenly split windows never fall back to a gather
        bi, bo = n // p, m // p
        for lo, hi, pairs in permutes:
            assert 0 <= lo < hi <= bi
            assert len({a for a, _ in pairs}) == len(pairs) == len({b for _, b in pairs})
        for i in range(p):
            held = set(range(i * bi, (i + 1) * bi))
            for lo, hi, pairs in permutes:
                held |= {src * bi + e for src, dst in pairs if dst == i for e in range(lo, hi)}
            assert set(range(s + bo * i, s + bo * (i + 1))) <= held, (n, m, s, p, i)


SCRIPT = """
import json, sys
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from planner.engines.xla_hlo import collectives
meshes = {p: jax.make_mesh((p, 8 // p), ("d", "e"), axis_types=(jax.sharding.AxisType.Auto,) * 2) for p in (2, 4, 8)}
out = []
for n, m, s, p in json.loads(sys.stdin.read()):
    sharding = NamedSharding(meshes[p], P(None, "d"))
    f = lambda x, s=s, m=m, sharding=sharding: jax.lax.with_sharding_constraint(x[:, s:s + m], sharding)
    text = jax.jit(f, in_shardings=sharding).lower(jax.ShapeDtypeStruct((3, n), jnp.float32)).compile().as_text()
    out.append(sorted([c.our_kind, c.bytes_per_device] for c in collectives(text, 8)))
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_permutes_are_the_ones_xla_compiles():
    pytest.importorskip("jax")
    compiled = run_on_eight_devices(SCRIPT, stdin=json.dumps(GRID), timeout=900)
    # a permute's buffer on each device: its range of a block, times the block's other dimension (3 rows of f32)
    ours = [sorted(["CollectivePermute", (hi - lo) * 3 * 4] for lo, hi, _ in halo_permutes(n, m, -s, p))
            for n, m, s, p in GRID]
    differ = [(case, xla, mine) for case, xla, mine in zip(GRID, compiled, ours) if xla != mine]
    assert len(GRID) >= 150 and differ == []
