"""The ILP is optimal: never worse than BFS on the same tables, equal to brute force where enumerable."""

from pathlib import Path

import pytest

from planner.api import plan
from tests.searches.brute_force import brute_force
from planner.searches.ilp import solve_ilp

from .conftest import BANDWIDTH_BOUND

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_ilp_objective_is_at_most_bfs_on_every_config(config):
    ilp = plan(config, search="ilp")
    bfs = plan(config, search="bfs")
    assert ilp.search == "ilp" and ilp.solver.optimal
    assert ilp.totals.objective <= bfs.totals.objective * (1 + 1e-9)
    # both scored on the same tables: the ILP's choice re-scored by BFS's problem is its objective
    m_ilp, choice = ilp.decision.model, ilp.decision.choice
    m_bfs = bfs.decision.model
    assert m_bfs.problem.objective(choice) == pytest.approx(ilp.totals.objective, rel=1e-12)


SMALL = {
    "mlp": "model: {builder: mlp, batch: 16, hidden: 32, layers: 2}",
    "diamond": """
tensors:
  x: {shape: [16, 32], kind: input}
  w: {shape: [32, 32], kind: param}
  v: {shape: [32, 32], kind: param}
ops:
  - {name: a, op: matmul, inputs: [x, w], output: ha}
  - {name: b, op: matmul, inputs: [x, v], output: hb}
  - {name: c, op: add, inputs: [ha, hb], output: hc}
  - {name: d, op: relu, inputs: [hc], output: y}
outputs: [y]""",
    "reduction": """
tensors:
  x: {shape: [16, 32], kind: input, sharding: '[{"d"}, {}]'}
ops:
  - {name: e, op: exp, inputs: [x], output: ex}
  - {name: s, op: sum, inputs: [ex], output: sx, axes: [1]}
  - {name: t, op: transpose, inputs: [ex], output: tx, perm: [1, 0]}
outputs: [sx, tx]""",
    "attention_scores": """
tensors:
  q: {shape: [2, 4, 8, 8], kind: input}
  k: {shape: [2, 4, 8, 8], kind: input}
ops:
  - {name: qk, op: einsum, inputs: [q, k], output: s, equation: "bnqd,bnkd->bnqk"}
  - {name: sm, op: softmax, inputs: [s], output: p}
outputs: [p]""",
}


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_ilp_equals_brute_force_on_small_graphs(name, training):
    text = f"name: {name}\nmesh: {{d: 4}}\ncluster: {BANDWIDTH_BOUND}\n{SMALL[name]}\n"
    p = plan(text, search="ilp", training=training)
    m, choice = p.decision.model, p.decision.choice
    best_choice, best = brute_force(m.problem)
    assert p.totals.objective == pytest.approx(best, rel=1e-9, abs=1e-15)
    exact = solve_ilp(m.problem, shrink=False)
    assert exact.objective == pytest.approx(best, rel=1e-9, abs=1e-15)
