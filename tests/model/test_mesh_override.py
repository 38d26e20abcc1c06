"""--mesh over the model's mesh (planner/model/mesh_override.py): annotations kept by axis name, or refused."""

import pytest

from graphs import load_model_text
from planner.api import plan
from planner.errors import PlanningError
from planner.ir.text import parse_mesh_spec
from planner.model.mesh_override import on_mesh

MODEL = """\
name: two_axes
mesh: {a: 4, b: 2}
tensors:
  x: {shape: [16, 8], kind: input, sharding: '[{"a"}, {"b"}]'}
  w: {shape: [8, 8], kind: param, sharding: '[{}, {"b"}]'}
ops:
  - {name: mm, op: matmul, inputs: [x, w], output: h, out_sharding: '[{"a"}, {}]'}
"""


def mesh(text: str):
    return parse_mesh_spec(text, default_name="mesh")


def test_annotations_keep_their_axis_names_when_sizes_change():
    g = on_mesh(load_model_text(MODEL), mesh("a=2,b=4"))
    assert g.tensor("x").sharding.dims_text() == '[{"a"}, {"b"}]'
    assert g.op("mm").out_sharding.dims_text() == '[{"a"}, {}]'
    # "a" is now of size 2: x's local shape is 16/2 x 8/4
    assert g.tensor("x").sharding.local_shape((16, 8)) == (8, 2)


def test_a_plan_on_the_new_mesh_honours_the_annotations_by_name():
    p = plan(MODEL, mesh="b=2,a=4")
    assert str(p.mesh) == '@mesh = <["b"=2, "a"=4]>'
    assert p.tensors["x"].sharding.dims_text() == '[{"a"}, {"b"}]'


def test_the_same_mesh_leaves_the_model_alone():
    g = load_model_text(MODEL)
    assert on_mesh(g, g.mesh) is g


def test_a_missing_axis_name_is_refused_naming_the_first_annotation():
    with pytest.raises(PlanningError) as info:
        on_mesh(load_model_text(MODEL), mesh("a=4,c=2"))
    # x on line 4 is the first annotation that uses "b"
    assert str(info.value).startswith('--mesh a=4,c=2 has no axis "b", which the model\'s annotations use '
                                      "(first: tensor 'x' at <string>:4)")
    assert "e.g. --mesh a=4,b=2" in str(info.value)


def test_a_sub_axis_that_does_not_fit_the_new_size_is_refused_naming_the_tensor():
    text = MODEL.replace("""sharding: '[{"a"}, {"b"}]'""", """sharding: '[{"a":(2)2}, {"b"}]'""")
    with pytest.raises(PlanningError) as info:
        on_mesh(load_model_text(text), mesh("a=2,b=4"))  # "a":(2)2 needs an axis of at least 2*2 = 4 devices
    assert str(info.value).startswith("tensor 'x' (<string>:4): its sharding")
    assert "does not fit --mesh a=2,b=4" in str(info.value)


def test_an_override_keeps_the_models_axis_types_by_name():
    from planner.ir.mesh import AxisType
    from planner.model.mesh_override import with_model_types

    typed = MODEL.replace("mesh: {a: 4, b: 2}", "meshes:\n  mesh: {axes: {a: 4, b: 2}, axis_types: {b: Explicit}}")
    g = load_model_text(typed)
    swapped = with_model_types(g, mesh("b=2,a=4"))
    assert {a.name: a.type for a in swapped.axes} == {"a": AxisType.AUTO, "b": AxisType.EXPLICIT}
    # the same names and sizes with the model's types is the model's own mesh: nothing to override
    assert with_model_types(g, mesh("a=4,b=2")) == g.mesh
