"""Planning a large mesh a few axes at a time (OpenXLA's iterative auto-sharding).

An op on a mesh of ``n`` axis pieces has up to ``(1 + factors) ** n`` strategies
and an edge table holds the product of two such counts: on three or more axes the
whole problem stops being tractable. So on such meshes the search runs in
*phases*: phase ``k`` decides what the next few pieces (mesh order) do for every
op, keeping what earlier phases decided — each factor keeps its axes and new
pieces go to at most one factor, anywhere among them
(:func:`planner.enumeration.enumerate_extensions`). Pieces an op left unused stay
unused. Every phase is planned on the whole mesh, so the last phase's costs are
those of the real program, and each phase's ILP is optimal for the problem it
solves; the restriction is that earlier phases cannot revisit their choices.

A restricted plan says so (:class:`SearchSpace`) and reports its gap against
:func:`lower_bound_s`, a bound on the unrestricted problem.

>>> from planner.ir.mesh import Mesh
>>> from planner.enumeration import search_pieces
>>> m = Mesh.from_sizes("m", {"x": 2, "y": 2, "z": 2})
>>> [[str(a) for a in p] for p in axis_phases(search_pieces(m), "auto")]
[['"x"', '"y"'], ['"z"']]
>>> len(axis_phases(search_pieces(m), "all"))
1
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from costmodels import Cluster, compute_time_s
from costmodels.units import format_seconds
from planner.errors import PlanningError, quote
from planner.ir.axis import AxisRef, merge_adjacent
from planner.ir.mesh import Mesh
from planner.ir.sharding import DimSharding, TensorSharding
from planner.rules.factors import FactorKind

#: With ``auto``, meshes of at most this many pieces are planned whole; larger ones in
#: phases: this many pieces first, then :data:`LATER_PHASE` at a time.
WHOLE_UP_TO = 2
LATER_PHASE = 1

PHASE_CHOICES = "auto, all or a number of pieces per phase"


@dataclass(frozen=True)
class SearchSpace:
    """What the search ran over: the whole problem, or phases of mesh pieces.

    ``phases``: the pieces each phase decided (one phase: the whole problem);
    ``completed``: how many ran (fewer when the time limit stopped the run: the
    pieces of the rest are unused); ``lower_bound_s``: a bound on the objective of
    the unrestricted problem (:func:`lower_bound_s`), for the gap; ``tied_layers``:
    the ILP gave repeated layers one shared decision.
    """

    phases: tuple[tuple[AxisRef, ...], ...]
    completed: int
    lower_bound_s: float
    tied_layers: bool = False

    @property
    def restricted(self) -> bool:
        return len(self.phases) > 1 or self.tied_layers

    def phase_texts(self) -> list[list[str]]:
        return [[str(a) for a in p] for p in self.phases]

    def describe(self, objective: float) -> str:
        """One line for the plan's header."""
        if not self.restricted:
            return "search space: the whole problem"
        parts = []
        if len(self.phases) > 1:
            steps = " then ".join("{" + ", ".join(p) + "}" for p in self.phase_texts())
            done = "" if self.completed == len(self.phases) else f" (stopped after {self.completed} by the time limit)"
            parts.append(f"mesh pieces in phases {steps}{done}")
        if self.tied_layers:
            parts.append("repeated layers share one decision")
        return (f"search space: {' and '.join(parts)}; objective {format_seconds(objective)} is "
                f"{gap(objective, self.lower_bound_s):.3g}x a lower bound of {format_seconds(self.lower_bound_s)} "
                "on the unrestricted problem (compute at full work division, no communication)")

    def to_dict(self, objective: float) -> dict:
        return {"restricted": self.restricted, "phases": self.phase_texts(), "completed_phases": self.completed,
                "tied_layers": self.tied_layers, "lower_bound_s": self.lower_bound_s, "objective_over_bound": gap(objective, self.lower_bound_s)}


def gap(objective: float, bound: float) -> float:
    """``objective / bound`` (1.0 when both are zero)."""
    if bound <= 0:
        return 1.0 if objective <= 0 else math.inf
    return objective / bound


