"""A Plan is a value: frozen, typed, a one-line repr, the CLI's table as its str, accessors for what callers read."""

import dataclasses
import typing
from pathlib import Path

import numpy as np
import pytest

from costmodels import Cluster
from costmodels.units import format_seconds
from graphs import ComputationGraph
from planner.api import plan
from planner.cli.main import main
from planner.enumeration import Strategy
from planner.model.nodes import SourceNode
from planner.model.decision import SolverReport
from planner.model.op_collectives import OpCollective
from planner.model.phases import SearchSpace
from planner.model.decision import Propagation
from planner.redistribution.engine import reshard_for_planning
from planner.report import Candidate, EdgeCosts, OpDecision, Plan, TensorDecision, Totals

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
FFN = CONFIGS / "ffn.yaml"
GPT2 = CONFIGS / "gpt2_small.yaml"

# the names report.py imports for annotations only
ANNOTATION_NAMES = {"Cluster": Cluster, "ComputationGraph": ComputationGraph, "Strategy": Strategy,
                    "SolverReport": SolverReport, "OpCollective": OpCollective, "SearchSpace": SearchSpace,
                    "Propagation": Propagation}


@pytest.fixture(scope="module")
def ffn():
    return plan(FFN)


def test_a_plan_is_frozen_and_has_no_room_for_attributes_added_later(ffn):
    with pytest.raises(dataclasses.FrozenInstanceError):
        ffn.model = "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        ffn.ops = ()
    # nothing can be cached on it after construction (a frozen slotted dataclass refuses a new name with
    # FrozenInstanceError from Python 3.12, TypeError before)
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        ffn.cached_index = {}
    assert not hasattr(ffn, "__dict__")
    with pytest.raises(TypeError):
        ffn.tensors["x"] = None  # its mapping of tensors is read-only too


@pytest.mark.parametrize("cls", [Plan, TensorDecision, OpDecision, Totals, Candidate, EdgeCosts])
def test_every_field_of_a_plan_and_its_parts_has_a_real_type(cls):
    hints = typing.get_type_hints(cls, localns=ANNOTATION_NAMES)  # raises if a name does not resolve
    assert set(hints) == {f.name for f in dataclasses.fields(cls)}
    for name, hint in hints.items():
        assert hint is not object and hint is not typing.Any, f"{cls.__name__}.{name} is typed {hint}"
        assert object not in typing.get_args(hint) and typing.Any not in typing.get_args(hint), (
            f"{cls.__name__}.{name} is typed {hint}")


@pytest.mark.parametrize("path", [FFN, GPT2])
def test_repr_is_one_line_under_200_characters(path):
    p = plan(path)
    text = repr(p)
    assert "\n" not in text and len(text) < 200
    assert text.startswith(f"Plan(model={p.model!r}, search='auto', ") and f"ops={len(p.ops)}" in text


def test_repr_names_the_mesh_the_size_and_the_costs():
    p = plan(FFN, search="bfs")
    assert repr(p) == ("Plan(model='ffn', search='bfs', mesh=<[\"d\"=8]>, ops=5, comm=6,144 B/device, "
                       f"objective={format_seconds(p.totals.objective)})")


@pytest.mark.parametrize("config, flags, options", [
    ("ffn", [], {}),
    ("gpt2_small", [], {}),
    ("dp_training_step", ["--training"], {"training": True}),  # manual regions' collectives, gradient reductions
    ("moe", ["--search", "explicit"], {"search": "explicit"}),  # every tensor with its type
    ("conv_net", ["--search", "ilp"], {"search": "ilp"}),  # the solver's line
])
def test_print_plan_writes_what_shardplan_plan_prints(config, flags, options, capsys, monkeypatch):
    import planner.api

    made = []  # the plan the command printed (a solver's time differs from run to run)
    monkeypatch.setattr(planner.api, "plan", lambda *a, **k: made.append(plan(*a, **k)) or made[-1])
    assert main(["plan", str(CONFIGS / f"{config}.yaml"), *flags]) == 0
    cli = capsys.readouterr().out
    (p,) = made
    assert (p.search, p.training) == (options.get("search", "auto"), options.get("training", False))
    assert p.summary() == cli == str(p) + "\n"
    print(p)
    assert capsys.readouterr().out == cli


