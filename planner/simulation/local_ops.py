"""Local op instances: one device's part of an op, computed from its local (padded) blocks.

:func:`local_compute` takes an op (anything with ``.op`` and ``.attrs_dict``, or a
pair ``(name, attrs)``), its :class:`~planner.rules.factors.OpShardingRule`, the
device's operand blocks and a :class:`LocalContext` (global shapes, this device's
index ranges and local shapes). It returns the device's result block.

Invariants:

- the *valid* region of the result block (the part inside the global result) is
  exactly right; padding may hold anything, and operand padding may hold
  anything (NaN included), so operand padding is zeroed (:func:`valid_mask`)
  before any contraction or sum;
- when a ``REDUCTION`` factor is sharded the block is this device's *partial sum*:
  the blocks of the devices that differ only along that factor's axes add up to
  the result (``mean`` and ``cross_entropy`` divide by the *global* count for that);
- ``NEED_REPLICATION`` factors must be unsharded (:class:`~planner.errors.RuleError`
  otherwise): slice axes, conv2d's spatial dims, cross_entropy's class dim; nor may
  ``STATISTIC`` factors (a norm's axis: :mod:`planner.simulation.statistics`) and
  ``PERMUTATION`` factors (concat's axis: :mod:`planner.simulation.permutation`);
- ``gather`` with a vocabulary-sharded table looks up only its rows
  ``[v0, v1)`` (indices shifted by ``v0``) and gives zeros for the others;
- ``reshape`` reshapes the block to the local target shape the rule implies.

>>> import numpy as np
>>> from planner.rules import rule_for
>>> rule = rule_for("matmul", [(2, 4), (4, 3)], (2, 3))
>>> ctx = LocalContext((LocalBlock((2, 4), ((0, 2), (2, 4)), (2, 2)),
...                     LocalBlock((4, 3), ((2, 4), (0, 3)), (2, 3))),
...                    LocalBlock((2, 3), ((0, 2), (0, 3)), (2, 3)))
>>> a, b = np.arange(8.0).reshape(2, 4), np.ones((4, 3))
>>> local_compute("matmul", rule, [a[:, 2:], b[2:]], ctx).tolist()   # a partial sum over k in [2, 4)
[[5.0, 5.0, 5.0], [13.0, 13.0, 13.0]]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from graphs.ops.registry import get_op
from planner.errors import RuleError
from planner.ir.layout import device_index_ranges
from planner.ir.sharding import TensorSharding
from planner.rules.factors import RESULT, FactorKind, OpShardingRule

Range = tuple[int, int]


@dataclass(frozen=True, slots=True)
class LocalBlock:
    """One tensor as one device sees it: global shape, held ``[start, stop)`` per dim, padded local shape."""

    global_shape: tuple[int, ...]
    ranges: tuple[Range, ...]
    local_shape: tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "global_shape", tuple(int(d) for d in self.global_shape))
        object.__setattr__(self, "ranges", tuple((int(a), int(b)) for a, b in self.ranges))
        object.__setattr__(self, "local_shape", tuple(int(d) for d in self.local_shape))

    @property
    def valid_shape(self) -> tuple[int, ...]:
        """Sizes of the valid (non-padding) part of the block."""
        return tuple(b - a for a, b in self.ranges)

    def valid_mask(self) -> np.ndarray:
        """Boolean array of the local shape: True on real elements, False on padding (:func:`valid_mask`)."""
        mask = np.ones(self.local_shape, dtype=bool)
        for d, (n, valid) in enumerate(zip(self.local_shape, self.valid_shape)):
            shape = [1] * len(self.local_shape)
            shape[d] = n
            mask &= (np.arange(n) < valid).reshape(shape)
        return mask

    def is_whole(self, dim: int) -> bool:
        """Whether this device holds all of dimension ``dim`` unpadded (it is unsharded)."""
        return self.ranges[dim] == (0, self.global_shape[dim]) and self.local_shape[dim] == self.global_shape[dim]

    @classmethod
    def of(cls, sharding: TensorSharding, shape: Sequence[int], device: int) -> "LocalBlock":
        ranges = device_index_ranges(sharding, shape)[device]
        return cls(tuple(shape), tuple(map(tuple, ranges)), sharding.local_shape(shape))


@dataclass(frozen=True, slots=True)
class LocalContext:
    """The blocks of an op's operands and result on one device."""

    operands: tuple[LocalBlock, ...]
    result: LocalBlock

    @classmethod
    def for_device(cls, operand_shardings: Sequence[TensorSharding], in_shapes: Sequence[Sequence[int]],
                   result_sharding: TensorSharding, out_shape: Sequence[int], device: int) -> "LocalContext":
        """The context of ``device`` from the op's shardings (see :func:`~planner.ir.layout.device_index_ranges`)."""
        ops = tuple(LocalBlock.of(s, shape, device) for s, shape in zip(operand_shardings, in_shapes))
        return cls(ops, LocalBlock.of(result_sharding, out_shape, device))

    def rule_result_shape(self, rule: OpShardingRule) -> tuple[int, ...]:
        """The local result shape ``rule`` implies from the operands' local shapes: each result dimension
        the product of its factors' local extents (:func:`local_factor_extents`)."""
        extents = local_factor_extents(rule, self.operands)
        return tuple(math.prod(extents[f] for f in factors) for factors in rule.result)


