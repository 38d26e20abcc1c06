"""One walk: what the search optimised is what the lowered program does.

For every config, under bfs and ilp, forward and with --training, the objective the
search minimised (unary costs plus link costs of its problem) equals the compute
time of the program's ops plus the time of every redistribution the program makes,
and the reported totals are read off that same program.
"""

from pathlib import Path

import pytest

from planner.api import plan

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("training", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("search", ["bfs", "ilp"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_objective_equals_compute_plus_communication_of_the_lowered_program(config, search, training):
    p = plan(config, search=search, training=training)
    program = p.program
    # communication: every redistribution plus manual regions' collectives (Program.op_collectives)
    recomputed = sum(c.compute_time_s for c in program.computes()) + sum(r.time_s for r in program.redistributions()) \
        + sum(c.time_s for c in program.op_collectives())
    assert p.totals.objective == pytest.approx(recomputed, rel=1e-12, abs=1e-18)
    assert p.totals.objective == pytest.approx(p.decision.model.problem.objective(p.decision.choice), rel=1e-15)
    assert p.totals.comm_bytes_per_device == sum(r.bytes_per_device for r in program.redistributions()) \
        + sum(c.bytes_per_device for c in program.op_collectives())
    assert [r.plan for r in p.redistributions] == [r.plan for r in program.redistributions() if r.steps]
    assert all(r.phase == "forward" for r in program.redistributions()) or training
