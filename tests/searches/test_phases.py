"""Axis phases (issue 11): large meshes are planned a few pieces at a time, and say so."""

import json
import subprocess
import sys

import pytest

from planner.api import plan
from planner.enumeration import enumerate_extensions, enumerate_strategies, search_pieces
from planner.errors import PlanningError
from planner.ir.mesh import Mesh
from planner.model.annotations import satisfies
from planner.model.phases import axis_phases, parse_per_phase
from planner.rules.registry import rule_for
from planner.simulation.run import simulate
from tests.plan.conftest import BANDWIDTH_BOUND

MLP = f"""
name: mlp3d
mesh: {{x: 2, y: 2, z: 2}}
cluster: {BANDWIDTH_BOUND}
tensors:
  x:  {{shape: [256, 512], kind: input}}
  w1: {{shape: [512, 1024], kind: param}}
  w2: {{shape: [1024, 512], kind: param}}
ops:
  - {{name: fc1, op: matmul, inputs: [x, w1], output: h}}
  - {{name: act, op: gelu, inputs: [h], output: a}}
  - {{name: fc2, op: matmul, inputs: [a, w2], output: y}}
outputs: [y]
"""


@pytest.fixture(scope="module")
def whole_and_phased():
    """The ILP's training plan of the MLP on 2x2x2, unrestricted and in phases ({x, y} then {z})."""
    return (plan(MLP, search="ilp", training=True, axes_per_phase="all"),
            plan(MLP, search="ilp", training=True))


def test_extensions_of_the_first_phase_cover_the_whole_enumeration():
    mesh = Mesh.from_sizes("m", {"x": 2, "y": 2, "z": 2})
    rule = rule_for("matmul", [(8, 8), (8, 8)], (8, 8))
    pieces = search_pieces(mesh)
    whole = {s.factor_axes for s in enumerate_strategies(rule, mesh, pieces)}
    first = enumerate_extensions(rule, mesh, ((), (), ()), pieces[:2])
    assert first[0].factor_axes == ((), (), ())  # the prefix itself comes first
    second = {e.factor_axes for s in first for e in enumerate_extensions(rule, mesh, s.factor_axes, pieces[2:])}
    # every strategy of the whole mesh extends exactly one first-phase choice: nothing is unreachable
    assert second == whole
    assert len(first) < len(whole)


def test_extensions_keep_the_prefix_and_place_new_pieces_anywhere():
    mesh = Mesh.from_sizes("m", {"x": 2, "y": 2, "z": 2})
    rule = rule_for("matmul", [(8, 8), (8, 8)], (8, 8))
    x, y, z = search_pieces(mesh)
    got = {s.factor_axes for s in enumerate_extensions(rule, mesh, ((x, y), (), ()), (z,))}
    # z: unused, on the other two factors, or in any of the three gaps of (x, y)
    assert got == {((x, y), (), ()), ((x, y), (z,), ()), ((x, y), (), (z,)),
                   ((z, x, y), (), ()), ((x, z, y), (), ()), ((x, y, z), (), ())}


def test_auto_plans_two_pieces_whole_and_larger_meshes_a_piece_at_a_time():
    two = search_pieces(Mesh.from_sizes("m", {"dp": 2, "tp": 4}))
    four = search_pieces(Mesh.from_sizes("m", {"a": 2, "b": 2, "c": 2, "d": 2}))
    assert axis_phases(two) == (two,)
    assert axis_phases(four) == (four[:2], four[2:3], four[3:])
    assert axis_phases(four, 2) == (four[:2], four[2:])
    assert axis_phases(four, "all") == (four,)


def test_axes_per_phase_must_be_auto_all_or_a_positive_number():
    assert parse_per_phase("3") == 3
    with pytest.raises(PlanningError, match="auto, all or a number"):
        parse_per_phase("0")


def test_phased_optimum_is_no_better_than_the_whole_problem_and_the_bound_is_below_both(whole_and_phased):
    whole, phased = whole_and_phased
    assert not whole.search_space.restricted and phased.search_space.restricted
    # each phase's ILP is optimal for the restricted problem it solves: never better than the whole one
    assert whole.totals.objective <= phased.totals.objective * (1 + 1e-9)
    # the bound holds for every plan of the unrestricted problem, the optimum included
    assert phased.search_space.lower_bound_s <= whole.totals.objective
    report = phased.to_dict()["search_space"]
    assert report["phases"] == [['"x"', '"y"'], ['"z"']] and report["completed_phases"] == 2
    assert report["objective_over_bound"] == pytest.approx(phased.totals.objective / report["lower_bound_s"])
    assert "search_space" not in whole.to_dict()


