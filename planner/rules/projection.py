"""Projection between tensor shardings and factor shardings.

A **factor sharding** gives, per factor of a rule, the mesh axes that shard it,
major to minor: ``tuple[tuple[AxisRef, ...], ...]``. A tensor dimension's axes
are the concatenation of its factors' axes; a result is unreduced on the axes of
``REDUCTION`` factors. Going back, a dimension's axes are split over its factors
major to minor by factor size, cutting an axis into sub-axes where a factor is
smaller than it.

A factor sharding is **valid** for a rule (:func:`check_factor_axes`) when no axis
is used twice, every factor admits the size of its axes
(:meth:`~planner.rules.factors.OpShardingRule.admits`), and in every dimension
with several factors a factor is sharded only if the more-major ones are fully
sharded (otherwise the dimension's blocks would not be contiguous).

MindSpore strategies (seed 002) map to factor split counts, which
:func:`~planner.notations.mindspore.axes_for_splits` lays out over the devices:

>>> from planner.ir.mesh import Mesh
>>> from planner.rules.registry import rule_for
>>> d8 = Mesh.from_sizes("mesh", {"d": 8})
>>> rule = rule_for("matmul", [(64, 64), (64, 64)], (64, 64))
>>> fa = strategy_to_factor_axes(rule, ((2, 1), (1, 4)), d8)
>>> [s.dims_text() for s in operand_shardings(rule, fa, d8)]
['[{"d":(1)2}, {}]', '[{}, {"d":(2)4}]']
>>> result_sharding(rule, strategy_to_factor_axes(rule, ((2, 4), (4, 1)), d8), d8).dims_text()
'[{"d":(1)2}, {}], unreduced={"d":(2)4}'
"""

from __future__ import annotations

from typing import Sequence

from planner.caches import memoize
from planner.errors import RuleError, ShardingError
from planner.ir.axis import AxisRef, axes_size, merge_adjacent, sort_axes
from planner.ir.mesh import Mesh
from planner.ir.sharding import PENDING_SUM, TensorSharding
from planner.rules.factors import RESULT, FactorKind, OpShardingRule
from planner.notations.mindspore import axes_for_splits

FactorAxes = tuple[tuple[AxisRef, ...], ...]


def _axes_text(axes: Sequence[AxisRef]) -> str:
    return "{" + ", ".join(map(str, axes)) + "}"


def _tensor_label(which: int | str) -> str:
    return "the result" if which == RESULT else f"operand {which}"


def unsharded(rule: OpShardingRule) -> FactorAxes:
    """The factor sharding with no axes anywhere."""
    return ((),) * rule.num_factors


# -- checks -------------------------------------------------------------------------

def check_factor_axes(rule: OpShardingRule, factor_axes: FactorAxes, mesh: Mesh, padded: bool = False) -> None:
    """Raise :class:`RuleError` unless ``factor_axes`` is a valid sharding of ``rule``'s factors; ``padded``: a
    pass-through factor may be split past its size where its dimensions pad (:meth:`OpShardingRule.admits_padded`,
    propagation's op shardings)."""
    if len(factor_axes) != rule.num_factors:
        raise RuleError(f"a factor sharding needs {rule.num_factors} entries for {rule}, got {len(factor_axes)}")
    seen: list[tuple[AxisRef, int]] = []
    for f, axes in enumerate(factor_axes):
        name = rule.factor_names[f]
        for a in axes:
            for b, g in seen:
                if a.overlaps(b):
                    where = "twice" if g == f else f"by factors {rule.factor_names[g]} and {name}"
                    raise RuleError(f"mesh axis {a} is used {where} of {rule}; an axis may shard one factor once")
            seen.append((a, f))
        size = axes_size(axes, mesh)
        if not (rule.admits_padded(f, size) if padded else rule.admits(f, size)):
            raise RuleError(_refusal(rule, f, axes, size))
    for which in list(range(rule.num_operands)) + [RESULT]:
        for d, factors in enumerate(rule.tensor_dims(which)):
            sharded = [k for k, f in enumerate(factors) if factor_axes[f]]
            for k in range(sharded[-1] if sharded else 0):
                f = factors[k]
                count = axes_size(factor_axes[f], mesh)
                if count != rule.factor_sizes[f]:
                    minor = rule.factor_names[factors[sharded[-1]]]
                    raise RuleError(
                        f"factor {minor} is sharded but the more-major factor {rule.factor_names[f]} of the same "
                        f"dimension ({_tensor_label(which)} dimension {d}) is split {count} of "
                        f"{rule.factor_sizes[f]} ways; a minor factor may be sharded only below a fully "
                        f"sharded major one ({rule})"
                    )


