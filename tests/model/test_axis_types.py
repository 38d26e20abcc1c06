"""Mixed Auto / Explicit mesh axes (seed 001, issue 13 part 1): Explicit axes are typed by the
consensus rule, Auto axes are searched, and the search never moves an Explicit axis."""

import pytest

from planner.api import plan
from planner.cli.main import main
from planner.errors import RuleError
from planner.simulation.run import simulate

MLP = """
name: mixed
mesh: {{axes: {{X: 2, Y: 4}}, axis_types: {{X: {x_type}}}}}
tensors:
  x: {{shape: [16, 64], sharding: '{x}'}}
  w1: {{shape: [64, 128], kind: param}}
  w2: {{shape: [128, 64], kind: param}}
ops:
  - {{name: fc1, op: matmul, inputs: [x, w1], output: h}}
  - {{name: act, op: relu, inputs: [h], output: a}}
  - {{name: fc2, op: matmul, inputs: [a, w2], output: y}}
outputs: [y]
"""


def _x_part(sharding):
    return [[str(a) for a in d.axes if a.name == "X"] for d in sharding.dims]


@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_explicit_axes_are_typed_and_auto_axes_searched(search):
    # x's type is f32[16@X,64]: by consensus every result is batch-sharded on X (the matmuls'
    # row factor), and nothing else is on X; Y is the search's to place.
    p = plan(MLP.format(x_type="Explicit", x='[{"X"}, {}]'), search=search)
    for name in ("h", "a", "y"):
        assert _x_part(p.tensors[name].sharding) == [['"X"'], []]
    assert any(a.name == "Y" for o in p.ops for axes in o.strategy.factor_axes for a in axes)
    for training in (False, True):
        q = plan(MLP.format(x_type="Explicit", x='[{"X"}, {}]'), search=search, training=training)
        r = simulate(q, seed=0)
        assert r.ok and r.measured_comm_bytes_per_device == q.totals.comm_bytes_per_device


def test_the_search_never_moves_an_explicit_axis():
    # x shards its contracting dimension on X. Typed (Explicit), fc1 computes on X as the types
    # say and its pending sum is all-reduced over X (JAX's psum); as an Auto axis the search may
    # instead gather x once, which it finds cheaper here.
    explicit = plan(MLP.format(x_type="Explicit", x='[{}, {"X"}]'), search="ilp")
    auto = plan(MLP.format(x_type="Auto", x='[{}, {"X"}]'), search="ilp")
    fc1 = explicit.op("fc1").strategy.factor_axes
    assert [str(a) for a in fc1[1]] == ['"X"']  # factor k on X, as typed
    assert "X" in {a.name for a in explicit.op("fc1").result_sharding.unreduced}
    assert auto.totals.objective < explicit.totals.objective
    r = simulate(explicit, seed=0)
    assert r.ok and r.measured_comm_bytes_per_device == explicit.totals.comm_bytes_per_device


def test_an_ambiguous_explicit_axis_asks_for_out_sharding():
    # seed 001's error: a + b with a [X, .] and b [., X] would use X twice
    graph_text = """
name: ambiguous
mesh: {axes: {X: 2, Y: 2}, axis_types: {X: Explicit}}
tensors:
  a: {shape: [4, 4], dtype: i32, sharding: '[{"X"}, {}]'}
  b: {shape: [4, 4], dtype: i32, sharding: '[{}, {"X"}]'}
ops:
  - {name: add, op: add, inputs: [a, b], output: c}
"""
    with pytest.raises(RuleError, match="out_sharding"):
        plan(graph_text, search="bfs")


def test_a_mesh_typed_manual_axis_is_refused_pointing_to_regions(tmp_path, capsys):
    model = tmp_path / "manual.yaml"
    model.write_text(MLP.format(x_type="Manual", x='[{"X"}, {}]'))
    assert main(["plan", str(model)]) == 2
    err = capsys.readouterr().err
    assert "Manual axes (X)" in err and "an axis is manual only inside a manual computation region" in err


def test_propagate_places_only_auto_axes_minor_to_the_types():
    # x's type holds X on its rows and the user asks for Y on its columns: propagation carries Y
    # (an Auto axis) through the chain while every tensor keeps its typed X, and the plan runs.
    model = MLP.format(x_type="Explicit", x='[{"X"}, {"Y", ?}]')
    p = plan(model, search="propagate")
    for name in ("h", "a", "y"):
        assert _x_part(p.tensors[name].sharding) == [['"X"'], []]
    assert p.tensors["w1"].sharding.dims_text() == '[{"Y", ?}, {?}]'  # k carries x's Y to w1
    r = simulate(plan(model, search="propagate", training=True), seed=0)
    assert r.ok


