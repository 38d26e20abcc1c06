"""The typed, frozen :class:`Plan` a search returns, and how it is read off the lowered program.

:func:`make_plan` takes a decided model (:class:`~planner.model.decision.Decision`),
lowers it once (:func:`planner.partitioning.lower`) and reads everything a user
sees from that program: every tensor's sharding with its source and reason
(:mod:`planner.model.provenance`), every op's strategy with its shardings
and compute cost, every redistribution with its phase, steps, bytes and time,
and the totals. ``to_dict`` / JSON / CSV / tables are produced from these
objects at the edge (:mod:`planner.cli`); nothing downstream parses a string.

The search's *cost tables* (seed 002) are public too:
:meth:`Plan.candidates` lists an op's enumerated strategies with their own
costs, and :meth:`Plan.edge_costs` the redistribution cost of a tensor between
every candidate of its producer and every candidate of one reader.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Mapping

import numpy as np

from planner.errors import PlanningError, did_you_mean, quote
from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding
from planner.partitioning.program import Program, lower
from planner.partitioning.program import Redistribute as Redistribution
from planner.model.decision import Decision
from planner.model.provenance import decision_reasons, explain, propagation_reasons
from planner.model.tables import link_table


@dataclass(frozen=True)
class TensorDecision:
    """Where a tensor lives: its layout (``sharding``), whether the user pinned it, and why."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: str
    sharding: TensorSharding
    source: str  # "user" or "propagated"
    reason: str

    def to_dict(self) -> dict:
        return {"shape": list(self.shape), "dtype": self.dtype, "sharding": str(self.sharding),
                "source": self.source, "reason": self.reason}


@dataclass(frozen=True)
class OpDecision:
    """An op's strategy, its operand and result shardings, its costs (s) and why."""

    name: str
    kind: str
    strategy: object  # planner.enumeration.Strategy
    source: str
    reason: str
    compute_time_s: float
    comm_time_s: float  # the forward redistributions of its result (graph-output delivery included)
    collective: object = None  # a manual region's collective: its BodyCollective (kind, axes, bytes, time)

    @property
    def operand_shardings(self) -> tuple[TensorSharding, ...]:
        return self.strategy.operands

    @property
    def result_sharding(self) -> TensorSharding:
        return self.strategy.result

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "op": self.kind,
            "strategy": self.strategy.text(),
            "operand_shardings": [str(x) for x in self.operand_shardings],
            "result_sharding": str(self.result_sharding),
            "source": self.source,
            "compute_time_s": self.compute_time_s,
            "comm_time_s": self.comm_time_s,
            "reason": self.reason,
            **({"collective": {"kind": self.collective.kind, "axes": list(self.collective.axes),
                               "group_size": self.collective.group_size,
                               "bytes_per_device": self.collective.bytes_per_device,
                               "time_s": self.collective.time_s}} if self.collective is not None else {}),
        }


def redistribution_dict(r: Redistribution) -> dict:
    """The JSON form of one redistribution (``reshards`` rows)."""
    return {
        "tensor": r.tensor,
        "producer": r.producer,
        "consumer": r.readers[0] if r.readers else None,
        "readers": list(r.readers),
        "phase": r.phase,
        "from": str(r.source),
        "to": str(r.destination),
        "steps": [s.to_dict() for s in r.steps],
        "bytes_per_device": r.bytes_per_device,
        "time_s": r.time_s,
    }


def gradient_sync_dict(r: Redistribution) -> dict:
    """The ``gradient_syncs`` form of a parameter's gradient reduction."""
    return {
        "param": r.tensor,
        "reader": r.producer or "several ops",
        "from": str(r.source),
        "to": str(r.destination),
        "steps": [s.to_dict() for s in r.steps],
        "bytes_per_device": r.bytes_per_device,
        "time_s": r.time_s,
    }


