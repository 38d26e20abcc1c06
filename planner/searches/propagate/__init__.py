"""Rule-based sharding propagation as Shardy does it (seed 003): its passes and the plan they give.

The engine (:mod:`~planner.searches.propagate.engine`) holds the state and the steps
every pass shares; the passes are :mod:`~planner.searches.propagate.basic`,
:mod:`~planner.searches.propagate.aggressive`, :mod:`~planner.searches.propagate.op_priority`
and :mod:`~planner.searches.propagate.user_priority`, each building on the previous;
:mod:`~planner.searches.propagate.plan` is the search ``propagate``.
"""

from planner.searches.propagate.engine import compatible_axes
from planner.searches.propagate.passes import PASSES, propagate
from planner.searches.propagate.plan import search

__all__ = ["PASSES", "compatible_axes", "propagate", "search"]
