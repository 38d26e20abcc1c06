"""auto_axes / explicit_axes regions in the YAML format and GraphBuilder (seed 001, issue 13)."""

import pytest

from graphs import load_model
from graphs.graph_builder import GraphBuilder
from planner.errors import ModelError

HEAD = """name: regions
mesh: {axes: {X: 2, Y: 4}, axis_types: {X: Explicit}}
tensors:
  x: {shape: [16, 64], sharding: '[{"X"}, {}]'}
  w1: {shape: [64, 64], kind: param}
  w2: {shape: [64, 64], kind: param}
ops:
  - {name: fc1, op: matmul, inputs: [x, w1], output: h}
  - {name: act, op: relu, inputs: [h], output: a}
  - {name: fc2, op: matmul, inputs: [a, w2], output: y}
outputs: [y]
"""


def _load(tmp_path, tail: str):
    f = tmp_path / "m.yaml"
    f.write_text(HEAD + tail)
    return load_model(f)


def test_regions_load_with_their_boundary_shardings(tmp_path):
    g = _load(tmp_path, """auto_axes:
  - {name: g, axes: [X], ops: [act], out_shardings: {a: '[{"X"}, {}]'}}
explicit_axes:
  - {name: e, axes: [Y], ops: [fc2], in_shardings: {a: '[{}, {"Y"}]', w2: '[{"Y"}, {}]'}}
""")
    (auto, explicit) = g.axis_regions
    assert (auto.name, auto.kind, auto.axes, auto.ops) == ("g", "auto", ("X",), ("act",))
    assert auto.sharding("a").dims_text() == '[{"X"}, {}]'
    assert (explicit.kind, explicit.axes, sorted(dict(explicit.shardings))) == ("explicit", ("Y",), ["a", "w2"])


def test_the_builder_makes_the_same_regions():
    b = GraphBuilder("regions", {"X": 2})
    b.tensor("x", [8])
    h = b.op("relu", ["x"], output="h", name="r")
    b.op("neg", [h], output="y", name="n")
    b.auto_axes("g", ["X"], ["r"], {"h": '[{"X"}]'})
    (r,) = b.build().axis_regions
    assert r.kind == "auto" and r.sharding("h").dims_text() == '[{"X"}]'


@pytest.mark.parametrize("tail, line, message", [
    ("""auto_axes:
  - {name: g, axes: [X], ops: [act]}
""", 13, "auto_axes region 'g' needs out_shardings for a: its results go back to the caller"),
    ("""explicit_axes:
  - {name: e, axes: [Y], ops: [fc2], in_shardings: {a: '[{}, {"Y"}]'}}
""", 13, "explicit_axes region 'e' needs in_shardings for w2: its inputs enter with the type"),
    ("""auto_axes:
  - {name: g, axes: [Z], ops: [act], out_shardings: {a: '[{}, {}]'}}
""", 13, "auto_axes region 'g' names axis 'Z', which the mesh does not have (axes: X, Y)"),
    ("""auto_axes:
  - {name: g, axes: [X], ops: [actt], out_shardings: {a: '[{}, {}]'}}
""", 13, "auto_axes region 'g' names op 'actt', which is not an op of the model"),
    ("""auto_axes:
  - {name: g, axes: [X], ops: [act], out_shardings: {h: '[{}, {}]', a: '[{}, {}]'}}
""", 13, "out_shardings names 'h', which is not one of the region's outputs (a)"),
    ("""auto_axes:
  - {name: g, axes: [X], ops: [act], out_shardings: {a: '[{}, {}]'}}
  - {name: g2, axes: [X], ops: [act], out_shardings: {a: '[{}, {}]'}}
""", 14, "op 'act' is in two regions ('g' and 'g2')"),
    ("""auto_axes:
  - {name: g, axes: [X], ops: [act], out_shardings: {a: '[{}, {}]'}, in_shardings: {}}
""", 13, "unknown key 'in_shardings'"),
])
def test_bad_regions_name_the_region_the_line_and_the_rule(tmp_path, tail, line, message):
    with pytest.raises(ModelError) as e:
        _load(tmp_path, tail)
    assert f"m.yaml:{line}" in str(e.value)
    assert message in str(e.value)
