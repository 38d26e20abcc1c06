"""The searches, each one module behind one interface: ``search(request) -> Decision``.

* ``bfs`` (:mod:`planner.searches.bfs`): seed 002's breadth-first propagation;
* ``ilp`` (:mod:`planner.searches.ilp`): the global optimum of the same tables;
* ``explicit`` (:mod:`planner.searches.explicit`): seed 001's consensus rule;
* ``propagate`` (:mod:`planner.searches.propagate`): Shardy's rule-based passes.
"""
