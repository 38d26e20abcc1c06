"""Test helper: run one op sharded on a simulated mesh with local_compute and check it.

``run_sharded`` cuts every operand into per-device blocks under the rule's operand
shardings (padding filled with garbage: NaN for floats, junk for integers, so a
local op that forgets to mask fails), computes every device's block and
reassembles the result: the valid regions of the devices, summed over each
partial-sum group when the result is unreduced.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations, product
from typing import Any, Mapping

import functools

import numpy as np

from graphs.ops.registry import get_op
from planner.errors import RuleError
from planner.ir.axis import AxisRef, axes_size
from planner.ir.layout import device_index_ranges, partial_groups
from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding
from planner.rules import (
    FactorKind,
    OpShardingRule,
    check_factor_axes,
    operand_shardings,
    result_sharding,
    rule_for,
)
from planner.simulation.local_ops import LocalContext, local_compute

MESHES = {
    "x2": Mesh.from_sizes("m", {"x": 2}),
    "x4": Mesh.from_sizes("m", {"x": 4}),
    "x2y2": Mesh.from_sizes("m", {"x": 2, "y": 2}),
    "x2y2z2": Mesh.from_sizes("m", {"x": 2, "y": 2, "z": 2}),
}


@dataclass(frozen=True)
class Case:
    """One op instance to check: operand shapes and dtypes, attributes."""

    name: str
    op: str
    shapes: tuple[tuple[int, ...], ...]
    attrs: Mapping[str, Any]
    dtypes: tuple[str, ...] = ()

    def dtype_list(self) -> list[str]:
        return list(self.dtypes) or ["f32"] * len(self.shapes)

    def out_shape(self) -> tuple[int, ...]:
        return get_op(self.op).infer(list(self.shapes), self.dtype_list(), dict(self.attrs))[0]

    def canonical_attrs(self) -> dict:
        opdef = get_op(self.op)
        return opdef.canonical(list(self.shapes), opdef.with_defaults(dict(self.attrs)))

    def rule(self) -> OpShardingRule:
        return rule_for(self.op, self.shapes, self.out_shape(), dict(self.attrs))


def int_high(case: Case, i: int) -> int:
    """The exclusive upper bound for integer operand ``i`` (indices, labels) of ``case``."""
    return _index_bounds(case).get(i, 50)


def _index_bounds(case: Case) -> dict[int, int]:
    """The integer operands ``case`` indexes with (gather's indices, cross_entropy's labels): the size they
    index (:meth:`~graphs.ops.opdef.OpDef.indexed`)."""
    return {i: case.shapes[j][d] for i, j, d in get_op(case.op).indexed(case.canonical_attrs())}


def example_arrays(case: Case, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for i, (shape, dtype) in enumerate(zip(case.shapes, case.dtype_list())):
        if dtype.startswith("i"):
            low = 0 if i in _index_bounds(case) else -int_high(case, i)
            out.append(rng.integers(low, int_high(case, i), shape).astype(np.int64))
        elif dtype == "bool":
            out.append(rng.random(shape) < 0.5)
        elif case.op in ("log", "log1p", "sqrt", "rsqrt", "pow"):
            out.append(0.5 + np.abs(rng.standard_normal(shape)))  # its domain, away from 0
        else:
            out.append(rng.standard_normal(shape))
    return out


def block_of(x: np.ndarray, sharding: TensorSharding, device: int, rng: np.random.Generator) -> np.ndarray:
    """Device ``device``'s padded block of ``x``; padding is garbage."""
    local = sharding.local_shape(x.shape)
    if np.issubdtype(x.dtype, np.integer) or x.dtype == bool:
        block = rng.integers(-1000, 1000, local).astype(x.dtype)
    else:
        block = np.full(local, np.nan, dtype=x.dtype)
    ranges = device_index_ranges(sharding, x.shape)[device]
    valid = tuple(slice(0, int(b - a)) for a, b in ranges)
    block[valid] = x[tuple(slice(int(a), int(b)) for a, b in ranges)]
    return block


