"""XLA compiles a normalisation over a sharded axis as AllReduces of its statistics: the same forward
collectives (kind, count, bytes per device) as the plan's op collectives. JAX is the reference: its
compiled HLO is read at test time (planner.engines.xla_hlo), 8 host CPU devices."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from planner.api import plan

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("jax")

#: the forms the JAX frontend traces (tests/frontends/shardy_suite.py) and fuses into our ops
SCRIPT = textwrap.dedent("""
    import json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax, jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    from planner.engines.xla_hlo import collectives
    mesh = jax.make_mesh((4,), ("x",))
    def ln(x, w, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * w + b
    def rms(x, w):
        return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w
    x = jax.ShapeDtypeStruct((16, 512), jnp.float32, sharding=NamedSharding(mesh, P(None, "x")))
    w = jax.ShapeDtypeStruct((512,), jnp.float32, sharding=NamedSharding(mesh, P("x")))
    cases = {"softmax": (lambda x: jax.nn.softmax(x, axis=-1), (x,)), "layernorm": (ln, (x, w, w)),
             "rmsnorm": (rms, (x, w))}
    out = {}
    for name, (f, args) in cases.items():
        text = jax.jit(f, out_shardings=NamedSharding(mesh, P(None, "x"))).lower(*args).compile().as_text()
        out[name] = [[c.our_kind, c.group_size, c.bytes_per_device] for c in collectives(text, 8)]
    print(json.dumps(out))
""")

MODEL = """
name: norm
mesh: {{x: 4}}
tensors:
  a: {{shape: [16, 512], kind: input, sharding: '[{{}}, {{"x"}}]'}}
  w: {{shape: [512], kind: param}}
  b: {{shape: [512], kind: param}}
ops:
  - {{name: n, op: {op}, inputs: [{inputs}], output: y, out_sharding: '[{{}}, {{"x"}}]'{attrs}}}
outputs: [y]
"""
INPUTS = {"softmax": ("a", ", axis: 1"), "layernorm": ("a, w, b", ""), "rmsnorm": ("a, w", "")}


@pytest.fixture(scope="module")
def xla():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(INPUTS))
def test_xla_all_reduces_the_same_statistics_as_the_plan(xla, op):
    inputs, attrs = INPUTS[op]
    p = plan(MODEL.format(op=op, inputs=inputs, attrs=attrs), search="bfs")
    planned = [[c.kind, c.group_size, c.bytes_per_device] for c in p.program.op_collectives("forward")]
    assert planned and p.program.redistributions("forward") == () or all(
        not r.plan.steps for r in p.program.redistributions("forward"))
    assert planned == xla[op]
