import pytest

from graphs import load_model_text
from planner.errors import ModelError
from planner.ir import AxisType

FFN = """
name: t
mesh: {x: 2, y: 4}
tensors:
  x:  {shape: [64, 64], dtype: f32, kind: input}
  w1: {shape: [64, 64], kind: param, sharding: '[{}, {"y", ?}]'}
  b1: {shape: [64], kind: param}
ops:
  - {name: relu1, op: relu, inputs: [h2], output: h3, out_sharding: '[{"x"}, {?}]'}
  - {name: dense1, op: matmul, inputs: [x, w1], output: h1, strategy: [[2, 1], [1, 4]]}
  - {name: add1, op: add, inputs: [h1, b1], output: h2}
outputs: [h3]
shard_as: [[h1, h3]]
"""


def test_spec_example_loads_with_ops_in_any_order():
    g = load_model_text(FFN, source="ffn.yaml")
    assert [op.name for op in g.ops] == ["dense1", "add1", "relu1"]
    assert g.tensor("x").dtype == "f32" and g.tensor("b1").kind == "param"
    assert str(g.tensor("w1").sharding) == 'sharding<@mesh, [{}, {"y", ?}]>'
    assert g.op("relu1").out_sharding.dims_text() == '[{"x"}, {?}]'
    assert g.tensor("h3").sharding == g.op("relu1").out_sharding
    assert g.shard_as == (("h1", "h3"),)
    assert g.source == "ffn.yaml"
    assert g.tensor("x").line == 5 and g.op("dense1").line == 10


def test_defaults_kind_input_dtype_f32_and_outputs_are_unread_results():
    g = load_model_text("name: d\ntensors: {a: {shape: [2]}}\nops: [{name: n, op: neg, inputs: a, output: b}]\n")
    assert g.tensor("a").kind == "input" and g.tensor("a").dtype == "f32"
    assert g.outputs == ("b",)
    assert g.meshes == {}


@pytest.mark.parametrize(
    "mesh_yaml, text",
    [
        ("mesh: {x: 2, y: 4}", '@mesh = <["x"=2, "y"=4]>'),
        ("mesh: '<[\"x\"=2, \"y\"=4]>'", '@mesh = <["x"=2, "y"=4]>'),
        ("mesh: '@m = <[\"x\"=8]>'", '@m = <["x"=8]>'),
        ("mesh: '@m = {<[\"x\"=2]>, device_ids=[1, 0]}'", '@m = {<["x"=2]>, device_ids=[1, 0]}'),
    ],
)
def test_mesh_forms(mesh_yaml, text):
    g = load_model_text(f"name: m\n{mesh_yaml}\ntensors: {{a: {{shape: [2]}}}}\nops: [{{op: neg, inputs: [a]}}]\n")
    assert str(g.mesh) == text


def test_several_meshes_first_is_default_and_shardings_may_name_one():
    g = load_model_text("""
name: two_meshes
meshes:
  mesh_a: {axes: {a: 4, b: 2}, axis_types: {a: Explicit}}
  mesh_b: {axes: {x: 2, y: 2, z: 2}, device_ids: [0, 2, 4, 6, 1, 3, 5, 7]}
tensors:
  p: {shape: [8, 8], sharding: '[{"a"}, {}]'}
  q: {shape: [8, 8], sharding: 'sharding<@mesh_b, [{"x", "y"}, {}]>'}
ops: [{name: s, op: add, inputs: [p, q], output: r}]
""")
    assert list(g.meshes) == ["mesh_a", "mesh_b"]
    assert g.mesh.name == "mesh_a"
    assert g.mesh.axes[0].type is AxisType.EXPLICIT
    assert g.meshes["mesh_b"].device_ids == (0, 2, 4, 6, 1, 3, 5, 7)
    assert g.tensor("q").sharding.mesh.name == "mesh_b"


def test_cluster_is_kept_as_plain_data_without_interpretation():
    g = load_model_text("name: c\ncluster: {preset: nvlink-node, nodes: 2}\ntensors: {a: {shape: [2]}}\n"
                        "ops: [{op: neg, inputs: [a]}]\n")
    assert g.cluster == {"preset": "nvlink-node", "nodes": 2}
    assert type(g.cluster) is dict


