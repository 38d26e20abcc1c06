"""The phases the breadth-first and ILP searches run in: priorities, then axis pieces.

:func:`run` builds the planning model (:mod:`planner.model.build`) and has it decided
by a search's ``decide`` (``bfs`` or ``ilp``), phase by phase:

* **priority phases**: when annotations carry several priorities, each phase
  plans with the annotations of priority ``<= p`` active and the axes they use,
  extending the factor axes earlier phases chose; the last phase plans the whole
  problem with those prefixes;
* **axis phases**: a mesh of many pieces is planned a few pieces at a time
  (:mod:`planner.model.phases`), each phase extending the factor axes the previous
  one chose;
* **time limit**: once the request's ``time_limit`` has passed no further phase
  starts (the plan so far is returned, with a note); ``decide`` gets the deadline.

:func:`prepared` puts the request's graph on its planning mesh, checks it, and gives
every op the factor axes that compute its types on Explicit mesh axes (seed 001), so
the search decides only the Auto axes.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Callable

import numpy as np

from costmodels.units import format_bytes
from planner.model.annotations import axes_of, priorities, user_annotation
from planner.model.axis_types import check_axis_types, explicit_prefixes, op_explicit_axes
from planner.model.build import build_model, constraints
from planner.model.decision import Decision
from planner.model.manual import check_plannable
from planner.model.mesh_override import on_mesh
from planner.model.nodes import Model, OpNode
from planner.model.phases import SearchSpace, axis_phases, lower_bound_s
from planner.model.request import Request
from planner.errors import PlanningError
from planner.progress import Progress

__all__ = ["Decide", "check_memory_budget", "checked", "on_planning_mesh", "prefixes_of", "prepared", "run", "with_explicit_types"]

Decide = Callable[[Model, "float | None", list, Request], Decision]
"""``decide(model, deadline, notes, request) -> Decision``: one phase's model decided by a search
(``deadline``: ``time.monotonic()`` it must finish by, None: no limit; ``notes``: where it says what
it fell back to)."""


def checked(request: Request) -> Request:
    """Refuse what the request's graph cannot be planned as on its mesh: axis types, manual regions."""
    check_axis_types(request.mesh)
    check_plannable(request.graph, request.mesh)
    if request.graph.manual_regions and request.options.training and not request.options.insert_pbroadcast:
        raise PlanningError("--no-pbroadcast treats every cotangent as a pending sum over the mesh, which a manual "
                            "region's body values (blocks that differ over its manual axes) cannot be; train "
                            "models with regions with the variance types (drop --no-pbroadcast)")
    return request


def on_planning_mesh(request: Request) -> Request:
    """``request`` with its graph's annotations on the planning mesh (kept by axis name, or a clear refusal),
    checked."""
    return checked(replace(request, graph=on_mesh(request.graph, request.mesh)))


def with_explicit_types(request: Request) -> Request:
    """``request`` with seed 001's types where axes are Explicit: every op keeps the factor axes that compute
    its types on them, and the search decides the Auto rest."""
    graph, mesh = request.graph, request.mesh
    if any(op_explicit_axes(graph, mesh).values()):
        prefixes, fixed, _ = explicit_prefixes(graph, mesh)
        request = replace(request, options=replace(request.options, prefixes=prefixes, fixed_axes=fixed))
    return request


def prepared(request: Request) -> Request:
    """``request`` on its planning mesh (:func:`on_planning_mesh`), with its Explicit axes typed
    (:func:`with_explicit_types`)."""
    return with_explicit_types(on_planning_mesh(request))


