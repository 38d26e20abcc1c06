"""The registry of collectives (seed 004's table): variance types, lowerings, transposes, errors, the step
kinds' bytes, kernels and HLO names, checked numerically."""

from pathlib import Path

import numpy as np
import pytest

from planner.collectives import (
    HLO_KINDS, KINDS, PRIMITIVES, REGION_COLLECTIVES, STEP_KINDS, backprop_primitive, primitive, result_variance,
    run_kernel, seed_name, stacked_vjp, step_kind, transpose_of, transpose_params,
)
from planner.errors import RuleError, ShardplanError, VarianceError
from planner.ir.variance import parse_type
from planner.simulation.collectives import Network

# Seed 004's table, row by row (plus ppermute, which the table leaves out):
# (primitive, operand type, extra arguments, result type as the seed writes it).
SEED_TABLE = [
    ("psum", "f32[3]{i,j}", {}, "f32[3]{j}"),  # y:f32[3]{j} = psum(x:f32[3]{i,j}, axis='i')
    ("pbroadcast", "f32[3]", {}, "f32[3]{i}"),  # y:f32[3]{i} = pbroadcast(x:f32[3], 'i')
    ("all_to_all", "f32[16]{i}", {"split_dim": 0, "concat_dim": 0}, "f32[16]{i}"),  # all_to_all(x, 'i', 0, 0)
    ("axis_index", None, {}, "i32[]{i}"),  # idx:i32[]{i} = axis_index('i')
    ("psum_scatter", "f32[16]{i}", {}, "f32[2]{i}"),  # y:f32[2]{i} = psum_scatter(x:f32[16]{i}, 'i')
    ("all_gather", "f32[2]{i}", {}, "f32[16]{i}"),  # y:f32[16]{i} = all_gather(x:f32[2]{i}, 'i')
    ("pscatter", "f32[16]", {}, "f32[2]{i}"),  # y:f32[2]{i} = pscatter(x:f32[16], 'i')
    ("all_gather_invariant", "f32[2]{i}", {}, "f32[16]"),  # y:f32[16] = all_gather_invariant(x:f32[2]{i}, 'i')
    ("ppermute", "f32[3]{i}", {"perm": [(0, 1), (1, 0)]}, "f32[3]{i}"),
]
MESH = {"i": 8, "j": 2}  # 16 -> 2 elements in the table: the axis 'i' has 8 devices


@pytest.mark.parametrize("name, operand, extra, result", SEED_TABLE, ids=[r[0] for r in SEED_TABLE])
def test_seed_table_row_has_the_seeds_variance_type(name, operand, extra, result):
    varies = parse_type(operand).varies if operand else None
    assert result_variance(name, varies, "i") == parse_type(result).varies


@pytest.mark.parametrize("name, operand, extra, result", SEED_TABLE, ids=[r[0] for r in SEED_TABLE])
def test_seed_table_row_has_the_seeds_local_shapes(name, operand, extra, result):
    # the registry's meaning on the 8 blocks of axis 'i', stacked [8, *local], gives the seed's local result shape
    t = parse_type(operand) if operand else None
    x = np.arange(8 * np.prod(t.shape), dtype=float).reshape((8, *t.shape)) if t else None
    y = primitive(name).reference(x, {"axes": ("i",), "dim": 0, "group_size": 8, **extra})
    assert y.shape[1:] == parse_type(result).shape


@pytest.mark.parametrize("name, transpose", [
    ("psum", "pbroadcast"), ("pbroadcast", "psum"),
    ("all_gather", "psum_scatter"), ("psum_scatter", "all_gather"),
    ("all_gather_invariant", "pscatter"), ("pscatter", "all_gather_invariant"),
    ("all_to_all", "all_to_all"), ("ppermute", "ppermute"),
])
def test_each_collective_transposes_as_the_seed_says(name, transpose):
    assert transpose_of(name).name == primitive(name).transpose == transpose


def test_psum_transposes_to_pbroadcast():
    assert transpose_of("psum") is PRIMITIVES["pbroadcast"]


def test_all_gather_transposes_to_psum_scatter_and_the_invariant_one_to_pscatter():
    assert (transpose_of("all_gather").name, transpose_of("all_gather_invariant").name) == ("psum_scatter", "pscatter")