def test_the_table_types_name_only_explicit_axes(tmp_path, capsys):
    model = tmp_path / "mixed.yaml"
    model.write_text(MLP.format(x_type="Explicit", x='[{"X"}, {}]'))
    assert main(["plan", str(model)]) == 0
    out = capsys.readouterr().out
    assert "types name the Explicit axes (X); the Auto axes are the auto search's" in out  # the default search
    lines = out.splitlines()
    start = lines.index(next(ln for ln in lines if ln.startswith("tensor  type")))
    rows = {ln.split()[0]: ln.split()[1] for ln in lines[start + 1:start + 4]}
    assert rows == {"x": "f32[16@X,64]", "w1": "f32[64,128]", "w2": "f32[128,64]"}


REGIONS = """
name: regions
mesh: {axes: {X: 2, Y: 4}, axis_types: {X: Explicit}}
tensors:
  x: {shape: [16, 64], sharding: '[{}, {"X"}]'}
  w1: {shape: [64, 128], kind: param}
  w2: {shape: [128, 64], kind: param}
ops:
  - {name: fc1, op: matmul, inputs: [x, w1], output: h}
  - {name: act, op: relu, inputs: [h], output: a}
  - {name: fc2, op: matmul, inputs: [a, w2], output: y}
outputs: [y]
"""


# fc2 keeps its pending sum over Y (JAX's out_sharding with unreduced axes)
PENDING_FC2 = REGIONS.replace("output: y}", "output: y, out_sharding: '[{}, {}], unreduced={\"Y\"}'}")


def test_inside_auto_axes_the_search_decides_the_axis_and_the_out_sharding_types_the_result():
    # Typed, x's X on the contracting dimension makes fc1 compute on X with a pending sum (see
    # above). With fc1 in an auto_axes region over X, the search places X there itself, and the
    # result leaves typed by the region's out-sharding: act and fc2 compute h's rows on X.
    typed = plan(REGIONS, search="ilp")
    free = plan(REGIONS + """auto_axes:
  - {name: g, axes: [X], ops: [fc1], out_shardings: {h: '[{"X"}, {}]'}}
""", search="ilp")
    assert [str(a) for a in typed.op("fc1").strategy.factor_axes[1]] == ['"X"']
    assert free.totals.objective <= typed.totals.objective
    for op in ("act", "fc2"):
        assert [str(a) for a in free.op(op).strategy.factor_axes[0] if a.name == "X"] == ['"X"']
    for training in (False, True):
        p = plan(REGIONS + """auto_axes:
  - {name: g, axes: [X], ops: [fc1], out_shardings: {h: '[{"X"}, {}]'}}
""", search="bfs", training=training)
        r = simulate(p, seed=0)
        assert r.ok and r.measured_comm_bytes_per_device == p.totals.comm_bytes_per_device


def test_inside_explicit_axes_an_auto_axis_is_typed_from_the_in_shardings():
    # fc2 in an explicit_axes region over Y: a enters typed [{}, {"Y"}] and w2 [{"Y"}, {}], so fc2
    # contracts on Y, which JAX types only with an out_sharding: here the pending sum over Y itself,
    # whatever the cost search would prefer.
    model = PENDING_FC2 + """explicit_axes:
  - {name: e, axes: [Y], ops: [fc2], in_shardings: {a: '[{}, {"Y"}]', w2: '[{"Y"}, {}]'}}
"""
    p = plan(model, search="bfs")
    k = p.op("fc2").strategy.factor_axes[1]
    assert [str(a) for a in k if a.name == "Y"] == ['"Y"']
    assert "Y" in {a.name for a in p.op("fc2").result_sharding.unreduced}
    r = simulate(plan(model, search="ilp", training=True), seed=0)
    assert r.ok


@pytest.mark.parametrize("model, op, expected", [
    # inside auto_axes, fc1 computes on X as its result's type (the out-sharding) has it: rows on X
    (REGIONS + """auto_axes:
  - {name: g, axes: [X], ops: [fc1], out_shardings: {h: '[{"X"}, {}]'}}
""", "fc1", '[{"X"}, {}]'),
    # inside explicit_axes, fc2 is typed on Y from its in-shardings: it contracts on Y (its out_sharding
    # keeps the pending sum, as JAX asks of a contraction sharded on both sides)
    (PENDING_FC2 + """explicit_axes:
  - {name: e, axes: [Y], ops: [fc2], in_shardings: {a: '[{}, {"Y"}]', w2: '[{"Y"}, {}]'}}
""", "fc2", '[{}, {}], unreduced={"Y"}'),
])
def test_propagate_plans_axis_regions_with_their_types(model, op, expected):
    for training in (False, True):
        p = plan(model, search="propagate", training=training)
        assert p.op(op).result_sharding.dims_text() == expected
        r = simulate(p, seed=0)
        assert r.ok and r.measured_comm_bytes_per_device == p.totals.comm_bytes_per_device


# -- auto_axes regions under bfs / ilp, and out_shardings on Explicit axes ----------------------------------

