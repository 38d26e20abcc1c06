"""The typed, frozen :class:`Plan` a search returns, and how it is read off the lowered program.

:func:`make_plan` takes a decided model (:class:`~planner.model.decision.Decision`),
lowers it once (:func:`planner.partitioning.lower`) and reads everything a user
sees from that program: every tensor's sharding with its source and reason
(:mod:`planner.model.provenance`), every op's strategy with its shardings
and compute cost, every redistribution with its phase, steps, bytes and time,
and the totals. :meth:`Plan.to_dict` (the JSON contract) and :meth:`Plan.summary`
(the table ``shardplan plan`` prints) are produced from these objects; CSV and the
other formats at the edge (:mod:`planner.cli`); nothing downstream parses a string.

The search's *cost tables* (seed 002) are public too:
:meth:`Plan.candidates` lists an op's enumerated strategies with their own
costs, and :meth:`Plan.edge_costs` the redistribution cost of a tensor between
every candidate of its producer and every candidate of one reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Mapping

import numpy as np

from costmodels.units import format_bytes, format_seconds
from graphs.ops import get_op
from planner.errors import PlanningError, did_you_mean, quote
from planner.ir.mesh import AxisType, Mesh
from planner.ir.sharding import TensorSharding
from planner.model.axis_types import axes_of_type, restrict
from planner.model.decision import Decision, Propagation, SolverReport
from planner.model.op_collectives import OpCollective
from planner.model.nodes import Model
from planner.model.phases import SearchSpace
from planner.model.provenance import decision_reasons, explain, propagation_reasons
from planner.notations.jax import to_jax_type
from planner.partitioning.program import Program, lower
from planner.partitioning.program import Redistribute as Redistribution
from planner.partitioning.schedule import PhaseTimes, schedule
from planner.text_table import table

if TYPE_CHECKING:  # named in annotations only: reading a plan needs none of them loaded
    from costmodels import Cluster
    from graphs import ComputationGraph
    from planner.enumeration import Strategy


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class OpDecision:
    """An op's strategy, its operand and result shardings, its costs (s) and why."""

    name: str
    kind: str
    strategy: Strategy
    source: str
    reason: str
    compute_time_s: float
    comm_time_s: float  # the forward redistributions of its result (graph-output delivery included)
    collectives: tuple[OpCollective, ...] = ()  # the op's own forward collectives (kind, axes, bytes, time)

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
            "strategy": [list(split) for split in self.strategy.splits],
            "operand_shardings": [str(x) for x in self.operand_shardings],
            "result_sharding": str(self.result_sharding),
            "source": self.source,
            "compute_time_s": self.compute_time_s,
            "comm_time_s": self.comm_time_s,
            "reason": self.reason,
            **({"collective": {"kind": c.kind, "axes": list(c.axis_names()), "group_size": c.group_size,
                               "bytes_per_device": c.bytes_per_device, "time_s": c.time_s}}
               if len(self.collectives) == 1 and get_op(self.kind).family == "collective"
               and (c := self.collectives[0]) else {}),
        }


def redistribution_dict(r: Redistribution) -> dict:
    """The JSON form of one redistribution (the ``redistributions`` rows, as the text report names them)."""
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


