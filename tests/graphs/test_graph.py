import dataclasses

import networkx as nx
import pytest

from graphs import ComputationGraph, GraphBuilder, OpSpec, TensorSpec
from planner.errors import ModelError
from planner.ir import Mesh, parse_sharding


def _chain():
    b = GraphBuilder("chain", {"x": 2, "y": 4})
    b.tensor("a", [8, 16])
    b.param("w", [16, 4])
    b.param("bias", [4])
    h = b.op("matmul", ["a", "w"], output="h", name="mm")
    h = b.op("add", [h, "bias"], output="hb", name="addb")
    b.op("mul", [h, h], output="sq", name="square")
    return b.build()


def test_graph_is_bipartite_with_kinds_and_specs():
    g = _chain()
    kinds = nx.get_node_attributes(g.nx, "kind")
    assert {n for n, k in kinds.items() if k == "op"} == {"mm", "addb", "square"}
    assert {n for n, k in kinds.items() if k == "tensor"} == set(g.tensors)
    for u, v in g.nx.edges:
        assert {kinds[u], kinds[v]} == {"tensor", "op"}
    assert g.nx.nodes["mm"]["spec"] is g.op("mm")
    assert g.nx.nodes["h"]["spec"] is g.tensor("h")


def test_tensor_used_twice_by_one_op_has_one_edge_with_both_operands():
    g = _chain()
    assert g.nx.edges["hb", "square"]["operands"] == [0, 1]
    assert g.consumers("hb") == [("square", 0), ("square", 1)]


def test_graph_is_read_only():
    g = _chain()
    with pytest.raises(AttributeError):
        g.name = "other"
    with pytest.raises(TypeError):
        g.tensors["z"] = g.tensor("a")
    with pytest.raises(nx.NetworkXError):
        g.nx.add_node("z")


def test_activation_shapes_and_dtypes_are_inferred():
    g = _chain()
    assert g.tensor("h").shape == (8, 4) and g.tensor("h").kind == "activation"
    assert g.tensor("sq").dtype == "f32"
    assert g.producer("h") == "mm" and g.producer("a") is None
    assert [t.name for t in g.inputs_of("addb")] == ["h", "bias"]
    assert g.output_of("mm").name == "h"


def test_flops_and_param_bytes():
    g = _chain()
    assert g.op_flops("mm") == 2 * 8 * 16 * 4
    assert g.total_flops() == 2 * 8 * 16 * 4 + 32 + 32
    assert g.param_bytes() == 4 * (16 * 4 + 4)
    assert g.param_count() == 68


def test_topological_order_breaks_ties_by_given_order():
    b = GraphBuilder("ties")
    b.tensor("x", [2])
    b.op("neg", ["t2"], output="t3", name="c")
    b.op("neg", ["x"], output="t1", name="a")
    b.op("neg", ["x"], output="t2", name="b")
    b.op("neg", ["t1"], output="t4", name="d")
    g = b.build()
    assert [op.name for op in g.ops] == ["a", "b", "c", "d"]
    assert g.outputs == ("t3", "t4")


def test_unknown_names_suggest_close_ones():
    g = _chain()
    with pytest.raises(ModelError, match="no tensor 'hbb'; did you mean hb"):
        g.tensor("hbb")
    with pytest.raises(ModelError, match="no op 'squre'; did you mean square"):
        g.op("squre")


def test_model_without_mesh_explains_how_to_add_one():
    b = GraphBuilder("nomesh")
    b.tensor("x", [2])
    b.op("neg", ["x"])
    with pytest.raises(ModelError, match="has no mesh"):
        b.build().mesh


def test_errors_from_python_have_no_location_but_name_the_op():
    b = GraphBuilder("bad", {"x": 2})
    b.tensor("x", [4, 8])
    b.param("w", [4, 8])
    b.op("matmul", ["x", "w"], name="mm")
    with pytest.raises(ModelError) as e:
        b.build()
    assert e.value.where is None
    assert e.value.message.startswith("op 'mm': matmul contracts 8 with 4: inputs x (4x8) and w (4x8)")


