"""The default search ``auto``: the ILP's optimum within a time budget per phase, else breadth-first propagation's plan."""

import json
import warnings
from pathlib import Path

import pytest

from planner.api import plan
from planner.model.decision import SolverReport
from planner.searches import DEFAULT_SEARCH, SEARCHES, auto, ilp
from planner.searches.ilp import IlpResult

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def quiet_plan(config: str, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return plan(str(CONFIGS / config), **kw)


def test_auto_is_the_default_search():
    assert DEFAULT_SEARCH == SEARCHES[0] == "auto"
    assert quiet_plan("ffn.yaml").search == "auto"


@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("config", ["ffn.yaml", "megatron_mlp.yaml", "moe.yaml", "embedding_head.yaml"])
def test_auto_gives_the_ilps_optimum_and_never_worse_than_bfs(config, training):
    default = quiet_plan(config, training=training)
    optimum = quiet_plan(config, search="ilp", solver="highs", training=training)
    bfs = quiet_plan(config, search="bfs", training=training)
    assert default.totals.objective == pytest.approx(optimum.totals.objective, rel=1e-9, abs=0.0)
    assert default.totals.objective <= bfs.totals.objective * (1 + 1e-9)


def test_auto_keeps_bfs_plan_when_the_ilp_has_no_time(monkeypatch):
    monkeypatch.setattr(auto, "PHASE_SECONDS", 0.0)
    with pytest.warns(UserWarning, match="time limit passed before the ILP could finish"):
        default = plan(str(CONFIGS / "ffn.yaml"))
    bfs = plan(str(CONFIGS / "ffn.yaml"), search="bfs")
    assert default.search == "auto" and default.solver is None
    assert [row["strategy"] for row in default.table()] == [row["strategy"] for row in bfs.table()]


def test_auto_plans_are_byte_identical_run_to_run():
    # no solver time in the plan: the same model prints the same JSON
    first = json.dumps(quiet_plan("megatron_mlp.yaml", training=True).to_dict())
    assert json.dumps(quiet_plan("megatron_mlp.yaml", training=True).to_dict()) == first
    assert "solver" not in quiet_plan("megatron_mlp.yaml").to_dict()


def test_ilp_keeps_bfs_plan_when_a_stopped_solver_answers_worse(monkeypatch):
    # a solver stopped by its time limit with a feasible plan worse than BFS's: the phase keeps BFS's plan
    bfs = quiet_plan("ffn.yaml", search="bfs")
    real = ilp.solve_ilp

    def stopped(problem, **kw):
        best = real(problem, **kw)
        # the worst of each node's candidates (a feasible choice here: ffn has no same groups or memory budget)
        worst = tuple(int(node.cost.argmax()) for node in problem.nodes)
        if problem.objective(worst) <= best.objective:
            pytest.skip("no choice worse than the optimum to hand back")
        report = SolverReport("HiGHS", "Time limit reached", False, 0.5, 0.0, 0, 0, len(problem.nodes))
        return IlpResult(worst, problem.objective(worst), report)

    monkeypatch.setattr(ilp, "solve_ilp", stopped)
    with pytest.warns(UserWarning, match="stopped before its optimum"):
        p = plan(str(CONFIGS / "ffn.yaml"), search="ilp")
    assert p.totals.objective == bfs.totals.objective