@pytest.mark.parametrize("name", [n for n, p in PRIMITIVES.items() if p.transpose and not p.mean_of])
def test_transposing_a_primitives_transpose_gives_it_back(name):
    assert transpose_of(transpose_of(name).name) is primitive(name)


@pytest.mark.parametrize("name", [n for n, p in PRIMITIVES.items() if p.transpose])
def test_a_transpose_swaps_invariant_and_varying(name):
    # the transpose maps the result type back to the operand type
    prim, t = primitive(name), transpose_of(name)
    assert (t.operand, t.result) == (prim.result, prim.operand)


def test_all_to_all_transposes_with_split_and_concat_swapped():
    params = {"axes": ("i",), "split_dim": 0, "concat_dim": 1}
    assert transpose_params("all_to_all", params) == {"axes": ("i",), "split_dim": 1, "concat_dim": 0}
    assert transpose_params("all_to_all", transpose_params("all_to_all", params)) == params


def test_ppermute_transposes_to_the_inverse_permutation():
    shift = ((0, 1), (1, 2), (2, 3), (3, 0))  # device k sends to k+1
    inverse = transpose_params("ppermute", {"perm": shift})["perm"]
    assert {dst: src for src, dst in inverse} == {src: dst for src, dst in shift}
    assert transpose_params("ppermute", {"perm": inverse})["perm"] == shift


def test_pbroadcast_and_pscatter_need_no_communication():
    assert primitive("pbroadcast").lowering is None and primitive("pbroadcast").local == "no-op (a cast)"
    assert primitive("pscatter").lowering is None and primitive("pscatter").local == "local slice x[axis_index]"
    assert primitive("axis_index").lowering is None and primitive("axis_index").transpose is None


def test_communicating_collectives_lower_to_the_planners_step_kinds():
    lowered = {n: p.lowering for n, p in PRIMITIVES.items() if p.communicates}
    assert lowered == {
        "all_gather": "AllGather", "all_gather_invariant": "AllGather", "all_to_all": "AllToAll",
        "pmax": "AllReduce", "pmean": "AllReduce", "pmin": "AllReduce", "ppermute": "CollectivePermute",
        "psum": "AllReduce", "psum_scatter": "ReduceScatter",
    }


def test_registry_is_read_only_and_alphabetical():
    with pytest.raises(TypeError):
        PRIMITIVES["pmax"] = PRIMITIVES["psum"]
    assert list(PRIMITIVES) == sorted(PRIMITIVES)


def test_psum_of_an_invariant_operand_names_the_axis_and_the_rule():
    with pytest.raises(VarianceError) as info:
        result_variance("psum", {"j"}, ("i",), where="y = psum(x, 'i')", operand="x:f32[3]{j}")
    assert str(info.value) == (
        "y = psum(x, 'i'): psum over 'i' needs an operand that varies over 'i', but x:f32[3]{j} is invariant "
        "over it (psum: varying -> invariant); insert pbroadcast or drop the psum")
    assert isinstance(info.value, ShardplanError)  # a user error: the CLI exits with status 2


def test_psum_over_two_axes_needs_the_operand_to_vary_over_both():
    assert result_variance("psum", {"i", "j"}, ("i", "j")) == frozenset()
    with pytest.raises(VarianceError, match="varies over 'j', but the operand is invariant over it"):
        result_variance("psum", {"i"}, ("i", "j"))


def test_pbroadcast_of_a_varying_operand_is_an_error():
    with pytest.raises(VarianceError, match=r"invariant over 'i'.*\(pbroadcast: invariant -> varying\); it already"):
        result_variance("pbroadcast", {"i"}, "i")


def test_all_gather_of_an_invariant_operand_is_an_error():
    with pytest.raises(VarianceError, match=r"all_gather over 'i'.*\(all_gather: varying -> varying\)"):
        result_variance("all_gather", set(), "i")


def test_unknown_primitive_suggests_the_closest():
    with pytest.raises(RuleError, match="unknown collective primitive 'psum_scater'; did you mean psum_scatter"):
        primitive("psum_scater")


def test_axis_index_has_no_transpose():
    with pytest.raises(RuleError, match="axis_index has no transpose"):
        transpose_of("axis_index")


