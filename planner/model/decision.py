"""What a search answers: a decided planning model, and what the search ran over.

:class:`Decision` is one candidate per node of a :class:`~planner.model.nodes.Model`,
why each was taken (BFS parents), the ILP solver's :class:`SolverReport`, what the
search space was (:class:`~planner.model.phases.SearchSpace`) and, for rule-based
propagation, the :class:`Propagation` it ran. The report and the lowering read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding
from planner.model.nodes import Model
from planner.model.phases import SearchSpace

__all__ = ["AxisOrigin", "Decision", "Phase", "Propagation", "SolverReport"]


@dataclass(frozen=True, slots=True)
class SolverReport:
    """What the solver did: its verdict, gap, time (s) and the size of the model it solved.

    ``tied_layers``: repeated layers shared one decision (a restriction of the problem:
    ``optimal`` then means optimal among plans that repeat one choice per layer).
    """

    name: str
    status: str
    optimal: bool
    gap: float | None
    time_s: float
    variables: int
    constraints: int
    nodes_solved: int
    tied_layers: bool = False


@dataclass(frozen=True)
class AxisOrigin:
    """Where one axis of a tensor's dimension came from: the phase and what gave it."""

    axis: AxisRef
    phase: str
    source: str  # "user annotation", "op NAME", "strategy of op NAME", "shard_as group [..]", ...

    def text(self) -> str:
        return f"{self.axis} from {self.source} ({self.phase})"


@dataclass(frozen=True)
class Phase:
    """Every tensor's sharding once a phase (a user priority, an op-priority level) reached its fixed point."""

    label: str
    shardings: Mapping[str, TensorSharding]
    visits: int  # op and group visits this phase made


@dataclass(frozen=True)
class Propagation:
    """What rule-based propagation gave (see the module docstring)."""

    how: str
    mesh: Mesh
    shardings: Mapping[str, TensorSharding]
    origins: Mapping[str, tuple[tuple[AxisOrigin, ...], ...]]  # tensor -> per dimension, its axes' origins
    phases: tuple[Phase, ...]

    def sharding(self, tensor: str) -> TensorSharding:
        return self.shardings[tensor]

    @property
    def visits(self) -> int:
        return sum(p.visits for p in self.phases)

    def explain(self, tensor: str) -> tuple[str, ...]:
        """One line per dimension: which phase and which op or annotation gave each axis."""
        out = []
        for d, origins in enumerate(self.origins[tensor]):
            if origins:
                out.append(f"dimension {d}: " + "; ".join(o.text() for o in origins))
            else:
                out.append(f"dimension {d}: unsharded")
        return tuple(out)


@dataclass(frozen=True)
class Decision:
    """A decided model: one candidate per node, why (BFS parents), the solver's report, notes."""

    model: Model
    choice: tuple[int, ...]
    parents: tuple | None  # BFS: per node (neighbour, link) it was decided from; None for the ILP
    report: SolverReport | None  # the ILP's solver report
    search: str  # the search that decided it ("bfs" after an ILP fallback)
    notes: tuple[str, ...] = ()
    space: SearchSpace | None = None  # the whole problem or axis phases, and a bound (None: explicit mode)
    propagation: Propagation | None = None  # what rule-based propagation gave (``--search propagate``)
