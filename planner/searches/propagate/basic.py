"""Shardy's basic propagation pass: factors grow only where no other factor wants or uses the axis.

Every op is visited until nothing changes (one fixed point, every factor, every op);
an axis that two factors of an op want, or that another factor already uses, stops
both factors there (they are truncated before it), so the pass never resolves a
conflict: it leaves it. A factor's axes are also cut before the first axis that any
tensor of the op cannot hold (Shardy's ``getCompatibleMajorShardingAxes``): one
tensor that cannot take an axis keeps it from all of them.
"""

from __future__ import annotations

from planner.ir.axis import AxisRef
from planner.searches.propagate.engine import Propagator

__all__ = ["BasicPropagation"]


class BasicPropagation(Propagator):
    """The ``basic`` pass (see the module docstring)."""

    how = "basic"

    def cut(self, rule, tensors, whiches, proj, f: int, axes):
        return self.truncated(rule, tensors, whiches, proj, f, axes)

    def order(self, rule, tensors, wanted: dict, origin: dict, proj, elementwise: bool) -> list[int]:
        used_by: dict[AxisRef, set[int]] = {}
        for f, axes in wanted.items():
            for a in axes:
                used_by.setdefault(a, set()).add(f)
        for p in proj:
            for f in range(rule.num_factors):
                for a in p[0][f]:
                    used_by.setdefault(a, set()).add(f)
            for a in p[2]:
                used_by.setdefault(a, set()).add(-1)
        for f in list(wanted):
            axes = wanted[f]
            cut = next((k for k, a in enumerate(axes) if used_by[a] - {f}), len(axes))
            wanted[f] = axes[:cut]
        return sorted(wanted)
