"""Why a pipelined plan chose its knobs: each alternative's claim checked by pricing every partition of its
configuration (the brute force of tests/stages/brute_force.py, one configuration at a time)."""

import itertools
import math
from dataclasses import replace

import pytest

from costmodels import load_cluster
from graphs.pipeline_spec import PipelineSpec
from graphs.yaml_format import load_model_text
from planner.errors import PlanningError
from planner.stages.cost import evaluate
from planner.stages.explain import configuration_text, knob_reasons, knob_value
from planner.stages.search import KNOBS, search_pipeline
from planner.stages.layers import layers_of
from tests.stages.brute_force import brute_force
from tests.stages.test_search import GPT, profiles_of, synthetic


def partitions(config, costs):
    """Every partition of ``config``'s layers into its stages, priced: ``[(step time, memory)]``."""
    L, S = len(costs), config.stages
    out = []
    for cuts in itertools.combinations(range(1, L), S - 1):
        ev = evaluate(replace(config, bounds=(0, *cuts, L)), costs, CLUSTER)
        out.append((ev.step_time_s, ev.peak_memory_bytes))
    return out


CLUSTER = replace(load_cluster("a100"), devices_per_node=2)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("budget", [1e18, 4e7, 2e7])  # all fit; some do; only pipelines with recomputation or none
def test_every_alternative_lost_as_it_says(seed, budget):
    graph = load_model_text(GPT.format(layers=3, batch=4))
    profiler = synthetic(graph, seed)
    profiles = profiles_of(graph, profiler, 4, 2)
    try:
        got = search_pipeline(graph, 4, CLUSTER, PipelineSpec(), budget, profiler=profiler)
    except PlanningError:  # nothing fits (seed 1 at 2e7): then no configuration and partition fits in brute force
        assert brute_force(profiles, len(layers_of(graph)), 4, 4, 2, CLUSTER, budget) == (math.inf, None)
        return
    step = got.evaluation.step_time_s
    reasons = knob_reasons(got)
    assert [r.knob for r in reasons] == list(KNOBS)
    for r in reasons:
        assert r.chosen == knob_value(got.config, r.knob)
        assert (r.fixed is None) == bool(r.alternatives)
        for a in r.alternatives:
            assert a.value != r.chosen
            if a.outcome == "slower":  # a priced configuration that fits: its own numbers
                config, ev = got.runners_up[r.knob]
                assert (a.step_time_s, a.memory_bytes_per_device) == (ev.step_time_s, ev.peak_memory_bytes)
                assert a.step_time_s >= step and a.memory_bytes_per_device <= budget
                assert a.slower_by == pytest.approx(a.step_time_s / step - 1)
                continue
            priced = _priced(got, a)
            costs = profiles[(priced.stage_axes, priced.microbatch)]
            every = partitions(priced, costs)
            fitting = [t for t, mem in every if mem <= budget]
            if a.outcome == "no_faster":
                # no partition of it that fits is faster than the bound, and the bound is no less than the winner
                assert a.step_time_bound_s >= step
                assert all(t >= a.step_time_bound_s * (1 - 1e-12) for t in fitting)
            else:
                assert a.outcome == "does_not_fit"
                # nothing of it that fits beats the winner (the winner is the optimum), and the memory it names is
                # one of its partitions', over the budget by what it says
                assert all(t >= step * (1 - 1e-12) for t in fitting)
                if a.memory_bytes_per_device is not None:
                    assert a.memory_bytes_per_device > budget
                    assert a.over_budget_bytes == math.ceil(a.memory_bytes_per_device - budget)
                    assert a.memory_bytes_per_device in {mem for _, mem in every}


def _priced(got, alternative):
    """The alternative's configuration, found by its text among those the search searched or skipped."""
    found = [c for c, *_ in got.lost] + [c for c, _ in got.unsearched.values()]
    return next(c for c in found if configuration_text(c) == alternative.configuration)


def test_a_pinned_knob_says_it_is_pinned():
    graph = load_model_text(GPT.format(layers=4, batch=8))
    spec = PipelineSpec(stages=2, schedule="1f1b", recompute="selective")
    got = search_pipeline(graph, 8, load_cluster("a100"), spec, profiler=synthetic(graph, 1))
    by_knob = {r.knob: r for r in knob_reasons(got, frozenset(spec.pinned()))}
    for knob, key in (("pp", "stages"), ("schedule", "schedule"), ("recompute", "recompute")):
        assert by_knob[knob].alternatives == () and by_knob[knob].fixed == f"pinned by pipeline.{key}"
    assert by_knob["pp"].chosen == "2" and by_knob["recompute"].chosen == "selective"


def test_a_tight_budget_names_the_faster_configuration_that_does_not_fit():
    # seed 0's layers at a budget only recomputation fits: the configuration without it is priced first (its
    # bound is the least) and loses on memory
    graph = load_model_text(GPT.format(layers=2, batch=4))
    got = search_pipeline(graph, 4, CLUSTER, PipelineSpec(), 2e7, profiler=synthetic(graph, 0))
    recompute = next(r for r in knob_reasons(got) if r.knob == "recompute")
    assert recompute.chosen != "none"
    unfit = [a for a in recompute.alternatives if a.outcome == "does_not_fit"]
    assert unfit and unfit[0].value == "none" and "does not fit" in unfit[0].reason


def test_the_cases_above_meet_every_outcome():
    # so that each branch of the checks above runs: at the tightest budget the seeds give configurations that are
    # slower, that do not fit (with and without a partition priced) and that no partition of could beat the winner
    seen = set()
    for seed in (0, 2, 3, 5):
        graph = load_model_text(GPT.format(layers=3, batch=4))
        got = search_pipeline(graph, 4, CLUSTER, PipelineSpec(), 2e7, profiler=synthetic(graph, seed))
        seen |= {(a.outcome, a.memory_bytes_per_device is None) for r in knob_reasons(got) for a in r.alternatives}
    assert seen == {("slower", False), ("no_faster", True), ("does_not_fit", False), ("does_not_fit", True)}