def test_attributes_sit_beside_op_and_are_canonicalised():
    g = load_model_text("""
name: attrs
tensors: {a: {shape: [2, 3, 4]}}
ops:
  - {name: r, op: sum, inputs: [a], output: s, axes: [-1], keepdims: true}
  - {name: t, op: transpose, inputs: [a], output: u, perm: [2, 0, 1]}
  - {name: sm, op: softmax, inputs: [a], output: v}
""")
    assert g.op("r").attrs_dict == {"axes": (2,), "keepdims": True}
    assert g.tensor("s").shape == (2, 3, 1)
    assert g.op("t").attr("perm") == (2, 0, 1)
    assert g.op("sm").attr("axis") == 2


def test_builder_model_with_pattern_shardings_and_strategies():
    g = load_model_text("""
name: m
mesh: {dp: 2, tp: 4}
model: {builder: mlp, batch: 16, hidden: 64, layers: 3}
shardings:
  "layer*.w": '[{}, {"tp"}]'
  x: '[{"dp"}, {}]'
  layer0.h: '[{"dp"}, {"tp"}]'
strategies:
  layer1.matmul: [[2, 1], [1, 4]]
shard_as: [[layer0.h, layer1.h]]
""")
    assert [g.tensor(f"layer{i}.w").sharding.dims_text() for i in range(3)] == ['[{}, {"tp"}]'] * 3
    assert g.op("layer0.matmul").out_sharding.dims_text() == '[{"dp"}, {"tp"}]'
    assert g.op("layer1.matmul").strategy == ((2, 1), (1, 4))
    assert g.shard_as == (("layer0.h", "layer1.h"),)


def test_pattern_shardings_also_apply_to_listed_tensors():
    g = load_model_text("""
name: p
mesh: {x: 2}
tensors: {w1: {shape: [4, 4], kind: param}, w2: {shape: [4, 4], kind: param}}
ops: [{name: m, op: matmul, inputs: [w1, w2], output: y}]
shardings: {"w*": '[{"x"}, {}]'}
""")
    assert g.tensor("w1").sharding == g.tensor("w2").sharding


def test_model_cannot_be_combined_with_tensors():
    with pytest.raises(ModelError) as e:
        load_model_text("name: m\nmodel: {builder: mlp, batch: 2, hidden: 2, layers: 1}\ntensors: {}\n", "m.yaml")
    assert e.value.where == "m.yaml:3" and "`tensors` cannot be combined with `model`" in e.value.message


def test_builder_argument_value_error_points_at_its_line():
    with pytest.raises(ModelError) as e:
        load_model_text("name: m\nmodel:\n  builder: mlp\n  batch: 0\n  hidden: 2\n  layers: 1\n", "m.yaml")
    assert e.value.where == "m.yaml:4"
    assert "builder mlp argument batch must be a positive integer, got 0" in e.value.message


def test_builder_missing_argument_points_at_the_model():
    with pytest.raises(ModelError) as e:
        load_model_text("name: m\nmodel:\n  builder: gpt\n  layers: 1\n", "m.yaml")
    assert e.value.where == "m.yaml:3"
    assert "builder gpt needs arguments hidden, heads, seq, batch, vocab" in e.value.message


def test_two_patterns_giving_one_tensor_different_shardings_is_an_error():
    with pytest.raises(ModelError, match="already has sharding .* from pattern 'w\\*'; pattern 'w1' would give it"):
        load_model_text("""
name: p
mesh: {x: 2}
tensors: {w1: {shape: [4, 4]}}
ops: [{op: neg, inputs: [w1]}]
shardings: {"w*": '[{"x"}, {}]', w1: '[{}, {"x"}]'}
""")


def test_empty_file_and_non_mapping_are_errors():
    with pytest.raises(ModelError, match="the model file is empty"):
        load_model_text("", "e.yaml")
    with pytest.raises(ModelError, match="must be a mapping"):
        load_model_text("- a\n- b\n", "e.yaml")


