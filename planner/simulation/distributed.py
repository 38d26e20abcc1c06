"""A distributed array on the numpy device simulator: one padded numpy block per device.

Device ``d`` holds the block of its shard under the array's sharding: along each
dimension the logical range ``[i*L, (i+1)*L)`` where ``i`` is its shard index and
``L`` the local (padded) size; positions past the tensor's end are padding and
hold zeros when the array is built. A sharding with ``unreduced`` axes holds
*partial sums*: the members of each reduction group hold values that add up to
the tensor (built unevenly on purpose when a generator is given, so that a wrong
reduction cannot pass by coincidence).

>>> import numpy as np
>>> from planner.ir import parse_mesh, parse_sharding
>>> mesh = parse_mesh('@m = <["x"=2]>')
>>> x = np.arange(6.0).reshape(3, 2)
>>> a = DistributedArray.from_global(x, parse_sharding('[{"x"}, {}]', mesh))
>>> a.blocks[1].tolist()   # rows [2, 4): row 3 is padding
[[4.0, 5.0], [0.0, 0.0]]
>>> np.array_equal(a.to_global(), x)
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from planner.errors import SimulationMismatch
from planner.caches import memoize
from planner.ir.layout import device_index_ranges, devices_to_positions, partial_groups, shard_indices
from planner.ir.sharding import TensorSharding


def block_origins(sharding: TensorSharding, shape: Sequence[int]) -> np.ndarray:
    """``(devices, rank)``: the logical index of each device block's first element."""
    local = np.asarray(sharding.local_shape(shape), dtype=np.int64)
    return shard_indices(sharding) * local


def valid_region(origin: Sequence[int], local: Sequence[int], shape: Sequence[int]) -> tuple[slice, ...]:
    """The slice of a block (at ``origin``) that holds real elements, in block coordinates."""
    return tuple(slice(0, max(0, min(l, d - o))) for o, l, d in zip(origin, local, shape))


@dataclass
class DistributedArray:
    """``blocks[d]`` is device ``d``'s padded local block under ``sharding``."""

    sharding: TensorSharding
    shape: tuple[int, ...]
    blocks: list[np.ndarray]
    # a manual region's body value: blocks also differ over the region's manual axes, so devices the
    # layout calls replicas may hold different blocks (never deduplicated or checked equal)
    varying: bool = False

    @classmethod
    def from_global(
        cls, x: np.ndarray, sharding: TensorSharding, rng: np.random.Generator | None = None
    ) -> "DistributedArray":
        x = np.asarray(x)
        shape = tuple(x.shape)
        sharding.check_rank(shape)
        local = sharding.local_shape(shape)
        origins = block_origins(sharding, shape)
        blocks = []
        for d in range(sharding.mesh.size):
            region = valid_region(origins[d], local, shape)
            src = tuple(slice(o, o + r.stop) for o, r in zip(origins[d], region))
            if all(r.stop == n for r, n in zip(region, local)):
                blocks.append(x[src])  # a read-only view: blocks are never written in place
                continue
            block = np.zeros(local, dtype=x.dtype)
            block[region] = x[src]
            blocks.append(block)
        if sharding.unreduced:
            blocks = [np.array(b, copy=True) for b in blocks]
            _split_partials(blocks, sharding, rng)
        return cls(sharding, shape, blocks)

    @property
    def mesh(self):
        return self.sharding.mesh

    def origins(self) -> np.ndarray:
        return block_origins(self.sharding, self.shape)

    def to_global(self, check_replicas: bool = True) -> np.ndarray:
        """Assemble the tensor: sum each partial-sum group, place each block's valid part.

        With ``check_replicas``, devices that hold the same elements must agree
        (bit-exact), or :class:`~planner.errors.SimulationMismatch` says which devices differ.
        """
        sharding = self.sharding
        local = sharding.local_shape(self.shape)
        origins = self.origins()
        values = self.blocks
        if sharding.unreduced:
            groups = partial_groups(sharding)
            summed = {}
            for d, g in enumerate(groups):
                summed[g] = values[d].copy() if g not in summed else summed[g] + values[d]
            values = [summed[g] for g in groups]
        out = np.zeros(self.shape, dtype=values[0].dtype if values else np.float64)
        seen = np.zeros(self.shape, dtype=bool)
        first: dict[tuple, int] = {}
        for d in range(sharding.mesh.size):
            region = valid_region(origins[d], local, self.shape)
            dst = tuple(slice(o, o + r.stop) for o, r in zip(origins[d], region))
            key = tuple(origins[d])
            if key in first:
                if check_replicas and not np.array_equal(values[d][region], values[first[key]][region]):
                    raise SimulationMismatch(f"devices {first[key]} and {d} hold different values for the same block")
                continue
            first[key] = d
            out[dst] = values[d][region]
            seen[dst] = True
        if not seen.all():
            raise SimulationMismatch("some elements are held by no device")
        return out

    def nbytes_per_device(self) -> int:
        return max((b.nbytes for b in self.blocks), default=0)


def _split_partials(blocks: list[np.ndarray], sharding: TensorSharding, rng) -> None:
    """Turn full values into partial sums over each unreduced group (uneven when ``rng``)."""
    mesh = sharding.mesh
    positions = np.empty(mesh.size, dtype=np.int64)
    positions[np.asarray(mesh.devices)] = np.arange(mesh.size)
    first = np.ones(mesh.size, dtype=bool)
    for ref in sharding.unreduced:
        stride, size = ref.digit(mesh)
        first &= (positions // stride) % size == 0
    groups = partial_groups(sharding)
    for g in np.unique(groups):
        members = np.flatnonzero(groups == g)
        keeper = members[first[members]][0]
        total = blocks[keeper]
        rest = np.zeros_like(total)
        for d in members:
            if d == keeper:
                continue
            if rng is None:
                part = np.zeros_like(total)
            elif np.issubdtype(total.dtype, np.integer):
                part = rng.integers(-3, 4, size=total.shape).astype(total.dtype)
            elif total.dtype == np.bool_:
                part = np.zeros_like(total)
            else:
                # small integers keep float sums exact, so checks can be bit-exact
                part = rng.integers(-3, 4, size=total.shape).astype(total.dtype)
            blocks[d] = part
            rest = rest + part
        blocks[keeper] = total - rest


@memoize("simulator replica groups", maxsize=4096)
def replica_groups(shardings: tuple, shapes: tuple) -> tuple[tuple[int, ...], ...]:
    """Devices that compute the same local instance: they hold the same blocks of every tensor
    (same index ranges, and the same partial of every pending sum), so one computes for all.

    Replicas hold bit-identical blocks (every collective hands each member the same bytes,
    and the collectives check it), so the simulator keeps one copy per group: one
    computation, one block shared read-only, as much memory as one device's worth.
    """
    mesh = shardings[0].mesh
    pos = devices_to_positions(mesh)
    keys: dict[tuple, list[int]] = {}
    per_tensor = []
    for sharding, shape in zip(shardings, shapes):
        ranges = device_index_ranges(sharding, shape)
        digits = [tuple(int((pos[d] // ref.digit(mesh)[0]) % ref.digit(mesh)[1]) for ref in sharding.unreduced)
                  for d in range(mesh.size)]
        per_tensor.append((ranges, digits))
    for d in range(mesh.size):
        key = tuple((tuple(map(tuple, r[d])), g[d]) for r, g in per_tensor)
        keys.setdefault(key, []).append(d)
    return tuple(tuple(v) for v in keys.values())
