"""The default search ``auto``: the ILP's optimum wherever it comes quickly, else breadth-first propagation's plan.

Each phase's model (:mod:`planner.searches.phased`) is decided by :func:`planner.searches.ilp.decide`
with at most :data:`PHASE_SECONDS` of its own: the shrunk model solved exactly by variable
elimination (:mod:`planner.searches.elimination`; no MIP) where its tables stay small, else by
HiGHS, and breadth-first propagation's plan, made first, kept when the solver cannot answer in
time or answers worse. So the plan is ``ilp``'s wherever the ILP finishes within the budget, and
never worse than ``bfs``'s. A request's ``time_limit`` still bounds the whole search.

Why this is the default: on every file in ``configs/`` and on the GPT builder at 12 to 48 layers,
forward and training, elimination gives the ILP's optimum in seconds, where breadth-first
propagation's objective is up to several times worse (``python benchmarks/plan.py --searches``).
"""

from __future__ import annotations

import time
from dataclasses import replace

from planner.model.decision import Decision
from planner.model.ignored import ignored_annotations
from planner.model.nodes import Model
from planner.model.request import Request
from planner.searches import ilp, phased

PHASE_SECONDS = 20.0
"""Seconds each phase's ILP may take (cost tables, model and solver) before ``auto`` keeps the BFS plan."""


def decide(m: Model, deadline: float | None, notes: list[str], request: Request) -> Decision:
    """``m`` decided by the ILP within :data:`PHASE_SECONDS` (and ``deadline``), else by breadth-first propagation."""
    budget = time.monotonic() + PHASE_SECONDS
    return ilp.decide(m, budget if deadline is None else min(deadline, budget), notes, request)


def search(request: Request) -> Decision:
    """The search ``auto``: :func:`decide` phase by phase. The plan says ``auto`` and carries no solver report:
    the solver's time in it would make the same model's plan differ from run to run (``--search ilp`` shows
    it); a note says where a phase kept breadth-first propagation's plan."""
    notes = ignored_annotations(request.graph, "auto")
    decision = phased.run(phased.prepared(request), "auto", decide)
    return replace(decision, search="auto", report=None, notes=(*notes, *decision.notes))
