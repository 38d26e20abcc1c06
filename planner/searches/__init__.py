"""The searches, each one module behind one interface: ``search(request) -> Decision``.

* ``auto`` (:mod:`planner.searches.auto`), the default: the ILP's optimum where it comes within a
  time budget per phase (exact variable elimination makes that seconds on every config and on
  GPT at 12-48 layers), breadth-first propagation's plan where not, so never worse than ``bfs``;
* ``bfs`` (:mod:`planner.searches.bfs`): seed 002's breadth-first propagation;
* ``ilp`` (:mod:`planner.searches.ilp`): the global optimum of the same cost tables;
* ``explicit`` (:mod:`planner.searches.explicit`): seed 001's consensus rule;
* ``propagate`` (:mod:`planner.searches.propagate`): Shardy's rule-based passes.

``auto``, ``bfs`` and ``ilp`` run in phases (:mod:`planner.searches.phased`); a search module is
imported when it is first asked for, so a breadth-first plan never loads the ILP
solver.
"""

from __future__ import annotations

import importlib
from typing import Callable

from planner.errors import PlanningError, quote

__all__ = ["DEFAULT_SEARCH", "SEARCHES", "search_named"]

_MODULES = {
    "auto": "planner.searches.auto",
    "bfs": "planner.searches.bfs",
    "ilp": "planner.searches.ilp",
    "explicit": "planner.searches.explicit",
    "propagate": "planner.searches.propagate",
}

SEARCHES = tuple(_MODULES)
"""The searches by name, the default first."""

DEFAULT_SEARCH = SEARCHES[0]
"""The search a plan uses unless told otherwise: ``auto``."""


def search_named(name: str) -> Callable:
    """The ``search(request) -> Decision`` of the search called ``name``.

    >>> search_named("bfs").__module__
    'planner.searches.bfs'
    """
    if name not in _MODULES:
        raise PlanningError(f"unknown search {quote(name)}; use one of {', '.join(SEARCHES)}")
    return importlib.import_module(_MODULES[name]).search
