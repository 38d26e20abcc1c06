"""The pipeline search: exact against brute force over every configuration and partition, pins held, the
memory budget respected, and impossible requests refused with the rule and the fix."""

import itertools
import random
from dataclasses import replace

import pytest

from costmodels import load_cluster
from graphs.pipeline_spec import PipelineSpec
from graphs.yaml_format import load_model_text
from planner.errors import PlanningError
from planner.stages.layers import layers_of
from planner.stages.profile import LayerCost
from planner.stages.search import least_share, search_pipeline
from tests.stages.brute_force import brute_force

GPT = """name: tiny_gpt
mesh: {{dp: 2, tp: 2}}
model: {{builder: gpt, layers: {layers}, hidden: 32, heads: 4, seq: 8, batch: {batch}, vocab: 64}}
"""


def synthetic(graph, seed):
    """A profiler of made-up but consistent layer costs: larger microbatches and smaller stage meshes cost more."""
    names = [layer.name for layer in layers_of(graph)]

    def profiler(g, mesh, cluster):
        size = next(t.shape[0] for t in g.tensors.values() if t.kind == "input")
        tp = mesh.size
        rng = random.Random(seed * 1000 + len(names))
        out = []
        for name in names:
            f = rng.uniform(1e-4, 5e-4) * size / tp + 2e-5
            b = 2 * f * rng.uniform(0.8, 1.2)
            stash = int(rng.uniform(1e6, 4e6) * size / tp)
            elems = int(rng.uniform(1e5, 1e6) / tp)
            out.append(LayerCost(name, f, b, rng.uniform(0, 1e-5), (("none", 0.0), ("selective", f / 4), ("full", f)),
                                 (("none", stash), ("selective", stash // 2), ("full", stash // 8)),
                                 elems, 4 * elems, int(rng.uniform(1e5, 1e6) * size / tp), stash // 4, 0))
        return tuple(out)
    return profiler


def profiles_of(graph, profiler, devices, per_node):
    from planner.stages.layers import microbatched
    from planner.ir.mesh import Mesh

    batch = graph.tensor("tokens").shape[0]
    out = {}
    for tp in [d for d in range(1, per_node + 1) if per_node % d == 0]:
        for size in [d for d in range(1, batch + 1) if batch % d == 0]:
            out[((("tp", tp),), size)] = profiler(microbatched(graph, size), Mesh.from_sizes("stage", {"tp": tp}), None)
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("budget", [1e18, 4e7, 2e7])  # all fit; some do (seed 3); only pipelines with recomputation or none
def test_the_search_finds_brute_forces_step_time(seed, budget):
    assert_brute_forces_step_time(GPT.format(layers=2, batch=4), 4, seed, budget)


def assert_brute_forces_step_time(text: str, devices: int, seed: int, budget: float) -> None:
    """The search on ``devices`` devices (2 a node) with :func:`synthetic` layer costs finds brute force's step time,
    finishing every partition search, or refuses where nothing fits."""
    graph = load_model_text(text)
    cluster = replace(load_cluster("a100"), devices_per_node=2)
    profiler = synthetic(graph, seed)
    batch = graph.tensor("tokens").shape[0]
    want = brute_force(profiles_of(graph, profiler, devices, 2), len(layers_of(graph)), devices, batch, 2, cluster,
                       budget)
    if want[1] is None:
        with pytest.raises(PlanningError, match="no pipeline configuration"):
            search_pipeline(graph, devices, cluster, PipelineSpec(), budget, profiler=profiler)
        return
    got = search_pipeline(graph, devices, cluster, PipelineSpec(), budget, profiler=profiler)
    assert got.exact
    assert got.evaluation.step_time_s == pytest.approx(want[0], rel=1e-12)
    assert got.evaluation.peak_memory_bytes <= budget


def test_pins_are_held_and_each_runner_up_chose_otherwise():
    graph = load_model_text(GPT.format(layers=4, batch=8))
    cluster = load_cluster("a100")
    spec = PipelineSpec(stages=2, schedule="1f1b", recompute="selective")
    got = search_pipeline(graph, 8, cluster, spec, profiler=synthetic(graph, 1))
    c = got.config
    assert (c.pp, c.schedule, c.recompute) == (2, "1f1b", "selective")
    for knob, (config, ev) in got.runners_up.items():
        assert ev.step_time_s >= got.evaluation.step_time_s
        assert knob not in ("pp", "schedule", "recompute")  # pinned: nothing chose otherwise


def test_the_real_layer_prices_give_a_plan_that_fits():
    graph = load_model_text(GPT.format(layers=2, batch=4))
    got = search_pipeline(graph, 4, load_cluster("a100"), PipelineSpec(stages=2, microbatches=2))
    assert got.config.pp == 2 and got.config.microbatches == 2
    assert [len(got.config.stage_layers(k)) > 0 for k in range(got.config.stages)] == [True] * got.config.stages
    assert got.evaluation.step_time_s > 0 and got.evaluation.peak_memory_bytes > 0


@pytest.mark.parametrize("spec,devices,match", [
    (PipelineSpec(stages=9), 9, "need at least 9 layers"),
    (PipelineSpec(stages=3), 8, "does not divide the 8 devices"),
    (PipelineSpec(microbatches=3), 4, "no pipeline configuration"),
])
def test_impossible_pins_name_the_rule_and_the_fix(spec, devices, match):
    graph = load_model_text(GPT.format(layers=2, batch=4))
    with pytest.raises(PlanningError, match=match):
        search_pipeline(graph, devices, load_cluster("a100"), spec, profiler=synthetic(graph, 0))


def test_a_budget_nothing_fits_says_the_smallest_need():
    graph = load_model_text(GPT.format(layers=2, batch=4))
    with pytest.raises(PlanningError, match="the smallest needs at least"):
        search_pipeline(graph, 4, load_cluster("a100"), PipelineSpec(), memory_budget=1000,
                        profiler=synthetic(graph, 0))


def uneven(graph, seed):
    """A profiler of layers far apart: some with almost no backward or parameters, others whose gradient reductions
    take as long as a stage's work (what an embedding beside transformer blocks looks like, exaggerated)."""
    names = [layer.name for layer in layers_of(graph)]

    def profiler(g, mesh, cluster):
        size = next(t.shape[0] for t in g.tensors.values() if t.kind == "input")
        rng = random.Random(seed * 1000 + mesh.size * 10 + size)
        out = []
        for name in names:
            f = rng.choice([rng.uniform(1e-4, 1e-3), rng.uniform(1e-6, 1e-5)]) * size / mesh.size
            b = rng.choice([2 * f, f / 100])
            elems = rng.choice([10, int(rng.uniform(1e6, 3e8) / mesh.size)])
            stash = int(rng.uniform(1e6, 1e8) * size / mesh.size)
            out.append(LayerCost(name, f, b, rng.choice([0.0, rng.uniform(0, 1e-2)]),
                                 (("none", 0.0), ("selective", f / 4), ("full", f)),
                                 (("none", stash), ("selective", stash // 2), ("full", stash // 8)),
                                 elems, 2 * elems, int(rng.uniform(1e5, 1e8) * size / mesh.size), stash // 4, 0))
        return tuple(out)
    return profiler


@pytest.mark.parametrize("seed", range(12))
def test_the_search_finds_brute_forces_step_time_when_gradient_reductions_dominate(seed):
    # a device reduces its gradients after its last backward while the earlier stages still run theirs: a bound
    # that adds both overestimates, and brute force (every configuration, every partition) shows what it cut
    graph = load_model_text(GPT.format(layers=3, batch=4))
    cluster = replace(load_cluster("a100"), devices_per_node=2)
    profiler = uneven(graph, seed)
    want = brute_force(profiles_of(graph, profiler, 4, 2), len(layers_of(graph)), 4, 4, 2, cluster, 1e18)
    got = search_pipeline(graph, 4, cluster, PipelineSpec(), profiler=profiler)
    assert got.evaluation.step_time_s == pytest.approx(want[0], rel=1e-12)


def test_least_share_is_the_smallest_whole_layer_sum_at_least_the_average():
    # ten alike layers of 1 and two of 0.5 over 3 parts: the average is 11/3; the sums of whole layers at or above
    # it are 4 (four alike), 4.0 (three and both halves) ...: the least is 4
    assert least_share([0.5] + [1.0] * 10 + [0.5], 3) == pytest.approx(4.0, rel=1e-8)
    # 7 alike layers over 7 parts: each part is one layer
    assert least_share([2.0] * 7, 7) == pytest.approx(2.0, rel=1e-8)
    # never above the largest part of a real split (here every split of [3, 1, 1, 1] into 2 has a part of 3 or more)
    assert least_share([3.0, 1.0, 1.0, 1.0], 2) <= 3.0


def test_least_share_bounds_every_contiguous_split_by_brute_force():
    rng = random.Random(7)
    for _ in range(40):
        values = [rng.choice([0.5, 1.0, 1.5, 2.25]) for _ in range(rng.randint(2, 9))]
        parts = rng.randint(2, len(values))
        # the least largest part over every split into ``parts`` contiguous non-empty parts, by enumeration
        best = min(max(sum(values[a:b]) for a, b in zip((0,) + cut, cut + (len(values),)))
                   for cut in itertools.combinations(range(1, len(values)), parts - 1))
        share = least_share(values, parts)
        assert share <= best * (1 + 1e-12)
        assert share >= sum(values) / parts * (1 - 1e-8)


def test_a_search_stopped_at_its_budget_polishes_its_partition_to_a_local_optimum(monkeypatch):
    import planner.stages.search as search_module
    from planner.stages.cost import Config, evaluate, memory_bytes, stage_sums

    graph = load_model_text(GPT.format(layers=8, batch=8))
    cluster = replace(load_cluster("a100"), devices_per_node=2)
    profiler = synthetic(graph, 5)
    spec = PipelineSpec(stages=4, microbatches=8, schedule="interleaved", virtual_stages=2, recompute="none", zero=0)
    monkeypatch.setattr(search_module, "MAX_PARTITION_NODES", 12)  # stops right after its first partitions
    got = search_pipeline(graph, 8, cluster, spec, profiler=profiler)
    assert not got.exact
    config, costs = got.config, got.costs
    # no partition one layer moved from one stage to another (every boundary between them shifted) is shorter
    bounds = config.bounds
    for k in range(1, len(bounds) - 1):
        for j in range(k, len(bounds) - 1):
            for d in (-1, 1):
                moved = bounds[:k] + tuple(x + d for x in bounds[k:j + 1]) + bounds[j + 1:]
                if all(a < b for a, b in zip(moved, moved[1:])):
                    other = Config(**{**config.__dict__, "bounds": moved})
                    if max(memory_bytes(other, costs, stage_sums(costs, "none"))) <= got.budget_bytes:
                        assert evaluate(other, costs, cluster).step_time_s >= got.evaluation.step_time_s * (1 - 1e-12)
    # here the unpolished search keeps a longer one (its 12 nodes reach only the first partitions)
    monkeypatch.setattr(search_module, "MAX_POLISH_ROUNDS", 0)
    unpolished = search_pipeline(graph, 8, cluster, spec, profiler=profiler)
    assert unpolished.evaluation.step_time_s > got.evaluation.step_time_s


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("budget", [1e18, 3e7, 2e7])  # interleaved pipelines win under some (seed 1 at 3e7)
def test_the_search_finds_brute_forces_step_time_on_eight_devices_with_interleaving(seed, budget):
    assert_brute_forces_step_time(GPT.format(layers=6, batch=8), 8, seed, budget)
