"""The ``xla`` redistribution policy moves what XLA's SPMD partitioner compiles for the same reshard: goldens
against XLA's HLO (JAX on 8 host CPU devices, at test time) and the rules they pin."""

import json

import pytest

from costmodels import load_cluster
from planner.ir import parse_mesh, parse_sharding
from planner.redistribution import reshard_for_planning
from planner.redistribution.xla_policy import reshard_like_xla, reshard_with_policy
from tests.jax_devices import run_on_eight_devices

MESH = parse_mesh('@m = <["dp"=2, "tp"=4]>')
CLUSTER = load_cluster(None)


def _s(text):
    return parse_sharding(text, MESH)


def _moves(plan):
    return [(s.kind, s.bytes_per_device) for s in plan.steps if s.kind != "Slice"]


def test_a_sum_pending_over_two_axes_is_completed_by_one_all_reduce_over_both():
    # f32[8, 64] = 2048 B per device pending over dp x tp (8 devices): a ring all-reduce receives
    # 2 * (8 - 1) / 8 of it, 3584 B, in one collective; the engine's cheapest splits it hierarchically
    plan = reshard_like_xla((8, 64), "f32", _s('[{}, {}], unreduced={"dp", "tp"}'), _s("[{}, {}]"), CLUSTER)
    assert _moves(plan) == [("AllReduce", 2 * 7 * 2048 // 8)]
    assert [s.axes for s in plan.steps] == [tuple(_s('[{}, {}], unreduced={"dp", "tp"}').unreduced)]
    cheapest = reshard_for_planning((8, 64), "f32", _s('[{}, {}], unreduced={"dp", "tp"}'), _s("[{}, {}]"), CLUSTER)
    assert len(cheapest.steps) > 1


def test_a_reductions_pending_sum_is_completed_one_group_at_a_time_in_order():
    # a sum over [{"dp"}, {"tp"}] (pending_groups: tp's dimension, the last, first): one ring all-reduce per
    # group, f32[8, 64] = 2048 B per device: tp's 2 * 3/4 of it (3072 B), then dp's 2 * 1/2 (2048 B)
    src = _s('[{}, {}], unreduced={"dp", "tp"}')
    dp, tp = src.unreduced
    plan = reshard_like_xla((8, 64), "f32", src, _s("[{}, {}]"), CLUSTER, groups=((tp,), (dp,)))
    assert _moves(plan) == [("AllReduce", 3072), ("AllReduce", 2048)]
    assert [s.axes for s in plan.steps] == [(tp,), (dp,)]
    assert [str(s.after) for s in plan.steps] == [str(_s('[{}, {}], unreduced={"dp"}')), str(_s("[{}, {}]"))]
    # a pending maximum too (XLA's reduce-max over two sharded dimensions), each step keeping its kind
    top = reshard_like_xla((8, 64), "f32", _s('[{}, {}], unreduced=max{"dp", "tp"}'), _s("[{}, {}]"), CLUSTER,
                           groups=((tp,), (dp,)))
    assert _moves(top) == [("AllReduce", 3072), ("AllReduce", 2048)] and top.steps[0].before.reduction == "max"
    # a group the destination keeps pending is not reduced
    kept = reshard_like_xla((8, 64), "f32", src, _s('[{}, {}], unreduced={"dp"}'), CLUSTER, groups=((tp,), (dp,)))
    assert _moves(kept) == [("AllReduce", 3072)]


def test_a_pending_sum_into_a_sharded_layout_is_all_reduced_whole_then_sliced():
    # f32[8, 64] pending over tp into [{}, {"tp"}]: XLA all-reduces the 2048-B product (2 * 3/4 of it, 3072 B)
    # and slices its shard; the cheapest plan reduce-scatters (3/4 of it, 1536 B)
    src, dst = _s('[{}, {}], unreduced={"tp"}'), _s('[{}, {"tp"}]')
    plan = reshard_with_policy((8, 64), "f32", src, dst, CLUSTER, policy="xla")
    assert [(s.kind, s.bytes_per_device) for s in plan.steps] == [("AllReduce", 3072), ("Slice", 0)]
    assert plan.steps[-1].after == dst
    cheapest = reshard_with_policy((8, 64), "f32", src, dst, CLUSTER, policy="cheapest")
    assert [(s.kind, s.bytes_per_device) for s in cheapest.steps] == [("ReduceScatter", 1536)]


def test_a_pending_axis_the_destination_keeps_is_not_reduced():
    plan = reshard_like_xla((8, 64), "f32", _s('[{}, {}], unreduced={"dp", "tp"}'), _s('[{}, {}], unreduced={"tp"}'),
                            CLUSTER)
    assert [(s.kind, [str(a) for a in s.axes]) for s in plan.steps] == [("AllReduce", ['"dp"'])]


_XLA = """
import json, sys
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from planner.engines.xla_hlo import collectives
mesh = jax.make_mesh((2, 4), ("dp", "tp"))
s = lambda spec: NamedSharding(mesh, P(*spec))
out = {}
for name, (a, b) in json.loads(sys.argv[2]).items():
    f = jax.jit(lambda x: x * 2, in_shardings=s(a), out_shardings=s(b))
    hlo = f.lower(jax.ShapeDtypeStruct((16, 32), jnp.float32)).compile().as_text()
    out[name] = [[c.kind, c.bytes_per_device] for c in collectives(hlo, 8)]
f = jax.jit(lambda x, w: x @ w, in_shardings=(s([None, ("dp", "tp")]), s([("dp", "tp"), None])),
            out_shardings=s([None, None]))
hlo = f.lower(jax.ShapeDtypeStruct((8, 16), jnp.float32), jax.ShapeDtypeStruct((16, 64), jnp.float32)).compile()
out["pending"] = [[c.kind, c.bytes_per_device] for c in collectives(hlo.as_text(), 8)]
f = jax.jit(lambda x, w: x @ w, in_shardings=(s([None, "tp"]), s(["tp", None])), out_shardings=s([None, "tp"]))
hlo = f.lower(jax.ShapeDtypeStruct((8, 16), jnp.float32), jax.ShapeDtypeStruct((16, 64), jnp.float32)).compile()
out["pending_sharded"] = [[c.kind, c.bytes_per_device] for c in collectives(hlo.as_text(), 8)]
print(json.dumps(out))
"""

#: reshards of f32[16, 32] on dp=2 x tp=4 as PartitionSpecs and as the planner's shardings
_CASES = {
    "slice_then_gather": (([None, "tp"], ["dp", None]), ('[{}, {"tp"}]', '[{"dp"}, {}]')),
    "gather_trailing": ((["dp", "tp"], ["dp", None]), ('[{"dp"}, {"tp"}]', '[{"dp"}, {}]')),
    "finer": ((["dp", None], ["dp", "tp"]), ('[{"dp"}, {}]', '[{"dp"}, {"tp"}]')),
    "swap": ((["tp", None], [None, "tp"]), ('[{"tp"}, {}]', '[{}, {"tp"}]')),
}
_KIND = {"all-gather": "AllGather", "all-to-all": "AllToAll", "all-reduce": "AllReduce",
         "reduce-scatter": "ReduceScatter", "collective-permute": "CollectivePermute"}


@pytest.mark.slow
def test_the_policy_moves_xlas_kinds_and_bytes_per_device():
    pytest.importorskip("jax")
    xla = run_on_eight_devices(_XLA, json.dumps({k: v[0] for k, v in _CASES.items()}))
    ours = {k: _moves(reshard_like_xla((16, 32), "f32", _s(a), _s(b), CLUSTER)) for k, (_, (a, b)) in _CASES.items()}
    ours["pending"] = _moves(reshard_like_xla((8, 64), "f32", _s('[{}, {}], unreduced={"dp", "tp"}'), _s("[{}, {}]"),
                                              CLUSTER))
    ours["pending_sharded"] = _moves(reshard_like_xla((8, 64), "f32", _s('[{}, {}], unreduced={"tp"}'),
                                                      _s('[{}, {"tp"}]'), CLUSTER))
    assert ours == {k: [(_KIND[kind], b) for kind, b in v] for k, v in xla.items()}
