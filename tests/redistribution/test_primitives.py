"""The registry of collectives (seed 004's table): variance types, lowerings, transposes, errors."""

import pytest

from planner.errors import RuleError, ShardplanError, VarianceError
from planner.ir.variance import parse_type
from planner.partitioning.shmap import P, shmap
from planner.partitioning import shmap as sm
from planner.redistribution.primitives import (
    PRIMITIVES, primitive, result_variance, transpose_of, transpose_params,
)

# Seed 004's table, row by row (plus ppermute, which the table leaves out):
# (primitive, operand type, extra arguments, result type as the seed writes it).
SEED_TABLE = [
    ("psum", "f32[3]{i,j}", {}, "f32[3]{j}"),  # y:f32[3]{j} = psum(x:f32[3]{i,j}, axis='i')
    ("pbroadcast", "f32[3]", {}, "f32[3]{i}"),  # y:f32[3]{i} = pbroadcast(x:f32[3], 'i')
    ("all_to_all", "f32[16]{i}", {"split_axis": 0, "concat_axis": 0}, "f32[16]{i}"),  # all_to_all(x, 'i', 0, 0)
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
def test_seed_table_row_types_the_same_in_a_shmap_body(name, operand, extra, result):
    fun = getattr(sm, name)
    if operand is None:
        f = shmap(lambda x: sm.broadcast(fun("i"), (1,)), P(), P("i"), mesh=MESH, in_types=["f32[1]"])
    else:
        t = parse_type(operand)
        spec = P(tuple(a for a in MESH if a in t.varies))  # an input varies over exactly its spec's axes
        f = shmap(lambda x: fun(x, "i", **extra), spec, P(("i", "j")), mesh=MESH, in_types=[t.with_varies(())])
    (eqn,) = [e for e in f.body.eqns if e.prim == name]
    assert eqn.outputs[0].type.text(order=tuple(MESH)) == result


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


@pytest.mark.parametrize("name", [n for n, p in PRIMITIVES.items() if p.transpose])
def test_transposing_a_primitives_transpose_gives_it_back(name):
    assert transpose_of(transpose_of(name).name) is primitive(name)


@pytest.mark.parametrize("name", [n for n, p in PRIMITIVES.items() if p.transpose])
def test_a_transpose_swaps_invariant_and_varying(name):
    # the transpose maps the result type back to the operand type
    prim, t = primitive(name), transpose_of(name)
    assert (t.operand, t.result) == (prim.result, prim.operand)


def test_all_to_all_transposes_with_split_and_concat_swapped():
    params = {"axis_name": ("i",), "split_axis": 0, "concat_axis": 1}
    assert transpose_params("all_to_all", params) == {"axis_name": ("i",), "split_axis": 1, "concat_axis": 0}
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
        "ppermute": "CollectivePermute", "psum": "AllReduce", "psum_scatter": "ReduceScatter",
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
