"""Building :class:`~planner.rules.factors.OpShardingRule` values: einsum specs, broadcasting, reshapes.

:class:`RuleBuilder` is the one low-level path (add factors, then map dimensions to
them); the helpers below cover the op families:

- :func:`rule_from_einsum` — matmul, batched matmul and einsum alike. Letters in
  the output are pass-through, the others reductions (or need-replication when
  listed). A letter of size 1 in one operand and ``n > 1`` elsewhere broadcasts:
  that dimension maps to ``()``.
- :func:`elementwise_rule` — numpy broadcasting, one factor per result dimension.
- :func:`reduction_rule` — reduced dimensions get the given kind.
- :func:`reshape_rule` — the pieces common to input and output dimensions.

Factor order matters for MindSpore strategies (split counts are laid out over
the devices in factor order). Einsum factors are numbered in order of first
appearance, operands first (for ``ik,kj->ij``: ``i, k, j``, MindSpore's device
matrix for MatMul); elementwise factors follow the result's dimensions.

>>> str(rule_from_einsum("bij,bjk->bik", [(2, 8, 4), (2, 4, 16)]))
'([b,i,j],[b,j,k])->([b,i,k]) {b=2,i=8,j=4,k=16} reduction={j}'
>>> str(elementwise_rule([(4, 1), (1, 8)], (4, 8)))
'([i,1],[1,j])->([i,j]) {i=4,j=8}'
>>> str(reshape_rule((4, 6), (8, 3)))
'([i,jk])->([ij,k]) {i=4,j=2,k=3}'
>>> str(reshape_rule((3, 2), (2, 3)))
'([i,j])->([k,l]) {i=3,j=2,k=2,l=3} need_replication={i,j,k,l}'
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from planner.errors import RuleError
from planner.ir.sharding import PENDING_SUM
from planner.rules.factors import FactorKind, OpShardingRule

Shape = tuple[int, ...]

_AUTO_NAMES = "ijklmnopqrstuvwxyzabcdefgh"


class RuleBuilder:
    """Collects factors and dimension mappings; :meth:`build` makes the rule.

    >>> b = RuleBuilder()
    >>> i, j = b.factor(4), b.factor(8, FactorKind.NEED_REPLICATION)
    >>> b.operand([[i], [j]]); b.result([[i], [j]])
    >>> str(b.build())
    '([i,j])->([i,j]) {i=4,j=8} need_replication={j}'
    """

    def __init__(self) -> None:
        self._sizes: list[int] = []
        self._kinds: list[FactorKind] = []
        self._names: list[str] = []
        self._divisible: list[bool] = []
        self._auto: list[bool] = []
        self._operands: list[tuple[tuple[int, ...], ...]] = []
        self._result: tuple[tuple[int, ...], ...] | None = None
        self._operand_sizes: list[tuple[int, int, int]] = []

    def factor(self, size: int, kind: FactorKind = FactorKind.PASS_THROUGH, name: str | None = None,
               divisible: bool = False) -> int:
        """Add a factor and return its index (names default to ``i, j, k, ...``)."""
        self._auto.append(name is None)
        if name is None:
            name = self._free_name(self._names)
        self._sizes.append(int(size))
        self._kinds.append(kind)
        self._names.append(name)
        self._divisible.append(divisible)
        return len(self._sizes) - 1

    def operand(self, dims: Iterable[Iterable[int]], sizes: dict[int, int] | None = None) -> None:
        """Map the next operand's dimensions to factors; ``sizes`` gives a dimension of one permutation
        factor its own size where it is not the factor's (a concatenated piece)."""
        self._operand_sizes.extend((len(self._operands), d, n) for d, n in (sizes or {}).items())
        self._operands.append(tuple(tuple(d) for d in dims))

    def result(self, dims: Iterable[Iterable[int]]) -> None:
        self._result = tuple(tuple(d) for d in dims)

    @staticmethod
    def _free_name(taken: Sequence[str]) -> str:
        """The first of ``i, j, ..., z, a, ..., h, i1, ...`` not in ``taken``."""
        k = 0
        while True:
            name = _AUTO_NAMES[k % 26] + (str(k // 26) if k >= 26 else "")
            if name not in taken:
                return name
            k += 1

    def build(self, by_appearance: bool = False, reduction: str = PENDING_SUM,
              window_start: int | None = None, whole_permutation: bool = False,
              mirrored: bool = False, rotation: int | None = None) -> OpShardingRule:
        """The rule; ``by_appearance`` renumbers factors (and renames unnamed ones) in order of
        first appearance, operands first; ``reduction`` combines its ``REDUCTION`` factors;
        ``window_start``: a slice's offset along its permutation factor; ``whole_permutation``: the op reads
        that factor's dimension whole (a scan); ``mirrored``: the op reverses it (a flip); ``rotation``: the op
        rotates it by that many positions (a roll)."""
        if self._result is None:
            raise RuleError("a rule needs a result mapping")
        order = list(range(len(self._sizes)))
        if by_appearance:
            order = []
            for dims in self._operands + [self._result]:
                for d in dims:
                    order.extend(f for f in d if f not in order)
            order.extend(f for f in range(len(self._sizes)) if f not in order)
        new = {old: k for k, old in enumerate(order)}
        names: list[str] = []
        fixed = [self._names[f] for f in order if not self._auto[f]]
        for f in order:
            names.append(self._free_name(fixed + names) if self._auto[f] and by_appearance else self._names[f])
        remap = lambda dims: tuple(tuple(new[f] for f in d) for d in dims)  # noqa: E731
        return OpShardingRule(
            tuple(self._sizes[f] for f in order), tuple(self._kinds[f] for f in order), tuple(names),
            tuple(remap(o) for o in self._operands), remap(self._result),
            tuple(self._divisible[f] for f in order), reduction, tuple(self._operand_sizes), window_start,
            whole_permutation, mirrored, rotation,
        )


# -- einsum ------------------------------------------------------------------------

def rule_from_einsum(
    equation: str,
    operand_shapes: Sequence[Sequence[int]],
    *,
    need_replication: Iterable[str] = (),
) -> OpShardingRule:
    """The rule of an einsum-like spec ``"bij,bjk->bik"`` on the given operand shapes.

    Letters in ``need_replication`` get that kind; other letters missing from the
    output are reductions.
    """
    eq = equation.replace(" ", "")
    if "->" not in eq:
        raise RuleError(f"einsum spec {equation!r} needs '->' and an output term")
    lhs, out = eq.split("->", 1)
    terms = lhs.split(",") if lhs else []
    if len(terms) != len(operand_shapes):
        raise RuleError(f"einsum spec {equation!r} has {len(terms)} operand terms for {len(operand_shapes)} operands")
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, operand_shapes):
        if len(term) != len(shape):
            raise RuleError(f"einsum term {term!r} of {equation!r} has {len(term)} letters but the operand has "
                            f"shape {tuple(shape)}")
        for c, d in zip(term, shape):
            prev = sizes.get(c, 1)
            if d != 1 and prev != 1 and d != prev:
                raise RuleError(f"letter {c!r} of {equation!r} is {prev} in one operand and {d} in another")
            sizes[c] = max(prev, d)
    for c in out:
        if c not in sizes:
            raise RuleError(f"output letter {c!r} of {equation!r} appears in no operand")
    nr = set(need_replication)
    b = RuleBuilder()
    index: dict[str, int] = {}
    for c in "".join(terms) + out:
        if c not in index:
            kind = FactorKind.NEED_REPLICATION if c in nr else (
                FactorKind.PASS_THROUGH if c in out else FactorKind.REDUCTION)
            index[c] = b.factor(sizes[c], kind, name=c)

    def dims(term: str, shape: Sequence[int]) -> list[tuple[int, ...]]:
        return [() if d == 1 and sizes[c] != 1 else (index[c],) for c, d in zip(term, shape)]

    for term, shape in zip(terms, operand_shapes):
        b.operand(dims(term, shape))
    b.result([(index[c],) for c in out])
    return b.build()


# -- elementwise ----------------------------------------------------------------------

def elementwise_rule(in_shapes: Sequence[Sequence[int]], out_shape: Sequence[int]) -> OpShardingRule:
    """Numpy broadcasting: operands right-aligned with the result; size-1 stretched dims map to ``()``."""
    b = RuleBuilder()
    rank = len(out_shape)
    factors = [b.factor(d) for d in out_shape]
    for shape in in_shapes:
        if len(shape) > rank:
            raise RuleError(f"operand shape {tuple(shape)} has a higher rank than the result {tuple(out_shape)}")
        offset = rank - len(shape)
        dims = []
        for k, d in enumerate(shape):
            full = out_shape[offset + k]
            if d == full:
                dims.append((factors[offset + k],))
            elif d == 1:
                dims.append(())
            else:
                raise RuleError(f"operand shape {tuple(shape)} does not broadcast to {tuple(out_shape)}")
        b.operand(dims)
    b.result([(f,) for f in factors])
    return b.build()


# -- reductions ------------------------------------------------------------------------

def reduction_rule(in_shape: Sequence[int], axes: Iterable[int], keepdims: bool, kind: FactorKind,
                   reduction: str = PENDING_SUM) -> OpShardingRule:
    """Reduce ``axes`` of one operand; reduced factors get ``kind`` (combined by ``reduction``); kept size-1
    dims map to ``()``."""
    axes = set(axes)
    b = RuleBuilder()
    factors = [b.factor(d, kind if i in axes else FactorKind.PASS_THROUGH) for i, d in enumerate(in_shape)]
    b.operand([(f,) for f in factors])
    out = []
    for i, f in enumerate(factors):
        if i not in axes:
            out.append((f,))
        elif keepdims:
            out.append(())
    b.result(out)
    return b.build(reduction=reduction)


# -- reshape ---------------------------------------------------------------------------

class _Walker:
    """A cursor over one side of a reshape: the current dimension and what is left of it."""

    def __init__(self, shape: Sequence[int]):
        self.shape = tuple(shape)
        self.dims: list[list[int]] = [[] for _ in self.shape]
        self.i = 0
        self.left = self.shape[0] if self.shape else 1
        self.done = 1  # product of the sizes handed out so far

    def skip_ones(self) -> None:
        while self.i < len(self.shape) and self.shape[self.i] == 1:
            self.i += 1
            self.left = self.shape[self.i] if self.i < len(self.shape) else 1

    @property
    def finished(self) -> bool:
        return self.i >= len(self.shape)

    def take(self, factor: int, size: int) -> None:
        """Give the next ``size`` of the current dimension to ``factor`` (major to minor)."""
        self.dims[self.i].append(factor)
        self.left //= size
        self.done *= size
        if self.left == 1:
            self.i += 1
            self.left = self.shape[self.i] if self.i < len(self.shape) else 1


def reshape_rule(in_shape: Sequence[int], out_shape: Sequence[int]) -> OpShardingRule:
    """Factors common to the input and output dims, found by walking both shapes with gcd.

    ``[8] -> [2, 4]`` gives factors 2 and 4; ``[4, 6] -> [8, 3]`` gives 4, 2, 3 with
    input dimension 1 ``= [2, 3]`` and output dimension 0 ``= [4, 2]``. Where a run
    of dimensions has no common piece (``[3, 2] -> [2, 3]``), every dimension (or
    rest of one) in that run gets its own ``NEED_REPLICATION`` factor. Size-1
    dimensions map to ``()``.
    """
    if math.prod(in_shape) != math.prod(out_shape):
        raise RuleError(f"reshape of {tuple(in_shape)} into {tuple(out_shape)} changes the number of elements")
    b = RuleBuilder()
    src, dst = _Walker(in_shape), _Walker(out_shape)
    nr = FactorKind.NEED_REPLICATION
    while True:
        src.skip_ones()
        dst.skip_ones()
        if src.finished or dst.finished:
            break
        g = math.gcd(src.left, dst.left)
        if g > 1:
            f = b.factor(g)
            src.take(f, g)
            dst.take(f, g)
            continue
        # No common piece: both remainders, then whole dims of the side that is
        # behind, until both sides have handed out the same number of elements.
        src.take(b.factor(src.left, nr), src.left)
        dst.take(b.factor(dst.left, nr), dst.left)
        while src.done != dst.done:
            side = src if src.done < dst.done else dst
            side.skip_ones()
            side.take(b.factor(side.left, nr), side.left)
    b.operand(src.dims)
    b.result(dst.dims)
    return b.build(by_appearance=True)
