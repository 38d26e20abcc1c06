"""XLA's halo exchange of a windowed dimension (planner/model/halo_exchange.py): every device gets its whole
window, and the permutes are the ones XLA 0.10.2 compiles for a slice and for the zero pad that is its backward
(their kinds and buffer sizes, read from its HLO on 8 host devices), over a grid of sizes, windows and device
counts, windows that split unevenly among them."""

import json

import pytest

import numpy as np

from planner.model.halo_exchange import halo_permutes, rotation_permutes, rotation_pieces
from tests.jax_devices import run_on_eight_devices

#: (input size, result size, window start, devices): every multiple-of-p size pair up to 24, from two to four starts each
GRID = [(n, m, s, p) for p in (2, 4, 8) for n in (p * k for k in range(2, 25 // p + 1)) for m in range(p, n, p)
        for s in range(0, n - m + 1, max(1, (n - m) // 2))]


def test_a_rolls_pieces_make_each_block_of_the_rolled_dimension():
    # derived from np.roll: each output block, joined from its pieces of the input blocks, is that block of the
    # rolled input, for every shift of every even split of sizes up to 24; and a piece that comes from another
    # block is exactly one permute, every block sending it to one other
    for p in (1, 2, 3, 4, 8):
        for n in range(p, 25, p):
            x, block = np.arange(n), n // p
            for shift in range(-n, n + 1):
                pieces = rotation_pieces(n, p, shift)
                rolled = np.roll(x, shift)
                for j in range(p):
                    joined = np.concatenate([x[((j + off) % p) * block:][lo:hi] for off, lo, hi in pieces])
                    assert joined.tolist() == rolled[j * block:(j + 1) * block].tolist(), (n, p, shift, j)
                permutes = rotation_permutes(n, p, shift)
                assert [(lo, hi) for lo, hi, _ in permutes] == [(lo, hi) for off, lo, hi in pieces if off % p]
                assert all(sorted(a for a, _ in pairs) == sorted(b for _, b in pairs) == list(range(p))
                           and all(a != b for a, b in pairs) for _, _, pairs in permutes)


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



#: windows of fewer positions than blocks (one position per block, the last blocks only padding): every start on
#: dimensions of one and two blocks' worth per device, four starts on three
SMALL = [(n, m, s, p) for p in (4, 8) for n in (p, 2 * p, 3 * p) for m in range(1, p)
         for s in (range(n - m + 1) if n <= 2 * p else sorted({0, 1, (n - m) // 2, n - m}))]


def test_a_window_of_fewer_positions_than_blocks_reaches_each_of_its_positions_block():
    for n, m, s, p in SMALL:
        permutes = halo_permutes(n, m, -s, p)
        assert permutes is not None, (n, m, s, p)
        bi = n // p
        for i in range(m):  # block i holds position s + i: its own, or received from the block holding it
            held = set(range(i * bi, (i + 1) * bi))
            for lo, hi, pairs in permutes:
                held |= {src * bi + e for src, dst in pairs if dst == i for e in range(lo, hi)}
            assert s + i in held, (n, m, s, p, i)

SCRIPT = """
import json, sys
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from planner.engines.xla_hlo import collectives
meshes = {p: jax.make_mesh((p, 8 // p), ("d", "e"), axis_types=(jax.sharding.AxisType.Auto,) * 2) for p in (2, 4, 8)}
def compiled(f, sharding, n):
    text = jax.jit(f, in_shardings=sharding).lower(jax.ShapeDtypeStruct((3, n), jnp.float32)).compile().as_text()
    return sorted([c.our_kind, c.bytes_per_device] for c in collectives(text, 8))
out = {"slice": [], "pad": []}
for n, m, s, p in json.loads(sys.stdin.read()):
    sh = NamedSharding(meshes[p], P(None, "d"))
    out["slice"].append(compiled(lambda x: jax.lax.with_sharding_constraint(x[:, s:s + m], sh), sh, n))
    pad = [(0, 0, 0), (s, n - s - m, 0)]  # the slice's transpose: its cotangent back in place, zeros around
    out["pad"].append(compiled(lambda c: jax.lax.with_sharding_constraint(jax.lax.pad(c, 0.0, pad), sh), sh, m))
print(json.dumps(out))
"""


def _collectives(n_in, n_out, low, p):
    """Our exchange for the window as XLA's HLO lists it: each permute's buffer on each device (its range of a
    block times the block's other dimension, 3 rows of f32), or the gather of the input's missing blocks."""
    permutes = halo_permutes(n_in, n_out, low, p)
    if permutes is None:  # the p - 1 blocks (of ceil(n_in / p)) a device lacks
        return [["AllGather", 3 * -(-n_in // p) * 4 * (p - 1)]]
    return sorted(["CollectivePermute", (hi - lo) * 3 * 4] for lo, hi, _ in permutes)


#: windows that split unevenly (their size not a multiple of p, at least p), kept sharded and then padded back:
#: JAX's arguments and results split evenly, so each case compiles a slice and its backward pad as one program
UNEVEN = [(n, m, s, p) for p in (2, 4, 8) for n in (2 * p, 4 * p) for m in range(p + 1, n) if m % p
          for s in sorted({0, 1, (n - m) // 2, n - m})]

UNEVEN_SCRIPT = """
import json, sys
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from planner.engines.xla_hlo import collectives
meshes = {p: jax.make_mesh((p, 8 // p), ("d", "e"), axis_types=(jax.sharding.AxisType.Auto,) * 2) for p in (2, 4, 8)}
out = []
for n, m, s, p in json.loads(sys.stdin.read()):
    sh = NamedSharding(meshes[p], P(None, "d"))
    kept = lambda x: jax.lax.with_sharding_constraint(x[:, s:s + m], sh)
    f = lambda x: jax.lax.with_sharding_constraint(jax.lax.pad(kept(x), 0.0, [(0, 0, 0), (s, n - s - m, 0)]), sh)
    text = jax.jit(f, in_shardings=sh).lower(jax.ShapeDtypeStruct((3, n), jnp.float32)).compile().as_text()
    out.append(sorted([c.our_kind, c.bytes_per_device] for c in collectives(text, 8)))
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_permutes_are_xlas_for_a_window_that_splits_unevenly():
    pytest.importorskip("jax")
    compiled = run_on_eight_devices(UNEVEN_SCRIPT, stdin=json.dumps(UNEVEN), timeout=900)
    ours = [sorted(_collectives(n, m, -s, p) + _collectives(m, n, s, p)) for n, m, s, p in UNEVEN]
    assert len(UNEVEN) >= 100
    assert [(case, xla) for case, xla, mine in zip(UNEVEN, compiled, ours) if xla != mine] == []


@pytest.mark.slow
def test_the_permutes_are_the_ones_xla_compiles_for_a_slice_and_its_backward_pad():
    pytest.importorskip("jax")
    compiled = run_on_eight_devices(SCRIPT, stdin=json.dumps(GRID), timeout=900)
    slices = [_collectives(n, m, -s, p) for n, m, s, p in GRID]
    pads = [_collectives(m, n, s, p) for n, m, s, p in GRID]
    assert len(GRID) >= 150 and any(c and c[0][0] == "AllGather" for c in pads)  # XLA gathers some pads
    assert [(case, xla) for case, xla, mine in zip(GRID, compiled["slice"], slices) if xla != mine] == []
    assert [(case, xla) for case, xla, mine in zip(GRID, compiled["pad"], pads) if xla != mine] == []


SMALL_SCRIPT = """
import json, sys
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from planner.engines.xla_hlo import collectives
meshes = {p: jax.make_mesh((p, 8 // p), ("d", "e"), axis_types=(jax.sharding.AxisType.Auto,) * 2) for p in (4, 8)}
out = []
for n, m, s, p in json.loads(sys.stdin.read()):
    sh = NamedSharding(meshes[p], P(None, "d"))
    text = jax.jit(lambda x: jnp.tanh(x[:, s:s + m]), in_shardings=sh).lower(
        jax.ShapeDtypeStruct((3, n), jnp.float32)).compile().as_text()
    out.append([[c.bytes_per_device, c.replica_groups] for c in collectives(text, 8) if c.our_kind == "CollectivePermute"])
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_permutes_are_xlas_for_a_window_of_fewer_positions_than_blocks():
    # Shardy keeps the input's axis on the window (past its size), and XLA trims the blocks that hold nothing of it
    # before its exchange: each permute's buffer (3 rows of f32) and its pairs of blocks (devices d * 8 // p + e,
    # read at e = 0), as XLA 0.10.2 compiles them
    pytest.importorskip("jax")
    compiled = run_on_eight_devices(SMALL_SCRIPT, stdin=json.dumps(SMALL), timeout=900)
    assert len(SMALL) >= 150

    def ours(n, m, s, p):
        return sorted([(hi - lo) * 3 * 4, sorted(pairs)] for lo, hi, pairs in halo_permutes(n, m, -s, p))

    def xla(case, permutes):
        e = 8 // case[3]
        return sorted([b, sorted((a // e, d // e) for a, d in pairs if a % e == 0)] for b, pairs in permutes)

    assert [(case, xla(case, c)) for case, c in zip(SMALL, compiled) if xla(case, c) != ours(*case)] == []