def run(request: Request, how: str, decide: Decide) -> Decision:
    """Build and decide ``request`` phase by phase with search ``how``'s ``decide`` (see the module docstring)."""
    graph, mesh, cluster, options = request.graph, request.mesh, request.cluster, request.options
    progress: Progress = request.progress
    time_limit = request.time_limit
    axes_per_phase = request.axes_per_phase
    say = progress.stage
    deadline = None if time_limit is None else time.monotonic() + time_limit
    notes: list[str] = []
    annotations = [user_annotation(graph, name, mesh) for name, t in graph.tensors.items() if t.sharding is not None]
    levels = priorities(annotations)
    if len(levels) > 1:
        prefixes: dict = dict(options.prefixes)  # Explicit axes' factor axes, if any, hold in every phase
        for level in levels:
            say(f"priority phase p{level} of {len(levels)}")
            allowed = frozenset(axes_of(a for a in annotations if any(d.priority <= level and d.axes for d in a.dims)))
            phase = replace(options, priority_level=level, allowed_axes=allowed, prefixes=dict(prefixes))
            m = build_model(graph, mesh, cluster, phase, progress)
            check_memory_budget(m)
            outcome = decide(m, deadline, notes, request)
            prefixes = prefixes_of(m, outcome.choice)
        options = replace(options, prefixes=prefixes)
    pieces = constraints(graph, mesh, options)[2]
    phases = axis_phases(pieces, axes_per_phase)
    # what the priority phases chose stays; the axis phases add the other pieces
    taken = {a for fa in options.prefixes.values() for axes in fa for a in axes}
    typed = frozenset.intersection(*options.fixed_axes.values()) if options.fixed_axes else frozenset()
    allowed_so_far = tuple(p for p in pieces if any(a.contains(p, mesh) for a in taken)
                           or p.name in typed)  # axes Explicit for every op are typed, not searched
    phases = tuple(q for q in (tuple(p for p in ph if p not in allowed_so_far) for ph in phases) if q)
    if len(phases) <= 1:
        phases = (pieces,)  # the whole problem
    outcome, done = None, 0
    for k, new in enumerate(phases):
        if outcome is not None and deadline is not None and time.monotonic() >= deadline:
            notes.append(f"the time limit ({time_limit:g} s) passed after axis phase {done} of {len(phases)}: "
                         f"the pieces of the later phases are left unused")
            break
        if len(phases) > 1:
            allowed_so_far += new
            say(f"axis phase {k + 1} of {len(phases)}: {', '.join(map(str, new))}")
            options = replace(options, phase_new=new, phase_allowed=allowed_so_far,
                              prefixes=prefixes_of(outcome.model, outcome.choice) if outcome else options.prefixes)
        say("enumerating strategies and building cost tables")
        m = build_model(graph, mesh, cluster, options, progress)
        check_memory_budget(m)
        say(f"searching ({how}) over {m.problem.variables} candidates")
        outcome = decide(m, deadline, notes, request)
        done += 1
    rules = {o.name: n.rule for o, n in zip(graph.ops, outcome.model.nodes)}
    bound = lower_bound_s(graph, mesh, cluster, options.training, outcome.model.needs_grad, rules)
    tied = outcome.report is not None and outcome.report.tied_layers
    return replace(outcome, notes=tuple(notes), space=SearchSpace(phases, done, bound, tied))


def check_memory_budget(m: Model) -> None:
    """Refuse a memory budget below what every plan of ``m`` needs (each op's and tensor's least memory per
    device, summed: a lower bound of any plan's), before a search reports that it found nothing."""
    budget = m.problem.memory_budget
    if budget is None:
        return
    least = sum(float(np.min(node.memory)) for node in m.problem.nodes if node.memory is not None and node.n)
    if least > budget * (1 + 1e-9):
        raise PlanningError(f"the memory budget of {format_bytes(budget)} per device is below what the smallest "
                            f"plan needs: at least {format_bytes(least)} per device (each op's and tensor's least "
                            f"memory, summed); give --memory-budget {math.ceil(least)} "
                            "or more, or plan on more devices")


def prefixes_of(m: Model, choice) -> dict:
    """Each op's factor axes under ``choice``: what the next phase extends."""
    return {n.name: n.strategies[c].factor_axes for n, c in zip(m.nodes, choice) if isinstance(n, OpNode)}