SEED001_ADD = """
name: seed001_auto_axes
mesh: {{axes: {{X: 2, Y: 4}}, axis_types: {{{types}}}}}
tensors:
  x: {{shape: [4, 4], dtype: i32, sharding: '{x}'}}
  y: {{shape: [4, 4], dtype: i32, sharding: '[{{}}, {{"X"}}]'}}
ops:
  - {{name: add, op: add, inputs: [x, y], output: z{out_sharding}}}
  - {{name: neg, op: neg, inputs: [z], output: w}}
outputs: [w]
{region}"""
REGION = """auto_axes:
  - {{name: g, axes: [{axes}], ops: [add], out_shardings: {{z: '[{{"X"}}, {{}}]'}}}}
"""


def _seed001_add(types="X: Explicit, Y: Explicit", x='[{"X"}, {}]', region_axes="X, Y", out_sharding=""):
    region = REGION.format(axes=region_axes) if region_axes else ""
    return SEED001_ADD.format(types=types, x=x, region=region, out_sharding=out_sharding)


@pytest.mark.parametrize("search", ["bfs", "ilp"])
@pytest.mark.parametrize("types, region_axes", [("X: Explicit, Y: Explicit", "X, Y"), ("X: Explicit", "X")])
def test_auto_axes_result_leaves_with_exactly_its_out_sharding_on_the_region_axes(search, types, region_axes):
    # seed 001's add: inside the region the search may compute z any way, but z goes back to the caller as
    # [{"X"}, {}] on the region's axes: no region axis on its columns (closed), X on its rows
    p = plan(_seed001_add(types, region_axes=region_axes), search=search)
    z = p.tensors["z"].sharding
    region = set(region_axes.split(", "))
    assert [[a.name for a in d.axes if a.name in region] for d in z.dims] == [["X"], []]
    r = simulate(p, seed=0)
    assert r.ok and r.measured_comm_bytes_per_device == p.totals.comm_bytes_per_device


@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_auto_axes_out_sharding_puts_the_axis_on_the_dimension_it_names(search):
    # both inputs shard their columns on X, so computing in place would leave X on z's columns;
    # the region's out_sharding puts X on the rows
    p = plan(_seed001_add("X: Explicit", x='[{}, {"X"}]', region_axes="X"), search=search)
    assert _x_part(p.tensors["z"].sharding) == [['"X"'], []]
    assert simulate(p, seed=0).ok


@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_out_sharding_on_explicit_axes_is_computed_in_its_layout(search):
    # consensus computes z as [{}, {"X"}], but the out_sharding [{"X"}, {}] types it: the op computes in the
    # out_sharding's layout (its operands move), which the search must give its result
    p = plan(_seed001_add("X: Explicit", x='[{}, {"X"}]', region_axes="",
                          out_sharding=", out_sharding: '[{\"X\"}, {}]'"), search=search)
    assert p.tensors["z"].sharding.dims_text() == '[{"X"}, {}]'
    assert simulate(p, seed=0).ok


@pytest.mark.parametrize("search", ["bfs", "ilp"])
@pytest.mark.parametrize("types", ["Y: Explicit", "X: Auto"])
def test_open_annotation_on_an_input_whose_reader_is_pinned_plans_as_the_closed_form(search, types):
    # add's out_sharding pins how it reads x ([{"X"}, {}]); x's annotation, open or closed, keeps X on its
    # columns: x is stored as annotated and moved to its reader, whether or not the annotation is open
    def model(x):
        return _seed001_add(types, x=x, region_axes="", out_sharding=", out_sharding: '[{\"X\"}, {}]'")
    closed = plan(model('[{}, {"X"}]'), search=search)
    opened = plan(model('[{?}, {"X", ?}]'), search=search)
    assert opened.totals.objective == closed.totals.objective
    assert [(r.tensor, [s.kind for s in r.steps]) for r in opened.redistributions] == [
        (r.tensor, [s.kind for s in r.steps]) for r in closed.redistributions]
    assert simulate(opened, seed=0).ok


def test_restrict_keeps_each_dimensions_priority_and_drops_it_from_a_closed_empty_one():
    # Rule-based propagation reads user priorities through restrict(): p1 must survive. A closed
    # dimension left without axes takes no priority (the grammar refuses {}p1), so it is dropped there.
    from planner.ir.text import parse_mesh, parse_sharding
    from planner.model.axis_types import restrict

    mesh = parse_mesh('@mesh = <["a"=2, "b"=2]>')
    s = parse_sharding('sharding<@mesh, [{"a", ?}p1, {"b"}p2]>', mesh)
    assert restrict(s, frozenset({"a", "b"})).dims_text() == '[{"a", ?}p1, {"b"}p2]'
    assert restrict(s, frozenset({"a"})).dims_text() == '[{"a", ?}p1, {}]'