def test_a_collective_needs_an_axis():
    with pytest.raises(VarianceError, match="at least one mesh axis"):
        result_variance("psum", {"i"}, ())


def test_pmax_and_pmin_reduce_as_psum_types_but_have_no_transpose():
    # JAX 0.10.2 types pmax and pmin like psum (varying -> invariant over the axes; an invariant operand gets a pvary
    # first in its jaxpr) and has no differentiation rule for either
    assert result_variance("pmax", {"i", "j"}, ("i",)) == result_variance("pmin", {"i", "j"}, ("i",)) == {"j"}
    assert primitive("pmax").transpose is None and primitive("pmin").transpose is None
    with pytest.raises(RuleError, match="pmax has no transpose"):
        transpose_of("pmax")
    with pytest.raises(VarianceError, match="insert pbroadcast or drop the pmin"):
        result_variance("pmin", {"j"}, ("i",))


def test_pmax_and_pmin_take_each_elements_extremum_over_the_group():
    x = np.array([[[1.0, 5.0]], [[4.0, -2.0]], [[3.0, 0.0]]])  # three devices' blocks
    attrs = {"axes": ("i",), "group_size": 3}
    assert primitive("pmax").reference(x, attrs)[:, 0].tolist() == [[4.0, 5.0]] * 3
    assert primitive("pmin").reference(x, attrs)[:, 0].tolist() == [[1.0, -2.0]] * 3


def test_pmean_is_a_scaled_psum():
    assert seed_name("pmean") == "psum" and seed_name("psum") == "psum"
    assert result_variance("pmean", {"i"}, "i") == frozenset()
    assert transpose_of("pmean").name == "pbroadcast"


def test_backprop_runs_the_seeds_transpose_except_pbroadcasts_psum_which_the_redistribution_makes():
    assert {n: backprop_primitive(n) for n in REGION_COLLECTIVES if primitive(n).transpose is not None} == {
        "all_gather": "psum_scatter", "all_gather_invariant": "pscatter", "all_to_all": "all_to_all",
        "pbroadcast": "pbroadcast", "pmean": "pbroadcast", "ppermute": "ppermute", "pscatter": "all_gather_invariant",
        "psum": "pbroadcast", "psum_scatter": "all_gather"}


def test_region_collectives_are_the_graph_ops():
    from graphs.ops.collectives import COLLECTIVE_OPS

    assert COLLECTIVE_OPS == REGION_COLLECTIVES == (
        "all_gather", "all_gather_invariant", "all_to_all", "axis_index", "pbroadcast", "pmax", "pmean", "pmin",
        "ppermute", "pscatter", "psum", "psum_scatter")


# -- step kinds ---------------------------------------------------------------------------------

def test_every_step_kind_is_a_registered_primitive_and_has_one_hlo_name():
    assert KINDS == ("AllReduce", "ReduceScatter", "AllGather", "AllToAll", "CollectivePermute", "Slice")
    assert {k: STEP_KINDS[k].primitive for k in KINDS} == {
        "AllReduce": "psum", "ReduceScatter": "psum_scatter", "AllGather": "all_gather_invariant",
        "AllToAll": "all_to_all", "CollectivePermute": "ppermute", "Slice": "pscatter"}
    assert dict(HLO_KINDS) == {"all-reduce": "AllReduce", "reduce-scatter": "ReduceScatter",
                               "all-gather": "AllGather", "all-to-all": "AllToAll",
                               "collective-permute": "CollectivePermute"}
    for p in PRIMITIVES.values():  # a primitive lowers to a step kind whose own primitive has its operand
        if p.lowering:
            assert primitive(step_kind(p.lowering).primitive).operand == p.operand


@pytest.mark.parametrize("p", [1, 2, 4, 8])
def test_step_kinds_receive_the_ring_formulas(p):
    # SPEC's ring formulas: AllGather and ReduceScatter (p-1)s, AllReduce 2(p-1)s, AllToAll (p-1) chunks of
    # a p-th, CollectivePermute what it moves, Slice nothing
    s = 12
    assert step_kind("AllGather").received(p, s) == step_kind("ReduceScatter").received(p, s) == (p - 1) * s
    assert step_kind("AllReduce").received(p, s) == 2 * (p - 1) * s
    assert step_kind("AllToAll").received(p, step_kind("AllToAll").unit_bytes(s * p, s * p, p, 1)) == (p - 1) * s
    assert step_kind("CollectivePermute").received(p, s) == s and step_kind("CollectivePermute").received(p, 0) == 0
    assert step_kind("Slice").received(p, s) == 0


