"""Strategy enumeration: every way an op's factor rule admits to use the mesh.

A :class:`Strategy` assigns mesh axes to an op's factors (each axis, or sub-axis
*piece*, to at most one factor; several pieces on one factor in any order) and
carries what follows from it: the operand shardings the op needs, its result
sharding (unreduced on the axes of sharded reduction factors), its MindSpore
strategy (split counts per operand dimension) and how many ways its work is
divided.

The pieces are the mesh axes refined at every cut point the model needs
(:func:`search_pieces`): sub-axes users wrote (``"d":(1)2``), those a MindSpore
strategy implies on a 1-D mesh, and those reshapes need to keep data in place.
Pieces of one axis on one factor stay in their natural order, so they merge back
into the larger sub-axis or the whole axis.

Enumeration order is deterministic: pieces in mesh order, each trying "no factor"
first and then factors in rule order; so the replicated strategy is always
index 0 and simpler strategies come first (the BFS tie-break relies on it).

>>> from planner.ir.mesh import Mesh
>>> from planner.rules.registry import rule_for
>>> mesh = Mesh.from_sizes("mesh", {"x": 2, "y": 2})
>>> rule = rule_for("matmul", [(8, 8), (8, 8)], (8, 8))
>>> len(enumerate_strategies(rule, mesh, search_pieces(mesh)))  # 16 assignments, 3 with two orders
19
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from planner.caches import memoize
from planner.errors import RuleError
from planner.ir.axis import AxisRef, make_axis, merge_adjacent
from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding
from planner.rules.factors import FactorKind, OpShardingRule
from planner.rules.projection import (
    check_factor_axes,
    checked_operand_shardings,
    checked_result_sharding,
    factor_axes_to_strategy,
)

FactorAxes = tuple[tuple[AxisRef, ...], ...]


@dataclass(frozen=True, eq=False, slots=True)
class Strategy:
    """One admissible factor sharding of an op and the shardings it implies."""

    factor_axes: FactorAxes
    operands: tuple[TensorSharding, ...]
    result: TensorSharding
    splits: tuple[tuple[int, ...], ...]
    work_divisor: int  # devices that split the op's work (product of all used axes)

    def text(self) -> str:
        """MindSpore's form, e.g. ``((2, 4), (4, 1))``."""
        return "(" + ", ".join("(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"
                               for s in self.splits) + ("," if len(self.splits) == 1 else "") + ")"


def make_strategy(rule: OpShardingRule, factor_axes: FactorAxes, mesh: Mesh, padded: bool = False) -> Strategy:
    """The strategy of a valid factor sharding (raises RuleError otherwise); ``padded``: see
    :func:`~planner.rules.projection.check_factor_axes`."""
    factor_axes = tuple(merge_adjacent(a, mesh) for a in factor_axes)
    check_factor_axes(rule, factor_axes, mesh, padded)
    divisor = 1
    for axes in factor_axes:
        for a in axes:
            divisor *= a.size_in(mesh)
    return Strategy(
        factor_axes,
        checked_operand_shardings(rule, factor_axes, mesh),
        checked_result_sharding(rule, factor_axes, mesh),
        factor_axes_to_strategy(rule, factor_axes, mesh),
        divisor,
    )


# -- pieces -----------------------------------------------------------------------------------

