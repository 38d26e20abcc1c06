"""The searches, each one module behind one interface: ``search(request) -> Decision``.

* ``bfs`` (:mod:`planner.searches.bfs`): seed 002's breadth-first propagation;
* ``ilp`` (:mod:`planner.searches.ilp`): the global optimum of the same cost tables;
* ``explicit`` (:mod:`planner.searches.explicit`): seed 001's consensus rule;
* ``propagate`` (:mod:`planner.searches.propagate`): Shardy's rule-based passes.

``bfs`` and ``ilp`` run in phases (:mod:`planner.searches.phased`); a search module is
imported when it is first asked for, so a breadth-first plan never loads the ILP
solver.
"""

from __future__ import annotations

import importlib
from typing import Callable

from planner.errors import PlanningError, quote

__all__ = ["SEARCHES", "search_named"]

_MODULES = {
    "bfs": "planner.searches.bfs",
    "ilp": "planner.searches.ilp",
    "explicit": "planner.searches.explicit",
    "propagate": "planner.searches.propagate",
}

SEARCHES = tuple(_MODULES)
"""The searches by name, the default first."""


def search_named(name: str) -> Callable:
    """The ``search(request) -> Decision`` of the search called ``name``.

    >>> search_named("bfs").__module__
    'planner.searches.bfs'
    """
    if name not in _MODULES:
        raise PlanningError(f"unknown search {quote(name)}; use one of {', '.join(SEARCHES)}")
    return importlib.import_module(_MODULES[name]).search