def test_unknown_step_kind_suggests_the_closest():
    with pytest.raises(RuleError, match="unknown step kind 'AllGathr'; did you mean AllGather"):
        step_kind("AllGathr")


# -- numerically: stacked meanings, their adjoints, and the kernels on simulated devices --------------

G = 4
ATTRS = {
    "all_gather": {"dim": 1}, "all_gather_invariant": {"dim": 1}, "psum_scatter": {"dim": 1}, "pscatter": {"dim": 1},
    "all_to_all": {"split_dim": 0, "concat_dim": 1}, "ppermute": {"perm": ((0, 2), (2, 1), (1, 0))},
}
LINEAR = [n for n, p in PRIMITIVES.items() if p.transpose]


def _stacked(name, rng):
    shape = (G, 8, 4) if name in ("psum_scatter", "pscatter", "all_to_all") else (G, 3, 2)
    return rng.standard_normal(shape) + 0.25 * np.arange(G).reshape((G, 1, 1))  # uneven over the group


@pytest.mark.parametrize("name", LINEAR)
def test_stacked_vjp_is_the_adjoint_of_the_stacked_meaning(name):
    rng = np.random.default_rng(3)
    attrs = {"axes": ("i",), "group_size": G, **ATTRS.get(name, {})}
    x = _stacked(name, rng)
    y = primitive(name).reference(x, attrs)
    ybar = rng.standard_normal(y.shape)
    assert np.vdot(stacked_vjp(name, ybar, attrs), x) == pytest.approx(np.vdot(ybar, y), rel=1e-12)


def test_pscatters_stacked_adjoint_puts_each_rows_cotangent_back_at_its_piece():
    # row c kept piece c of its block [c*2, c*2 + 2) along dim 0: its cotangent goes back there, zeros elsewhere
    got = stacked_vjp("pscatter", np.arange(1.0, 5.0).reshape(2, 2, 1), {"axes": ("i",), "dim": 0})
    assert got[..., 0].tolist() == [[1.0, 2.0, 0.0, 0.0], [0.0, 0.0, 3.0, 4.0]]


@pytest.mark.parametrize("name", list(PRIMITIVES))
def test_kernel_on_simulated_devices_computes_the_stacked_meaning_and_receives_its_step_kinds_bytes(name):
    rng = np.random.default_rng(5)
    attrs = {"axes": ("i",), "group_size": G, **ATTRS.get(name, {})}
    prim = primitive(name)
    x = _stacked(name, rng) if prim.operand else None
    members = np.arange(G) + 10  # device ids need not be member indices
    net = Network(G + 10)
    got = run_kernel(name, net, members, list(x) if x is not None else [], attrs)
    np.testing.assert_allclose(np.stack(got), prim.reference(x, attrs), rtol=1e-12)
    if not prim.communicates:
        assert net.bytes_per_device == 0
        return
    kind = step_kind(prim.lowering)
    result = prim.reference(x, attrs)
    unit = kind.unit_bytes(x[0].size, result[0].size, G, x.itemsize)
    assert net.bytes_per_device == kind.received(G, unit)


def test_a_region_collective_is_one_registry_entry():
    """Every primitive a region's body may apply is a graph op, with its shape, meaning, VJP and sharding rule,
    made from its registry entry alone: no other table names it."""
    from graphs.ops.registry import OPS
    from planner.collectives import PRIMITIVES
    from planner.rules.registry import RULES

    in_regions = sorted(n for n, p in PRIMITIVES.items() if p.in_regions)
    for name in in_regions:
        op = OPS[name]
        assert op.family == "collective" and op.rule == "regions.collective" and name in RULES
        assert op.min_inputs == (0 if PRIMITIVES[name].shape == "indexes" else 1)
    assert sorted(n for n, op in OPS.items() if op.family == "collective") == in_regions
    registry_source = (Path(__file__).resolve().parents[1] / "graphs" / "ops" / "registry.py").read_text()
    assert not any(f'"{name}"' in registry_source for name in in_regions)