@dataclass(frozen=True)
class Totals:
    """Per device: bytes received and seconds communicating (all phases), compute, memory; the objective."""

    comm_bytes_per_device: int
    comm_time_s: float
    compute_time_s: float
    memory_bytes_per_device: int
    objective: float

    def to_dict(self) -> dict:
        return {
            "comm_bytes_per_device": self.comm_bytes_per_device,
            "comm_time_s": self.comm_time_s,
            "compute_time_s": self.compute_time_s,
            "memory_bytes_per_device": self.memory_bytes_per_device,
            "objective": self.objective,
        }


@dataclass(frozen=True)
class Candidate:
    """One enumerated strategy of an op, with its own cost (s: compute, output delivery, own gradients)."""

    index: int
    strategy: object  # planner.enumeration.Strategy
    cost_s: float
    memory_bytes: int
    chosen: bool

    @property
    def text(self) -> str:
        return self.strategy.text()


@dataclass(frozen=True, eq=False)
class EdgeCosts:
    """Seconds to redistribute ``tensor`` for every (producer candidate, reader candidate).

    ``producer_candidates`` label the rows (an op's strategies in MindSpore form, or
    a source tensor's layouts) and ``reader_candidates`` the columns. When several
    ops read the tensor, each layout is made once and shared: the table is what
    this reader would pay alone, and ``shared`` says so.
    """

    tensor: str
    producer: str
    reader: str
    producer_candidates: tuple[str, ...]
    reader_candidates: tuple[str, ...]
    seconds: np.ndarray
    shared: bool