def test_strategy_needs_one_entry_per_operand():
    b = GraphBuilder("s", {"d": 8})
    b.tensor("x", [4, 8])
    b.param("w", [8, 2])
    b.op("matmul", ["x", "w"], name="mm", strategy=[[2, 1]])
    with pytest.raises(ModelError, match="strategy gives 1 entries but matmul has 2 inputs \\(x, w\\)"):
        b.build()


def test_out_sharding_rank_is_checked_after_inference():
    b = GraphBuilder("o", {"x": 2})
    b.tensor("x", [4, 8])
    b.op("sum", ["x"], name="s", axes=[1], out_sharding='[{"x"}, {}]')
    with pytest.raises(ModelError, match="op 's': tensor 's.out' has rank 1"):
        b.build()


def test_sharding_on_a_foreign_mesh_is_rejected():
    other = Mesh.from_sizes("other", {"z": 2})
    g_mesh = Mesh.from_sizes("mesh", {"x": 2})
    spec = TensorSpec("a", (4,), sharding=parse_sharding('[{"z"}]', other))
    with pytest.raises(ModelError, match="sharded on mesh @other, which is not a mesh of this model"):
        ComputationGraph("f", {"mesh": g_mesh}, [spec], [OpSpec("n", "neg", ["a"], "b")])


def test_declared_activation_kind_is_rejected():
    with pytest.raises(ModelError, match="declared with kind activation"):
        ComputationGraph("k", None, [TensorSpec("a", (2,), kind="activation")], [])


def test_op_and_tensor_names_share_one_namespace():
    with pytest.raises(ModelError, match="op 'a' has the name of a tensor"):
        ComputationGraph("n", None, [TensorSpec("a", (2,))], [OpSpec("a", "neg", ["a"], "b")])
    with pytest.raises(ModelError, match="names its output 'n2', which is an op name"):
        ComputationGraph("n", None, [TensorSpec("a", (2,))],
                         [OpSpec("n1", "neg", ["a"], "n2"), OpSpec("n2", "neg", ["a"], "c")])


def test_ops_keep_canonical_attributes_with_defaults():
    g = _chain()
    assert g.op("mm").attrs_dict == {"transpose_a": False, "transpose_b": False}
    assert dataclasses.replace(g.op("mm"), attrs={}).attrs == ()


def test_walk_yields_ops_with_their_tensors_in_order():
    g = _chain()
    steps = [(op.name, [t.name for t in ins], out.name) for op, ins, out in g.walk()]
    assert steps == [("mm", ["a", "w"], "h"), ("addb", ["h", "bias"], "hb"), ("square", ["hb", "hb"], "sq")]


def test_tensors_of_kind():
    g = _chain()
    assert [t.name for t in g.tensors_of_kind("param")] == ["w", "bias"]
    with pytest.raises(ModelError, match="unknown tensor kind"):
        g.tensors_of_kind("weights")


def test_graph_pickles_and_copies_to_an_equal_graph():
    import copy
    import pickle

    from graphs.builders import gpt

    g = gpt(layers=1, hidden=16, heads=2, seq=4, batch=2, vocab=11, mesh={"dp": 2}, shardings={"tokens": '[{"dp"}, {}]'})
    for clone in (pickle.loads(pickle.dumps(g)), copy.deepcopy(g)):
        assert clone.ops == g.ops and dict(clone.tensors) == dict(g.tensors) and clone.outputs == g.outputs
        assert list(clone.nx.edges(data=True)) == list(g.nx.edges(data=True))


