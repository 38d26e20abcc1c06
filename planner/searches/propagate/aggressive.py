"""Shardy's aggressive propagation pass: conflicts between an op's factors are resolved, not left.

Building on :mod:`~planner.searches.propagate.basic`, an op's factors are grown in
the order of the size of the tensor their axes come from (larger first, then operand
index, the result last), and each tensor keeps what does not conflict with what it
already got.
"""

from __future__ import annotations

from planner.searches.propagate.basic import BasicPropagation

__all__ = ["AggressivePropagation"]


class AggressivePropagation(BasicPropagation):
    """The ``aggressive`` pass (see the module docstring)."""

    how = "aggressive"

    def order(self, rule, tensors, wanted: dict, origin: dict, proj) -> list[int]:
        return sorted(wanted, key=lambda f: (-tensors[origin[f]].nbytes, origin[f], f))
