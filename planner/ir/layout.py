"""Which part of a tensor each device holds: the one function behind the simulator,
the redistribution engine and the lower bounds.

A dimension split by axes ``a1..ak`` (major to minor) is cut into
``S = |a1|*...*|ak|`` shards of ``ceil(d / S)`` elements each (the last shards are
partly or wholly padding). A device's shard index along that dimension is the
mixed-radix number formed by its coordinates along ``a1..ak``; its index range is
``[min(i*L, d), min((i+1)*L, d))``. Everything here is vectorised over devices.

>>> from planner.ir.text import parse_mesh, parse_sharding
>>> mesh = parse_mesh('@m = <["x"=2, "y"=2]>')
>>> s = parse_sharding('[{"x"}, {}]', mesh)
>>> device_index_ranges(s, (4, 6))[3].tolist()
[[2, 4], [0, 6]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    import numpy as np

from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding


def positions_to_devices(mesh: Mesh) -> np.ndarray:
    """``ids[p]`` is the device id at flat mesh position ``p``."""
    import numpy as np  # lazily: `import planner` stays light
    return np.asarray(mesh.devices, dtype=np.int64)


def devices_to_positions(mesh: Mesh) -> np.ndarray:
    """``pos[d]`` is the flat mesh position of device ``d``."""
    import numpy as np  # lazily: `import planner` stays light
    ids = positions_to_devices(mesh)
    pos = np.empty_like(ids)
    pos[ids] = np.arange(ids.size)
    return pos


def shard_indices(sharding: TensorSharding) -> np.ndarray:
    """``(devices, rank)`` array: each device's shard index along each dimension (by device id)."""
    import numpy as np  # lazily: `import planner` stays light
    mesh = sharding.mesh
    positions = devices_to_positions(mesh)
    out = np.zeros((mesh.size, sharding.rank), dtype=np.int64)
    for i, dim in enumerate(sharding.dims):
        idx = np.zeros(mesh.size, dtype=np.int64)
        for ref in dim.axes:
            stride, size = ref.digit(mesh)
            idx = idx * size + (positions // stride) % size
        out[:, i] = idx
    return out


def device_index_ranges(sharding: TensorSharding, shape: Sequence[int]) -> np.ndarray:
    """``(devices, rank, 2)`` array of ``[start, stop)`` per device id and dimension."""
    import numpy as np  # lazily: `import planner` stays light
    sharding.check_rank(shape)
    shape_arr = np.asarray(shape, dtype=np.int64)
    local = np.asarray(sharding.local_shape(shape), dtype=np.int64)
    idx = shard_indices(sharding)
    start = np.minimum(idx * local, shape_arr)
    stop = np.minimum((idx + 1) * local, shape_arr)
    return np.stack([start, stop], axis=-1)


def device_slices(sharding: TensorSharding, shape: Sequence[int], device: int) -> tuple[slice, ...]:
    """The index ranges of ``device`` as a tuple of slices into the global array."""
    r = device_index_ranges(sharding, shape)[device]
    return tuple(slice(int(a), int(b)) for a, b in r)


def partial_groups(sharding: TensorSharding) -> np.ndarray:
    """Label per device id: devices with one label hold partial sums of the same values.

    Without unreduced axes every device is its own group.
    """
    import numpy as np  # lazily: `import planner` stays light
    mesh = sharding.mesh
    positions = devices_to_positions(mesh)
    key = positions.copy()
    for ref in sharding.unreduced:
        stride, size = ref.digit(mesh)
        key = key - ((positions // stride) % size) * stride
    _, labels = np.unique(key, return_inverse=True)
    return labels


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    import numpy as np  # lazily: `import planner` stays light
    pairs = np.unique(np.stack([a, b], axis=1), axis=0)
    return len(pairs) == len(np.unique(a)) == len(np.unique(b))


def same_layout(a: TensorSharding, b: TensorSharding, shape: Sequence[int]) -> bool:
    """Whether two shardings put the same data on the same devices (meshes of one size).

    Open/closed flags, priorities and explicitly replicated axes do not change a
    layout and are ignored.
    """
    import numpy as np  # lazily: `import planner` stays light
    if a.mesh.size != b.mesh.size:
        return False
    if not np.array_equal(device_index_ranges(a, shape), device_index_ranges(b, shape)):
        return False
    return _same_partition(partial_groups(a), partial_groups(b))


def holders_count(sharding: TensorSharding, shape: Sequence[int]) -> np.ndarray:
    """How many devices hold each element of the tensor (an array of ``shape``).

    Used by tests; it builds a dense array, so keep shapes small.
    """
    import numpy as np  # lazily: `import planner` stays light
    counts = np.zeros(tuple(shape), dtype=np.int64)
    for r in device_index_ranges(sharding, shape):
        counts[tuple(slice(int(s), int(e)) for s, e in r)] += 1
    return counts