def test_pickled_graph_keeps_shard_as_and_shard_like():
    import copy
    import pickle

    b = GraphBuilder("groups", {"x": 2})
    b.tensor("a", [4])
    b.op("relu", ["a"], output="h", name="r")
    b.op("tanh", ["a"], output="t", name="th")
    b.shard_as("a", "h")
    b.shard_like("h", "t")
    g = b.build()
    for clone in (pickle.loads(pickle.dumps(g)), copy.deepcopy(g)):
        assert (clone.shard_as, clone.shard_like) == ((("a", "h"),), (("h", "t"),))


def test_bytes_accessed_per_op_and_in_total_on_global_or_local_shapes():
    g = _chain()  # f32: a 8x16 @ 16x4 matmul, a bias add of a 4-vector, a square of the 8x4 result
    assert g.op_bytes_accessed("mm") == (8 * 16 + 16 * 4 + 8 * 4) * 4
    assert g.op_bytes_accessed("addb") == (32 + 4 + 32) * 4
    assert g.op_bytes_accessed("square") == 3 * 32 * 4
    assert g.total_bytes_accessed() == sum(g.op_bytes_accessed(op.name) for op in g.ops)
    # one device's instance with the matmul's rows split in two: 4x16 @ 16x4 -> 4x4
    assert g.op_bytes_accessed("mm", [(4, 16), (16, 4)], (4, 4)) == (64 + 64 + 16) * 4


def test_an_op_past_the_flop_limit_is_refused_at_its_line():
    from graphs import load_model_text
    from planner.limits import MAX_OP_FLOPS

    def model(k: int) -> str:
        # ab,cd,e->a multiplies every triple of elements: 2 FLOPs x 2 products x (2^24)^4 x k = 2^98 k
        return ("name: t\nmesh: {x: 2}\ntensors: {p: {shape: [16777216, 16777216]}, "
                f"q: {{shape: [16777216, 16777216]}}, r: {{shape: [{k}]}}}}\n"
                "ops: [{name: e, op: einsum, inputs: [p, q, r], output: y, equation: 'ab,cd,e->a'}]\n")

    under = MAX_OP_FLOPS // 2**98  # the largest k whose einsum is within the limit
    assert load_model_text(model(under)).op("e").name == "e"
    with pytest.raises(ModelError, match="m.yaml:4: op 'e': this einsum computes .* FLOPs, more than"):
        load_model_text(model(under + 1), "m.yaml")


def _lookup(value, rows: int = 50, dtype: str = "i32") -> str:
    return (f"name: t\nmesh: {{x: 2}}\ntensors:\n  table: {{shape: [{rows}, 8], kind: param}}\n"
            f"  idx: {{shape: [4], dtype: {dtype}, kind: const, value: {value}}}\n"
            "ops:\n  - {name: look, op: gather, inputs: [table, idx], output: y}\n")


def test_constant_gather_index_is_checked_against_the_table_when_the_model_loads():
    from graphs import load_model_text

    assert load_model_text(_lookup(49)).op("look").inputs == ("table", "idx")  # the last of 50 rows
    for value in (50, -1):  # one past the end; negative indices do not wrap
        with pytest.raises(ModelError, match=rf"m.yaml:7: op 'look': idx is a constant {value} used as an index "
                                             r"into dimension 0 of table \(f32\[50x8\]\), whose size is 50"):
            load_model_text(_lookup(value), "m.yaml")


@pytest.mark.parametrize("dtype, value, wanted", [
    ("i32", 2**31, "from -2,147,483,648 to 2,147,483,647"),  # one past i32's largest
    ("i32", -2**31 - 1, "from -2,147,483,648"),
    ("i64", 2**63, "to 9,223,372,036,854,775,807"),
    ("i32", 2.5, "an integer"),
])
def test_integer_constant_outside_its_dtype_is_refused_at_its_line(dtype, value, wanted):
    from graphs import load_model_text

    with pytest.raises(ModelError, match=rf"m.yaml:5: tensor 'idx': the constant value .* does not fit its dtype "
                                         rf"{dtype}; give .*{wanted}"):
        load_model_text(_lookup(value, dtype=dtype), "m.yaml")  # refused as declared, before any op reads it
