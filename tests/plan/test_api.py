"""The Python API: planner.api.plan(...) and what a Plan offers."""

from pathlib import Path

import pytest

from planner import api as planner
from planner.api import PlanWarning
from planner.errors import ShardplanError

FFN = Path(__file__).resolve().parents[2] / "configs" / "ffn.yaml"


def test_planner_plan_returns_a_plan_whose_table_is_plain_data():
    p = planner.plan(FFN, search="bfs")
    rows = p.table()
    assert isinstance(rows, list) and all(isinstance(r, dict) for r in rows)
    assert rows[0]["name"] == "dense1.matmul" and rows[0]["source"] == "user"
    assert p.to_dict()["ops"] == rows


def test_progress_messages_follow_the_stages():
    seen = []
    planner.plan(FFN, search="ilp", progress=seen.append)
    assert seen[0].startswith("loaded ffn") and seen[-1] == "lowering the plan"
    assert any(m.startswith("searching (ilp)") for m in seen)


def test_ilp_that_cannot_finish_falls_back_to_bfs_with_a_warning(monkeypatch):
    import planner.searches.ilp as ilp

    def fail(*args, **kwargs):
        raise ilp.SolverFailed("time limit reached without a solution")

    monkeypatch.setattr(ilp, "solve_ilp", fail)
    with pytest.warns(PlanWarning, match="falling back to breadth-first propagation"):
        p = planner.plan(FFN, search="ilp", time_limit=60)  # the solver fails, not the deadline
    assert p.search == "bfs" and p.solver is None
    assert p.warnings and "time limit" in p.warnings[0]


def test_unknown_search_is_refused():
    with pytest.raises(ShardplanError, match="unknown search 'dfs'"):
        planner.plan(FFN, search="dfs")


def test_the_plan_is_frozen_and_typed():
    import dataclasses

    p = planner.plan(FFN, search="bfs")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.search = "ilp"
    with pytest.raises(TypeError):
        p.tensors["y"] = None  # a read-only mapping
    assert p.tensors["h4"].sharding.unreduced  # a TensorSharding, not text to cut
    assert p.op("dense2.add").operand_shardings[0] == p.redistributions[0].destination


def test_candidates_are_the_enumerated_strategies_with_their_own_costs():
    p = planner.plan(FFN, search="bfs")
    cands = p.candidates("relu")
    chosen = [c for c in cands if c.chosen]
    assert len(chosen) == 1 and chosen[0].text == p.op("relu").strategy.text()
    # relu's own cost is its compute time: FLOPs (one per element, 64x64) split over the devices it uses
    assert chosen[0].cost_s == pytest.approx(p.op("relu").compute_time_s)
    assert len({c.text for c in cands}) == len(cands) > 1


def test_edge_costs_price_the_chosen_pair_as_the_plan_reports_it():
    p = planner.plan(FFN, search="bfs")
    t = p.edge_costs("h4", "dense2.add")
    m, choice = p.decision.model, p.decision.choice
    row, col = choice[m.op_index["dense2.matmul"]], choice[m.op_index["dense2.add"]]
    (r,) = p.redistributions
    assert t.seconds[row, col] == pytest.approx(r.time_s) and not t.shared
    assert t.seconds.shape == (len(t.producer_candidates), len(t.reader_candidates))
    with pytest.raises(ShardplanError, match="does not read tensor 'h4'"):
        p.edge_costs("h4", "relu")


def test_a_progress_object_hears_the_cost_tables_and_the_solver():
    from tests.test_progress import Recorder

    r = Recorder()
    p = planner.plan(FFN, search="ilp", progress=r)
    m = p.decision.model
    steps = len(m.nodes) + len(m.flows)  # one step per node and link of the planning model
    begin = r.calls.index(("begin", "cost tables", steps))
    end = r.calls.index(("end",), begin)
    assert r.calls[begin + 1:end] == [("advance", 1)] * steps
    assert ("begin", "ILP solve (elimination)", None) in r.calls  # the solver that runs; no step count: a spinner
    # no long step is silent: the strategies of every op (a bar), the ILP's fallback plan and the lowering
    assert ("begin", "strategies", len(p.graph.ops)) in r.calls
    assert ("begin", "breadth-first plan (the ILP's fallback)", None) in r.calls
    assert ("begin", "lowering and costing the plan", None) in r.calls
    assert r.calls[0] == ("stage", "loaded ffn: 5 ops")


def test_the_models_cluster_path_is_relative_to_the_model_and_the_argument_to_the_current_directory(
        tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    cluster = "preset: nvlink-node\n"
    (tmp_path / "models" / "lab.yaml").write_text(cluster)  # next to the model
    (tmp_path / "here.yaml").write_text(cluster)  # in the current directory
    model = FFN.read_text().replace("\ntensors:", "\ncluster: lab.yaml\ntensors:", 1)
    assert "cluster: lab.yaml" in model
    (tmp_path / "models" / "m.yaml").write_text(model)
    monkeypatch.chdir(tmp_path)
    # a cluster file's name defaults to its stem: which file was read shows in the cluster's name
    assert planner.plan("models/m.yaml").cluster.name == "lab"
    assert planner.plan("models/m.yaml", cluster="here.yaml").cluster.name == "here"
    with pytest.raises(ShardplanError):  # models/lab.yaml is not in the current directory
        planner.plan("models/m.yaml", cluster="lab.yaml")


def test_an_ilp_out_of_time_keeps_the_breadth_first_plan_made_first():
    """Past its time limit the ILP does not run: the phase keeps breadth-first propagation's plan,
    made before it (the same plan as --search bfs), with a warning."""
    with pytest.warns(PlanWarning, match="time limit passed before the ILP could finish"):
        p = planner.plan(FFN, search="ilp", time_limit=1e-9)
    assert p.search == "bfs" and p.solver is None
    assert p.totals.objective == planner.plan(FFN, search="bfs").totals.objective
