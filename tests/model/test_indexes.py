"""The indexes that keep planning linear in the number of layers (issue 11) give what the scans gave.

Each shortcut is checked against the plain computation it replaces: fanout link costs
from the stacked masks or from a caller's ``needed`` (BFS keeps it per fanout,
provenance reads it off reader counts), BFS's per-node equal-layout groups and its
pointer to the first undecided node, provenance's annotated neighbours, and the
plan's op and link indexes.
"""

from types import SimpleNamespace

import numpy as np
import pytest

from planner.api import plan
from planner.model import provenance
from planner.searches.bfs import bfs
from planner.model.nodes import SourceNode
from planner.model.problem import Edge, Fanout, Node, SearchProblem


def _naive_link_costs(p: SearchProblem, link: int, i: int, choice, decided=None) -> np.ndarray:
    """The fanout part of ``SearchProblem.link_costs`` as a loop over the readers (the reference)."""
    counted = (lambda q: True) if decided is None else (lambda q: bool(decided[q]))
    f = p.fanouts[link - len(p.edges)]
    need = np.zeros(f.class_cost.shape[1], dtype=bool)
    for r, mask in zip(f.readers, (f.need_mask(j) for j in range(len(f.readers)))):
        if r != i and counted(r):
            need |= mask[choice[r]]
    if i == f.u:
        return f.class_cost[:, need].sum(axis=1)[f.u_class]
    if not counted(f.u):
        return np.zeros(p.nodes[i].n)
    row = np.where(need, 0.0, f.class_cost[f.u_class[choice[f.u]]])
    return f.need_mask(f.readers.index(i)) @ row


def _random_fanout_problem(seed: int, components: int = 1) -> SearchProblem:
    """Chains of nodes, each chain's first node fanning out to the rest, plus equal-layout groups."""
    rng = np.random.default_rng(seed)
    nodes, edges, fanouts, same = [], [], [], []
    for _ in range(components):
        base = len(nodes)
        size = int(rng.integers(3, 9))
        for k in range(size):
            nodes.append(Node(f"n{base + k}", rng.random(int(rng.integers(1, 5))) * 1e-3))
        for k in range(1, size - 1):  # a chain between readers
            u, v = base + k, base + k + 1
            edges.append(Edge.from_matrix(u, v, rng.random((nodes[u].n, nodes[v].n)) * 1e-3))
        readers = tuple(range(base + 1, base + size))
        layouts = int(rng.integers(1, 5))
        needs = tuple(tuple(tuple(sorted(set(rng.integers(0, layouts, int(rng.integers(0, 3))).tolist())))
                            for _ in range(nodes[r].n)) for r in readers)
        rows = int(rng.integers(1, 3))
        fanouts.append(Fanout(base, rng.integers(0, rows, nodes[base].n), readers, needs,
                              rng.random((rows, layouts)) * 1e-3))
        a, b = base + 1, base + size - 1
        if size > 3 and nodes[a].n > 1 and nodes[b].n > 1:  # both sides have both classes: feasible
            same.append((a, rng.permutation(np.arange(nodes[a].n) % 2), b, rng.permutation(np.arange(nodes[b].n) % 2)))
    return SearchProblem(tuple(nodes), tuple(edges), tuple(same), fanouts=tuple(fanouts))


@pytest.mark.parametrize("seed", range(20))
def test_fanout_link_costs_match_the_loop_over_readers(seed):
    p = _random_fanout_problem(seed)
    rng = np.random.default_rng(1000 + seed)
    link = len(p.edges)
    f = p.fanouts[0]
    for _ in range(10):
        choice = [int(rng.integers(0, n.n)) for n in p.nodes]
        decided = [bool(x) for x in rng.random(len(p.nodes)) < 0.6]
        for i in (f.u,) + f.readers:
            for d in (None, decided):
                np.testing.assert_array_equal(p.link_costs(link, i, choice, d), _naive_link_costs(p, link, i, choice, d))
        counts = p.fanout_counts(link, choice)
        expected = sum(f.need_mask(j)[choice[r]].astype(int) for j, r in enumerate(f.readers))
        np.testing.assert_array_equal(counts, expected)