def test_phased_training_plan_runs_on_the_simulator(whole_and_phased):
    _, phased = whole_and_phased
    result = simulate(phased)
    assert result.ok
    assert result.measured_comm_bytes_per_device == result.predicted_comm_bytes_per_device


def test_annotations_hold_across_phases():
    text = MLP.replace("{shape: [256, 512], kind: input}",
                       """{shape: [256, 512], kind: input, sharding: '[{"z", "x"}, {}]'}""")
    p = plan(text, search="bfs")
    assert p.search_space.restricted
    ann = p.decision.model.annotations["x"]
    assert satisfies(p.tensors["x"].sharding, ann)
    assert [str(a) for a in p.tensors["x"].sharding.dims[0].axes] == ['"z"', '"x"']


def test_the_time_limit_stops_between_phases_with_a_runnable_plan():
    with pytest.warns(UserWarning, match="time limit"):
        p = plan(MLP, search="bfs", training=True, time_limit=1e-9)
    assert p.search_space.completed == 1
    # the pieces of the phases that did not run are unused: z shards nothing
    assert all(a.name != "z" for o in p.ops for axes in o.strategy.factor_axes for a in axes)
    # nor do its collectives: that phase's redistributions are searched within x and y
    # (Model.reshard_pieces), and what was costed is what runs
    steps = [s for r in p.redistributions for s in r.plan.steps]
    assert steps and all(a.name != "z" for s in steps for a in s.axes)
    assert simulate(p).ok


def test_cli_reports_the_search_space_and_rejects_a_bad_phase_size(tmp_path):
    model = tmp_path / "mlp3d.yaml"
    model.write_text(MLP)
    out = subprocess.run([sys.executable, "-m", "planner", "plan", str(model), "--format", "json"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["search_space"]["phases"] == [['"x"', '"y"'], ['"z"']]
    bad = subprocess.run([sys.executable, "-m", "planner", "plan", str(model), "--axes-per-phase", "none"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "auto, all or a number" in bad.stderr and "Traceback" not in bad.stderr


def test_priority_phases_then_axis_phases_keep_what_priorities_chose():
    text = """
name: prio3d
mesh: {x: 2, y: 2, z: 2}
tensors:
  x:  {shape: [16, 32], kind: input, sharding: '[{"x"}p0, {}]'}
  w1: {shape: [32, 64], kind: param, sharding: '[{}, {"y"}p1]'}
  w2: {shape: [64, 32], kind: param}
ops:
  - {name: fc1, op: matmul, inputs: [x, w1], output: h}
  - {name: act, op: gelu, inputs: [h], output: a}
  - {name: fc2, op: matmul, inputs: [a, w2], output: y}
outputs: [y]
"""
    whole = plan(text, search="ilp", training=True, axes_per_phase="all")
    phased = plan(text, search="ilp", training=True)
    # the priority phases decide x and y; the axis phases add only what is left (z)
    assert [[str(a) for a in ph] for ph in phased.search_space.phases][-1] == ['"z"']
    assert whole.totals.objective <= phased.totals.objective * (1 + 1e-9)
    assert simulate(phased).ok


def test_tied_layers_are_reported_and_never_beat_the_untied_optimum():
    """The ILP gives repeated layers one decision (a restriction): the plan says so, and on a small
    mesh the untied problem's optimum is no worse, with the bound below both."""
    from planner.searches.ilp import solve_ilp

    text = """
name: gpt2l
mesh: {dp: 2, tp: 2}
model: {builder: gpt, layers: 2, hidden: 64, heads: 4, seq: 16, batch: 8, vocab: 97}
"""
    p = plan(text, search="ilp")
    space = p.search_space
    assert space.tied_layers and space.restricted and len(space.phases) == 1
    assert "repeated layers share one decision" in space.describe(p.totals.objective)
    assert p.to_dict()["search_space"]["tied_layers"] is True
    untied = solve_ilp(p.decision.model.problem, shrink=False)
    assert not untied.report.tied_layers
    assert space.lower_bound_s <= untied.objective <= p.totals.objective * (1 + 1e-9)
