"""``compare``: rule-based propagation, BFS and the ILP on one model and one cost model, side by side.

:func:`compare` plans the model with each search (the same mesh, cluster, training
flag and memory budget) and reads every figure off each plan: its objective,
communication bytes and time, collectives by kind (:meth:`Program.collective_counts
<planner.partitioning.program.Program.collective_counts>`, what the CI gate counts),
memory per device, the seconds it took to plan (each search from cold caches), and its gap to the ILP's optimum
(``objective / optimum - 1``; unknown when the ILP was not proven optimal, e.g.
stopped by a time limit), and its step time scheduled under the ``overlap`` asked for
(``totals.step_time_s``: every search optimises the serial objective, so it is reported beside it).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any, Mapping

from planner.api import PlanWarning, load, plan
from planner.caches import clear_caches
from planner.progress import as_progress, prefixed

COMPARED = ("propagate", "bfs", "ilp")


@dataclass(frozen=True)
class Entry:
    """One search's plan of the model, by the figures ``compare`` reports."""

    search: str
    objective: float
    comm_bytes_per_device: int
    comm_time_s: float
    compute_time_s: float
    memory_bytes_per_device: int
    collectives: Mapping[str, int]
    plan_s: float
    gap: float | None  # objective over the ILP optimum, minus 1 (None: no proven optimum)
    warnings: tuple[str, ...] = ()
    step_time_s: float = 0.0  # the plan's scheduled step (Totals.step_time_s)

    def to_dict(self) -> dict:
        return {"search": self.search, "objective": self.objective, "step_time_s": self.step_time_s,
                "comm_bytes_per_device": self.comm_bytes_per_device,
                "comm_time_s": self.comm_time_s, "compute_time_s": self.compute_time_s,
                "memory_bytes_per_device": self.memory_bytes_per_device, "collectives": dict(self.collectives),
                "plan_s": self.plan_s, "gap_to_ilp": self.gap, "warnings": list(self.warnings)}


@dataclass(frozen=True)
class Comparison:
    """The plans of one model by each search (see the module docstring)."""

    model: str
    mesh: str
    training: bool
    entries: tuple[Entry, ...]
    optimum: float | None  # the ILP's proven optimum (None: not proven)
    overlap: str = "async"  # how each entry's step_time_s is scheduled

    def to_dict(self) -> dict:
        return {"model": self.model, "mesh": self.mesh, "training": self.training, "overlap": self.overlap,
                "ilp_optimum": self.optimum,
                "searches": [e.to_dict() for e in self.entries]}


def compare(model: Any, *, searches=COMPARED, propagation: str = "user-priority", **options) -> Comparison:
    """Plan ``model`` with each of ``searches`` under the same ``options`` (those of :func:`planner.api.plan`)."""
    graph = load(model)
    plans, seconds, notes = {}, {}, {}
    progress = as_progress(options.pop("progress", None))
    for k, search in enumerate(searches):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PlanWarning)
            clear_caches()  # each search starts cold: no search reuses the tables another built
            t0 = time.perf_counter()
            extra = {"propagation": propagation} if search == "propagate" else {}
            # every line and bar says which search runs: "ilp (3 of 3): cost tables"
            heard = prefixed(progress, f"{search} ({k + 1} of {len(searches)})")
            plans[search] = plan(graph, search=search, progress=heard, **options, **extra)
            seconds[search] = time.perf_counter() - t0
        notes[search] = tuple(str(w.message) for w in caught)
    ilp = plans.get("ilp")
    optimum = ilp.totals.objective if ilp is not None and ilp.solver is not None and ilp.solver.optimal else None
    entries = []
    for search, p in plans.items():
        t = p.totals
        gap = None if optimum is None else (t.objective / optimum - 1.0 if optimum > 0 else 0.0)
        entries.append(Entry(search, t.objective, t.comm_bytes_per_device, t.comm_time_s, t.compute_time_s,
                             t.memory_bytes_per_device, p.program.collective_counts(), seconds[search], gap,
                             notes[search], t.step_time_s))
    first = next(iter(plans.values()))
    return Comparison(graph.name, str(first.mesh), bool(options.get("training", False)), tuple(entries), optimum,
                      first.totals.overlap)