@dataclass
class ShardedRun:
    """The per-device result blocks of one sharded execution and what they should add up to."""

    sharding: TensorSharding
    out_shape: tuple[int, ...]
    blocks: list[np.ndarray]
    expected: np.ndarray

    def groups(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for d, g in enumerate(partial_groups(self.sharding)):
            out.setdefault(int(g), []).append(d)
        return out

    def valid(self, device: int) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
        """(slice into the block, slice into the global result) of the device's valid region."""
        r = device_index_ranges(self.sharding, self.out_shape)[device]
        return (tuple(slice(0, int(b - a)) for a, b in r), tuple(slice(int(a), int(b)) for a, b in r))

    def mismatches(self) -> list[str]:
        """Why the reassembled result differs from the reference (empty when it agrees)."""
        problems = []
        covered = np.zeros(self.out_shape, dtype=bool)
        exact = np.issubdtype(self.expected.dtype, np.integer)
        for group in self.groups().values():
            local, glob = self.valid(group[0])
            # the pending reduction's own combination: a sum, or the maximum of the local maxima
            combine = {"sum": np.add, "max": np.maximum, "min": np.minimum}[self.sharding.reduction]
            total = functools.reduce(combine, (self.blocks[d][local] for d in group))
            want = self.expected[glob]
            ok = np.array_equal(total, want) if exact else np.allclose(total, want, rtol=1e-5)
            if not ok:
                problems.append(f"devices {group} hold {np.asarray(total).tolist()} for {glob}, "
                                f"reference {np.asarray(want).tolist()}")
            covered[glob] = True
        if not covered.all():
            problems.append("some result elements are held by no device")
        return problems

    def partials_differ(self) -> bool:
        """Whether, in every partial-sum group with real data, the members' partials are not all equal."""
        for group in self.groups().values():
            local, _ = self.valid(group[0])
            parts = [self.blocks[d][local] for d in group]
            if len(group) > 1 and parts[0].size and all(np.array_equal(p, parts[0]) for p in parts):
                return False
        return True


def run_sharded(case: Case, factor_axes, mesh: Mesh, seed: int = 0) -> ShardedRun:
    rng = np.random.default_rng(seed)
    rule = case.rule()
    arrays = example_arrays(case, rng)
    attrs = case.canonical_attrs()
    expected = np.asarray(get_op(case.op).reference(arrays, attrs))
    ins = operand_shardings(rule, factor_axes, mesh)
    res = result_sharding(rule, factor_axes, mesh)
    out_shape = case.out_shape()
    blocks = []
    for d in range(mesh.size):
        local = [block_of(x, s, d, rng) for x, s in zip(arrays, ins)]
        ctx = LocalContext.for_device(ins, case.shapes, res, out_shape, d)
        blocks.append(local_compute((case.op, attrs), rule, local, ctx))
    return ShardedRun(res, out_shape, blocks, expected)


# -- factor shardings to try ------------------------------------------------------------

def _pieces(mesh: Mesh) -> list[tuple[AxisRef, ...]]:
    """The ways to cut the mesh into assignable pieces: its axes, and a size-4 axis also as two halves."""
    out = [tuple(AxisRef(n) for n in mesh.axis_names)]
    for k, a in enumerate(mesh.axes):
        if a.size == 4:
            halves = (AxisRef(a.name, 1, 2), AxisRef(a.name, 2, 2))
            out.append(out[0][:k] + halves + out[0][k + 1:])
    return out


def _valid(rule: OpShardingRule, fa, mesh: Mesh) -> bool:
    try:
        check_factor_axes(rule, fa, mesh)
    except RuleError:
        return False
    return any(fa)


def factor_shardings(rule: OpShardingRule, mesh: Mesh) -> list[tuple[tuple[AxisRef, ...], ...]]:
    """Every valid factor sharding that gives each mesh piece to one shardable factor or to none
    (pieces on one factor in every order): one axis on one factor, two axes on one factor,
    axes on several factors, reduction factors included (statistic and permutation factors not: sharded,
    their op communicates its statistics or exchanges blocks, tests/simulation/test_statistics.py and
    test_permutation.py)."""
    shardable = [f for f in range(rule.num_factors)
                 if rule.factor_sizes[f] > 1 and rule.factor_kinds[f] not in (
                     FactorKind.NEED_REPLICATION, FactorKind.STATISTIC, FactorKind.PERMUTATION)]
    out: list[tuple[tuple[AxisRef, ...], ...]] = []
    for pieces in _pieces(mesh):
        for owners in product([None] + shardable, repeat=len(pieces)):
            groups: dict[int, list[AxisRef]] = {}
            for piece, f in zip(pieces, owners):
                if f is not None:
                    groups.setdefault(f, []).append(piece)
            for orders in product(*(permutations(g) for g in groups.values())):
                assign = dict(zip(groups, orders))
                fa = tuple(tuple(assign.get(f, ())) for f in range(rule.num_factors))
                if fa not in out and _valid(rule, fa, mesh):
                    out.append(fa)
    return out


def describe(rule: OpShardingRule, fa, mesh: Mesh) -> str:
    parts = [f"{rule.factor_names[f]}={{{', '.join(map(str, a))}}}" for f, a in enumerate(fa) if a]
    return f"{' '.join(parts)} on {mesh.short()} (sizes {[axes_size(a, mesh) for a in fa]})"
