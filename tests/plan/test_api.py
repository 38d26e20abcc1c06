"""The Python API: planner.plan(...) and what a Plan offers."""

from pathlib import Path

import pytest

import planner
from planner.api import PlanWarning

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
    with pytest.raises(planner.ShardplanError, match="unknown search 'dfs'"):
        planner.plan(FFN, search="dfs")