@dataclass(frozen=True, slots=True)
class Totals:
    """Per device: bytes received and seconds communicating (all phases), compute, memory; the objective
    (compute plus communication: the serial sum the searches optimise); and the step's schedule under
    ``overlap`` (:mod:`planner.partitioning.schedule`): its length ``step_time_s``, the communication it
    exposes and hides behind compute, and the same per phase (forward, backward, gradient).

    ``step_time_s`` includes the cluster's ``step_overhead_s`` (the launch of the step's program, the same
    for every plan); ``overlap_gap`` is ``(serial - step_time_s) / serial`` with ``serial`` the objective
    plus that launch: how much the serial bound the search optimised overstates the scheduled step (0 with
    ``overlap="none"``).
    """

    comm_bytes_per_device: int
    comm_time_s: float
    compute_time_s: float
    memory_bytes_per_device: int
    objective: float
    step_time_s: float
    overlap: str
    exposed_comm_time_s: float
    hidden_comm_time_s: float
    phases: tuple[tuple[str, PhaseTimes], ...]  # in planner.partitioning.schedule.PHASES order
    step_overhead_s: float = 0.0

    @property
    def overlap_gap(self) -> float:
        serial = self.objective + self.step_overhead_s
        if serial <= 0:
            return 0.0
        # the schedule is at most the program's serial sum, which is the objective summed in another order:
        # a negative gap is rounding
        return max(0.0, (serial - self.step_time_s) / serial)

    def to_dict(self) -> dict:
        return {
            "comm_bytes_per_device": self.comm_bytes_per_device,
            "comm_time_s": self.comm_time_s,
            "compute_time_s": self.compute_time_s,
            "memory_bytes_per_device": self.memory_bytes_per_device,
            "objective": self.objective,
            "step_time_s": self.step_time_s,
            "overlap": self.overlap,
            "exposed_comm_time_s": self.exposed_comm_time_s,
            "hidden_comm_time_s": self.hidden_comm_time_s,
            "overlap_gap": self.overlap_gap,
            "step_overhead_s": self.step_overhead_s,
            "phases": {ph: times.to_dict() for ph, times in self.phases},
        }

    def schedule_lines(self, training: bool) -> list[str]:
        """The step time and each phase's exposed and hidden communication, as the text report prints them."""
        gap = (f"; the objective's serial sum overstates it by {100 * self.overlap_gap:.1f}%"
               if self.overlap != "none" else "")
        lines = [f"step time {format_seconds(self.step_time_s)} (overlap {self.overlap}{gap}): communication exposed "
                 f"{format_seconds(self.exposed_comm_time_s)}, hidden {format_seconds(self.hidden_comm_time_s)}"]
        parts = []
        for ph, t in self.phases:
            if ph != "forward" and not training:
                continue
            compute = f"compute {format_seconds(t.compute_time_s)}, " if ph != "gradient" else ""
            parts.append(f"{ph} {compute}communication exposed {format_seconds(t.exposed_comm_time_s)}, "
                         f"hidden {format_seconds(t.hidden_comm_time_s)}")
        lines.append("per phase: " + "; ".join(parts))
        return lines


@dataclass(frozen=True, slots=True)
class Candidate:
    """One enumerated strategy of an op, with its own cost (s: compute, output delivery, own gradients)."""

    index: int
    strategy: Strategy
    cost_s: float
    memory_bytes: int
    chosen: bool

    @property
    def text(self) -> str:
        return self.strategy.text()


@dataclass(frozen=True, eq=False, slots=True)
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


