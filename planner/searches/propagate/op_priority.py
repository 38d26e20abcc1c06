"""Shardy's op-priority propagation pass: the aggressive pass in levels, each run to a fixed point.

Building on :mod:`~planner.searches.propagate.aggressive`, ops are visited in
:data:`LEVELS`: pass-through ops whose operands have a single use, then every
pass-through op, then any op along its pass-through factors (a broadcast operand only
receives), then every factor (still not from a broadcast operand), then everything.
Which ops pass shardings through is their definition's trait.
"""

from __future__ import annotations

from planner.searches.propagate.aggressive import AggressivePropagation
from planner.searches.propagate.engine import Level

__all__ = ["LEVELS", "OpPriorityPropagation"]

LEVELS = (
    Level("pass-through ops with single-use operands", True, True, False, False),
    Level("pass-through ops", True, False, False, False),
    Level("pass-through factors of every op", False, False, True, False),
    Level("every factor, broadcasts backward only", False, False, False, False),
    Level("everything", False, False, False, True),
)
"""The op-priority levels, in the order they run."""


class OpPriorityPropagation(AggressivePropagation):
    """The ``op-priority`` pass (see the module docstring)."""

    how = "op-priority"

    def levels(self) -> list[Level]:
        return list(LEVELS)
