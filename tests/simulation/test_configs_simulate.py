"""Every config simulates exactly under bfs and ilp, and the simulator measures the predicted bytes."""

from pathlib import Path

import pytest

from planner.api import plan
from planner.simulation.run import simulate

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("search", ["bfs", "ilp"])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_config_simulates_and_bytes_match(config, search):
    p = plan(config, search=search)
    r = simulate(p, seed=1)
    assert r.ok, r.outputs
    assert r.measured_comm_bytes_per_device == r.predicted_comm_bytes_per_device == p.totals.comm_bytes_per_device
    assert r.devices == 8
