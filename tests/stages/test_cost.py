"""The cost model of a pipeline configuration: ZeRO's gradient buckets in the step time and the memory per device,
derived by hand from layers whose costs are given."""

from dataclasses import replace

import pytest

from costmodels import load_cluster
from planner.stages.cost import Config, bucket_time_s, bucketed, evaluate, layer_shard_bytes, links
from planner.stages.profile import LayerCost

CLUSTER = load_cluster("a100")


def layer(name: str, elements: int, backward_peak: int, gradient_sync_s: float = 0.0) -> LayerCost:
    """A layer of ``elements`` f32 parameters, 1 ms forward and 2 ms backward, nothing stashed, holding 100 bytes at
    its forward's worst and ``backward_peak`` at its backward's."""
    policies = ("none", "selective", "full")
    return LayerCost(name, 1e-3, 2e-3, gradient_sync_s, tuple((p, 0.0) for p in policies),
                     tuple((p, 0) for p in policies), elements, 4 * elements, 64, 100, 0,
                     tuple((p, 100) for p in policies), tuple((p, backward_peak) for p in policies))


def one_stage(zero: int, dp: int, n_layers: int) -> Config:
    """One device group running every layer, one microbatch (its peak is its forward's or its backward's)."""
    return Config(1, dp, (("tp", 1),), 1, 1, "gpipe", 1, "none", zero, (0, n_layers))


def ring_s(p: int, shard: int, link) -> float:
    """A ring ReduceScatter's or AllGather's time: its call overhead, p - 1 steps of latency, p - 1 shards received."""
    return link.overhead_s + (p - 1) * link.latency_s + (p - 1) * shard / link.bandwidth_bytes_per_s


def test_only_zero_2_and_3_over_replicas_reduce_in_buckets():
    assert [bucketed(z, 2) for z in range(4)] == [False, False, True, True]
    assert not any(bucketed(z, 1) for z in range(4))


def test_a_layers_shard_pads_its_elements_to_the_replicas():
    # 10 f32 elements over 4 replicas: padded to 12, 3 elements a shard
    assert layer_shard_bytes(layer("a", 10, 0), 4) == 3 * 4
    assert layer_shard_bytes(layer("none", 0, 0), 4) == 0


def test_zero_2_holds_its_shards_and_the_bucket_of_the_layer_running():
    # four alike layers of 100 f32 (400 B) over dp 2: whole accumulators 1,600 B; ZeRO 2's shards 800 B and one
    # 400 B bucket at a time: 400 + 800 < 1,600, so ZeRO 2 holds less
    costs = tuple(layer(f"l{i}", 100, peak) for i, peak in enumerate((300, 1000, 200, 500)))
    zero_1 = evaluate(one_stage(1, 2, 4), costs, CLUSTER).memory_bytes_per_device[0]
    zero_2 = evaluate(one_stage(2, 2, 4), costs, CLUSTER).memory_bytes_per_device[0]
    params, adam = 1600, 8 * 400 // 2
    # ZeRO 1: parameters, whole gradients, Adam's moments of half the elements, the worst backward moment (1,000 B)
    assert zero_1 == params + 1600 + adam + 1000
    # ZeRO 2: the same, half the gradients, and at the worst backward moment that layer's bucket with it
    assert zero_2 == params + 800 + adam + 1000 + 400
    assert zero_2 < zero_1


def test_zero_2_holds_more_than_zero_1_on_a_stage_of_one_layer():
    # one layer of 400 f32 (1,600 B) over dp 2: its 800 B shard and its 1,600 B bucket during its backward
    costs = (layer("only", 400, 1000),)
    zero_1 = evaluate(one_stage(1, 2, 1), costs, CLUSTER).memory_bytes_per_device[0]
    zero_2 = evaluate(one_stage(2, 2, 1), costs, CLUSTER).memory_bytes_per_device[0]
    # the worst moment is the backward (1,000 B) in both: ZeRO 2's shard and bucket against ZeRO 1's accumulator
    assert zero_2 - zero_1 == (800 + 1600) - 1600


def test_zero_3_shards_each_layer_and_holds_the_stage_gathered_and_one_bucket():
    # two layers of 10 and 7 f32 over dp 4: shards of 3 and 2 elements (padded to 12 and 8)
    costs = (layer("a", 10, 100), layer("b", 7, 200))
    ev = evaluate(one_stage(3, 4, 2), costs, CLUSTER)
    shards = (3 + 2) * 4
    # its parameter and gradient shards, Adam's moments of 5 elements; in the backward of b (the worst: 200 B held),
    # the stage's 68 B of parameters gathered whole and b's 28 B bucket
    assert ev.memory_bytes_per_device == (shards + shards + 8 * 5 + 200 + 68 + 28,)


@pytest.mark.parametrize("zero", [2, 3])
def test_each_layers_bucket_lengthens_the_backward_by_its_reductions(zero):
    # layers of 1,000 and 3,000 f32 (the first also reduced inside the stage mesh, 5 us) and one without parameters,
    # over dp 4
    costs = (layer("a", 1000, 0, gradient_sync_s=5e-6), layer("b", 3000, 0), layer("loss", 0, 0))
    config = one_stage(zero, 4, 3)
    link = links(config, CLUSTER)[1]
    buckets = 5e-6 + ring_s(4, 1000, link) + ring_s(4, 3000, link)
    assert bucket_time_s(costs[0], 4, link) + bucket_time_s(costs[1], 4, link) == pytest.approx(buckets)
    assert bucket_time_s(costs[2], 4, link) == 0.0
    base = evaluate(replace(config, zero=1), costs, CLUSTER)
    ev = evaluate(config, costs, CLUSTER)
    gathers = ring_s(4, 4000, link) if zero == 3 else 0.0  # ZeRO 3's gather of the stage before the backward
    assert ev.backward_s[0] - base.backward_s[0] == pytest.approx(buckets + gathers)
    # once a step, ZeRO 1 reduces inside the stage mesh, reduce-scatters and all-gathers the 4,000 elements' shards;
    # ZeRO 2 only all-gathers (its buckets were reduced during the backward), ZeRO 3 neither; Adam's update is alike
    gather = ring_s(4, 4000, link)
    assert base.sync_s[0] - ev.sync_s[0] == pytest.approx(5e-6 + gather + (gather if zero == 3 else 0.0))
