"""Shardy's user-priority propagation pass (the default): annotations propagate priority by priority.

Building on :mod:`~planner.searches.propagate.op_priority`, annotations of priority
``p0`` propagate through the whole program (with op priorities) before those of
``p1`` are restored, and so on; a dimension's own annotation is restored as written
when its priority comes.
"""

from __future__ import annotations

from planner.searches.propagate.op_priority import OpPriorityPropagation

__all__ = ["UserPriorityPropagation"]


class UserPriorityPropagation(OpPriorityPropagation):
    """The ``user-priority`` pass (see the module docstring)."""

    how = "user-priority"

    def rounds(self, priorities: list[int]) -> list[int | None]:
        return list(priorities)

    def round_label(self, priority: int | None) -> str:
        return f"p{priority}"
