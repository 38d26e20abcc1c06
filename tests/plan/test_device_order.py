"""Annotations on meshes with another device order (seed 000's "several logical meshes").

A tensor may be annotated on any mesh of the model (``meshes:``); the planner plans on the
default (first) mesh and translates each annotation to the sharding that gives every device
the same index ranges (:func:`planner.ir.equivalence.equivalent_sharding`). Expected layouts
are derived here from the device index map (:func:`planner.ir.device_index_ranges`), never
written out by hand.
"""

import numpy as np
import pytest

from planner.api import load, plan
from planner.cli.main import main
from planner.errors import PlanningError
from planner.ir import device_index_ranges, parse_mesh, parse_sharding
from planner.simulation.run import simulate

from .conftest import collectives

# Seed 000: "<@mesh_0, "b"> is identical to <@mesh_1, "z">" (same device order, other axes).
SEED_000 = """\
name: seed000_meshes
meshes:
  mesh_0: '@mesh_0 = {<["a"=4, "b"=2]>, device_ids=[0, 1, 2, 3, 4, 5, 6, 7]}'
  mesh_1: '@mesh_1 = {<["x"=2, "y"=2, "z"=2]>, device_ids=[0, 1, 2, 3, 4, 5, 6, 7]}'
tensors:
  p: {shape: [16, 8], kind: input, sharding: 'sharding<@mesh_0, [{"b"}, {}]>'}
  q: {shape: [16, 8], kind: input, sharding: 'sharding<@mesh_1, [{"z"}, {}]>'}
ops:
  - {name: both, op: add, inputs: [p, q], output: s}
  - {name: act, op: relu, inputs: [s], output: y}
outputs: [y]
"""

# A second mesh over the same 8 devices in another order: mesh_b's position i holds device
# device_ids[i]. Every annotation below has an equivalent on the default mesh_a.
REORDERED = """\
name: reordered
meshes:
  mesh_a: {axes: {a: 4, b: 2}}
  mesh_b: {axes: {x: 2, y: 2, z: 2}, device_ids: [0, 2, 4, 6, 1, 3, 5, 7]}
tensors:
  x:  {shape: [16, 8], kind: input, sharding: 'sharding<@mesh_b, [{"x"}, {}]>'}
  w1: {shape: [8, 16], kind: param, sharding: 'sharding<@mesh_b, [{}, {"y", "z"}]>'}
  w2: {shape: [16, 8], kind: param, sharding: 'sharding<@mesh_b, [{"y", "z"}, {}]>'}
ops:
  - {name: up, op: matmul, inputs: [x, w1], output: h}
  - {name: act, op: relu, inputs: [h], output: a}
  - {name: down, op: matmul, inputs: [a, w2], output: y}
outputs: [y]
"""

# mesh_r swaps devices 0 and 1: its "d" gives device 1 the first rows, which no sharding of
# the default mesh does. x carries the same text on the default mesh and is fine.
NO_EQUIVALENT = """\
name: no_equivalent
meshes:
  mesh: {axes: {d: 8}}
  mesh_r: {axes: {d: 8}, device_ids: [1, 0, 2, 3, 4, 5, 6, 7]}
tensors:
  x: {shape: [16, 8], kind: input, sharding: '[{"d"}, {}]'}
  w: {shape: [16, 8], kind: input, sharding: 'sharding<@mesh_r, [{"d"}, {}]>'}
ops:
  - {name: both, op: add, inputs: [x, w], output: y}
"""


