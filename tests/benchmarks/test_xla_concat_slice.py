"""XLA's algorithm for a concatenate or a slice along a sharded dimension, as benchmarks/xla_concat_slice.py
describes it, read from what JAX compiles at test time (8 host CPU devices), and the plan for the same program.

Bytes per device follow costmodels/collectives.py: an AllToAll over p devices receives (p-1)/p of its local
buffer, a CollectivePermute its whole buffer, an AllGather (p-1) shards. f32: 4 bytes an element."""

import json
import os
import subprocess
import sys
from math import prod
from pathlib import Path

import pytest

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "xla_concat_slice.py"

#: concat case -> (operand shapes, result shape, size of the group sharding the concatenated dimension)
CONCATS = {
    "concat equal 1d": ([(16, 16), (16, 16)], (16, 32), 8),
    "concat unequal 1d": ([(16, 16), (16, 32)], (16, 48), 8),
    "concat 8+24 1d": ([(16, 8), (16, 24)], (16, 32), 8),
    "concat rows 2d": ([(8, 32), (8, 32)], (16, 32), 2),
}

#: slice case -> (input shape, result shape): x[16, 32] sharded 8 ways along the sliced dimension
SLICES = {"slice prefix": ((16, 32), (16, 16)), "slice middle": ((16, 32), (16, 16)),
          "slice prefix to replicated": ((16, 32), (16, 16))}


def all_to_all(shape, p):
    # the local block is the shape's elements over p; a device keeps one of p chunks
    return prod(shape) * 4 // p * (p - 1) // p


def all_gather(shape, p):
    # a device receives the p-1 shards it does not hold
    return prod(shape) * 4 // p * (p - 1)


@pytest.fixture(scope="module")
def measured():
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8",
               PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, str(SCRIPT), "--json"], text=True, capture_output=True, env=env,
                       timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_xla_concatenates_by_moving_the_axes_to_another_dimension_and_back(measured):
    # one AllToAll per operand (its concatenated dimension's axes to another dimension), one for the result
    for name, (operands, result, p) in CONCATS.items():
        expected = sorted(["AllToAll", all_to_all(s, p)] for s in operands + [result])
        assert sorted(measured[name]["xla"]) == expected, name


@pytest.mark.slow
def test_xla_slices_a_sharded_dimension_with_collective_permutes(measured):
    # result block j (2 of the 16 kept columns) lies in one input block (4 columns): XLA permutes a whole
    # input block (16 x 4) and then the piece (16 x 2); a replicated result is gathered after that
    block, piece = 16 * 4 * 4, 16 * 2 * 4
    for name, (_, result) in SLICES.items():
        permutes = [c for c in measured[name]["xla"] if c[0] == "CollectivePermute"]
        assert sorted(b for _, b in permutes) == [piece, block], name
        rest = [c for c in measured[name]["xla"] if c[0] != "CollectivePermute"]
        assert rest == ([["AllGather", all_gather(result, 8)]] if name.endswith("replicated") else []), name


@pytest.mark.slow
def test_the_plan_gathers_the_operands_where_xla_permutes(measured):
    # the concatenated (sliced) dimension needs replication in our rules: every search gathers each operand
    # whole and keeps its block of the result; XLA moves only the blocks (the tests above)
    cases = {name: operands for name, (operands, _, _) in CONCATS.items()}
    cases.update({name: [shape] for name, (shape, _) in SLICES.items()})
    for name, operands in cases.items():
        p = CONCATS[name][2] if name in CONCATS else 8
        expected = sorted(["AllGather", all_gather(s, p)] for s in operands)
        for search in ("ilp", "propagate"):
            assert sorted(measured[name][search]) == expected, (name, search)
