import pytest

from graphs.meshes import as_meshes, mesh_from_value
from planner.errors import ModelError
from planner.ir import Mesh


def test_sizes_mapping_makes_a_mesh_called_mesh():
    assert list(as_meshes({"dp": 2, "tp": 4})) == ["mesh"]


def test_text_forms():
    assert mesh_from_value("mesh", '<"devices"=8>').shape == (8,)
    assert mesh_from_value("mesh", '@full = <["d"=8]>').name == "full"
    with pytest.raises(ModelError, match="given as text naming a different mesh @b"):
        mesh_from_value("a", '@b = <["d"=8]>')


def test_full_mapping_form_with_device_ids_and_types():
    m = mesh_from_value("m", {"axes": {"x": 2, "y": 2}, "device_ids": [3, 2, 1, 0], "axis_types": {"y": "Manual"}})
    assert m.device_ids == (3, 2, 1, 0) and m.axes[1].type.value == "Manual"
    with pytest.raises(ModelError, match="unknown key 'devices'"):
        mesh_from_value("m", {"axes": {"x": 2}, "devices": [0, 1]})
    with pytest.raises(ModelError, match="axis_types names axis 'z'"):
        mesh_from_value("m", {"axes": {"x": 2}, "axis_types": {"z": "Auto"}})


def test_bad_device_ids_are_wrapped_as_model_errors():
    with pytest.raises(ModelError, match="bad mesh 'm': .*permutation"):
        mesh_from_value("m", {"axes": {"x": 2}, "device_ids": [0, 0]})


def test_mesh_objects_and_lists():
    a, b = Mesh.from_sizes("a", {"x": 4}), Mesh.from_sizes("b", {"y": 2, "z": 2})
    assert list(as_meshes([a, b])) == ["a", "b"]
    assert as_meshes(a) == {"a": a}
    assert as_meshes(None) == {}
    with pytest.raises(ModelError, match="@a has 4 devices but @c has 2"):
        as_meshes([a, Mesh.from_sizes("c", {"x": 2})])