def _write(tmp_path, text, name="model.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _ranges(sharding, shape):
    return device_index_ranges(sharding, shape)


def _assert_exact_simulation(p):
    r = simulate(p)
    assert r.ok, r.outputs
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device
    assert r.predicted_comm_bytes_per_device == p.totals.comm_bytes_per_device
    return r


# -- seed 000: two meshes, one device order ---------------------------------------------------

@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_seed000_mesh0_b_and_mesh1_z_plan_as_one_layout(tmp_path, search):
    path = _write(tmp_path, SEED_000)
    g = load(path)
    shape = g.tensor("p").shape
    given_p, given_q = g.tensor("p").sharding, g.tensor("q").sharding
    assert given_p.mesh.name == "mesh_0" and given_q.mesh.name == "mesh_1"
    # the seed's claim, from the index map: every device holds the same rows under both
    want = _ranges(given_q, shape)
    np.testing.assert_array_equal(_ranges(given_p, shape), want)

    p = plan(path, search=search)
    assert p.mesh.name == "mesh_0"  # the first mesh is the planning mesh
    for name in ("p", "q"):
        got = p.tensors[name].sharding
        assert got.mesh == p.mesh
        np.testing.assert_array_equal(_ranges(got, shape), want, err_msg=name)
    assert p.tensors["p"].sharding == p.tensors["q"].sharding
    # they agree, so nothing moves: no collective for either and none in the whole plan
    assert collectives(p) == []
    assert p.totals.comm_bytes_per_device == 0

    r = _assert_exact_simulation(p)
    assert r.measured_comm_bytes_per_device == 0


def test_seed000_planned_on_mesh_1_gives_the_same_layout(tmp_path):
    """Either mesh may be the planning mesh: on @mesh_1 the mesh_0 annotation becomes "z"."""
    path = _write(tmp_path, SEED_000)
    g = load(path)
    shape = g.tensor("p").shape
    p = plan(path, search="bfs", mesh="mesh_1")
    assert p.mesh.name == "mesh_1"
    want = _ranges(g.tensor("p").sharding, shape)
    for name in ("p", "q"):
        np.testing.assert_array_equal(_ranges(p.tensors[name].sharding, shape), want, err_msg=name)
    assert p.totals.comm_bytes_per_device == 0
    _assert_exact_simulation(p)


# -- a mesh with another device order --------------------------------------------------------

def test_the_reordered_mesh_is_not_a_renaming():
    """The same text on mesh_b in the default order would be another layout: the order matters."""
    g = load(REORDERED)
    given = g.tensor("x").sharding
    naive_mesh = parse_mesh('@mesh_b = <["x"=2, "y"=2, "z"=2]>')
    naive = parse_sharding('[{"x"}, {}]', naive_mesh)
    assert given.mesh.device_ids != naive_mesh.device_ids
    assert not np.array_equal(_ranges(given, (16, 8)), _ranges(naive, (16, 8)))


@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_reordered_annotations_plan_and_simulate_exactly(tmp_path, search):
    path = _write(tmp_path, REORDERED)
    g = load(path)
    assert g.mesh.name == "mesh_a" and g.meshes["mesh_b"].device_ids == (0, 2, 4, 6, 1, 3, 5, 7)

    p = plan(path, search=search)
    assert p.mesh.name == "mesh_a"
    for name in ("x", "w1", "w2"):
        given = g.tensor(name).sharding
        assert given.mesh.name == "mesh_b"
        got = p.tensors[name].sharding
        assert got.mesh == p.mesh
        # each device holds what the annotation on mesh_b gives it
        np.testing.assert_array_equal(_ranges(got, g.tensor(name).shape), _ranges(given, g.tensor(name).shape),
                                      err_msg=name)
    # the annotations line up with each other as on mesh_b: the first matmul needs no communication
    assert [t for t, _, _ in collectives(p)] == ["y"]
    assert p.totals.comm_bytes_per_device > 0  # the second matmul's pending sum is reduced

    r = _assert_exact_simulation(p)
    assert r.measured_comm_bytes_per_device > 0


def test_cli_simulate_on_the_reordered_model_exits_0(tmp_path, capsys):
    path = _write(tmp_path, REORDERED)
    assert main(["simulate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "(equal)" in out and "OK" in out


# -- no equivalent on the planning mesh -------------------------------------------------------

def test_the_reordered_annotation_really_has_no_equivalent():
    """From the index map: under mesh_r's "d" device 1 holds rows 0-1, under any "d" of mesh device 0 does."""
    g = load(NO_EQUIVALENT)
    shape = g.tensor("w").shape
    on_r = _ranges(g.tensor("w").sharding, shape)
    on_default = _ranges(g.tensor("x").sharding, shape)
    assert on_r[1, 0, 0] == 0 and on_default[0, 0, 0] == 0
    assert not np.array_equal(on_r, on_default)


@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_annotation_without_equivalent_is_a_clear_planning_error(tmp_path, search):
    path = _write(tmp_path, NO_EQUIVALENT)
    with pytest.raises(PlanningError) as info:
        plan(path, search=search)
    message = str(info.value)
    assert "tensor 'w'" in message  # which tensor
    assert 'sharding<@mesh_r, [{"d"}, {}]>' in message  # which sharding
    assert "no equivalent on mesh @mesh" in message and "order the devices differently" in message
    assert "Annotate it on @mesh" in message  # what to do


def test_cli_plan_without_equivalent_exits_2_naming_tensor_and_sharding(tmp_path, capsys):
    path = _write(tmp_path, NO_EQUIVALENT)
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("shardplan plan: error:")
    assert "tensor 'w'" in err and 'sharding<@mesh_r, [{"d"}, {}]>' in err
    assert "Annotate it on @mesh" in err
    assert "Traceback" not in err
