"""Every search is one module behind one interface, picked by name: search(request) -> Decision."""

import inspect
from pathlib import Path

import pytest

from costmodels import load_cluster
from graphs import load_model
from planner.errors import PlanningError
from planner.model.decision import Decision
from planner.model.options import Options
from planner.model.request import Request
from planner.searches import SEARCHES, search_named

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "ffn.yaml"


@pytest.mark.parametrize("name", SEARCHES)
def test_each_search_takes_a_request_and_gives_a_decision(name):
    search = search_named(name)
    assert list(inspect.signature(search).parameters) == ["request"]
    graph = load_model(str(CONFIG))
    decision = search(Request(graph, graph.mesh, load_cluster(None), Options()))
    assert isinstance(decision, Decision)
    assert len(decision.choice) == len(decision.model.nodes)
    assert decision.search == name


def test_an_unknown_search_is_refused_with_the_names():
    with pytest.raises(PlanningError, match="unknown search 'dfs'; use one of auto, bfs, ilp, explicit, propagate"):
        search_named("dfs")


def test_the_api_calls_the_search_by_name_and_nothing_else():
    """planner.api calls no search module itself: it asks planner.searches for one by name (it reads only the
    names of the rule-based passes, to refuse a wrong one before loading the model)."""
    import planner.api

    source = inspect.getsource(planner.api)
    for module in ("searches.bfs", "searches.ilp", "searches.explicit", "searches.phased", "propagate.plan"):
        assert module not in source
