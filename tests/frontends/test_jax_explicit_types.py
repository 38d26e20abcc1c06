"""JAX functions on an Explicit mesh, traced by the frontend and typed by explicit mode: every output's type is the
one JAX gives it (JAX 0.10.2 on 8 host CPU devices, read at test time from ``jax.jit(f).trace(...).out_info``), and
the programs that carry a sum pending through linear ops plan and simulate exactly. The functions were written as
held-out programs of the kinds issue 27 names (MLPs, attention scores and head reshapes, norms, softmax,
concat/slice, reductions, out_sharding and reshard)."""

import pytest

from tests.jax_devices import run_on_eight_devices

pytest.importorskip("jax")

SCRIPT = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import jax, jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from planner.api import plan
from planner.errors import ShardplanError
from planner.frontends.jax import trace_function
from planner.model.explicit_types import explicit_shardings
from planner.simulation.run import simulate

mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
S = lambda shape, spec: jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))
x = S((16, 32), P("x", None)); w1 = S((32, 64), P(None, "y")); w2 = S((64, 32), P("y", None))
xs = S((16, 32), P("x", "y")); g = S((32,), P()); gy = S((32,), P("y"))
q = S((2, 8, 4, 16), P("x", None, "y", None))
# a row-parallel product left pending over y
pending = lambda h, w: jnp.matmul(h, w, out_sharding=P("x", None, unreduced={"y"}))
cases = {
 "mlp_relu": (lambda x, w1: jax.nn.relu(x @ w1), (x, w1)),
 "megatron_out": (lambda x, w1, w2: jnp.matmul(jax.nn.relu(x @ w1), w2, out_sharding=P("x", None)), (x, w1, w2)),
 "megatron_unreduced_reshard": (lambda x, w1, w2: jax.sharding.reshard(pending(jnp.tanh(x @ w1), w2), P("x", None)),
                                (x, w1, w2)),
 "two_branch_pending": (lambda x, w1, w2: jax.sharding.reshard(pending(x @ w1, w2) + pending(jnp.tanh(x @ w1), w2),
                                                               P("x", None)), (x, w1, w2)),
 "softmax_rows": (lambda x, w1: jax.nn.softmax(x @ w1, axis=-1), (x, w1)),
 "layernorm_like": (lambda xs, g: ((xs - xs.mean(-1, keepdims=True)) / jnp.sqrt(xs.var(-1, keepdims=True) + 1e-5)) * g,
                    (xs, g)),
 "sum_sharded": (lambda xs: xs.sum(axis=1), (xs,)),
 "max_sharded": (lambda xs: xs.max(axis=0), (xs,)),
 "transpose_mm": (lambda xs, w1: xs.T.T @ w1, (xs, w1)),
 "concat": (lambda x, w1: jnp.concatenate([x @ w1, x @ w1], axis=0), (x, w1)),
 "slice": (lambda x, w1: (x @ w1)[:, :32], (x, w1)),
 "reshape_heads": (lambda x, w1: (x @ w1).reshape(16, 4, 16), (x, w1)),
 "reshape_merge": (lambda q: q.reshape(2, 8, 64), (q,)),
 "attn_scores": (lambda q: jnp.einsum("bqhd,bkhd->bhqk", q, q), (q,)),
 "bias_add": (lambda xs, gy: xs + gy, (xs, gy)),
 "outer": (lambda g, gy: g[:, None] * gy[None, :], (g, gy)),
 "scale": (lambda xs: xs * 2.0 + 1.0, (xs,)),
 "mean_rows": (lambda xs: xs.mean(axis=0), (xs,)),
 "gelu": (lambda x, w1: jax.nn.gelu(x @ w1), (x, w1)),
 "einsum_out": (lambda x, w1: jnp.einsum("ij,jk->ik", x, w1, out_sharding=P(None, "y")), (x, w1)),
 "reshard_cols": (lambda x: jax.sharding.reshard(x, P(None, "y")), (x,)),
 "cast": (lambda xs: xs.astype(jnp.bfloat16), (xs,)),
 "square_sum": (lambda xs: jnp.sum(xs * xs, axis=-1), (xs,)),
 "silu_gate": (lambda x, w1: jax.nn.silu(x @ w1) * (x @ w1), (x, w1)),
 "contract_both": (lambda xs, w2: xs @ w2.T, (xs, S((64, 32), P(None, "y")))),
}

PENDING = ("megatron_unreduced_reshard", "two_branch_pending")


def dims(spec, ndim):
    parts = list(spec.partitions) + [None] * (ndim - len(spec.partitions))
    return [[] if p is None else [p] if isinstance(p, str) else list(p) for p in parts], sorted(spec.unreduced)


out = {}
for name, (fn, args) in cases.items():
    try:
        with jax.set_mesh(mesh):
            infos = jax.tree.leaves(jax.jit(fn).trace(*args).out_info)
        theirs = [dims(o.sharding.spec, len(o.shape)) for o in infos]
    except Exception as e:  # JAX's type error: shardplan must refuse the program too
        theirs = {"error": f"{type(e).__name__}: {e}"}
    try:
        # no mesh given: the arguments' NamedShardings name it, and the functions' bare PartitionSpecs are read
        # under it, as `shardplan import-jax` traces a module's example arguments
        traced = trace_function(fn, *args)
        types = explicit_shardings(traced.graph)
        name_of = lambda a: a.name if a.size is None else str(a)  # a whole axis by name, as JAX's specs
        ours = [([[name_of(a) for a in d.axes] for d in types.sharding(o).dims],
                 sorted(name_of(a) for a in types.sharding(o).unreduced)) for o in traced.graph.outputs]
    except ShardplanError as e:
        ours = {"error": str(e)}
    row = {"jax": theirs, "ours": ours}
    if name in PENDING:
        r = simulate(plan(traced.graph, search="explicit"))
        row["simulated"] = [r.ok] + [p["measured_comm_bytes_per_device"] == p["predicted_comm_bytes_per_device"]
                                     for p in r.phases.values()]
    out[name] = row
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def results():
    return run_on_eight_devices(SCRIPT)


def test_every_output_of_a_traced_explicit_program_has_jaxs_type(results):
    typed = {name: row for name, row in results.items() if "error" not in row["jax"]}
    assert len(typed) >= 24
    assert {name: row for name, row in typed.items() if row["ours"] != row["jax"]} == {}


def test_a_program_jax_refuses_to_type_is_refused_for_the_same_reason(results):
    # xs[x, y] @ w2.T with w2's columns on y: the contracting dimension is sharded on both sides; the frontend
    # traces with JAX on the Explicit mesh, so JAX's own typing refuses it, and the error says so
    row = results["contract_both"]
    assert "Contracting dimensions are sharded" in row["jax"]["error"]
    assert row["ours"]["error"].startswith("JAX could not trace")
    assert "Contracting dimensions are sharded" in row["ours"]["error"]


def test_a_sum_pending_through_an_add_is_read_typed_and_simulated_exactly(results):
    # the functions write out_sharding=P("x", None, unreduced={"y"}) on row-parallel matmuls and reshard after
    for name in ("megatron_unreduced_reshard", "two_branch_pending"):
        assert results[name]["simulated"] and all(results[name]["simulated"]), name