@dataclass(frozen=True, eq=False)
class Plan:
    """A decided plan; see the module docstring. ``to_dict()`` is the JSON contract."""

    model: str
    search: str
    mesh: Mesh
    meshes: tuple[Mesh, ...]
    tensors: Mapping[str, TensorDecision]
    ops: tuple[OpDecision, ...]
    redistributions: tuple[Redistribution, ...]
    totals: Totals
    training: bool
    program: Program
    outcome: Decision
    solver: object | None = None  # planner.searches.ilp.SolverReport
    warnings: tuple[str, ...] = ()

    # -- reading ----------------------------------------------------------------------------
    def _indexed(self, key: str, build):
        """``build()``, computed on first use and kept (the plan is frozen, so it never goes stale)."""
        value = self.__dict__.get(key)
        if value is None:
            value = build()
            object.__setattr__(self, key, value)
        return value

    def op(self, name: str) -> OpDecision:
        found = self._indexed("_op_by_name", lambda: {o.name: o for o in reversed(self.ops)}).get(name)
        if found is not None:
            return found
        raise PlanningError(f"the plan has no op {quote(name)}{did_you_mean(name, [o.name for o in self.ops], n=3)}")

    def tensor(self, name: str) -> TensorDecision:
        if name not in self.tensors:
            raise PlanningError(f"the plan has no tensor {quote(name)}{did_you_mean(name, self.tensors, n=3)}")
        return self.tensors[name]

    @property
    def reshards(self) -> tuple[Redistribution, ...]:
        """Forward and backward redistributions (gradient reductions of parameters are :attr:`gradient_syncs`)."""
        return tuple(r for r in self.redistributions if r.phase != "gradient")

    @property
    def gradient_syncs(self) -> tuple[Redistribution, ...]:
        return tuple(r for r in self.redistributions if r.phase == "gradient")

    def table(self) -> list[dict]:
        """The strategy table: one row per op, as plain data."""
        return [o.to_dict() for o in self.ops]

    def to_dict(self, phases: bool = False) -> dict:
        """The JSON form; ``phases``: with every tensor's sharding after each propagation phase."""
        out = {
            "model": self.model,
            "search": self.search,
            "meshes": [str(m) for m in self.meshes],
            "tensors": {name: t.to_dict() for name, t in self.tensors.items()},
            "ops": self.table(),
            "reshards": [redistribution_dict(r) for r in self.reshards],
            "totals": self.totals.to_dict(),
        }
        if self.training:
            out["gradient_syncs"] = [gradient_sync_dict(r) for r in self.gradient_syncs]
        if self.solver is not None:
            s = self.solver
            out["solver"] = {"name": s.name, "status": s.status, "optimal": s.optimal, "gap": s.gap,
                             "time_s": s.time_s, "variables": s.variables}
        if self.search_space is not None and self.search_space.restricted:
            out["search_space"] = self.search_space.to_dict(self.totals.objective)
        prop = self.propagation
        if prop is not None:
            out["propagation"] = {"pass": prop.how, "visits": prop.visits}
            if phases:
                out["phases"] = [{"label": ph.label, "visits": ph.visits,
                                  "tensors": {name: str(s) for name, s in ph.shardings.items()}}
                                 for ph in prop.phases]
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out

    def export(self, to: str) -> dict:
        """The plan in another notation: ``jax``, ``shardy``, ``dtensor`` or ``mindspore``
        (:func:`planner.export.export`), as JSON-ready data keyed by tensor and op."""
        from planner.export import export

        return export(self, to)

    @property
    def propagation(self):
        """What rule-based propagation gave (:class:`planner.searches.propagate.engine.Propagation`; None for other
        searches): every tensor's sharding, the origin of each axis, the phases."""
        return self.outcome.propagation

    @property
    def search_space(self):
        """What the search ran over (:class:`planner.model.phases.SearchSpace`; None in explicit mode)."""
        return self.outcome.space

    def explain(self, tensor: str) -> list[str]:
        """The chain of decisions from ``tensor`` back to a user annotation (see ``shardplan explain``)."""
        t = self.tensor(tensor)
        o = self.outcome
        if o.propagation is not None:
            lines = [f"{tensor}: {t.sharding}", *(f"  {line}" for line in o.propagation.explain(tensor))]
        else:
            info = self._indexed("_reasons", lambda: decision_reasons(o.model, o.choice, o.parents))
            lines = explain(o.model, o.choice, o.parents, tensor, t.sharding, info)
        return lines[:1] + region_lines(o.model.graph, tensor) + lines[1:]

    # -- the cost tables ----------------------------------------------------------------------
    def candidates(self, op: str) -> tuple[Candidate, ...]:
        """Every strategy enumerated for ``op`` (after the user's constraints) with its own cost.

        >>> from planner.api import plan
        >>> p = plan("configs/ffn.yaml")
        >>> [c.text for c in p.candidates("relu") if c.chosen]
        ['((2, 4),)']
        """
        m = self.outcome.model
        self.op(op)
        i = m.op_index[op]
        node, costs = m.nodes[i], m.problem.nodes[i]
        return tuple(Candidate(c, s, float(costs.cost[c]), int(costs.memory[c]) if costs.memory is not None else 0,
                               c == self.outcome.choice[i]) for c, s in enumerate(node.strategies))

    def edge_costs(self, tensor: str, reader: str) -> EdgeCosts:
        """The redistribution cost table of ``tensor`` between its producer's candidates and ``reader``'s.

        >>> from planner.api import plan
        >>> p = plan("configs/ffn.yaml")
        >>> t = p.edge_costs("h3", "dense2.matmul")
        >>> t.seconds.shape == (len(t.producer_candidates), len(t.reader_candidates))
        True
        """
        m = self.outcome.model
        self.tensor(tensor)
        self.op(reader)
        v = m.op_index[reader]
        by_tensor = self._indexed("_links_by_tensor", lambda: _links_by_tensor(m))
        for k in by_tensor.get(tensor, ()):
            link = m.flows[k]
            if v not in link.readers:
                continue
            u = link.producer
            if link.kind == "data":
                # forward part only: a backward part is the gradient's
                seconds = link_table(m, replace(link, backward=False)) if link.backward else m.problem.edges[k].cost
            else:
                f = m.problem.fanouts[k - len(m.problem.edges)]
                j = link.readers.index(v)
                seconds = np.array([[sum(f.class_cost[f.u_class[a], L] for L in needs) for needs in f.needs[j]]
                                    for a in range(m.nodes[u].candidates())])
            return EdgeCosts(tensor, m.nodes[u].name, reader, m.problem.nodes[u].labels, m.problem.nodes[v].labels,
                             np.asarray(seconds, dtype=float), link.kind == "fanout")
        readers = [op for op, _ in m.graph.consumers(tensor)]
        if reader not in readers:
            raise PlanningError(f"op {quote(reader)} does not read tensor {quote(tensor)}; its readers are {', '.join(readers)}")
        raise PlanningError(f"tensor {quote(tensor)} is stored as {quote(reader)} reads it (its only reader): it has no "
                            "edge to redistribute over")