@pytest.mark.parametrize("seed", range(20))
def test_bfs_kept_fanout_needs_equal_the_recomputed_ones(seed, monkeypatch):
    """Every ``needed`` BFS passes is what link_costs computes itself; BFS over several parts
    (the first undecided node restarts it) and equal-layout groups decides every node."""
    p = _random_fanout_problem(seed, components=3)
    original = SearchProblem.link_costs
    calls = []

    def checked(self, link, i, choice, decided=None, needed=None):
        got = original(self, link, i, choice, decided, needed)
        np.testing.assert_array_equal(got, original(self, link, i, choice, decided))
        calls.append(link)
        return got

    monkeypatch.setattr(SearchProblem, "link_costs", checked)
    result = bfs(p, seeds=[0])
    assert calls and all(c is not None for c in result.choice)
    assert sum(v is None for v in result.parent) >= 3  # one start per part
    for a, ac, b, bc in p.same:  # BFS honours equal-layout groups (it decided one side first)
        assert ac[result.choice[a]] == bc[result.choice[b]]


@pytest.mark.parametrize("seed", range(20))
def test_provenance_fanout_costs_from_reader_counts_match_the_loop(seed):
    p = _random_fanout_problem(seed)
    m = SimpleNamespace(problem=p)
    rng = np.random.default_rng(2000 + seed)
    link, f = len(p.edges), p.fanouts[0]
    for _ in range(10):
        choice = [int(rng.integers(0, n.n)) for n in p.nodes]
        counts: dict = {}
        for i in (f.u,) + f.readers:
            np.testing.assert_array_equal(provenance._link_costs(m, link, i, choice, counts),
                                          _naive_link_costs(p, link, i, choice))


def _shared_input_model(layers: int) -> str:
    """Layers that all read one input ``m`` (a fanout with a reader per layer)."""
    lines = ["name: shared", "mesh: {dp: 2, tp: 4}", "tensors:",
             "  x: {shape: [64, 64], kind: input}", "  m: {shape: [64, 64], kind: input}"]
    ops, prev = [], "x"
    for j in range(layers):
        lines.append(f"  w{j}: {{shape: [64, 64], kind: param}}")
        ops += [f"  - {{name: l{j}.mm, op: matmul, inputs: [{prev}, w{j}], output: h{j}}}",
                f"  - {{name: l{j}.add, op: add, inputs: [h{j}, m], output: a{j}}}"]
        prev = f"a{j}"
    return "\n".join(lines + ["ops:"] + ops + [f"outputs: [{prev}]"]) + "\n"


@pytest.mark.parametrize("search", ["bfs", "ilp"])
def test_provenance_reads_fanout_costs_off_reader_counts(search, monkeypatch):
    p = plan(_shared_input_model(6), search=search)
    o = p.decision
    original = SearchProblem.link_costs

    def checked(self, link, i, choice, decided=None, needed=None):
        got = original(self, link, i, choice, decided, needed)
        np.testing.assert_array_equal(got, original(self, link, i, choice))
        return got

    monkeypatch.setattr(SearchProblem, "link_costs", checked)
    assert provenance.decision_reasons(o.model, o.choice, o.parents) == p._reasons


def test_annotated_neighbours_are_the_first_annotated_link_each_node_reads():
    p = plan("configs/gpt2_small.yaml")
    m = p.decision.model
    index = provenance._annotated_neighbours(m)
    for i in range(len(m.nodes)):
        expected = next(((link.producer, k) for k, link in enumerate(m.flows)
                         if i in link.readers and link.kind in ("data", "fanout")
                         and isinstance(m.nodes[link.producer], SourceNode) and m.nodes[link.producer].user), None)
        assert index.get(i) == expected


def test_plan_indexes_find_what_the_scans_found():
    p = plan("configs/transformer_block.yaml")
    for o in p.ops:
        assert p.op(o.name) is o
    m = p.decision.model
    for k, link in enumerate(m.flows):
        for v in link.readers:
            reader = m.nodes[v].name
            t = p.edge_costs(link.tensor, reader)
            assert (t.tensor, t.reader, t.producer) == (link.tensor, reader, m.nodes[link.producer].name)
            assert t.shared == (link.kind == "fanout")
    first = p.explain(next(iter(p.tensors)))
    assert first == provenance.explain(m, p.decision.choice, p.decision.parents, next(iter(p.tensors)),
                                       p.tensors[next(iter(p.tensors))].sharding)
