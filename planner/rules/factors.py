"""Factor-based operator sharding rules: the value type.

A rule names the op's **factors** (Shardy's word; an einsum's letters). Every
dimension of every operand and of the result maps to a tuple of factor indices,
major to minor; a size-1 broadcast dimension maps to ``()``. Sharding a factor
with mesh axes shards every dimension it appears in. Each factor has a kind:

- ``PASS_THROUGH``: it appears in the result (matmul's ``i`` and ``j``);
- ``REDUCTION``: it appears only in operands and is combined over (matmul's ``k``,
  summed); sharding it leaves the result *unreduced* on its axes: a pending sum, or
  the rule's ``reduction`` (``"max"``, ``"min"``: the maximum of ``max``'s reduced
  dimensions is the maximum of each device's local maxima);
- ``NEED_REPLICATION``: it may not be sharded without gathering first (a sliced
  dimension, a gather's indexed one). It may appear in operands and result.
- ``PERMUTATION``: a dimension whose elements the op moves to other positions (the
  concatenated dimension of ``concat``, the sliced one of ``slice``): one factor in every
  operand and the result though its size differs between them (Shardy's
  ``kPermutation``; the factor's size is the result's, an operand's own size is in
  ``operand_sizes``, a slice's offset in ``window_start``). Sharding it keeps every tensor
  sharded alike along it, and the op exchanges blocks itself
  (:mod:`planner.model.op_collectives`); its axes must divide every size it has (a
  slice's window, the result, may split unevenly).
- ``MANUAL``: the blocks of a manual region's boundary (``manual_enter``'s operand,
  ``manual_exit``'s result; :mod:`planner.rules.regions`): it appears on the global
  side only, major in its dimension, and is sharded by exactly the manual axes of
  that dimension (never a pending sum): it admits only its exact size.

**Divisibility.** A dimension with one factor tolerates padding: a factor of size
5 split 2 ways is stored as ``ceil(5/2) = 3`` per device. A factor that shares a
dimension with other factors (a reshape piece) does not: its axes must divide its
size, or the dimension's blocks would not line up with the factor's. The rule
records this per factor in ``needs_divisible`` (derived from the mapping; a
builder may force it). :meth:`OpShardingRule.admits` combines it with the kind.

>>> K = FactorKind
>>> rule = OpShardingRule(
...     factor_sizes=(8, 32, 16), factor_kinds=(K.PASS_THROUGH, K.REDUCTION, K.PASS_THROUGH),
...     factor_names=("i", "k", "j"), operands=(((0,), (1,)), ((1,), (2,))), result=((0,), (2,)))
>>> str(rule)
'([i,k],[k,j])->([i,j]) {i=8,j=16,k=32} reduction={k}'
>>> rule.admits(1, 4), rule.admits(1, 64)
(True, False)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

from planner.errors import RuleError
from planner.ir.sharding import PENDING_SUM, REDUCTIONS

#: Names a tensor of a rule: an operand index, or this constant for the result.
RESULT = "result"

Dims = tuple[tuple[int, ...], ...]


class FactorKind(enum.Enum):
    """What sharding a factor means for the op (see the module docstring)."""

    PASS_THROUGH = "pass_through"
    REDUCTION = "reduction"
    NEED_REPLICATION = "need_replication"
    MANUAL = "manual"
    #: moved by the op (a concatenated or sliced dimension): one factor in operands and result of different sizes,
    #: sharded alike in all of them; the op exchanges blocks itself (:mod:`planner.model.op_collectives`)
    PERMUTATION = "permutation"
    #: reduced over and broadcast back by the op (a normalised axis): sharding it leaves the result
    #: sharded alike and costs small AllReduces of the op's statistics over its axes
    #: (:mod:`planner.model.op_collectives`); its axes must divide it (padding would enter the statistics).
    #: Absent from the result, it is reduced away by statistics each device gathers (argmax's maximum and
    #: index): the result is replicated over its axes
    STATISTIC = "statistic"


def _tuple_dims(dims: Sequence[Sequence[int]]) -> Dims:
    return tuple(tuple(int(f) for f in d) for d in dims)


@dataclass(frozen=True, slots=True)
class OpShardingRule:
    """One op instance's factor mapping (see the module docstring).

    ``operands[i][d]`` and ``result[d]`` list the factors of a dimension, major to
    minor. The size of a dimension is the product of its factors' sizes (1 for
    ``()``), so the rule fixes every operand's and the result's shape.
    """

    factor_sizes: tuple[int, ...]
    factor_kinds: tuple[FactorKind, ...]
    factor_names: tuple[str, ...]
    operands: tuple[Dims, ...]
    result: Dims
    needs_divisible: tuple[bool, ...] = ()
    reduction: str = PENDING_SUM
    #: ``(operand, dimension, size)`` of each operand dimension holding a ``PERMUTATION`` factor
    #: whose size is not the factor's (a concatenated piece)
    operand_sizes: tuple[tuple[int, int, int], ...] = ()
    #: a slice's first kept index along its permutation factor's dimension of operand 0 (the result is that
    #: window of the operand); None for a rule whose permutation factor joins pieces (a concat) or without one
    window_start: int | None = None
    #: the op reads its permutation factor's dimension whole on each device (a scan along it, ``cumsum``):
    #: sharded, each device gathers it, computes, and keeps its block of the result, as XLA partitions a
    #: reduce-window over a sharded dimension (the backward gathers the cotangent likewise)
    whole_permutation: bool = False
    #: the op reverses its permutation factors' dimensions (``flip``): sharded, each device's block goes to the
    #: device holding the mirrored block, reversed (XLA's one CollectivePermute); its backward is the same
    mirrored: bool = False
    #: the op rotates its permutation factor's dimension by this many positions (``roll``, in ``[1, size)``):
    #: sharded, each device's block is two pieces of the blocks ``shift`` positions before it, moved by at most two
    #: CollectivePermutes (XLA's partitioning of a concatenate of two slices of one operand); None for other rules
    rotation: int | None = None

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("factor_sizes", tuple(int(s) for s in self.factor_sizes))
        set_("factor_kinds", tuple(self.factor_kinds))
        set_("factor_names", tuple(self.factor_names))
        set_("operands", tuple(_tuple_dims(o) for o in self.operands))
        set_("result", _tuple_dims(self.result))
        set_("operand_sizes", tuple(sorted((int(i), int(d), int(n)) for i, d, n in self.operand_sizes)))
        self._check()
        derived = self._shared_factors()
        given = tuple(self.needs_divisible) or (False,) * len(derived)
        if len(given) != len(derived):
            raise RuleError(f"needs_divisible has {len(given)} entries for {len(derived)} factors")
        set_("needs_divisible", tuple(a or b for a, b in zip(given, derived)))

    # -- validation --------------------------------------------------------------
    def _check(self) -> None:
        n = len(self.factor_sizes)
        if self.reduction not in REDUCTIONS:
            raise RuleError(f"a rule's reduction is one of {', '.join(REDUCTIONS)}; got {self.reduction!r}")
        if len(self.factor_kinds) != n or len(self.factor_names) != n:
            raise RuleError(
                f"a rule needs one kind and one name per factor: {n} sizes, "
                f"{len(self.factor_kinds)} kinds, {len(self.factor_names)} names"
            )
        if len(set(self.factor_names)) != n:
            raise RuleError(f"factor names {self.factor_names} repeat a name")
        if any(s < 1 for s in self.factor_sizes):
            raise RuleError(f"factor sizes {self.factor_sizes} must be >= 1")
        seen_in_operands: set[int] = set()
        for dims in self.operands:
            for d in dims:
                seen_in_operands.update(d)
        in_result = {f for d in self.result for f in d}
        for f in seen_in_operands | in_result:
            if not 0 <= f < n:
                raise RuleError(f"factor index {f} is out of range for {n} factors")
        for f, kind in enumerate(self.factor_kinds):
            name = self.factor_names[f]
            if f not in seen_in_operands and f not in in_result:
                raise RuleError(f"factor {name} appears in no dimension")
            if kind is FactorKind.PASS_THROUGH and f not in in_result:
                raise RuleError(f"{kind.value.replace('_', '-')} factor {name} must appear in the result")
            if kind is FactorKind.REDUCTION and f in in_result:
                raise RuleError(f"reduction factor {name} may not appear in the result")
            if kind is FactorKind.PERMUTATION and f not in in_result:
                raise RuleError(f"permutation factor {name} must appear in the result")
        if self.window_start is not None and (len(self.operands) != 1 or len(self.factors_of_kind(
                FactorKind.PERMUTATION)) != 1):
            raise RuleError("window_start belongs to a rule of one operand and one permutation factor")
        if self.whole_permutation and (len(self.operands) != 1 or len(self.factors_of_kind(
                FactorKind.PERMUTATION)) != 1 or self.window_start is not None or self.operand_sizes):
            raise RuleError("whole_permutation belongs to a rule of one operand and one permutation factor of one "
                            "size, no window")
        if self.mirrored and (len(self.operands) != 1 or not self.factors_of_kind(FactorKind.PERMUTATION)
                              or self.window_start is not None or self.whole_permutation or self.operand_sizes):
            raise RuleError("mirrored belongs to a rule of one operand and permutation factors of one size")
        if self.rotation is not None and (len(self.operands) != 1 or len(self.factors_of_kind(
                FactorKind.PERMUTATION)) != 1 or self.window_start is not None or self.whole_permutation
                or self.mirrored or self.operand_sizes or not 0 < self.rotation < self.factor_sizes[
                    self.factors_of_kind(FactorKind.PERMUTATION)[0]]):
            raise RuleError("rotation belongs to a rule of one operand and one permutation factor of one size, "
                            "rotated by fewer positions than its size")
        for i, d, size in self.operand_sizes:
            if not (0 <= i < len(self.operands) and 0 <= d < len(self.operands[i])):
                raise RuleError(f"operand_sizes names dimension {d} of operand {i}, which the rule lacks")
            factors = self.operands[i][d]
            if len(factors) != 1 or self.factor_kinds[factors[0]] is not FactorKind.PERMUTATION or size < 1:
                raise RuleError(f"operand_sizes gives dimension {d} of operand {i} its own size {size}; only a "
                                "dimension of one permutation factor may differ from its factor's size")

    def _shared_factors(self) -> tuple[bool, ...]:
        shared = [False] * len(self.factor_sizes)
        for dims in self.operands + (self.result,):
            for d in dims:
                if len(d) > 1:
                    for f in d:
                        shared[f] = True
        return tuple(shared)

    # -- queries -------------------------------------------------------------------
    @property
    def num_factors(self) -> int:
        return len(self.factor_sizes)

    @property
    def num_operands(self) -> int:
        return len(self.operands)

    def tensor_dims(self, which: int | str) -> Dims:
        """The factor mapping of operand ``which`` (an int) or of the result (:data:`RESULT`)."""
        if which == RESULT:
            return self.result
        if isinstance(which, int) and 0 <= which < len(self.operands):
            return self.operands[which]
        raise RuleError(f"the rule has operands 0..{len(self.operands) - 1} and {RESULT!r}; got {which!r}")

    def dim_size(self, factors: Sequence[int]) -> int:
        size = 1
        for f in factors:
            size *= self.factor_sizes[f]
        return size

    def tensor_shape(self, which: int | str) -> tuple[int, ...]:
        """The shape of operand ``which`` (or the result) implied by the factor sizes (and ``operand_sizes``)."""
        shape = [self.dim_size(d) for d in self.tensor_dims(which)]
        for i, d, size in self.operand_sizes:
            if i == which:
                shape[d] = size
        return tuple(shape)

    def factor_extents(self, factor: int) -> tuple[int, ...]:
        """Every size ``factor`` has: its own, and a permutation factor's size in each operand."""
        return (self.factor_sizes[factor],) + tuple(
            n for i, d, n in self.operand_sizes if self.operands[i][d] == (factor,))

    def factors_of_kind(self, kind: FactorKind) -> tuple[int, ...]:
        return tuple(f for f, k in enumerate(self.factor_kinds) if k is kind)

    def admits(self, factor: int, axes_size: int) -> bool:
        """Whether ``factor`` may be sharded by axes whose sizes multiply to ``axes_size``.

        No axes (``axes_size == 1``) always fit. Otherwise a size-1 factor and a
        ``NEED_REPLICATION`` factor admit nothing; the others admit at most their
        size, and a factor in ``needs_divisible`` only sizes that divide it; a ``PERMUTATION``
        factor only sizes that divide each of its sizes (a slice's: its input's, its own any size).
        """
        if axes_size == 1:
            return True
        size = self.factor_sizes[factor]
        if self.factor_kinds[factor] is FactorKind.PERMUTATION and self.window_start is not None:
            # a slice's window may split unevenly (its last blocks padded, as XLA's halo exchange pads them) where the
            # input splits evenly, past its size too (``x[:, 0]``, ``x[:, 1:4]`` on 4 devices: a position per block
            # from the first, the others only padding), as Shardy shards the window's dimension
            return all(n % axes_size == 0 for n in self.factor_extents(factor)[1:])
        if size == 1 or self.factor_kinds[factor] is FactorKind.NEED_REPLICATION:
            return False
        if axes_size > size:
            return False
        if self.factor_kinds[factor] is FactorKind.MANUAL:
            return axes_size == size
        if self.factor_kinds[factor] is FactorKind.STATISTIC:
            return size % axes_size == 0
        if self.factor_kinds[factor] is FactorKind.PERMUTATION:  # a concat's pieces and result split evenly
            return all(n % axes_size == 0 for n in self.factor_extents(factor))
        return not self.needs_divisible[factor] or size % axes_size == 0

    def admits_padded(self, factor: int, axes_size: int) -> bool:
        """:meth:`admits`, or a pass-through factor split past its size where it is the minor-most factor of every
        dimension it is in (the padding at the end of each: Shardy's ``isMinorMost``, as Shardy keeps a slice's
        one position split through the ops that read it and XLA computes them on the padded blocks)."""
        if self.admits(factor, axes_size):
            return True
        return (self.factor_kinds[factor] is FactorKind.PASS_THROUGH and axes_size > self.factor_sizes[factor]
                and all(dim[-1] == factor for which in (*range(len(self.operands)), RESULT)
                        for dim in self.tensor_dims(which) if factor in dim))

    # -- text ----------------------------------------------------------------------
    def _dims_text(self, dims: Dims) -> str:
        return "[" + ",".join("".join(self.factor_names[f] for f in d) or "1" for d in dims) + "]"

    def _names_text(self, factors: Sequence[int]) -> str:
        return "{" + ",".join(sorted(self.factor_names[f] for f in factors)) + "}"

    def __str__(self) -> str:
        ins = ",".join(self._dims_text(o) for o in self.operands)
        sizes = ",".join(f"{n}={s}" for n, s in sorted(zip(self.factor_names, self.factor_sizes)))
        text = f"({ins})->({self._dims_text(self.result)}) {{{sizes}}}"
        for kind, label in ((FactorKind.REDUCTION, "reduction"), (FactorKind.NEED_REPLICATION, "need_replication"),
                            (FactorKind.MANUAL, "manual"), (FactorKind.STATISTIC, "statistic"),
                            (FactorKind.PERMUTATION, "permutation")):
            factors = self.factors_of_kind(kind)
            if factors:
                kind = self.reduction if kind is FactorKind.REDUCTION and self.reduction != PENDING_SUM else \
                    "whole" if kind is FactorKind.PERMUTATION and self.whole_permutation else \
                    "mirror" if kind is FactorKind.PERMUTATION and self.mirrored else \
                    f"rotate{self.rotation}" if kind is FactorKind.PERMUTATION and self.rotation is not None else ""
                text += f" {label}={kind}{self._names_text(factors)}"
        return text
