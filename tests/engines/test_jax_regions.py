"""Manual regions run on JAX/XLA as ``jax.shard_map`` (issue 14 over issue 13's regions).

The end-to-end check is one subprocess (JAX must start with 4 host devices; this process may already hold JAX
with another count) running seven plans: megatron_by_hand forward, dp_training_step trained, ring_matmul forward,
a two-axis region whose collectives list their axes against the mesh's order, a region using every other
collective, trained, one using all_gather_invariant and pscatter, trained, and one using pmax and pmin."""

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from planner.api import plan
from planner.engines.jax_run import planned_collectives
from tests.model.test_manual_regions import INVARIANT_GATHER  # trained: each op transposes into the other
from tests.simulation.test_manual_regions import STABLE_SOFTMAX  # pmax, psum and pmin in one body

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"

# mesh (a, b): device id = 2a + b. The body's collectives list their axes as [b, a], so their linear index is
# 2b + a (graphs.ops.collectives), not the device id: a run that numbered them in mesh order would differ.
TWO_AXES = """\
name: two_axes
mesh: {a: 2, b: 2}
tensors:
  x: {shape: [8, 4]}
regions:
  - name: r
    manual_axes: [a, b]
    inputs: [x]
    in_shardings: ['[{"a", "b"}, {}]']
    outputs: [y, g]
    out_shardings: ['[{"a", "b"}, {}]', '[{"a", "b"}, {}]']
    ops:
      - {name: shift, op: ppermute, axes: [b, a], perm: [[0, 1], [1, 2], [2, 3]], inputs: [x], output: y}
      - {name: gather, op: all_gather, axes: [b, a], dim: 1, inputs: [x], output: g}
outputs: [y, g]
"""

# every other collective of graphs.ops.collectives, trained: w's gradient flows back through psum_scatter
# (an all_gather) and pbroadcast (a psum)
ALL_COLLECTIVES = """\
name: all_collectives
mesh: {tp: 4}
tensors:
  x: {shape: [8, 16]}
  w: {shape: [8, 16], kind: param}
regions:
  - name: r
    manual_axes: [tp]
    inputs: [x, w]
    in_shardings: ['[{"tp"}, {}]', '[{}, {}]']
    outputs: [m, s, t, si]
    out_shardings: ['[{}, {}]', '[{"tp"}, {}]', '[{"tp"}, {}]', '[{"tp"}, {}]']
    ops:
      - {name: bw, op: pbroadcast, axes: [tp], inputs: [w], output: wb}
      - {name: mean, op: pmean, axes: [tp], inputs: [x], output: m}
      - {name: scatter, op: psum_scatter, axes: [tp], dim: 0, inputs: [wb], output: s}
      - {name: a2a, op: all_to_all, axes: [tp], split_dim: 1, concat_dim: 0, inputs: [x], output: t}
      - {name: idx, op: axis_index, axes: [tp], inputs: [], output: i}
      - {name: fi, op: cast, dtype: f32, inputs: [i], output: f}
      - {name: scaled, op: mul, inputs: [s, f], output: si}
outputs: [m, s, t, si]
"""


RUNS = textwrap.dedent("""\
    import json, sys
    from planner.api import plan
    from planner.engines.jax_run import run_on_jax
    out = {}
    for key, path, training in json.loads(sys.argv[1]):
        out[key] = run_on_jax(plan(path, training=training)).to_dict()
    print(json.dumps(out))
""")


def _ring_pairs(pairs):
    return sorted(tuple(p) for p in pairs)


def test_ring_matmuls_permutes_are_the_plans_collectives_and_reverse_backward():
    p = plan(CONFIGS / "ring_matmul.yaml", training=True)
    planned = planned_collectives(p)
    assert dict(sorted(Counter(c.kind for c in planned).items())) == p.program.collective_counts()
    assert sum(c.bytes_per_device for c in planned) == p.totals.comm_bytes_per_device
    # perm i -> i+1 mod 4 over tp, whose linear index is the device id on the mesh {tp: 4}
    ring = [(0, 1), (1, 2), (2, 3), (3, 0)]
    forward = [c for c in planned if c.phase == "forward"]
    backward = [c for c in planned if c.phase == "backward"]
    assert len(forward) == 6 and all(_ring_pairs(c.replica_groups) == ring for c in forward)
    # the transpose of ppermute is ppermute with the pairs reversed
    assert backward and all(_ring_pairs(c.replica_groups) == sorted((d, s) for s, d in ring) for c in backward)


def test_megatron_by_hands_psum_is_one_all_reduce_over_every_device():
    planned = planned_collectives(plan(CONFIGS / "megatron_by_hand.yaml"))
    assert [(c.kind, c.tensor, c.replica_groups) for c in planned] == [("AllReduce", "mlp/y", ((0, 1, 2, 3),))]