def search_pieces(mesh: Mesh, refs: Iterable[AxisRef] = (), cut_sizes: Iterable[int] = ()) -> tuple[AxisRef, ...]:
    """The mesh axes cut at every boundary of ``refs``, major to minor.

    ``cut_sizes`` adds, for each axis, a cut after a major piece of
    ``gcd(axis size, s)`` (what a reshape factor of size ``s`` needs).
    """
    cuts: dict[str, set[int]] = {a.name: {1, a.size} for a in mesh.axes}
    for ref in refs:
        if mesh.has_axis(ref.name):
            lo, hi = ref.interval(mesh)
            cuts[ref.name].update((lo, hi))
    for s in cut_sizes:
        for a in mesh.axes:
            g = math.gcd(a.size, int(s))
            if 1 < g < a.size:
                cuts[a.name].add(g)
    out: list[AxisRef] = []
    for axis in mesh.axes:
        points = sorted(cuts[axis.name])
        # keep only cut points that divide the larger ones (a chain of divisors)
        chain = [1]
        for p in points[1:]:
            if p % chain[-1] == 0:
                chain.append(p)
        if chain[-1] != axis.size:
            chain.append(axis.size)
        for lo, hi in zip(chain, chain[1:]):
            out.append(make_axis(mesh, axis.name, lo, hi // lo))
    return tuple(out)


# -- enumeration ------------------------------------------------------------------------------------

def enumerate_strategies(rule: OpShardingRule, mesh: Mesh, pieces: Sequence[AxisRef]) -> tuple[Strategy, ...]:
    """Every admissible strategy of ``rule`` on ``mesh`` using ``pieces`` (cached)."""
    return _enumerate(rule, mesh, tuple(pieces))


@memoize("strategy enumeration", maxsize=4096)
def _enumerate(rule: OpShardingRule, mesh: Mesh, pieces: tuple[AxisRef, ...]) -> tuple[Strategy, ...]:
    return _extensions(rule, mesh, ((),) * rule.num_factors, pieces)  # the empty prefix extended


def enumerate_extensions(rule: OpShardingRule, mesh: Mesh, prefix: FactorAxes,
                         new: Sequence[AxisRef]) -> tuple[Strategy, ...]:
    """The strategies that keep ``prefix`` and add pieces of ``new`` (cached).

    One phase of planning a mesh a few axes at a time (see
    :mod:`planner.model.phases`): every factor keeps the axes ``prefix``
    gave it, in their order, and each piece of ``new`` goes to at most one
    factor, at any position among them (pieces of one axis in their natural
    order). Pieces in neither stay unused. Index 0 is ``prefix`` itself. There are
    at most ``(1 + factors) ** len(new)`` assignments, times the interleavings.
    """
    return _extend(rule, mesh, tuple(tuple(a) for a in prefix), tuple(new))


@memoize("strategy extensions", maxsize=4096)
def _extend(rule: OpShardingRule, mesh: Mesh, prefix: FactorAxes, new: tuple[AxisRef, ...]) -> tuple[Strategy, ...]:
    return _extensions(rule, mesh, prefix, new)


def _extensions(rule: OpShardingRule, mesh: Mesh, prefix: FactorAxes, new: tuple[AxisRef, ...]) -> tuple[Strategy, ...]:
    """Each piece of ``new`` to no factor or one (rule order), placed in every gap of the factor's prefix."""
    shardable = [
        f for f in range(rule.num_factors)
        if rule.factor_kinds[f] is not FactorKind.NEED_REPLICATION and rule.factor_sizes[f] > 1
    ]
    held = [math.prod(a.size_in(mesh) for a in axes) for axes in prefix]
    sizes = [p.size_in(mesh) for p in new]
    seen: set[FactorAxes] = set()
    out: list[Strategy] = []
    for choice in itertools.product([None] + shardable, repeat=len(new)):
        per_factor: dict[int, list[int]] = {}
        for i, f in enumerate(choice):
            if f is not None:
                per_factor.setdefault(f, []).append(i)
        if any(not rule.admits(f, held[f] * math.prod(sizes[i] for i in idx)) for f, idx in per_factor.items()):
            continue
        options = [
            [merged for order in _orders(idx, new)
             for merged in _interleavings(prefix[f], [new[i] for i in order], mesh)]
            for f, idx in per_factor.items()
        ]
        for placed in itertools.product(*options):
            axes = list(prefix)
            for f, seq in zip(per_factor, placed):
                axes[f] = seq
            factor_axes = tuple(merge_adjacent(a, mesh) for a in axes)
            if factor_axes in seen:
                continue
            seen.add(factor_axes)
            try:
                out.append(make_strategy(rule, factor_axes, mesh))
            except RuleError:
                continue
    return tuple(out)


def _interleavings(fixed: Sequence[AxisRef], added: Sequence[AxisRef], mesh: Mesh) -> list[tuple[AxisRef, ...]]:
    """Every merge of two sequences that keeps the order of each (``added`` in every gap of ``fixed``)
    and the natural order of the pieces of one axis."""
    n = len(fixed) + len(added)
    out = []
    for slots in itertools.combinations(range(n), len(added)):
        it_fixed, it_added, merged = iter(fixed), iter(added), []
        chosen = set(slots)
        for j in range(n):
            merged.append(next(it_added) if j in chosen else next(it_fixed))
        if all(a.name != b.name or a.interval(mesh)[0] < b.interval(mesh)[0]
               for a, b in itertools.combinations(merged, 2)):
            out.append(tuple(merged))
    return out


def _orders(idx: list[int], pieces: Sequence[AxisRef]) -> list[tuple[int, ...]]:
    """Orders of several pieces on one factor; pieces of one axis keep their natural order."""
    if len(idx) == 1:
        return [tuple(idx)]
    orders = []
    for perm in itertools.permutations(idx):
        ok = True
        for a, b in itertools.combinations(perm, 2):
            if pieces[a].name == pieces[b].name and pieces[a].pre_size > pieces[b].pre_size:
                ok = False
                break
        if ok:
            orders.append(perm)
    return orders