def _refusal(rule: OpShardingRule, f: int, axes: Sequence[AxisRef], size: int) -> str:
    name, fsize, kind = rule.factor_names[f], rule.factor_sizes[f], rule.factor_kinds[f]
    what = f"factor {name} (size {fsize}) of {rule} cannot be sharded {size} ways by {_axes_text(axes)}"
    if kind is FactorKind.NEED_REPLICATION:
        return f"{what}: it needs replication"
    if fsize == 1 or size > fsize:
        return f"{what}: a factor admits at most its size"
    if kind is FactorKind.PERMUTATION:
        sizes = ", ".join(map(str, rule.factor_extents(f)))
        return f"{what}: a permutation factor's split must divide each of its sizes ({sizes}; a slice's window aside)"
    return f"{what}: it shares a dimension with other factors, so the split must divide {fsize}"


# -- factors -> tensors -------------------------------------------------------------

def operand_shardings(rule: OpShardingRule, factor_axes: FactorAxes, mesh: Mesh,
                      padded: bool = False) -> tuple[TensorSharding, ...]:
    """Every operand's sharding under a valid factor sharding (``padded``: :func:`check_factor_axes`)."""
    check_factor_axes(rule, factor_axes, mesh, padded)
    return checked_operand_shardings(rule, factor_axes, mesh)


def result_sharding(rule: OpShardingRule, factor_axes: FactorAxes, mesh: Mesh, padded: bool = False) -> TensorSharding:
    """The result's sharding; unreduced on the axes of sharded ``REDUCTION`` factors (mesh order), pending
    the rule's reduction (a sum, or ``max``'s maximum); ``padded``: :func:`check_factor_axes`."""
    check_factor_axes(rule, factor_axes, mesh, padded)
    return checked_result_sharding(rule, factor_axes, mesh)


def checked_operand_shardings(rule: OpShardingRule, factor_axes: FactorAxes, mesh: Mesh) -> tuple[TensorSharding, ...]:
    """:func:`operand_shardings` of a factor sharding :func:`check_factor_axes` has accepted."""
    return tuple(_sharding(mesh, _dims_tuple(rule, i, factor_axes)) for i in range(rule.num_operands))


def checked_result_sharding(rule: OpShardingRule, factor_axes: FactorAxes, mesh: Mesh) -> TensorSharding:
    """:func:`result_sharding` of a factor sharding :func:`check_factor_axes` has accepted."""
    pending = sort_axes((a for f in rule.factors_of_kind(FactorKind.REDUCTION) for a in factor_axes[f]), mesh)
    return _sharding(mesh, _dims_tuple(rule, RESULT, factor_axes), tuple(pending), rule.reduction)


def _dims_tuple(rule: OpShardingRule, which: int | str, factor_axes: FactorAxes) -> tuple[tuple[AxisRef, ...], ...]:
    return tuple(tuple(a for f in factors for a in factor_axes[f]) for factors in rule.tensor_dims(which))


@memoize("factor shardings' tensor shardings", maxsize=65536)
def _sharding(mesh: Mesh, dims, unreduced=(), reduction=PENDING_SUM) -> TensorSharding:
    """A tensor's sharding from its dimensions' axes: the strategies of many ops and layers share few of them."""
    return TensorSharding.build(mesh, dims, unreduced=unreduced, reduction=reduction)


# -- tensor -> factors ----------------------------------------------------------------

def _split_dim(rule: OpShardingRule, factors: Sequence[int], axes: Sequence[AxisRef], mesh: Mesh,
               where: str) -> dict[int, list[AxisRef]]:
    """Axes of one dimension over its factors, major to minor (see the module docstring)."""
    out: dict[int, list[AxisRef]] = {f: [] for f in factors}
    if not axes:
        return out
    if not factors:
        raise RuleError(f"{where} has size 1 but is sharded by {_axes_text(axes)}")
    if len(factors) == 1:  # a lone factor takes every axis; padding is the admits() question
        out[factors[0]] = list(axes)
        return out
    k, room = 0, rule.factor_sizes[factors[0]]
    for axis in axes:
        piece: AxisRef | None = axis
        while piece is not None:
            while room == 1 and k + 1 < len(factors):
                k += 1
                room = rule.factor_sizes[factors[k]]
            size = piece.size_in(mesh)
            if room % size == 0:
                out[factors[k]].append(piece)
                room //= size
                piece = None
            elif size % room == 0 and room > 1:
                major, piece = piece.split(mesh, room)
                out[factors[k]].append(major)
                room = 1
            else:
                sizes = "x".join(str(rule.factor_sizes[f]) for f in factors)
                raise RuleError(
                    f"{where} (factors {sizes}) is sharded by {_axes_text(axes)}, which cannot be split evenly "
                    f"over its factors major to minor: {piece} (size {size}) does not fit the "
                    f"remaining {room} of factor {rule.factor_names[factors[k]]}"
                )
    return out