def test_the_accessors_give_the_planned_graph_mesh_cluster_and_decision(ffn):
    graph = ffn.graph
    assert isinstance(graph, ComputationGraph) and graph.name == ffn.model == "ffn"
    assert [o.name for o in ffn.ops] == [op.name for op in graph.ops]
    assert ffn.mesh == graph.mesh and ffn.mesh.size == 8
    assert isinstance(ffn.cluster, Cluster)
    # the decision holds one choice per node of the planning model; the plan's strategies are those choices
    m = ffn.decision.model
    assert m.graph is graph and m.cluster is ffn.cluster and len(ffn.decision.choice) == len(m.nodes)
    for o in ffn.ops:
        assert o.strategy is m.strategy(o.name, ffn.decision.choice)


def test_the_mesh_is_the_one_planned_on_when_another_is_given():
    p = plan(FFN, mesh="x=2,y=4")
    assert [(a.name, a.size) for a in p.mesh.axes] == [("x", 2), ("y", 4)]
    assert p.graph.name == "ffn" and p.decision.model.mesh == p.mesh


def _forward_seconds(m, link, v) -> list[list[float]]:
    """Seconds to move ``link``'s tensor from each producer candidate to what each candidate of reader
    ``v`` reads, derived from first principles: one redistribution (the engine's plan) from the producer's
    result (or a source's stored layout) to each distinct layout the reader's operands take it in."""
    spec = m.graph.tensor(link.tensor)
    u = m.nodes[link.producer]
    sources = u.layouts if isinstance(u, SourceNode) else [s.result for s in u.strategies]
    ks = link.operands[link.readers.index(v)]
    table = []
    for src in sources:
        row = []
        for s in m.nodes[v].strategies:
            layouts = dict.fromkeys(s.operands[k] for k in ks)
            row.append(sum(reshard_for_planning(spec.shape, spec.dtype, src, lay, m.cluster, m.reshard_pieces).time_s
                           for lay in layouts))
        table.append(row)
    return table


SHARED_INPUT = """
name: shared
mesh: {dp: 2, tp: 2}
tensors:
  x: {shape: [32, 32], kind: input}
  m: {shape: [32, 32], kind: input}
  w: {shape: [32, 32], kind: param}
ops:
  - {name: mm, op: matmul, inputs: [x, w], output: h}
  - {name: a1, op: add, inputs: [h, m], output: y1}
  - {name: a2, op: add, inputs: [y1, m], output: y2}
outputs: [y2]
"""


@pytest.mark.parametrize("model, training", [(FFN, False), (FFN, True), (SHARED_INPUT, False)])
def test_edge_costs_are_the_forward_redistributions_priced_one_by_one(model, training):
    p = plan(model, training=training)
    m = p.decision.model
    seen = set()
    for link in m.flows:
        if link.kind not in ("data", "fanout") or (training and link.kind == "fanout"):
            continue  # a training fanout also prices the transposes of its reads
        for v in link.readers:
            t = p.edge_costs(link.tensor, m.nodes[v].name)
            assert t.shared == (link.kind == "fanout")
            np.testing.assert_allclose(t.seconds, _forward_seconds(m, link, v), rtol=1e-12, atol=0)
            seen.add(link.kind)
    assert seen == ({"data", "fanout"} if model is SHARED_INPUT else {"data"})


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_edge_costs_read_the_models_tables_and_build_none(monkeypatch, training):
    """Inference: the search's own tables. Training: a data edge's table also prices the transposes back, and
    edge_costs reads the forward part the model keeps beside it (Edge.forward); no table is built for it."""
    import planner.model.tables as tables

    p = plan(SHARED_INPUT, training=training)
    m = p.decision.model
    monkeypatch.setattr(tables, "_table", lambda *a, **k: pytest.fail("edge_costs built a cost table of its own"))
    backward = 0
    for k, link in enumerate(m.flows):
        if link.kind == "data":
            edge = m.problem.edges[k]
            backward += link.backward
            assert (edge.forward is not None) == link.backward
            for v in link.readers:
                t = p.edge_costs(link.tensor, m.nodes[v].name)
                np.testing.assert_array_equal(t.seconds, np.asarray(edge.forward_cost))
        elif link.kind == "fanout":
            for v in link.readers:
                p.edge_costs(link.tensor, m.nodes[v].name)
    assert (backward > 0) == training