def valid_mask(block: LocalBlock) -> np.ndarray:
    """Boolean array of the block's local shape: True on real elements, False on padding.

    >>> valid_mask(LocalBlock((3,), ((2, 3),), (2,))).tolist()
    [True, False]
    """
    return block.valid_mask()


def zero_padding(array: np.ndarray, block: LocalBlock) -> np.ndarray:
    """``array`` with its padding set to zero (a copy when there is padding)."""
    array = np.asarray(array)
    if array.shape != block.local_shape:
        raise RuleError(f"a local block of shape {array.shape} does not match its local shape {block.local_shape}")
    if block.valid_shape == block.local_shape:
        return array
    return np.where(valid_mask(block), array, np.zeros((), array.dtype))


def name_attrs(op: Any) -> tuple[str, dict]:
    if isinstance(op, str):
        return op, {}
    if isinstance(op, tuple):
        return op[0], dict(op[1])
    return op.op, dict(op.attrs_dict)


def _dim_extents(rule: OpShardingRule, factors: Sequence[int], local: int) -> dict[int, int]:
    """The local extent of each factor of one dimension of local size ``local``.

    In a dimension ``[f1, ..., fn]`` the minor factors are whole down to one
    partial factor; the ones above it are fully sharded (extent 1).
    """
    out = {}
    for f in reversed(factors):
        out[f] = min(local, rule.factor_sizes[f])
        local //= out[f]
    return out


def _check_replicated_factors(name: str, rule: OpShardingRule, ctx: LocalContext) -> None:
    blocks = list(enumerate(ctx.operands)) + [(RESULT, ctx.result)]
    for which, block in blocks:
        for d, factors in enumerate(rule.tensor_dims(which)):
            extents = _dim_extents(rule, factors, block.local_shape[d])
            for f in factors:
                if rule.factor_kinds[f] is FactorKind.PERMUTATION and block.local_shape[d] != block.global_shape[d]:
                    who = "the result" if which == RESULT else f"operand {which}"
                    raise RuleError(
                        f"{name}: factor {rule.factor_names[f]} (dimension {d} of {who}) is a permutation factor "
                        "(sharded, the op runs as planner.simulation.permutation, not locally), but this device "
                        f"holds {block.local_shape[d]} of its {block.global_shape[d]}")
                if rule.factor_kinds[f] in (FactorKind.NEED_REPLICATION, FactorKind.STATISTIC) \
                        and extents[f] != rule.factor_sizes[f]:
                    who = "the result" if which == RESULT else f"operand {which}"
                    need = "needs replication" if rule.factor_kinds[f] is FactorKind.NEED_REPLICATION else \
                        "is a statistic factor (sharded, the op runs as planner.simulation.statistics, not locally)"
                    raise RuleError(
                        f"{name}: factor {rule.factor_names[f]} (dimension {d} of {who}) {need}, "
                        f"but this device holds {extents[f]} of its {rule.factor_sizes[f]}"
                    )


def local_factor_extents(rule: OpShardingRule, blocks: Sequence[LocalBlock]) -> list[int]:
    """Each factor's local extent, read from the operands' local shapes (full size where unseen)."""
    extents = list(rule.factor_sizes)
    for dims, block in zip(rule.operands, blocks):
        for factors, local in zip(dims, block.local_shape):
            for f, ext in _dim_extents(rule, factors, local).items():
                extents[f] = ext
    return extents


# -- per-op local instances --------------------------------------------------------------

def local_compute(op: Any, rule: OpShardingRule, local_arrays: Sequence[np.ndarray], ctx: LocalContext) -> np.ndarray:
    """One device's result block of ``op`` (see the module docstring for the invariants): the op's
    ``reference`` on the blocks, or its own local instance where its definition gives one
    (:attr:`graphs.ops.opdef.OpDef.local_reference`)."""
    name, attrs = name_attrs(op)
    opdef = get_op(name)
    attrs = opdef.canonical([b.global_shape for b in ctx.operands], opdef.with_defaults(attrs))
    if len(local_arrays) != len(ctx.operands) or len(ctx.operands) != rule.num_operands:
        raise RuleError(f"{name}: {len(local_arrays)} local blocks, {len(ctx.operands)} operand contexts and "
                        f"{rule.num_operands} rule operands must agree")
    _check_replicated_factors(name, rule, ctx)
    arrays = [zero_padding(a, b) for a, b in zip(local_arrays, ctx.operands)]
    with np.errstate(all="ignore"):
        if opdef.local_reference is not None:
            out = opdef.local_reference(arrays, attrs, ctx, rule)
        else:
            out = opdef.reference(arrays, attrs)
    out = np.asarray(out)
    if out.shape != ctx.result.local_shape:
        raise RuleError(f"{name}: the local result has shape {out.shape} but the result's sharding gives "
                        f"{ctx.result.local_shape}")
    return out