@pytest.mark.slow
def test_regions_run_through_shard_map_and_match_the_reference(tmp_path):
    pytest.importorskip("jax")
    two_axes = tmp_path / "two_axes.yaml"
    two_axes.write_text(TWO_AXES)
    every = tmp_path / "all_collectives.yaml"
    every.write_text(ALL_COLLECTIVES)
    invariant = tmp_path / "invariant_gather.yaml"
    invariant.write_text(INVARIANT_GATHER)
    extremes = tmp_path / "extremes.yaml"
    extremes.write_text(STABLE_SOFTMAX)
    runs = [["megatron", str(CONFIGS / "megatron_by_hand.yaml"), False],
            ["dp", str(CONFIGS / "dp_training_step.yaml"), True],
            ["ring", str(CONFIGS / "ring_matmul.yaml"), False],
            ["two_axes", str(two_axes), False],
            ["every", str(every), True],
            ["invariant", str(invariant), True],
            ["extremes", str(extremes), False]]
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-c", RUNS, json.dumps(runs)], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)

    m = d["megatron"]
    assert m["ok"] and m["outputs"]["y"]["ok"]
    # the psum of each device's partial [16, 128] f32 product: one all-reduce over the 4 devices, moving the
    # ring's 2 (p - 1) / p of 16 * 128 * 4 B = 12,288 B per device, what the plan predicts
    ar = [c for c in m["xla_collectives"] if c["kind"] == "all-reduce"]
    assert [c["replica_groups"] for c in ar] == [[[0, 1, 2, 3]]]
    assert ar[0]["bytes_per_device"] == 2 * 3 * 16 * 128 * 4 // 4 == m["predicted_comm_bytes_per_device"]

    dp = d["dp"]
    assert dp["ok"] and dp["outputs"]["loss"]["ok"] and set(dp["gradients"]) == {"w"} and dp["gradients"]["w"]["ok"]
    # the loss's psum (forward) and w's gradient reduction (backward) are all-reduces over dp on XLA too
    assert {c["kind"] for c in dp["xla_collectives"]} == {"all-reduce"}
    assert dp["xla_comm_bytes_per_device"] == dp["predicted_comm_bytes_per_device"]

    ring = d["ring"]
    assert ring["ok"] and ring["outputs"]["y_per_device"]["ok"]
    assert Counter(c["kind"] for c in ring["xla_collectives"]) == {"collective-permute": 6}
    assert sorted(_ring_pairs(c["replica_groups"]) for c in ring["xla_collectives"]) == \
        sorted(_ring_pairs(c["replica_groups"]) for c in ring["predicted_collectives"])

    two = d["two_axes"]
    assert two["ok"] and two["outputs"]["y"]["ok"] and two["outputs"]["g"]["ok"]
    # linear index 2b + a -> device 2a + b: pairs 0->1, 1->2, 2->3 are devices 0->2, 2->1, 1->3
    permute = [c for c in two["xla_collectives"] if c["kind"] == "collective-permute"]
    assert [_ring_pairs(c["replica_groups"]) for c in permute] == [[(0, 2), (1, 3), (2, 1)]]

    every = d["every"]
    assert every["ok"] and all(o["ok"] for o in every["outputs"].values()) and every["gradients"]["w"]["ok"]
    # pmean, psum_scatter, all_to_all forward; all_gather and psum backward: each kind on both sides
    assert {k for k, v in every["by_kind"].items() if v["predicted_count"]} == \
        {k for k, v in every["by_kind"].items() if v["xla_count"]} == \
        {"AllGather", "AllReduce", "AllToAll", "ReduceScatter"}
    assert every["xla_comm_bytes_per_device"] == every["predicted_comm_bytes_per_device"]

    inv = d["invariant"]
    assert inv["ok"] and all(o["ok"] for o in inv["outputs"].values())
    assert set(inv["gradients"]) == {"w", "v"} and all(g["ok"] for g in inv["gradients"].values())
    # XLA compiles two all-gathers over the 4 devices: all_gather_invariant forward, and the transpose of pscatter
    # (all_gather_invariant of s's cotangent) backward; pscatter forward and its transpose of the gather backward
    # are local slices. Each gathers the other 3 devices' [2, 16] f32 quarters: 3 * 2 * 16 * 4 B, as planned
    gathers = [c for c in inv["xla_collectives"] if c["kind"] == "all-gather"]
    assert len(gathers) == len(inv["xla_collectives"]) == 2
    assert all(c["replica_groups"] == [[0, 1, 2, 3]] and c["bytes_per_device"] == 3 * 2 * 16 * 4 for c in gathers)
    assert sorted((c["phase"], c["kind"]) for c in inv["predicted_collectives"]) == \
        [("backward", "AllGather"), ("forward", "AllGather")]
    assert inv["xla_comm_bytes_per_device"] == inv["predicted_comm_bytes_per_device"]

    ext = d["extremes"]
    assert ext["ok"] and all(o["ok"] for o in ext["outputs"].values())
    # pmax, psum and pmin: three all-reduces over the 4 devices on XLA too, each of the [8, 1] f32 row statistics,
    # the ring's 2 * 3 chunks of 2 floats = 48 B per device
    reduces = [c for c in ext["xla_collectives"] if c["kind"] == "all-reduce"]
    assert len(reduces) == len(ext["xla_collectives"]) == 3
    assert all(c["replica_groups"] == [[0, 1, 2, 3]] and c["bytes_per_device"] == 2 * 3 * 2 * 4 for c in reduces)
    assert ext["xla_comm_bytes_per_device"] == ext["predicted_comm_bytes_per_device"] == 3 * 48
