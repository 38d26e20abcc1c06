"""MindSpore views: sharding strategies and tensor layouts (seed 002).

* A **strategy** gives split counts: per tensor dimension, or for an operator per
  dimension of each operand (``((2, 1), (1, 4))`` for MatMul on 8 devices).
* A **tensor layout** is a *device matrix* (sizes, major to minor) and a *tensor
  map*: per tensor dimension the device-matrix dimension that splits it, indexed
  from the right, ``-1`` when it is not split (a list when several split it,
  major to minor, as MindSpore's newer ``Layout`` allows).

Split counts become axes by laying them out major to minor over the flat device
index, followed by a minor "repeat" digit when their product is below the device
count (MindSpore's default: ``repeated_num_in_dev_matrix_right_``). On a 1-D mesh
this needs sub-axes:

>>> from planner.ir.mesh import Mesh
>>> d8 = Mesh.from_sizes("mesh", {"d": 8})
>>> [tuple(map(str, a)) for a in axes_for_splits(d8, [2, 4])]
[('"d":(1)2',), ('"d":(2)4',)]
>>> s = from_strategy((2, 4), d8)
>>> str(s), to_tensor_layout(s)
('sharding<@mesh, [{"d":(1)2}, {"d":(2)4}]>', ([2, 4], [1, 0]))
"""

from __future__ import annotations

from typing import Sequence

from planner.errors import NotExpressibleError, ShardingError
from planner.ir.axis import AxisRef, axes_for_digit, make_axis, product
from planner.ir.mesh import Mesh
from planner.ir.sharding import DimSharding, TensorSharding


def axes_for_splits(mesh: Mesh, splits: Sequence[int]) -> list[tuple[AxisRef, ...]]:
    """Axes for consecutive split counts laid out major to minor over the devices.

    Counts of 1 get no axes. Raises ShardingError when the counts do not divide
    the device count or cut an axis in a way no sub-axis expresses.
    """
    total = product(splits)
    if total < 1 or mesh.size % total:
        raise ShardingError(
            f"split counts {tuple(splits)} multiply to {total}, which does not divide the "
            f"{mesh.size} devices of mesh @{mesh.name}"
        )
    # MindSpore appends the repeat count (mesh.size // total) as the last, most
    # minor, dimension of the device matrix by default, so the split digits sit
    # above it: the last count has stride mesh.size // total.
    out: list[tuple[AxisRef, ...]] = []
    minor = mesh.size // total
    digit_strides = [0] * len(splits)
    for i in range(len(splits) - 1, -1, -1):
        digit_strides[i] = minor
        minor *= splits[i]
    for s, st in zip(splits, digit_strides):
        out.append(() if s == 1 else axes_for_digit(mesh, st, s))
    return out


def from_strategy(splits: Sequence[int], mesh: Mesh) -> TensorSharding:
    """A tensor sharding from its split counts per dimension (major to minor over devices)."""
    per_dim = axes_for_splits(mesh, splits)
    return TensorSharding(mesh, tuple(DimSharding(a) for a in per_dim))


def to_strategy(sharding: TensorSharding) -> tuple[int, ...]:
    """Split counts per dimension."""
    return sharding.shard_counts()


def _pieces(sharding: TensorSharding) -> list[AxisRef]:
    """The mesh axes refined into the pieces this sharding uses, major to minor."""
    mesh = sharding.mesh
    out: list[AxisRef] = []
    used = sharding.sharding_axes()
    for axis in mesh.axes:
        cuts = {1, axis.size}
        for ref in used:
            if ref.name == axis.name:
                lo, hi = ref.interval(mesh)
                cuts.update((lo, hi))
        cuts = sorted(cuts)
        if len(cuts) == 1:  # axis of size 1
            out.append(AxisRef(axis.name))
            continue
        for lo, hi in zip(cuts, cuts[1:]):
            out.append(make_axis(mesh, axis.name, lo, hi // lo))
    return out


def to_tensor_layout(sharding: TensorSharding) -> tuple[list[int], list[int | list[int]]]:
    """``(device_matrix, tensor_map)``; NotExpressibleError for device orders and pending sums."""
    mesh = sharding.mesh
    if sharding.unreduced:
        raise NotExpressibleError(f"{sharding} has pending reductions; a MindSpore tensor layout cannot hold them")
    if mesh.device_ids is not None and list(mesh.device_ids) != list(range(mesh.size)):
        raise NotExpressibleError(
            f"mesh @{mesh.name} reorders devices; a MindSpore tensor layout assumes ranks in order"
        )
    pieces = _pieces(sharding)
    device_matrix = [p.size_in(mesh) for p in pieces]
    right = {p: len(pieces) - 1 - i for i, p in enumerate(pieces)}
    tensor_map: list[int | list[int]] = []
    for dim in sharding.dims:
        idx = [right[a] for a in dim.axes]
        tensor_map.append(-1 if not idx else idx[0] if len(idx) == 1 else idx)
    return device_matrix, tensor_map


def from_tensor_layout(
    device_matrix: Sequence[int], tensor_map: Sequence[int | Sequence[int]], mesh: Mesh | None = None
) -> TensorSharding:
    """Read a layout back. Without a mesh, one is made with an axis ``m<k>`` per device-matrix dim."""
    n = len(device_matrix)
    if mesh is None:
        mesh = Mesh.from_sizes("mesh", {f"m{n - 1 - i}": s for i, s in enumerate(device_matrix)})
    if product(device_matrix) != mesh.size:
        raise ShardingError(
            f"device matrix {list(device_matrix)} has {product(device_matrix)} devices but mesh "
            f"@{mesh.name} has {mesh.size}"
        )
    stride = [product(device_matrix[i + 1:]) for i in range(n)]
    dims = []
    for t, entry in enumerate(tensor_map):
        entries = [entry] if isinstance(entry, int) else list(entry)
        axes: list[AxisRef] = []
        for e in entries:
            if e == -1:
                continue
            if not 0 <= e < n:
                raise ShardingError(f"tensor map entry {e} of dimension {t} is outside the device matrix of {n} dims")
            i = n - 1 - e
            if device_matrix[i] > 1:
                axes.extend(axes_for_digit(mesh, stride[i], device_matrix[i]))
        dims.append(axes)
    return TensorSharding.build(mesh, dims)
