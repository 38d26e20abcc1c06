"""What a search is asked: :class:`Request`, the one argument of every search.

``search(request) -> Decision`` is the interface of every module of
:mod:`planner.searches`; :func:`planner.api.plan` normalises the user's arguments
into a request once and picks the search by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodels import Cluster
from graphs.graph import ComputationGraph
from planner.ir.mesh import Mesh
from planner.model.options import Options
from planner.progress import SILENT, Progress

__all__ = ["Request"]


@dataclass(frozen=True)
class Request:
    """A model to plan and how.

    ``graph`` as the user gave it and ``mesh`` the planning mesh (the model's or
    ``--mesh``, with the model's axis types); ``time_limit`` (seconds) bounds the
    whole search; ``solver`` names the ILP's backend; ``axes_per_phase`` is
    ``auto``, ``all`` or a number of mesh pieces per phase
    (:mod:`planner.model.phases`); ``propagation`` names the rule-based pass of
    ``--search propagate``.
    """

    graph: ComputationGraph
    mesh: Mesh
    cluster: Cluster
    options: Options
    time_limit: float | None = None
    solver: str = "auto"
    progress: Progress = SILENT
    axes_per_phase: str | int = "auto"
    propagation: str = "user-priority"
