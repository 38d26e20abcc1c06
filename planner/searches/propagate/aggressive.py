"""Shardy's aggressive propagation pass: conflicts between an op's factors are resolved, not left.

Building on :mod:`~planner.searches.propagate.basic`, an op's factors are grown in
the order of the size of the tensor their axes come from (larger first, an elementwise
op's operand at its broadcast size, as Shardy sees the ``broadcast_in_dim`` JAX lowers
an implicit broadcast to; for an elementwise op then the most sharded factor; then
operand index, the result last), and each tensor keeps what does not conflict with what it already got. Results are
grown first, and an elementwise op's operands take no more along a factor than its
result then holds (Shardy's ``aggressive_factor_propagation.cc``).
"""

from __future__ import annotations

import math

from planner.searches.propagate.basic import BasicPropagation

__all__ = ["AggressivePropagation"]


class AggressivePropagation(BasicPropagation):
    """The ``aggressive`` pass (see the module docstring)."""

    how = "aggressive"

    caps_operands = True

    def cut(self, rule, tensors, whiches, proj, f: int, axes):
        return tuple(axes)

    def order(self, rule, tensors, wanted: dict, origin: dict, proj, elementwise: bool) -> list[int]:
        size = self.atoms.size
        result = math.prod(tensors[-1].shape)

        def nbytes(k):  # an elementwise op's operand as Shardy sees it: broadcast to the result's shape first
            t = tensors[k]
            numel = math.prod(t.shape)
            return t.nbytes // numel * result if elementwise and 0 < numel < result else t.nbytes

        def sharded(f):  # an elementwise op's most sharded factor first (Shardy's sort)
            n = 1
            for a in wanted[f]:
                n *= size[a]
            return n if elementwise else 0
        return sorted(wanted, key=lambda f: (-nbytes(origin[f]), -sharded(f), origin[f], f))