@dataclass(frozen=True, eq=False, slots=True)
class Plan:
    """A decided plan: what every tensor and op gets, what moves, what it costs, and the model it decided.

    A value: frozen, every field set by :func:`make_plan` and never written afterwards.

    Fields:

    * ``model``: the model's name; ``search``: the search that decided it (``bfs`` after an
      ILP fallback); ``training``: a training step (backward and gradient reductions included);
    * ``mesh``: the mesh it was planned on; ``meshes``: that mesh, then the model's other meshes;
    * ``tensors``: each tensor's :class:`TensorDecision` by name; ``ops``: each op's
      :class:`OpDecision` in graph order; ``redistributions``: every redistribution that moves
      data, in program order; ``totals``: the :class:`Totals`;
    * ``program``: the lowered SPMD program (:func:`planner.partitioning.lower`) everything
      above is read from, and what the simulator and the JAX engine run;
    * ``decision``: the decided model the search returned
      (:class:`~planner.model.decision.Decision`): the planning model with its cost
      tables (``decision.model``), one candidate per node (``decision.choice``) and why;
    * ``solver``: the ILP solver's report (None for other searches); ``warnings``: notes such as
      an ILP fallback, also issued as :class:`~planner.errors.PlanWarning`.

    Read-only accessors: :attr:`graph` (the :class:`~graphs.ComputationGraph` planned),
    :attr:`cluster` (the :class:`~costmodels.Cluster` it was costed on), :attr:`reshards`,
    :attr:`gradient_syncs`, :attr:`propagation` and :attr:`search_space`; :meth:`op` and
    :meth:`tensor` look one up by name. The search's cost tables: :meth:`candidates` and
    :meth:`edge_costs`.

    ``repr(plan)`` is one line; ``str(plan)`` (and :meth:`summary`) the table ``shardplan plan`` prints:

    >>> from planner.api import plan
    >>> p = plan("configs/ffn.yaml")
    >>> p
    Plan(model='ffn', search='auto', mesh=<["d"=8]>, ops=5, comm=1,536 B/device, objective=27.0 us)
    >>> print(p)  # doctest: +ELLIPSIS
    model ffn, search auto, mesh @mesh = <["d"=8]>
    ...
    totals: communication 1,536 B per device in 17.0 us, ...
    >>> p.graph.name, p.mesh.size, p.decision.search
    ('ffn', 8, 'auto')
    """

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
    decision: Decision
    # why each node of the decided model was chosen (provenance's ``ops``, ``tensors``, ``parent`` and
    # ``node_reason`` tables): what :meth:`explain` walks
    _reasons: Mapping[str, Mapping] = field(repr=False)
    solver: SolverReport | None = None
    warnings: tuple[str, ...] = ()
    # derived from the fields above while constructing (so a ``dataclasses.replace`` copy derives its own)
    _op_by_name: Mapping[str, OpDecision] = field(init=False, repr=False)
    _links_by_tensor: Mapping[str, tuple[int, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # a frozen dataclass sets its derived fields through object.__setattr__, once, here
        object.__setattr__(self, "_op_by_name", MappingProxyType({o.name: o for o in reversed(self.ops)}))
        object.__setattr__(self, "_links_by_tensor", _links_by_tensor(self.decision.model))

    # -- the two string forms ------------------------------------------------------------------
    def __repr__(self) -> str:
        extra = ((", training=True" if self.training else "")
                 + (f", warnings={len(self.warnings)}" if self.warnings else ""))
        return (f"Plan(model={self.model!r}, search={self.search!r}, mesh={self.mesh.axes_text()}, "
                f"ops={len(self.ops)}, "
                f"comm={format_bytes(self.totals.comm_bytes_per_device)}/device, "
                f"objective={format_seconds(self.totals.objective)}{extra})")

    def __str__(self) -> str:
        """The :meth:`summary` without its final newline, so ``print(plan)`` writes exactly what the CLI does."""
        return self.summary().removesuffix("\n")

    # -- what callers read ---------------------------------------------------------------------
    @property
    def graph(self) -> ComputationGraph:
        """The computation graph that was planned (on the planning mesh)."""
        return self.decision.model.graph

    @property
    def cluster(self) -> Cluster:
        """The cluster every cost was computed on."""
        return self.decision.model.cluster

    @property
    def propagation(self) -> Propagation | None:
        """What rule-based propagation gave (:class:`planner.model.decision.Propagation`; None for other
        searches): every tensor's sharding, the origin of each axis, the phases."""
        return self.decision.propagation

    @property
    def search_space(self) -> SearchSpace | None:
        """What the search ran over (:class:`planner.model.phases.SearchSpace`; None in explicit mode)."""
        return self.decision.space

    def op(self, name: str) -> OpDecision:
        found = self._op_by_name.get(name)
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
        """The strategy table: one row per op, as plain data (``strategy`` as split counts per operand
        dimension, ``[[2, 1], [1, 4]]``; :meth:`OpDecision.strategy`'s ``text()`` is MindSpore's text)."""
        return [o.to_dict() for o in self.ops]

    def to_dict(self, phases: bool = False) -> dict:
        """The JSON form; ``phases``: with every tensor's sharding after each propagation phase."""
        out = {
            "model": self.model,
            "search": self.search,
            "meshes": [str(m) for m in self.meshes],
            "tensors": {name: t.to_dict() for name, t in self.tensors.items()},
            "ops": self.table(),
            "redistributions": [redistribution_dict(r) for r in self.reshards],
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

    def summary(self) -> str:
        """The table ``shardplan plan`` prints: each op's strategy, tensors where the mode is about them,
        the redistributions, ops' own collectives, gradient reductions and the totals."""
        rows = [(o.name, o.kind, o.strategy.text(), o.result_sharding.dims_text(), o.source) for o in self.ops]
        out = [f"model {self.model}, search {self.search}, mesh {self.mesh}", ""]
        out.append(table(rows, header=("op", "kind", "strategy", "result sharding", "source")))
        # every tensor's sharding where the mode is about it; types (seed 001) name the Explicit axes only:
        # every axis in explicit mode, a mixed mesh's Explicit axes otherwise
        explicit_axes = axes_of_type(self.mesh, AxisType.EXPLICIT)
        type_axes = frozenset(a.name for a in self.mesh.axes) if self.search == "explicit" else explicit_axes
        if self.search in ("explicit", "propagate") or explicit_axes:

            def typed(t):
                return (to_jax_type(restrict(t.sharding, type_axes), t.shape, t.dtype),) if type_axes else ()

            trows = [(name, *typed(t), t.sharding.dims_text(), t.source) for name, t in self.tensors.items()]
            header = ("tensor", *(("type",) if type_axes else ()), "sharding", "source")
            out += ["", table(trows, header=header)]
            if explicit_axes and self.search != "explicit":
                out.append(f"types name the Explicit axes ({', '.join(sorted(explicit_axes))}); the Auto axes are "
                           f"the {self.search} search's")
        if self.reshards:
            out += ["", "redistributions:"]
            rs = []
            for r in self.reshards:
                phase = f" [{r.phase}]" if self.training else ""
                rs.append((r.tensor, f"{r.producer or 'input'} -> {', '.join(r.readers) or 'output'}{phase}",
                           _steps_text(r.steps), format_bytes(r.bytes_per_device), format_seconds(r.time_s)))
            out.append(table(rs, header=("tensor", "edge", "steps", "bytes/device", "time")))
        body = [(o, c) for o in self.ops for c in o.collectives]
        if body:
            out += ["", "ops' own collectives (forward):"]
            out.append(table([(o.name, o.kind, f"{c.kind}{{{', '.join(map(str, c.axes))}}}",
                               format_bytes(c.bytes_per_device), format_seconds(c.time_s))
                              for o, c in body], header=("op", "collective", "steps", "bytes/device", "time")))
        if self.gradient_syncs:
            out += ["", "gradient reductions:"]
            gs = [(g.tensor, _steps_text(g.steps), format_bytes(g.bytes_per_device), format_seconds(g.time_s))
                  for g in self.gradient_syncs]
            out.append(table(gs, header=("param", "steps", "bytes/device", "time")))
        t = self.totals
        out += ["", "totals: " + ", ".join([
            f"communication {format_bytes(t.comm_bytes_per_device)} per device in {format_seconds(t.comm_time_s)}",
            f"compute {format_seconds(t.compute_time_s)}",
            f"memory {format_bytes(t.memory_bytes_per_device)} per device",
            f"objective {format_seconds(t.objective)}",
        ])]
        out += t.schedule_lines(self.training)
        if self.search_space is not None and self.search_space.restricted:
            out.append(self.search_space.describe(self.totals.objective))
        if self.solver:
            s = self.solver
            gap = "n/a" if s.gap is None else f"{s.gap:.3g}"
            out.append(f"solver: {s.name} {s.status} (optimal: {s.optimal}, gap {gap}) in "
                       f"{format_seconds(s.time_s)}, {s.variables} variables solved")
        return "\n".join(out) + "\n"

    def export(self, to: str) -> dict:
        """The plan in another notation: ``jax``, ``shardy``, ``dtensor`` or ``mindspore``
        (:func:`planner.export.export`), as JSON-ready data keyed by tensor and op."""
        from planner.export import export  # the exporters load for an export only

        return export(self, to)

    def explain(self, tensor: str) -> list[str]:
        """The chain of decisions from ``tensor`` back to a user annotation (see ``shardplan explain``)."""
        t = self.tensor(tensor)
        o = self.decision
        if o.propagation is not None:
            lines = [f"{tensor}: {t.sharding}", *(f"  {line}" for line in o.propagation.explain(tensor))]
        else:
            lines = explain(o.model, o.choice, o.parents, tensor, t.sharding, self._reasons)
        return lines[:1] + region_lines(self.graph, tensor) + lines[1:]

    # -- the cost tables ----------------------------------------------------------------------
    def candidates(self, op: str) -> tuple[Candidate, ...]:
        """Every strategy enumerated for ``op`` (after the user's constraints) with its own cost.

        >>> from planner.api import plan
        >>> p = plan("configs/ffn.yaml")
        >>> [c.text for c in p.candidates("relu") if c.chosen]
        ['((2, 4),)']
        """
        m = self.decision.model
        self.op(op)
        i = m.op_index[op]
        node, costs = m.nodes[i], m.problem.nodes[i]
        return tuple(Candidate(c, s, float(costs.cost[c]), int(costs.memory[c]) if costs.memory is not None else 0,
                               c == self.decision.choice[i]) for c, s in enumerate(node.strategies))

    def edge_costs(self, tensor: str, reader: str) -> EdgeCosts:
        """The redistribution cost table of ``tensor`` between its producer's candidates and ``reader``'s.

        Read off the planning model's cost tables (its search problem's edges and fanouts), the
        cells the search did not read computed as it would have.

        >>> from planner.api import plan
        >>> p = plan("configs/ffn.yaml")
        >>> t = p.edge_costs("h3", "dense2.matmul")
        >>> t.seconds.shape == (len(t.producer_candidates), len(t.reader_candidates))
        True
        """
        m = self.decision.model
        self.tensor(tensor)
        self.op(reader)
        v = m.op_index[reader]
        for k in self._links_by_tensor.get(tensor, ()):
            link = m.flows[k]
            if v in link.readers:
                u = link.producer
                return EdgeCosts(tensor, m.nodes[u].name, reader, m.problem.nodes[u].labels, m.problem.nodes[v].labels,
                                 _reader_seconds(m, k, v), link.kind == "fanout")
        readers = [op for op, _ in self.graph.consumers(tensor)]
        if reader not in readers:
            raise PlanningError(f"op {quote(reader)} does not read tensor {quote(tensor)}; its readers are {', '.join(readers)}")
        raise PlanningError(f"tensor {quote(tensor)} is stored as {quote(reader)} reads it (its only reader): it has no "
                            "edge to redistribute over")


def _reader_seconds(m: Model, k: int, v: int) -> np.ndarray:
    """Seconds of link ``k`` for reader node ``v``: one row per producer candidate, one column per ``v``'s."""
    link = m.flows[k]
    problem = m.problem
    if link.kind == "fanout":
        # every layout (and cotangent) this reader's candidate needs, each priced as its own copy
        f = problem.fanouts[k - len(problem.edges)]
        needs = f.needs[link.readers.index(v)]
        return np.array([[sum(f.class_cost[f.u_class[a], L] for L in cols) for cols in needs]
                         for a in range(m.nodes[link.producer].candidates())], dtype=float)
    # the forward part: with training the search's table also prices the transposes back, and the
    # model keeps the forward part beside it (Edge.forward)
    return np.asarray(problem.edges[k].forward_cost, dtype=float)


def _links_by_tensor(m: Model) -> Mapping[str, tuple[int, ...]]:
    """The data and fanout links of each tensor, in link order."""
    out: dict[str, list[int]] = {}
    for k, link in enumerate(m.flows):
        if link.kind in ("data", "fanout"):
            out.setdefault(link.tensor, []).append(k)
    return MappingProxyType({t: tuple(ks) for t, ks in out.items()})


def _steps_text(steps) -> str:
    return ", ".join(f"{s.kind}{'{' + ','.join(map(str, s.axes)) + '}' if s.axes else ''}" for s in steps)


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


def make_plan(decision: Decision) -> Plan:
    """Lower ``decision`` and read the plan off its program (see the module docstring)."""
    m, choice = decision.model, decision.choice
    graph = m.graph
    program = lower(m, choice)
    if decision.propagation is not None:
        reasons = propagation_reasons(m, decision.propagation)
    else:
        reasons = decision_reasons(m, choice, decision.parents)
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
                              forward_comm.get(c.op.name, 0.0) + sum(o.time_s for o in c.collectives),
                              c.collectives))
    redistributions = tuple(r for r in program.redistributions() if r.steps)  # a transpose may move nothing
    step = schedule(program, m.cluster, m.options.overlap)
    totals = Totals(
        comm_bytes_per_device=program.comm_bytes_per_device(),
        comm_time_s=program.comm_time_s(),
        compute_time_s=program.compute_time_s(),
        memory_bytes_per_device=int(m.problem.memory(choice)),
        objective=m.problem.objective(choice),
        step_time_s=step.step_time_s,
        overlap=step.overlap,
        exposed_comm_time_s=step.exposed_comm_time_s,
        hidden_comm_time_s=step.hidden_comm_time_s,
        phases=step.phases,
        step_overhead_s=step.step_overhead_s,
    )
    meshes = (m.mesh,) + tuple(x for x in graph.meshes.values() if x != m.mesh)
    return Plan(model=graph.name, search=decision.search, mesh=m.mesh, meshes=meshes, tensors=MappingProxyType(tensors),
                ops=tuple(ops), redistributions=redistributions, totals=totals, training=m.options.training,
                program=program, decision=decision, _reasons=MappingProxyType(reasons), solver=decision.report,
                warnings=decision.notes)
