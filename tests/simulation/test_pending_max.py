"""``max`` (``min``) over a sharded dimension: each device reduces its block and one AllReduce takes the maximum
(minimum)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from planner.api import plan
from planner.partitioning import render
from planner.simulation.run import simulate

ROOT = Path(__file__).resolve().parents[2]

# a [64, 4096] input (large enough that the AllGather's bytes, not latency, decide) pinned as [{"y"}, {"x"}] on x=4, y=2, reduced over its x-sharded dimension 1
MODEL = """
name: maxred
mesh: {x: 4, y: 2}
tensors:
  a: {shape: [64, 4096], kind: input, sharding: '[{"y"}, {"x"}]'}
ops:
  - {name: m, op: max, inputs: [a], output: b, axes: [1]}
  - {name: r, op: relu, inputs: [b], output: c}
outputs: [c]
"""


def _steps(p):
    """The communicating steps (a free Slice of the reduced value may follow)."""
    return [st for r in p.program.redistributions() for st in r.plan.steps if st.kind != "Slice"]


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_max_over_a_sharded_dim_all_reduces_the_local_maxima(search):
    p = plan(MODEL, search=search)
    (step,) = _steps(p)
    # the local max of a 32x1024 block is 32 elements, pending a maximum over "x" (p = 4): the ring moves
    # 2 (p-1) chunks of ceil(32/4) = 8 elements of 4 B = 192 B, where gathering the input would move 3 x 32x1024 x 4 B
    assert (step.kind, [str(a) for a in step.axes], step.before.dims_text()) == \
        ("AllReduce", ['"x"'], '[{"y"}], unreduced=max{"x"}')
    assert step.bytes_per_device == 2 * 3 * 8 * 4
    assert "reduction: max" in render(p.program) and "// pmax" in render(p.program)
    r = simulate(p)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device == 192


@pytest.mark.parametrize("search", ["bfs", "propagate"])
def test_min_over_a_sharded_dim_all_reduces_the_local_minima(search):
    # the same model with min: the same 192 B AllReduce (as above), now by min; the simulator's result equals the
    # single-device reference's (local minima, their padding +inf, combined with np.minimum)
    p = plan(MODEL.replace("op: max", "op: min"), search=search)
    (step,) = _steps(p)
    assert (step.kind, step.before.dims_text()) == ("AllReduce", '[{"y"}], unreduced=min{"x"}')
    assert step.bytes_per_device == 2 * 3 * 8 * 4
    assert "reduction: min" in render(p.program) and "// pmin" in render(p.program)
    r = simulate(p)
    assert r.ok and r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device == 192


def test_a_training_plan_reduces_max_over_whole_dimensions():
    # pmax has no transpose: with training the reduced dimension is gathered first, and the gradients match
    p = plan(MODEL.replace("kind: input", "kind: param"), search="bfs", training=True)
    assert all(st.before.reduction == "sum" for st in _steps(p))
    assert any(st.kind == "AllGather" for st in _steps(p))
    assert simulate(p).ok


@pytest.mark.slow
@pytest.mark.parametrize("op", ["max", "min"])
def test_xla_compiles_the_same_all_reduce_by_max_or_min(tmp_path, op):
    """The same reduction jitted by JAX (Shardy) and our plan's shard_map module: both one all-reduce whose
    computation is a maximum (minimum), of the same bytes per device."""
    pytest.importorskip("jax")
    model = tmp_path / "maxred.yaml"
    model.write_text(MODEL.replace("op: max", f"op: {op}"))
    code = textwrap.dedent("""
        import json, jax, jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec as P
        from planner.engines.xla_hlo import collectives
        mesh = jax.make_mesh((4, 2), ("x", "y"))
        f = jax.jit(lambda a: jnp.OP(a, axis=1), in_shardings=NamedSharding(mesh, P("y", "x")),
                    out_shardings=NamedSharding(mesh, P("y")))
        text = f.lower(jax.ShapeDtypeStruct((64, 4096), jnp.float32)).compile().as_text()
        found = [(c.kind, c.bytes_per_device, c.replica_groups) for c in collectives(text, 8)]
        print(json.dumps({"found": found, "combiner": "OPimum(" in text}))
    """).replace("OP", op)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    xla = json.loads(done.stdout.splitlines()[-1])
    p = plan(model, search="bfs")
    (step,) = _steps(p)
    assert [(k, b) for k, b, _ in xla["found"]] == [("all-reduce", step.bytes_per_device)] and xla["combiner"]
    run = subprocess.run([sys.executable, "-m", "planner", "run", str(model), "--search", "bfs", "--repeat", "1",
                          "--format", "json", "--quiet"], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    d = json.loads(run.stdout)
    assert d["ok"] and d["xla_comm_bytes_per_device"] == d["predicted_comm_bytes_per_device"] == step.bytes_per_device
