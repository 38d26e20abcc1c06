"""Per-op compute in the cost tables: the roofline of each strategy's local instance."""

from __future__ import annotations

import math

import pytest

from costmodels import Cluster, Link, Roofline, load_cluster, op_time_s
from graphs import GraphBuilder
from planner.model.build import build_model
from planner.model.nodes import OpNode
from planner.model.options import Options
from planner.model.phases import lower_bound_s
from planner.model.tables import node_costs, op_compute_time_s

M, K, N = 64, 128, 256


def _mlp():
    b = GraphBuilder("mlp", {"x": 2, "y": 4})
    b.tensor("a", [M, K], "bf16")
    b.param("w", [K, N], "bf16")
    b.param("bias", [N], "bf16")
    h = b.op("matmul", ["a", "w"], output="h", name="mm")
    h = b.op("add", [h, "bias"], output="hb", name="addb")
    b.op("relu", [h], output="r", name="act")
    return b.build()


def _nodes(m):
    return {n.name: n for n in m.nodes if isinstance(n, OpNode)}


def _local(shape, splits):
    return [-(-d // s) for d, s in zip(shape, splits)]


@pytest.mark.parametrize("preset", ["nvlink-node", "tpu-v4", "default"])
def test_every_matmul_strategy_is_priced_on_its_local_shapes(preset):
    graph = _mlp()
    m = build_model(graph, graph.mesh, load_cluster(preset))
    node = _nodes(m)["mm"]
    for s in node.strategies:
        # splits: MindSpore's split counts per operand dimension, (m, k) and (k, n); the result is m x n
        (sm, sk), (_, sn) = s.splits
        a, w, h = _local((M, K), (sm, sk)), _local((K, N), (sk, sn)), _local((M, N), (sm, sn))
        nbytes = 2 * (math.prod(a) + math.prod(w) + math.prod(h))  # bf16: 2 bytes, each element once
        want = op_time_s(2 * M * K * N / (sm * sk * sn), nbytes, "bf16", True, m.cluster)
        assert op_compute_time_s(graph, graph.op("mm"), s, m.cluster, False, m.needs_grad) == pytest.approx(want)


def test_an_elementwise_op_split_eight_ways_moves_an_eighth_of_the_bytes():
    graph = _mlp()
    cluster = load_cluster("nvlink-node")
    m = build_model(graph, graph.mesh, cluster)
    node = _nodes(m)["act"]
    whole = M * N * 2 * 2  # relu reads and writes every bf16 element once
    for s in node.strategies:
        parts = s.work_divisor
        want = max(M * N / parts / 67e12, whole / parts / 3.35e12) + 2e-6  # the preset's vector rate and HBM
        assert op_compute_time_s(graph, graph.op("act"), s, cluster, False, m.needs_grad) == pytest.approx(want)


def test_training_adds_one_forward_per_needed_operand_gradient():
    graph = _mlp()
    m = build_model(graph, graph.mesh, load_cluster("nvlink-node"), Options(training=True))
    op = graph.op("mm")
    grads = sum(1 for t in op.inputs if m.needs_grad.get(t, False))
    assert grads == 1  # the weight's; the input "a" needs none
    for s in _nodes(m)["mm"].strategies:
        forward = op_compute_time_s(graph, op, s, m.cluster, False, m.needs_grad)
        assert op_compute_time_s(graph, op, s, m.cluster, True, m.needs_grad) == pytest.approx(2 * forward)


def test_the_first_models_roofline_prices_flops_at_the_peak():
    graph = _mlp()
    cluster = Cluster("first", 100e12, 2**34, 8, Link(1e11, 1e-6), Link(1e11, 1e-6))  # Roofline()
    m = build_model(graph, graph.mesh, cluster)
    for name, node in _nodes(m).items():
        for s in node.strategies:
            want = graph.op_flops(name) / s.work_divisor / 100e12
            assert op_compute_time_s(graph, graph.op(name), s, cluster, False, m.needs_grad) == pytest.approx(want)


def test_node_costs_hold_the_same_compute_as_op_compute_time_s():
    graph = _mlp()
    # links so fast and free that a node's cost is its compute alone
    roofline = load_cluster("nvlink-node").roofline
    cluster = Cluster("fast", 989e12, 2**34, 8, Link(1e30, 0.0), Link(1e30, 0.0), roofline=roofline)
    m = build_model(graph, graph.mesh, cluster)
    i = m.op_index["act"]
    costs = node_costs(m, i).cost
    for c, s in enumerate(m.nodes[i].strategies):
        assert costs[c] == pytest.approx(op_compute_time_s(graph, graph.op("act"), s, cluster, False, m.needs_grad))


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("preset", ["nvlink-node", "tpu-v4", "a100-node"])
def test_the_phase_lower_bound_is_below_every_ops_cheapest_strategy(preset, training):
    graph = _mlp()
    m = build_model(graph, graph.mesh, load_cluster(preset), Options(training=training))
    rules = {n.name: n.rule for n in m.nodes if isinstance(n, OpNode)}
    bound = lower_bound_s(graph, graph.mesh, m.cluster, training, m.needs_grad, rules)
    cheapest = sum(min(op_compute_time_s(graph, graph.op(name), s, m.cluster, training, m.needs_grad)
                       for s in node.strategies) for name, node in _nodes(m).items())
    assert 0 < bound <= cheapest


def _two_layers():
    """Two identical matmul + relu layers and a differently shaped third (the memo must tell it apart)."""
    b = GraphBuilder("layers", {"x": 2, "y": 4})
    b.tensor("a", [M, K], "bf16")
    b.param("w0", [K, K], "bf16")
    b.param("w1", [K, K], "bf16")
    b.param("w2", [K, N], "bf16")
    h = "a"
    for i in range(3):
        h = b.op("matmul", [h, f"w{i}"], output=f"h{i}", name=f"mm{i}")
        h = b.op("relu", [h], output=f"r{i}", name=f"act{i}")
    return b.build()


@pytest.mark.parametrize("training", [False, True])
def test_node_costs_shared_by_identical_layers_equal_those_priced_alone(training):
    graph = _two_layers()
    m = build_model(graph, graph.mesh, load_cluster("nvlink-node"), Options(training=training))
    memo: dict = {}
    for i in range(len(m.nodes)):
        shared, alone = node_costs(m, i, memo), node_costs(m, i)
        assert shared.cost.tolist() == alone.cost.tolist()  # the same floats, bit for bit
        assert shared.memory.tolist() == alone.memory.tolist()
        assert shared.labels == alone.labels
    # one entry per distinct op signature: mm0/mm1 (K x K weights) and act0/act1 share theirs;
    # mm2 (K x N) and act2 (an M x N result) have their own; with training mm0 has its own too,
    # as its first operand "a" needs no gradient (so its backward runs no collectives of its own)
    assert len(memo) == (5 if training else 4)
