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
    "concat large 1d": ([(2048, 2048), (2048, 2048)], (2048, 4096), 8),
    "concat rows 2d": ([(8, 32), (8, 32)], (16, 32), 2),
}

#: slice case -> (input shape, result shape), the input sharded 8 ways along the sliced (last) dimension
SLICES = {"slice prefix": ((16, 32), (16, 16)), "slice middle": ((16, 32), (16, 16)),
          "slice prefix to replicated": ((16, 32), (16, 16)), "slice large prefix": ((2048, 4096), (2048, 2048))}

#: cases large enough that bandwidth outweighs latency in the ILP's cost model
LARGE = ("concat large 1d", "slice large prefix")


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
    # result block j (a result block: an eighth of the kept columns) lies in one input block (twice as wide):
    # XLA permutes a whole input block and then the result block; a replicated result is gathered after that
    for name, (shape, result) in SLICES.items():
        block, piece = prod(shape) * 4 // 8, prod(result) * 4 // 8
        permutes = [c for c in measured[name]["xla"] if c[0] == "CollectivePermute"]
        assert sorted(b for _, b in permutes) == [piece, block], name
        rest = [c for c in measured[name]["xla"] if c[0] != "CollectivePermute"]
        assert rest == ([["AllGather", all_gather(result, 8)]] if name.endswith("replicated") else []), name


@pytest.mark.slow
def test_xla_gathers_the_operands_where_no_other_dimension_divides(measured):
    # 6 rows cannot take 8 shards: each operand is AllGathered along the concatenated dimension, the result
    # sliced locally
    assert sorted(measured["concat gathered 1d"]["xla"]) == sorted(
        ["AllGather", all_gather(s, 8)] for s in [(6, 16), (6, 8)])


@pytest.mark.slow
def test_the_propagate_plan_exchanges_what_xla_compiles_for_a_concat(measured):
    # the concat's permutation factor keeps the axes (Shardy) and the op's own exchanges are XLA's, in order
    concats = [name for name in measured if name.startswith("concat")]
    assert len(concats) == len(CONCATS) + 4  # the cases of benchmarks/xla_concat_slice.py
    for name in concats:
        assert measured[name]["propagate"] == measured[name]["xla"], name


@pytest.mark.slow
def test_the_propagate_plan_permutes_what_xla_compiles_for_a_slice(measured):
    # the slice's permutation factor keeps the axes (Shardy); its permutes are XLA's halo exchange, in order
    for name in SLICES:
        if not name.endswith("replicated"):
            assert measured[name]["propagate"] == measured[name]["xla"], name


@pytest.mark.slow
def test_the_ilp_gathers_a_small_concat_where_latency_dominates(measured):
    # a concat's two AllGathers: 14 ring latencies on 8 devices, against 21 for its three AllToAlls
    for name, (operands, _, p) in CONCATS.items():
        if name not in LARGE:
            assert sorted(measured[name]["ilp"]) == sorted(["AllGather", all_gather(s, p)] for s in operands), name


@pytest.mark.slow
def test_the_ilp_exchanges_as_xla_where_bandwidth_dominates(measured):
    # the same redistributions around a local concat as XLA's: AllToAll each operand to the rows, concatenate,
    # AllToAll the result back
    assert measured["concat large 1d"]["ilp"] == measured["concat large 1d"]["xla"]
    # a slice by XLA's halo permutes too: two permutes (one step each) cost less in the cost model than the
    # AllToAlls around a local slice (7 ring steps each), though they move more bytes (6 MiB against 5.25 MiB)
    assert measured["slice large prefix"]["ilp"] == measured["slice large prefix"]["xla"]
