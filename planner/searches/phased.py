"""Running a search on a graph: priority phases, BFS or ILP, the ILP's check and fallback.

:func:`search` builds the planning model (:mod:`planner.model.build`) and
decides it with ``bfs`` (:mod:`planner.searches.seeding`) or ``ilp``
(:mod:`planner.searches.ilp`):

* **priority phases**: when annotations carry several priorities, each phase
  plans with the annotations of priority ``<= p`` active and the axes they use,
  extending the factor axes earlier phases chose; the last phase plans the whole
  problem with those prefixes;
* **ILP**: solved shrunk first (followers folded, repeated layers solved once);
  the hints restrict the problem, so the answer is checked against BFS on the
  full problem and the full problem is solved exactly when BFS does better. If
  the solver fails or runs out of time the search falls back to BFS with a note.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from planner.errors import PlanningError, SolverFailed
from planner.progress import SILENT, Progress, task
from planner.model.annotations import axes_of, priorities
from planner.model.build import (
    Model,
    OpNode,
    Options,
    build_model,
    constraints,
    user_annotation,
    with_shrink_hints,
)
from planner.model.phases import SearchSpace, axis_phases, lower_bound_s
from planner.searches.seeding import propagate_bfs

SEARCHES = ("bfs", "ilp", "explicit", "propagate")


@dataclass(frozen=True)
class SearchOutcome:
    """A decided model: one candidate per node, why (BFS parents), the solver's report, notes."""

    model: Model
    choice: tuple[int, ...]
    parents: tuple | None  # BFS: per node (neighbour, link) it was decided from; None for the ILP
    report: object | None  # planner.searches.ilp.SolverReport for the ILP
    search: str  # the search that decided it ("bfs" after an ILP fallback)
    notes: tuple[str, ...] = ()
    space: SearchSpace | None = None  # the whole problem or axis phases, and a bound (None: explicit mode)
    propagation: object | None = None  # planner.searches.propagate.engine.Propagation of a propagate plan


def search(graph, mesh, cluster, options: Options, how: str = "bfs", *, time_limit: float | None = None,
           solver: str = "auto", progress: Progress = SILENT, axes_per_phase="auto") -> SearchOutcome:
    """Build and decide ``graph`` on ``mesh`` with search ``how`` (``bfs`` or ``ilp``).

    ``axes_per_phase`` (``auto``, ``all`` or a number of mesh pieces): how many pieces
    of the mesh each axis phase decides (:mod:`planner.model.phases`).
    ``time_limit`` bounds the whole run: the ILP gets what is left of it (reading its cost tables
    and building its model included) and keeps breadth-first propagation's plan, made first, when
    it cannot finish in time; once the limit has passed no further phase starts (the plan so far
    is returned, with a note).
    ``progress`` hears the stages, the cost tables being built and the solver running.
    """
    say = progress.stage
    if how not in ("bfs", "ilp"):
        raise PlanningError(f"unknown search {how!r}; use one of {', '.join(SEARCHES)}")
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
            outcome = _decide(m, how, deadline, solver, notes, progress)
            prefixes = _prefixes(m, outcome.choice)
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
                              prefixes=_prefixes(outcome.model, outcome.choice) if outcome else options.prefixes)
        say("enumerating strategies and building cost tables")
        m = build_model(graph, mesh, cluster, options, progress)
        say(f"searching ({how}) over {m.problem.variables} candidates")
        outcome = _decide(m, how, deadline, solver, notes, progress)
        done += 1
    rules = {o.name: n.rule for o, n in zip(graph.ops, outcome.model.nodes)}
    bound = lower_bound_s(graph, mesh, cluster, options.training, outcome.model.needs_grad, rules)
    tied = outcome.report is not None and outcome.report.tied_layers
    return replace(outcome, notes=tuple(notes), space=SearchSpace(phases, done, bound, tied))


def _left(deadline: float | None) -> float | None:
    """Seconds left before ``deadline`` (None: no deadline; 0 or less: it has passed)."""
    return None if deadline is None else deadline - time.monotonic()


def _prefixes(m: Model, choice) -> dict:
    """Each op's factor axes under ``choice``: what the next phase extends."""
    return {n.name: n.strategies[c].factor_axes for n, c in zip(m.nodes, choice) if isinstance(n, OpNode)}


def decide_fixed(m: Model) -> SearchOutcome:
    """A model whose every op has one candidate (explicit mode): BFS only decides the source layouts."""
    result = propagate_bfs(m)
    return SearchOutcome(m, result.choice, result.parent, None, "explicit")


def _decide(m: Model, how: str, deadline: float | None, solver, notes: list[str],
            progress: Progress = SILENT) -> SearchOutcome:
    """``m`` decided by ``how``. The ILP runs until ``deadline`` (``time.monotonic()``; None: no
    limit) at most, building its tables and model included; breadth-first propagation's plan,
    made first, is the plan in hand it returns when the ILP cannot finish in time."""
    result = propagate_bfs(m)
    reference = SearchOutcome(m, result.choice, result.parent, None, "bfs")
    if how != "ilp":
        return reference
    from planner.searches.ilp import solve_ilp

    try:
        # the shrunk problem first (folded followers, tied layers); if its optimum is worse than
        # breadth-first propagation's plan, the whole problem
        for shrink in (True, False):
            left = _left(deadline)
            if left is not None and left <= 0:
                notes.append("the time limit passed before the ILP could finish; this phase keeps breadth-first "
                             "propagation's plan")
                return reference
            problem = with_shrink_hints(m) if shrink else m.problem
            with task(progress, f"ILP solve{'' if shrink else ', whole problem'} ({solver} solver)"):  # a spinner
                solved = solve_ilp(problem, time_limit=left, solver=solver, shrink=shrink)
            if solved.objective <= result.objective * (1 + 1e-9):
                break
        return SearchOutcome(m, solved.choice, None, solved.report, "ilp")
    except SolverFailed as e:
        notes.append(f"the ILP solver did not finish ({e.message}); falling back to breadth-first propagation")
    return reference
