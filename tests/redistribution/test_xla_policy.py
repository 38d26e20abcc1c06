"""The ``xla`` redistribution policy moves what XLA's SPMD partitioner compiles for the same reshard: goldens
against XLA's HLO (JAX on 8 host CPU devices, at test time) and the rules they pin."""

import importlib.util
import json
from pathlib import Path

import pytest

from costmodels import load_cluster
from planner.ir import parse_mesh, parse_sharding
from planner.redistribution import reshard_for_planning
from planner.redistribution.xla_policy import regrouped, reshard_like_xla, reshard_with_policy
from planner.redistribution.xla_route import xla_route
from planner.simulation.reshard import verify
from tests.jax_devices import run_on_eight_devices

ROOT = Path(__file__).resolve().parents[2]

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


@pytest.mark.parametrize("mesh_text", ['@m = <["dp"=2, "tp"=4]>', '@m = <["dp"=4, "tp"=2]>'])
def test_a_size_1_dimension_split_past_its_size_is_replicated_by_an_all_reduce_as_xla_does(mesh_text):
    # x[:, 0] squeezed (tests/frontends/test_shardy_suite.py: pos_first, pos_row): XLA all-reduces the position
    # over tp even on 2 devices, where an AllGather of the padding moves as many bytes in fewer rounds (the
    # engine's cheapest by time); f32[8, 1, 32] with rows on dp: a 32 x (8 / dp) block, 2 (tp - 1) / tp of it
    mesh = parse_mesh(mesh_text)
    dp, tp = (a.size for a in mesh.axes)
    src, dst = parse_sharding('[{"dp"}, {"tp"}, {}]', mesh), parse_sharding('[{"dp"}, {}, {}]', mesh)
    block = 8 // dp * 32 * 4
    plan = reshard_like_xla((8, 1, 32), "f32", src, dst, CLUSTER)
    assert [(s.kind, s.bytes_per_device) for s in plan.steps] == [("Slice", 0),
                                                                  ("AllReduce", 2 * (tp - 1) * block // tp)]
    assert verify(plan).verified


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
f = jax.jit(lambda x, w: x @ w, in_shardings=(s([None, ("dp", "tp")]), s([("dp", "tp"), None])),
            out_shardings=s([None, None]))
hlo = f.lower(jax.ShapeDtypeStruct((8, 16), jnp.float32), jax.ShapeDtypeStruct((16, 64), jnp.float32)).compile()
out["pending"] = [[c.kind, c.bytes_per_device] for c in collectives(hlo.as_text(), 8)]
f = jax.jit(lambda x, w: x @ w, in_shardings=(s([None, "tp"]), s(["tp", None])), out_shardings=s([None, "tp"]))
hlo = f.lower(jax.ShapeDtypeStruct((8, 16), jnp.float32), jax.ShapeDtypeStruct((16, 64), jnp.float32)).compile()
out["pending_sharded"] = [[c.kind, c.bytes_per_device] for c in collectives(hlo.as_text(), 8)]
print(json.dumps(out))
"""

def _benchmark():
    """benchmarks/xla_reshard.py, which compiles reshards with XLA and compares the policy's moves."""
    spec = importlib.util.spec_from_file_location("xla_reshard_benchmark", ROOT / "benchmarks" / "xla_reshard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compare_reshards(sizes, names, shape, pairs):
    """``{(source, destination): (XLA's moves, the policy's)}`` for the pairs that differ."""
    rows = _benchmark().compare(sizes, names, shape, [[list(map(list, a)), list(map(list, b))] for a, b in pairs],
                                CLUSTER)
    return {(r["source"], r["destination"]): (r["xla"], r["policy"]) for r in rows if r["policy"] != r["xla"]}



@pytest.mark.slow
def test_the_policy_completes_pending_sums_as_xla_compiles_a_dot():
    pytest.importorskip("jax")
    xla = run_on_eight_devices(_XLA)
    ours = {"pending": _moves(reshard_like_xla((8, 64), "f32", _s('[{}, {}], unreduced={"dp", "tp"}'),
                                               _s("[{}, {}]"), CLUSTER)),
            "pending_sharded": _moves(reshard_like_xla((8, 64), "f32", _s('[{}, {}], unreduced={"tp"}'),
                                                       _s('[{}, {"tp"}]'), CLUSTER))}
    assert ours == {k: [(_benchmark().KINDS[kind], b) for kind, b in v] for k, v in xla.items()}


@pytest.mark.slow
def test_every_reshard_of_a_matrix_on_a_2x4_mesh_moves_xlas_collectives_in_order():
    # all 110 ordered pairs of distinct layouts of f32[16, 32] on dp=2 x tp=4: kind and bytes of each
    # collective, in XLA's order (expected values: XLA's compiled HLO, at test time)
    pytest.importorskip("jax")
    layouts = _benchmark().layouts(("dp", "tp"), 2)
    pairs = [(a, b) for a in layouts for b in layouts if a != b]
    assert len(pairs) == 110
    assert _compare_reshards([2, 4], ["dp", "tp"], [16, 32], pairs) == {}


@pytest.mark.slow
def test_reshards_on_a_2x2x2_mesh_and_of_a_rank_3_tensor_move_xlas_collectives_in_order():
    # every 17th pair of layouts of f32[16, 32] on a=b=c=2 (2x2x2: axes swapped, split and merged between
    # dimensions, partly replicated), and every 5th of f32[8, 8, 16] on dp=2 x tp=4
    pytest.importorskip("jax")
    three = _benchmark().layouts(("a", "b", "c"), 2)
    pairs = [(a, b) for a in three for b in three if a != b][::17]
    assert _compare_reshards([2, 2, 2], ["a", "b", "c"], [16, 32], pairs) == {}
    rank3 = _benchmark().layouts(("dp", "tp"), 3)
    pairs = [(a, b) for a in rank3 for b in rank3 if a != b][::5]
    assert _compare_reshards([2, 4], ["dp", "tp"], [8, 8, 16], pairs) == {}


def test_xlas_route_swaps_two_dimensions_tiles_by_an_all_to_all_and_fixes_the_order_by_a_permute():
    # [dp, tp] -> [tp, dp] on 2x4: tile counts (2, 4) -> (4, 2) are a permutation: one AllToAll moves tp's minor
    # half to the rows (XLA's GetAllToAllSharding), leaving [{dp, tp:(2)2}, {tp:(1)2}], and a CollectivePermute
    # puts the devices in the target's order
    route = xla_route((16, 32), _s('[{"dp"}, {"tp"}]'), _s('[{"tp"}, {"dp"}]'))
    assert [(kind, str(layout.dims_text())) for kind, layout in route] == [
        ("AllToAll", '[{"dp", "tp":(2)2}, {"tp":(1)2}]'), ("CollectivePermute", '[{"tp"}, {"dp"}]')]


def test_xlas_route_is_none_where_a_layout_is_uneven_or_cuts_an_axis_another_way():
    assert xla_route((15, 32), _s('[{"dp"}, {"tp"}]'), _s('[{"tp"}, {"dp"}]')) is None  # XLA pads and halos
    six = parse_mesh('@m = <["x"=6]>')
    # "x":(1)2 is the major factor 2 of x=6, while x's prime digits are 3 (major) and 2: not modelled
    assert xla_route((12, 12), parse_sharding('[{"x":(1)2}, {"x":(2)3}]', six), parse_sharding('[{"x"}, {}]', six)) \
        is None
    # the engine's plan stands in
    plan = reshard_like_xla((12, 12), "f32", parse_sharding('[{"x":(1)2}, {"x":(2)3}]', six),
                            parse_sharding('[{"x"}, {}]', six), CLUSTER)
    assert plan.steps and plan.steps[-1].after == parse_sharding('[{"x"}, {}]', six)


MESH3 = parse_mesh('@m = <["a"=2, "b"=2, "c"=2]>')


def _s3(text):
    return parse_sharding(text, MESH3)


def _regroup(*axes):
    """A dot's ``regroup`` (``OpNode.regroup``): the grouping axes, by name."""
    return tuple(a for name in axes for a in _s3(f'[{{"{name}"}}]').dims[0].axes)


def test_a_dot_operand_holding_the_grouping_axis_is_permuted_onto_the_free_axes_then_gathered():
    # w f32[32, 16] on [{}, {"a"}] (1024 B a device) read whole by a dot grouped by a (x[{"a"}, {}] @ w): a free,
    # b and c are free in each group of a, so w goes to [{}, {"b", "c"}] (each device keeps or receives the quarter
    # of the columns it needs: 512 B), then is gathered over b and c (3 of 4 quarters: 1536 B), as XLA compiles it
    src, dst = _s3('[{}, {"a"}]'), _s3("[{}, {}]")
    regroup = _regroup("a")
    plan = reshard_with_policy((32, 16), "f32", src, dst, CLUSTER, policy="xla", regroup=regroup)
    assert _moves(plan) == [("CollectivePermute", 512), ("AllGather", 1536)]
    assert plan.steps[0].after.dims_text() == '[{}, {"b", "c"}]' and plan.steps[-1].after == dst
    # without the dot's groups (or under the cheapest policy) one gather over a: 1024 B
    assert _moves(reshard_with_policy((32, 16), "f32", src, dst, CLUSTER, policy="xla")) == [("AllGather", 1024)]
    assert _moves(reshard_with_policy((32, 16), "f32", src, dst, CLUSTER, regroup=regroup)) == [("AllGather", 1024)]


def test_regrouping_replaces_the_grouping_axis_where_it_stood_by_the_free_axes_left():
    # b is the operand's own (kept by the destination), so c alone is free: [{"b"}, {"a"}] -> [{"b"}, {"c"}]
    assert regrouped((32, 16), _s3('[{"b"}, {"a"}]'), _s3('[{"b"}, {}]'), _regroup("a")) == _s3('[{"b"}, {"c"}]')
    # a pair of axes on the dimension: the grouping one is replaced in place
    assert regrouped((32, 16), _s3('[{}, {"a", "b"}]'), _s3("[{}, {}]"), _regroup("a")) == _s3('[{}, {"c", "b"}]')
    # a contracting dimension gathered whole is regrouped alike (x[{"a"}, {"b"}] @ w[{"a"}, {}]: XLA gathers x over b,
    # permutes w onto b and c, gathers it there)
    assert regrouped((32, 16), _s3('[{"a"}, {}]'), _s3("[{}, {}]"), _regroup("a")) == _s3('[{"b", "c"}, {}]')


@pytest.mark.parametrize("src, dst, why", [
    ('[{"b", "c"}, {"a"}]', "[{}, {}]", "no axis is free in a group"),
    ('[{"a"}, {}]', '[{"b", "c"}, {}]', "the destination adds axes (a contraction XLA keeps split on the free ones): "
                                       "one permute, as the route"),
    ('[{}, {"a"}]', '[{}, {"b"}]', "the destination adds an axis"),
    ('[{}, {"a"}]', '[{}, {"a"}]', "the destination keeps the axis"),
])
def test_regrouping_leaves_the_route_alone(src, dst, why):
    assert regrouped((32, 16), _s3(src), _s3(dst), _regroup("a")) is None, why


def test_too_few_free_devices_leave_the_grouping_axis_to_be_gathered_directly():
    # tp (4) against dp (2) free on 2x4: XLA gathers over tp
    src, dst = _s('[{"tp"}, {}]'), _s("[{}, {}]")
    regroup = ((0,), tuple(src.dims[0].axes))
    assert regrouped((16, 32), src, dst, regroup) is None