def factor_axes_from_tensor(rule: OpShardingRule, which: int | str, sharding: TensorSharding) -> FactorAxes:
    """The factor sharding implied by one tensor's sharding (operand ``which`` or :data:`RESULT`).

    Factors that do not appear in that tensor get no axes. Unreduced and
    replicated axes of ``sharding`` are ignored.

    >>> from planner.ir.text import parse_mesh, parse_sharding
    >>> from planner.rules.builder import reshape_rule
    >>> mesh = parse_mesh('@m = <["x"=4]>')
    >>> rule = reshape_rule((8,), (2, 4))
    >>> [tuple(map(str, a)) for a in factor_axes_from_tensor(rule, 0, parse_sharding('[{"x"}]', mesh))]
    [('"x":(1)2',), ('"x":(2)2',)]
    """
    dims = rule.tensor_dims(which)
    if len(dims) != sharding.rank:
        raise RuleError(f"{_tensor_label(which)} of {rule} has rank {len(dims)} but its sharding has {sharding.rank}")
    out: list[list[AxisRef]] = [[] for _ in range(rule.num_factors)]
    for d, (factors, dim) in enumerate(zip(dims, sharding.dims)):
        where = f"dimension {d} of {_tensor_label(which)}"
        for f, axes in _split_dim(rule, factors, dim.axes, sharding.mesh, where).items():
            out[f].extend(axes)
    return tuple(merge_adjacent(a, sharding.mesh) for a in out)


# -- MindSpore strategies ---------------------------------------------------------------

def _split_count(rule: OpShardingRule, factors: Sequence[int], count: int, where: str) -> dict[int, int]:
    """A dimension's split count over its factors, major to minor."""
    out = {f: 1 for f in factors}
    if count == 1:
        return out
    if not factors:
        raise RuleError(f"{where} has size 1 but the strategy splits it {count} ways")
    if len(factors) == 1:
        out[factors[0]] = count
        return out
    left = count
    for f in factors:
        size = rule.factor_sizes[f]
        if left <= size and size % left == 0:
            out[f] = left
            return out
        if left % size:
            break
        out[f] = size
        left //= size
    sizes = "x".join(str(rule.factor_sizes[f]) for f in factors)
    raise RuleError(f"{where} (factors {sizes}) cannot be split {count} ways evenly major to minor")


def strategy_to_factor_axes(rule: OpShardingRule, strategy: Sequence[Sequence[int]], mesh: Mesh) -> FactorAxes:
    """Axes per factor from a MindSpore strategy (split counts per operand dimension).

    Operands must agree on every factor they share; the counts, in factor order,
    are laid out over the devices by :func:`~planner.notations.mindspore.axes_for_splits`.
    """
    if len(strategy) != rule.num_operands:
        raise RuleError(f"strategy {tuple(map(tuple, strategy))} has {len(strategy)} entries for "
                        f"{rule.num_operands} operands of {rule}")
    counts: list[int | None] = [None] * rule.num_factors
    source: list[str] = [""] * rule.num_factors
    for i, splits in enumerate(strategy):
        dims = rule.operands[i]
        if len(splits) != len(dims):
            raise RuleError(f"strategy entry {tuple(splits)} for operand {i} has {len(splits)} counts but the "
                            f"operand has rank {len(dims)}")
        for d, (factors, count) in enumerate(zip(dims, splits)):
            where = f"operand {i} dimension {d}"
            for f, c in _split_count(rule, factors, int(count), where).items():
                if counts[f] is not None and counts[f] != c:
                    raise RuleError(
                        f"strategy {tuple(map(tuple, strategy))} disagrees on factor {rule.factor_names[f]} of "
                        f"{rule}: {source[f]} splits it {counts[f]} ways but {where} splits it {c} ways"
                    )
                if counts[f] is None:
                    counts[f], source[f] = c, where
    final = [1 if c is None else c for c in counts]
    try:
        factor_axes = tuple(axes_for_splits(mesh, final))
    except ShardingError as e:
        raise RuleError(f"strategy {tuple(map(tuple, strategy))}: {e.message}") from None
    check_factor_axes(rule, factor_axes, mesh)
    return factor_axes


def factor_axes_to_strategy(rule: OpShardingRule, factor_axes: FactorAxes, mesh: Mesh) -> tuple[tuple[int, ...], ...]:
    """Split counts per operand dimension (MindSpore's strategy) of a factor sharding."""
    return tuple(
        tuple(axes_size([a for f in factors for a in factor_axes[f]], mesh) for factors in dims)
        for dims in rule.operands
    )
