"""The planner's public entry point: ``planner.plan(model, ...) -> Plan`` (SPEC §6, §9).

``plan`` loads the model (a path, YAML text or a built graph), builds the search
problem (:mod:`planner.propagation.build`), solves it with the chosen search
(``bfs``, ``ilp`` or ``explicit``), runs priority phases when annotations carry
several priorities, and returns a :class:`Plan`: plain data about every tensor,
op, redistribution and gradient reduction, with provenance for every decision.

>>> p = plan('''
... name: tiny
... mesh: {x: 2}
... tensors:
...   a: {shape: [8, 4], kind: input, sharding: '[{"x"}, {}]'}
...   w: {shape: [4, 4], kind: param}
... ops:
...   - {name: mm, op: matmul, inputs: [a, w], output: h}
...   - {name: act, op: relu, inputs: [h], output: y}
... ''', search="bfs")
>>> [(row["name"], row["strategy"]) for row in p.table()]
[('mm', '((2, 1), (1, 1))'), ('act', '((2, 1),)')]
>>> p.tensors["y"]["sharding"], p.totals["comm_bytes_per_device"]
('sharding<@mesh, [{"x"}, {}]>', 0)
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from costmodels import Cluster, compute_time_s, load_cluster
from graphs import ComputationGraph, load_model, load_model_text
from planner.errors import PlanningError
from planner.ir.mesh import Mesh
from planner.ir.text import parse_mesh_spec
from planner.propagation.annotations import axes_of, priorities, translate
from planner.propagation.bfs import bfs
from planner.propagation.annotations import satisfies
from planner.propagation.build import (
    Model,
    Options,
    OpNode,
    SourceNode,
    build_model,
    default_annotations,
    has_user_annotations,
    output_layout,
    with_shrink_hints,
)
from planner.redistribution import reshard_for_planning
from planner.training.gradients import operand_gradient, result_gradient

SEARCHES = ("bfs", "ilp", "explicit")


class PlanWarning(UserWarning):
    """Something the user should know about a plan (e.g. the ILP fell back to BFS)."""


@dataclass
class Plan:
    """A plan as plain data (see :meth:`to_dict` for the JSON contract)."""

    model: str
    search: str
    meshes: list[str]
    tensors: dict[str, dict]
    ops: list[dict]
    reshards: list[dict]
    totals: dict
    gradient_syncs: list[dict] | None = None
    solver: dict | None = None
    warnings: list[str] = field(default_factory=list)
    _internal: Any = field(default=None, repr=False, compare=False)

    def table(self) -> list[dict]:
        """The strategy table: one row per op, as plain data."""
        return [dict(row) for row in self.ops]

    def to_dict(self) -> dict:
        out = {
            "model": self.model,
            "search": self.search,
            "meshes": self.meshes,
            "tensors": self.tensors,
            "ops": self.ops,
            "reshards": self.reshards,
            "totals": self.totals,
        }
        if self.gradient_syncs is not None:
            out["gradient_syncs"] = self.gradient_syncs
        if self.solver is not None:
            out["solver"] = self.solver
        if self.warnings:
            out["warnings"] = self.warnings
        return out

    def explain(self, tensor: str) -> list[str]:
        """The chain of decisions from ``tensor`` back to a user annotation (see ``shardplan explain``)."""
        from planner.propagation.provenance import explain

        return explain(self, tensor)


# -- inputs -------------------------------------------------------------------------------------

def load(model: Any) -> ComputationGraph:
    """A graph from a path, YAML text or a graph."""
    if isinstance(model, ComputationGraph):
        return model
    if isinstance(model, Path) or (isinstance(model, str) and "\n" not in model and model.endswith((".yaml", ".yml"))):
        return load_model(model)
    if isinstance(model, str):
        return load_model_text(model)
    raise PlanningError(f"cannot plan {type(model).__name__}: give a YAML path, YAML text or a ComputationGraph")


def _planning_mesh(graph: ComputationGraph, mesh: Any) -> Mesh:
    if mesh is None:
        return graph.mesh
    if isinstance(mesh, Mesh):
        return mesh
    text = str(mesh)
    if text in graph.meshes:
        return graph.meshes[text]
    candidate = parse_mesh_spec(text, default_name=graph.mesh.name if graph.meshes else "mesh")
    return candidate


def _cluster(graph: ComputationGraph, cluster: Any) -> Cluster:
    spec = cluster if cluster is not None else graph.cluster
    base = str(Path(graph.source).parent) if graph.source and Path(str(graph.source)).exists() else None
    return load_cluster(spec, base_dir=base)


# -- the entry point ------------------------------------------------------------------------------

def plan(
    model: Any,
    *,
    search: str = "bfs",
    mesh: Any = None,
    cluster: Any = None,
    training: bool = False,
    memory_budget: float | None = None,
    time_limit: float | None = None,
    solver: str = "auto",
    progress=None,
) -> Plan:
    """Plan ``model`` (a path, YAML text or graph); see the module docstring.

    ``progress``, if given, is called with a short message at each stage of a long
    search (the CLI prints them when stderr is a terminal).
    """
    say = progress or (lambda message: None)
    if search not in SEARCHES:
        raise PlanningError(f"unknown search {search!r}; use one of {', '.join(SEARCHES)}")
    graph = load(model)
    say(f"loaded {graph.name}: {len(graph.ops)} ops")
    if search == "explicit":
        from planner.propagation.explicit_plan import explicit_plan

        return explicit_plan(graph)
    planning_mesh = _planning_mesh(graph, mesh)
    if graph.meshes and planning_mesh.size != graph.mesh.size:
        raise PlanningError(
            f"--mesh {planning_mesh.short()} has {planning_mesh.size} devices but the model's mesh "
            f"@{graph.mesh.name} has {graph.mesh.size}; a different mesh must cover the same devices"
        )
    clu = _cluster(graph, cluster)
    notes: list[str] = []
    base = Options(training=training, memory_budget=memory_budget)
    annotations = [translate(t.sharding, planning_mesh) for t in graph.tensors.values() if t.sharding is not None]
    levels = priorities(annotations)
    prefixes: dict = {}
    if len(levels) > 1:
        for level in levels:
            say(f"priority phase p{level} of {len(levels)}")
            allowed = frozenset(axes_of(a for a in annotations if any(d.priority <= level and d.axes for d in a.dims)))
            opts = Options(training, memory_budget, level, allowed, dict(prefixes))
            m = build_model(graph, planning_mesh, clu, opts)
            choice, _, _, _ = _solve(m, search, time_limit, solver, notes)
            prefixes = {n.name: n.strategies[c].factor_axes for n, c in zip(m.nodes, choice) if isinstance(n, OpNode)}
        base = Options(training, memory_budget, None, None, prefixes)
    say("enumerating strategies and building cost tables")
    m = build_model(graph, planning_mesh, clu, base)
    say(f"searching ({search}) over {m.problem.variables} candidates")
    choice, reasons, report, used = _solve(m, search, time_limit, solver, notes)
    say("assembling the plan")
    for note in notes:
        warnings.warn(note, PlanWarning, stacklevel=2)
    return assemble(m, choice, reasons, used, report, notes)


def _seeds(m: Model) -> list[int]:
    """Configured ops start the walk (in topological order), and annotated tensors not fixed to one layout."""
    return [i for i, n in enumerate(m.nodes) if n.user and (isinstance(n, OpNode) or len(n.layouts) > 1)]


def _prefer(m: Model):
    """BFS tie-break: keep the layouts of the node propagation came from, dimension by dimension."""

    def layouts_of(i, c):
        n = m.nodes[i]
        if not isinstance(n, OpNode):
            return [n.layouts[c]]
        s = n.strategies[c]
        return [*s.operands, s.result]

    def edge_layout(i, c, info):
        n = m.nodes[i]
        if not isinstance(n, OpNode):
            return n.layouts[c]
        s = n.strategies[c]
        return s.operands[info.operand] if info.consumer == i else s.result

    def prefer(v, u, e, cu):
        info = m.edges[e]
        node = m.nodes[v]
        if info.kind != "data":
            return np.zeros(len(node.strategies) if isinstance(node, OpNode) else len(node.layouts))
        theirs = [l for l in layouts_of(u, cu)]
        node = m.nodes[v]
        count = len(node.strategies) if isinstance(node, OpNode) else len(node.layouts)
        scores = np.zeros(count)
        for c in range(count):
            mine = edge_layout(v, c, info)
            best = 0
            for l in theirs:
                if l.rank == mine.rank:
                    best = max(best, sum(a.axes == b.axes for a, b in zip(l.dims, mine.dims)))
            scores[c] = best
        return scores

    return prefer


def _solve(m: Model, search: str, time_limit, solver, notes) -> tuple:
    """``(choice, reasons, solver report, search used)``."""
    if search == "ilp":
        from planner.propagation.ilp import SolverFailed, solve_ilp

        started = time.perf_counter()
        try:
            # Shrunk first (followers folded, repeated layers solved once); the hints
            # restrict the problem, so the answer is checked against BFS on the full
            # problem and the full problem is solved exactly when BFS does better.
            result = solve_ilp(with_shrink_hints(m), time_limit=time_limit, solver=solver)
            reference = _bfs(m)
            if result.objective > reference.objective * (1 + 1e-9):
                left = None if time_limit is None else max(time_limit - (time.perf_counter() - started), 1.0)
                result = solve_ilp(m.problem, time_limit=left, solver=solver, shrink=False)
            return result.choice, None, result.report, "ilp"
        except SolverFailed as e:
            notes.append(f"the ILP solver did not finish ({e.message}); falling back to breadth-first propagation")
    result = _bfs(m)
    return result.choice, result.parent, None, "bfs"


def _bfs(m: Model):
    seeds, seed_choice = _seeds(m), {}
    context = {i: 0 for i, n in enumerate(m.nodes) if not isinstance(n, OpNode) and n.user and len(n.layouts) == 1}
    if not has_user_annotations(m.graph):
        seeds, seed_choice = _default_seeds(m)
    return bfs(m.problem, seeds, seed_choice, prefer=_prefer(m), context=context)


def _default_seeds(m: Model) -> tuple[list[int], dict[int, int]]:
    """No annotation at all: the readers of graph inputs start from batch-sharding on the first mesh axis.

    Each reader of an input takes its cheapest candidate whose operand is split along
    dimension 0 by the first mesh axis (when the dimension is at least that large);
    this seeds the propagation without constraining the problem.
    """
    defaults = default_annotations(m.graph, m.mesh)
    seeds, choice = [], {}
    for tensor, ann in defaults.items():
        for op_name, k in m.graph.consumers(tensor):
            i = m.index[op_name]
            node = m.nodes[i]
            ok = [c for c, s in enumerate(node.strategies) if satisfies(s.operands[k], ann)]
            if ok and i not in choice:
                costs = m.problem.nodes[i].cost
                choice[i] = min(ok, key=lambda c: (costs[c], c))
                seeds.append(i)
    return seeds, choice


# -- reporting --------------------------------------------------------------------------------------

def _steps(plan_) -> list[dict]:
    return [s.to_dict() for s in plan_.steps]


def _node_name(m: Model, i: int) -> str | None:
    n = m.nodes[i]
    return n.name if isinstance(n, OpNode) else None


def assemble(m: Model, choice, parents, used: str, report, notes) -> Plan:
    """Everything a user reads about a chosen plan, with costs recomputed from the same engine."""
    from planner.propagation.provenance import decision_reasons

    graph, clu, training = m.graph, m.cluster, m.options.training
    reasons = decision_reasons(m, choice, parents)
    tensors: dict[str, dict] = {}
    ops: list[dict] = []
    reshards: list[dict] = []
    syncs: list[dict] = []
    compute_total = 0.0
    reduce_time: dict[str, float] = {op.name: 0.0 for op in graph.ops}

    def layout_of(name: str):
        producer = graph.producer(name)
        if producer is not None:
            return m.nodes[m.index[producer]].strategies[choice[m.index[producer]]].result
        if f"tensor:{name}" in m.index:
            i = m.index[f"tensor:{name}"]
            return m.nodes[i].layouts[choice[i]]
        op_name, k = m.private_sources[name][0]
        i = m.index[op_name]
        return m.nodes[i].strategies[choice[i]].operands[k]

    for name, spec in graph.tensors.items():
        if spec.kind != "activation" and not graph.consumers(name):
            continue
        lay = layout_of(name)
        user = spec.sharding is not None
        tensors[name] = {
            "shape": list(spec.shape),
            "dtype": spec.dtype,
            "sharding": str(lay),
            "source": "user" if user else "propagated",
            "reason": reasons["tensors"][name],
        }

    for info in m.edges:
        spec = graph.tensor(info.tensor)
        src_node, dst_node = m.nodes[info.producer], m.nodes[info.consumer]
        a, b = choice[info.producer], choice[info.consumer]
        if info.kind == "grad_in":  # a reader's gradients into the accumulation layout
            cc = src_node.strategies[a]
            for grad in dict.fromkeys(operand_gradient(src_node.rule, cc, k) for k in info.operands):
                p = reshard_for_planning(spec.shape, spec.dtype, grad, dst_node.layouts[b], clu)
                if p.steps:
                    reshards.append(_reshard_row(info.tensor, src_node.name, f"gradient of {info.tensor}", p,
                                                 training, "backward"))
            continue
        if info.kind == "grad_out":  # the summed gradient back to the producer (or the parameter)
            target = dst_node.layouts[b] if isinstance(dst_node, SourceNode) else result_gradient(dst_node.strategies[b])
            p = reshard_for_planning(spec.shape, spec.dtype, src_node.layouts[a], target, clu)
            if p.steps:
                if isinstance(dst_node, SourceNode) and spec.kind == "param":
                    syncs.append(_sync_row(info.tensor, p, "several ops"))
                else:
                    reshards.append(_reshard_row(info.tensor, f"gradient of {info.tensor}", _node_name(m, info.consumer),
                                                 p, training, "backward"))
            continue
        producer, consumer = src_node, dst_node
        cc = consumer.strategies[b]
        if isinstance(producer, SourceNode):
            src = producer.layouts[a]
            res_grad = src
        else:
            ps = producer.strategies[a]
            src, res_grad = ps.result, result_gradient(ps)
        for layout in dict.fromkeys(cc.operands[k] for k in info.operands):
            fwd = reshard_for_planning(spec.shape, spec.dtype, src, layout, clu)
            if fwd.steps:
                row = _reshard_row(info.tensor, _node_name(m, info.producer), consumer.name, fwd, training, "forward")
                reshards.append(row)
                if not isinstance(producer, SourceNode):
                    reduce_time[producer.name] += sum(s.time_s for s in fwd.steps if s.kind in ("AllReduce", "ReduceScatter"))
        if info.backward:
            for grad in dict.fromkeys(operand_gradient(consumer.rule, cc, k) for k in info.operands):
                bwd = reshard_for_planning(spec.shape, spec.dtype, grad, res_grad, clu)
                if not bwd.steps:
                    continue
                if isinstance(producer, SourceNode) and spec.kind == "param":
                    syncs.append(_sync_row(info.tensor, bwd, consumer.name))
                else:
                    reshards.append(_reshard_row(info.tensor, consumer.name, _node_name(m, info.producer), bwd,
                                                 training, "backward"))

    for i, node in enumerate(m.nodes):
        if not isinstance(node, OpNode):
            continue
        s = node.strategies[choice[i]]
        op = node.spec
        out = graph.tensor(op.output)
        flops = graph.op_flops(op.name)
        grads = sum(1 for t in op.inputs if m.needs_grad.get(t, False)) if training else 0
        compute = compute_time_s(flops * (1 + grads) / s.work_divisor, clu)
        compute_total += compute
        comm = reduce_time[op.name]
        if op.output in graph.outputs and not (training and out.rank == 0):
            final = output_layout(s.result, m.annotations.get(op.output))
            fin = reshard_for_planning(out.shape, out.dtype, s.result, final, clu)
            if fin.steps:
                reshards.append(_reshard_row(op.output, op.name, None, fin, training, "forward"))
                comm += sum(st.time_s for st in fin.steps if st.kind in ("AllReduce", "ReduceScatter"))
        for t, reads in m.private_sources.items():
            for name, k in reads:
                tspec = graph.tensor(t)
                if name == op.name and training and tspec.kind == "param" and m.needs_grad.get(t, False):
                    g = reshard_for_planning(tspec.shape, tspec.dtype, operand_gradient(node.rule, s, k), s.operands[k], clu)
                    if g.steps:
                        syncs.append(_sync_row(t, g, op.name))
        ops.append({
            "name": op.name,
            "op": op.op,
            "strategy": s.text(),
            "operand_shardings": [str(x) for x in s.operands],
            "result_sharding": str(s.result),
            "source": "user" if node.user else "propagated",
            "compute_time_s": compute,
            "comm_time_s": comm,
            "reason": reasons["ops"][op.name],
        })

    comm_bytes = sum(r["bytes_per_device"] for r in reshards) + sum(g["bytes_per_device"] for g in syncs)
    comm_time = sum(r["time_s"] for r in reshards) + sum(g["time_s"] for g in syncs)
    objective = m.problem.objective(choice)
    totals = {
        "comm_bytes_per_device": int(comm_bytes),
        "comm_time_s": comm_time,
        "compute_time_s": compute_total,
        "memory_bytes_per_device": int(m.problem.memory(choice)),
        "objective": objective,
    }
    solver_info = None
    if report is not None:
        solver_info = {
            "name": report.name, "status": report.status, "optimal": report.optimal, "gap": report.gap,
            "time_s": report.time_s, "variables": report.variables,
        }
    meshes = [str(m.mesh)] + [str(x) for x in m.graph.meshes.values() if x != m.mesh]
    search_name = used
    return Plan(
        model=graph.name,
        search=search_name,
        meshes=meshes,
        tensors=tensors,
        ops=ops,
        reshards=reshards,
        totals=totals,
        gradient_syncs=syncs if training else None,
        solver=solver_info,
        warnings=list(notes),
        _internal=(m, tuple(choice), parents),
    )


def _reshard_row(tensor, producer, consumer, p, training, phase) -> dict:
    row = {
        "tensor": tensor,
        "producer": producer,
        "consumer": consumer,
        "from": str(p.source),
        "to": str(p.destination),
        "steps": _steps(p),
        "bytes_per_device": p.bytes_per_device,
        "time_s": p.time_s,
    }
    if training:
        row["phase"] = phase
    return row


def _sync_row(param, p, reader) -> dict:
    return {
        "param": param,
        "reader": reader,
        "from": str(p.source),
        "to": str(p.destination),
        "steps": _steps(p),
        "bytes_per_device": p.bytes_per_device,
        "time_s": p.time_s,
    }