def parse_per_phase(value) -> str | int:
    """``auto``, ``all`` or a positive number of pieces per phase (a PlanningError otherwise)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    text = str(value).strip()
    if text in ("auto", "all"):
        return text
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise PlanningError(f"axes per phase must be {PHASE_CHOICES}, got {quote(value)}")


def axis_phases(pieces: Sequence[AxisRef], per_phase="auto") -> tuple[tuple[AxisRef, ...], ...]:
    """The pieces each phase decides, in mesh order (one phase: the whole mesh at once)."""
    per_phase = parse_per_phase(per_phase)
    pieces = tuple(pieces)
    if per_phase == "all" or not pieces:
        return (pieces,)
    if per_phase == "auto":
        if len(pieces) <= WHOLE_UP_TO:
            return (pieces,)
        first = pieces[:WHOLE_UP_TO]
        rest = pieces[WHOLE_UP_TO:]
        return (first,) + tuple(rest[i:i + LATER_PHASE] for i in range(0, len(rest), LATER_PHASE))
    return tuple(pieces[i:i + per_phase] for i in range(0, len(pieces), per_phase))


# -- restricting constraints to a phase --------------------------------------------------------------

def restrict_axes(axes: Sequence[AxisRef], allowed: Sequence[AxisRef], mesh: Mesh) -> tuple[AxisRef, ...]:
    """The pieces of ``axes`` that are in ``allowed``, in order (adjacent pieces merged)."""
    out: list[AxisRef] = []
    for ref in axes:
        inside = [p for p in allowed if ref.contains(p, mesh)]
        out += sorted(inside, key=lambda p: p.interval(mesh)[0])
    return merge_adjacent(out, mesh)


def restrict_annotation(annotation: TensorSharding, allowed: Sequence[AxisRef]) -> TensorSharding:
    """What an annotation asks of the pieces ``allowed`` so far: each dimension keeps those of its
    axes (open or closed as written), pending sums likewise; replicated axes stay forbidden."""
    mesh = annotation.mesh
    dims = tuple(DimSharding(restrict_axes(d.axes, allowed, mesh), d.is_open, d.priority) for d in annotation.dims)
    return TensorSharding(mesh, dims, annotation.replicated, restrict_axes(annotation.unreduced, allowed, mesh))


def restrict_factor_axes(factor_axes, allowed: Sequence[AxisRef], mesh: Mesh) -> tuple[tuple[AxisRef, ...], ...]:
    """A user's strategy as far as the pieces ``allowed`` so far go."""
    return tuple(restrict_axes(axes, allowed, mesh) for axes in factor_axes)


# -- the bound -------------------------------------------------------------------------------------------

def lower_bound_s(graph, mesh: Mesh, cluster: Cluster, training: bool, needs_grad, rules) -> float:
    """A lower bound on the objective of every plan of ``graph`` on ``mesh``.

    Per op, a bound on its roofline under any strategy, and no communication:

    - FLOPs: divided among as many devices as any strategy could split them (no more
      than the mesh, no more than the product of its shardable factors' sizes: a
      factor admits at most its size), at the best rate any op reaches on the cluster
      (:func:`~costmodels.compute.compute_time_s`: the highest peak at the matmul
      curve's highest efficiency, or the vector rate), since the efficiency of the
      real local instance is at most the curve's highest;
    - bytes: the global bytes accessed divided by the mesh size, at the memory
      bandwidth, since a device holds at least ``1 / mesh.size`` of each operand and
      result (each mesh axis splits a tensor at most once, and padding only adds);
    - the kernel overhead, paid by every op with FLOPs or bytes, as its local instance
      has some too.

    Cheap and valid whatever the search space; loose where communication dominates.
    """
    roofline = cluster.roofline
    total = 0.0
    for op in graph.ops:
        rule = rules[op.name]
        sizes = [rule.factor_sizes[f] for f in range(rule.num_factors)
                 if rule.factor_kinds[f] is not FactorKind.NEED_REPLICATION]
        divisor = min(mesh.size, math.prod(sizes)) if sizes else 1
        flops, nbytes = graph.op_flops(op.name), graph.op_bytes_accessed(op.name)
        if not flops and not nbytes:
            continue
        one = max(compute_time_s(flops / max(divisor, 1), cluster),
                  nbytes / mesh.size / roofline.memory_bandwidth_bytes_per_s) + roofline.kernel_overhead_s
        grads = sum(1 for t in op.inputs if needs_grad.get(t, False)) if training else 0
        total += one * (1 + grads)
    return total