def test_python_objects_cannot_be_constructed_safe_loading():
    with pytest.raises(ModelError, match="YAML"):
        load_model_text("name: !!python/object/apply:os.system ['true']\n")


CONSTRAINED = """
name: c
mesh: {x: 2, y: 2}
tensors:
  a: {shape: [8, 4]}
ops:
  - {name: act, op: relu, inputs: [a], output: h1}
  - {name: c1, op: sharding_constraint, inputs: [h1], output: h1c, out_sharding: '[{"x"}, {}]'}
  - {name: bar, op: propagation_barrier, inputs: [h1c], output: h2, allowed_direction: forward}
  - {name: open, op: propagation_barrier, inputs: [h1], output: h3}
shard_as: [[h1, h2]]
shard_like:
  - [h1, h3]
  - [h1c, h2, h3]
"""


def test_sharding_constraint_pins_only_its_own_result():
    g = load_model_text(CONSTRAINED, source="c.yaml")
    c1 = g.op("c1")
    assert (c1.op, c1.inputs, c1.output, c1.attrs) == ("sharding_constraint", ("h1",), "h1c", ())
    assert g.tensor("h1c").sharding.dims_text() == '[{"x"}, {}]' and g.tensor("h1c").shape == (8, 4)
    assert g.tensor("h1").sharding is None  # the constrained tensor's other readers are not constrained
    assert g.consumers("h1") == [("c1", 0), ("open", 0)]


def test_propagation_barrier_direction_is_an_attribute_defaulting_to_none():
    g = load_model_text(CONSTRAINED, source="c.yaml")
    assert g.op("bar").attrs == (("allowed_direction", "forward"),)
    assert g.op("open").attrs == (("allowed_direction", "none"),)  # built graphs store defaults
    assert g.op("bar").line == 9
    assert g.total_flops() == 8 * 4  # the relu only: annotation ops compute nothing


def test_shard_like_is_kept_beside_shard_as_in_order():
    g = load_model_text(CONSTRAINED, source="c.yaml")
    assert g.shard_as == (("h1", "h2"),)
    assert g.shard_like == (("h1", "h3"), ("h1c", "h2", "h3"))
    assert load_model_text(FFN).shard_like == ()


def test_shard_like_must_be_a_list_of_groups():
    with pytest.raises(ModelError, match=r"m.yaml:5: `shard_like` must be a list of groups like \[\[h1, h3\]\]"):
        load_model_text("name: s\ntensors: {a: {shape: [2]}}\nops: [{name: n, op: neg, inputs: a, output: b}]\n"
                        "\nshard_like: {a: b}\n", source="m.yaml")
    with pytest.raises(ModelError, match=r"m.yaml:4: a shard_like group must be a list of tensor names, got 3"):
        load_model_text("name: s\ntensors: {a: {shape: [2]}}\nops: [{name: n, op: neg, inputs: a, output: b}]\n"
                        "shard_like: [3]\n", source="m.yaml")


def test_yaml_1_1_integer_spellings_read_as_their_values_in_every_integer_field():
    # 0x2 = 2, 0b100 = 4, 010 = 8 (octal), 1:04 = 1 * 60 + 4 = 64 (sexagesimal), 1_0 = 10, -0x2 = -2
    spelled = load_model_text(
        "name: t\nmesh: {x: 0x2, y: 0b100}\n"
        "tensors: {a: {shape: [1:04, 010]}, b: {shape: [1_0, 010]}}\n"
        "ops: [{name: c, op: concat, inputs: [a, b], output: y, axis: -0x2}]\n"
    )
    plain = load_model_text(
        "name: t\nmesh: {x: 2, y: 4}\n"
        "tensors: {a: {shape: [64, 8]}, b: {shape: [10, 8]}}\n"
        "ops: [{name: c, op: concat, inputs: [a, b], output: y, axis: -2}]\n"
    )
    assert spelled.mesh == plain.mesh
    assert spelled.tensor("a").shape == (64, 8) and spelled.tensor("b").shape == (10, 8)
    assert spelled.op("c").attrs == plain.op("c").attrs