def _links_by_tensor(m) -> dict[str, list[int]]:
    """The data and fanout links of each tensor, in link order (built once per plan)."""
    out: dict[str, list[int]] = {}
    for k, link in enumerate(m.flows):
        if link.kind in ("data", "fanout"):
            out.setdefault(link.tensor, []).append(k)
    return out


# -- building -------------------------------------------------------------------------------------

def region_lines(graph, tensor: str) -> list[str]:
    """What a manual region says about ``tensor`` (``shardplan explain``): a body tensor's manual blocks, a
    region input's in-sharding, a region output's out-sharding."""
    out = []
    for r in graph.manual_regions:
        axes = ", ".join(r.manual_axes)
        if tensor in r.body_tensors:
            out.append(f"  body tensor of manual region {r.name!r} (manual axes {axes}): one local block per "
                       "manual coordinate; its sharding is over the free axes")
        if tensor in r.inputs:
            out.append(f"  input of manual region {r.name!r}: in-sharding as written "
                       f"{r.in_shardings[r.inputs.index(tensor)].dims_text()} (manual axes {axes} major)")
        if tensor in r.outputs:
            out.append(f"  output of manual region {r.name!r}: out-sharding as written "
                       f"{r.out_shardings[r.outputs.index(tensor)].dims_text()} (manual axes {axes} major)")
    return out


def make_plan(outcome: Decision) -> Plan:
    """Lower ``outcome`` and read the plan off its program (see the module docstring)."""
    m, choice = outcome.model, outcome.choice
    graph = m.graph
    program = lower(m, choice)
    if outcome.propagation is not None:

        reasons = propagation_reasons(m, outcome.propagation)
    else:
        reasons = decision_reasons(m, choice, outcome.parents)
    tensors = {}
    for name, spec in graph.tensors.items():
        if spec.kind != "activation" and not graph.consumers(name):
            continue
        tensors[name] = TensorDecision(name, spec.shape, spec.dtype, spec.kind, m.reported_sharding(name, choice),
                                       "user" if spec.sharding is not None else "propagated",
                                       reasons["tensors"][name])
    forward_comm: dict[str, float] = {}
    for r in program.redistributions("forward"):
        if r.producer is not None:
            forward_comm[r.producer] = forward_comm.get(r.producer, 0.0) + r.time_s
    ops = []
    for c in program.computes():
        node = m.nodes[m.op_index[c.op.name]]
        ops.append(OpDecision(c.op.name, c.op.op, c.strategy, "user" if node.user else "propagated",
                              reasons["ops"][c.op.name], c.compute_time_s,
                              forward_comm.get(c.op.name, 0.0) + (c.collective.time_s if c.collective else 0.0),
                              c.collective))
    redistributions = tuple(r for r in program.redistributions() if r.steps)  # a transpose may move nothing
    totals = Totals(
        comm_bytes_per_device=program.comm_bytes_per_device(),
        comm_time_s=program.comm_time_s(),
        compute_time_s=program.compute_time_s(),
        memory_bytes_per_device=int(m.problem.memory(choice)),
        objective=m.problem.objective(choice),
    )
    meshes = (m.mesh,) + tuple(x for x in graph.meshes.values() if x != m.mesh)
    plan = Plan(graph.name, outcome.search, m.mesh, meshes, MappingProxyType(tensors), tuple(ops), redistributions,
                totals, m.options.training, program, outcome, outcome.report, outcome.notes)
    object.__setattr__(plan, "_reasons", reasons)  # Plan.explain reads them
    return plan
