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
    import planner.propagation.ilp as ilp

    def fail(*args, **kwargs):
        raise ilp.SolverFailed("time limit reached without a solution")

    monkeypatch.setattr(ilp, "solve_ilp", fail)
    with pytest.warns(PlanWarning, match="falling back to breadth-first propagation"):
        p = planner.plan(FFN, search="ilp", time_limit=0.01)
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
    m, choice = p.outcome.model, p.outcome.choice
    row, col = choice[m.op_index["dense2.matmul"]], choice[m.op_index["dense2.add"]]
    (r,) = p.redistributions
    assert t.seconds[row, col] == pytest.approx(r.time_s) and not t.shared
    assert t.seconds.shape == (len(t.producer_candidates), len(t.reader_candidates))
    with pytest.raises(ShardplanError, match="does not read tensor 'h4'"):
        p.edge_costs("h4", "relu")
