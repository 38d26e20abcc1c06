"""Collectives executed for real on the simulator's blocks, counting received bytes.

Each function takes a :class:`~planner.simulation.distributed.DistributedArray`, a
:class:`~planner.redistribution.steps.Step` and a :class:`Network`, moves numpy
blocks between simulated devices exactly as the algorithm would (ring passes for
AllGather, ReduceScatter and AllReduce; one chunk per peer for AllToAll; the one
missing box per receiver for CollectivePermute) and returns the array in the step's ``after``
sharding. Every transfer goes through :meth:`Network.send`, which is what the
measured bytes count. A device then cuts its new block out of what it holds and
received; an element it should hold but cannot find is a
:class:`~planner.errors.SimulationMismatch` (the engine's plan was wrong), never silently zero.

Device groups come from the mesh: the devices whose positions differ only in the
step's axes, ordered by their index over those axes.

The kernels that move a group's blocks (the ring passes, the all-to-all exchange,
the permute) are the step kinds' in the registry :mod:`planner.collectives`; this
module groups the devices, cuts and reassembles blocks, and counts the bytes.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from planner.collectives import STEP_KINDS
from planner.errors import SimulationMismatch
from planner.ir.layout import device_index_ranges, devices_to_positions
from planner.redistribution.state import missing_box
from planner.ir.sharding import PENDING_MAX, PENDING_MIN, PENDING_SUM, TensorSharding
from planner.redistribution.steps import Step
from planner.simulation.distributed import DistributedArray, block_origins, replica_groups


class Network:
    """Counts the bytes each simulated device receives, step by step."""

    def __init__(self, devices: int, itemsize: int | None = None):
        self.devices = devices
        self.itemsize = itemsize  # bytes counted per element (the declared dtype's), else the array's own
        self.total = np.zeros(devices, dtype=np.int64)
        self.per_step: list[np.ndarray] = []

    def begin_step(self) -> None:
        self.per_step.append(np.zeros(self.devices, dtype=np.int64))

    def send(self, src: int, dst: int, data: np.ndarray) -> np.ndarray:
        """Deliver ``data`` from ``src`` to ``dst`` (free when they are the same device).

        What arrives is a read-only view, not a copy: nothing in the simulator writes
        into a block in place, so the receiver's copy would only cost memory.
        """
        if src != dst:
            if not self.per_step:
                self.begin_step()
            nbytes = data.nbytes if self.itemsize is None else data.size * self.itemsize
            self.per_step[-1][dst] += nbytes
            self.total[dst] += nbytes
        out = data.view()
        out.flags.writeable = False
        return out

    def step_bytes(self) -> int:
        """Largest number of bytes any device received in the last step."""
        return int(self.per_step[-1].max(initial=0)) if self.per_step else 0

    @property
    def bytes_per_device(self) -> int:
        """Sum over steps of each step's largest per-device receipt (the engine's measure)."""
        return int(sum(int(s.max(initial=0)) for s in self.per_step))


# -- groups and pieces ------------------------------------------------------------------------

def groups(sharding: TensorSharding, axes) -> list[np.ndarray]:
    """Device ids of each group of a collective over ``axes``, in member order."""
    mesh = sharding.mesh
    pos = devices_to_positions(mesh)
    key = pos.copy()
    member = np.zeros(mesh.size, dtype=np.int64)
    for ref in axes:
        stride, size = ref.digit(mesh)
        digit = (pos // stride) % size
        key -= digit * stride
        member = member * size + digit
    order = np.lexsort((member, key))
    cuts = np.flatnonzero(np.diff(key[order])) + 1
    return list(np.split(order, cuts))


def _extract(block: np.ndarray, origin: Sequence[int], want_origin: Sequence[int], want_shape: Sequence[int]):
    """The part of ``block`` (at ``origin``) covering ``[want_origin, +want_shape)``, zero-padded
    (a read-only view when the block holds all of it)."""
    src, dst = [], []
    for o, n, w, m in zip(origin, block.shape, want_origin, want_shape):
        lo, hi = max(o, w), min(o + n, w + m)
        if hi <= lo:
            return np.zeros(tuple(want_shape), dtype=block.dtype)
        src.append(slice(lo - o, hi - o))
        dst.append(slice(lo - w, hi - w))
    if all(d.stop - d.start == m for d, m in zip(dst, want_shape)):
        view = block[tuple(src)]
        view.flags.writeable = False
        return view
    out = np.zeros(tuple(want_shape), dtype=block.dtype)
    out[tuple(dst)] = block[tuple(src)]
    return out


def _assemble(pieces, origin, local, shape) -> np.ndarray:
    """A new block at ``origin`` built from ``(origin, array)`` pieces; every valid element must be found."""
    dtype = pieces[0][1].dtype
    out = np.zeros(tuple(local), dtype=dtype)
    covered = np.zeros(tuple(local), dtype=bool)
    for p_origin, arr in pieces:
        src, dst = [], []
        empty = False
        for o, n, w, m in zip(p_origin, arr.shape, origin, local):
            lo, hi = max(o, w), min(o + n, w + m)
            if hi <= lo:
                empty = True
                break
            src.append(slice(lo - o, hi - o))
            dst.append(slice(lo - w, hi - w))
        if empty:
            continue
        out[tuple(dst)] = arr[tuple(src)]
        covered[tuple(dst)] = True
    valid = tuple(slice(0, max(0, min(m, d - w))) for w, m, d in zip(origin, local, shape))
    if not covered[valid].all():
        raise SimulationMismatch("a device lacks elements of its new block: the plan is not executable")
    return out


def _replicas(after: TensorSharding, shape) -> tuple[tuple[int, ...], ...]:
    """Groups of devices that hold the same block of a value laid out as ``after`` (singletons for a pending sum)."""
    if after.unreduced:
        return tuple((d,) for d in range(after.mesh.size))
    return replica_groups((after,), (tuple(shape),))


def same_block(kept: np.ndarray | None, block: np.ndarray, after: TensorSharding, device: int) -> np.ndarray:
    """``kept`` if ``block`` equals it bit for bit (a replica: one copy is kept, read-only), else an error."""
    if kept is None:
        block.flags.writeable = False
        return block
    if kept.shape != block.shape or not np.array_equal(_bits(kept), _bits(block)):
        raise SimulationMismatch(f"device {device} should hold the same block as its replicas of a value laid out as "
                                 f"{after}, but it differs")
    return kept


def _bits(a: np.ndarray) -> np.ndarray:
    """``a``'s raw bits as unsigned integers (NaNs compare equal to identical NaNs, without copies)."""
    a = np.ascontiguousarray(a)
    kind = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(a.dtype.itemsize)
    return a.view(kind) if kind is not None and a.dtype != np.bool_ else a


def _rebuild(arr: DistributedArray, after: TensorSharding, pieces_of) -> DistributedArray:
    shape = arr.shape
    local = after.local_shape(shape)
    origins = block_origins(after, shape)
    blocks: list = [None] * after.mesh.size
    replicas = tuple((d,) for d in range(after.mesh.size)) if arr.varying else _replicas(after, shape)
    for members in replicas:  # replicas share one block (checked equal): one copy per group
        for d in members:
            blocks[d] = same_block(blocks[members[0]], _assemble(pieces_of(d), origins[d], local, shape), after, d)
    return DistributedArray(after, shape, blocks, arr.varying)


# -- the collectives ----------------------------------------------------------------------------

def all_gather(arr: DistributedArray, step: Step, net: Network) -> DistributedArray:
    origins = arr.origins()
    held: dict[int, list] = {}
    for members in groups(arr.sharding, step.axes):
        items = [(origins[d], arr.blocks[d]) for d in members]
        for r, got in enumerate(_kernel(step)(net, members, items)):
            held[int(members[r])] = got
    return _rebuild(arr, step.after, lambda d: held[d])


def all_to_all(arr: DistributedArray, step: Step, net: Network) -> DistributedArray:
    _, k = step.dims
    shape = arr.shape
    origins = arr.origins()
    new_origins = block_origins(step.after, shape)
    new_local = step.after.local_shape(shape)
    held: dict[int, list] = {}
    for members in groups(arr.sharding, step.axes):
        pieces, wanted = [], []  # pieces[m][n]: member m's chunk for member n, at origin wanted[m][n]
        for m in members:
            row, at = [], []
            for n in members:
                want_origin = list(origins[m])
                want_origin[k] = new_origins[n][k]
                want_shape = list(arr.blocks[m].shape)
                want_shape[k] = new_local[k]
                row.append(_extract(arr.blocks[m], origins[m], want_origin, want_shape))
                at.append(want_origin)
            pieces.append(row)
            wanted.append(at)
        for c, got in enumerate(_kernel(step)(net, members, pieces)):
            held[int(members[c])] = [(wanted[r][c], data) for r, data in enumerate(got)]
    return _rebuild(arr, step.after, lambda d: held[d])


def reduce_scatter(arr: DistributedArray, step: Step, net: Network) -> DistributedArray:
    shape = arr.shape
    origins = arr.origins()
    new_origins = block_origins(step.after, shape)
    new_local = step.after.local_shape(shape)
    held: dict[int, list] = {}
    for members in groups(arr.sharding, step.axes):
        chunks = [
            [_extract(arr.blocks[m], origins[m], new_origins[c], new_local) for c in members] for m in members
        ]
        for r, total in enumerate(_kernel(step)(net, members, chunks)):
            d = int(members[r])
            held[d] = [(new_origins[d], total)]
    return _rebuild(arr, step.after, lambda d: held[d])


#: How an AllReduce combines the members' blocks, by the kind of reduction the value is pending.
COMBINE = {PENDING_SUM: np.add, PENDING_MAX: np.maximum, PENDING_MIN: np.minimum}


def all_reduce(arr: DistributedArray, step: Step, net: Network) -> DistributedArray:
    blocks = list(arr.blocks)
    combine = COMBINE[step.before.reduction]
    for members in groups(arr.sharding, step.axes):
        first = None
        for r, full in enumerate(_kernel(step)(net, members, [arr.blocks[m] for m in members], combine)):
            if not step.after.unreduced and not arr.varying:  # every member holds the sum: one copy (checked)
                full = first = same_block(first, full, step.after, int(members[r]))
            blocks[int(members[r])] = full
    return DistributedArray(step.after, arr.shape, blocks, arr.varying)


def collective_permute(arr: DistributedArray, step: Step, net: Network) -> DistributedArray:
    shape = arr.shape
    origins = arr.origins()
    after = step.after
    source = {dst: src for src, dst in step.pairs}
    if arr.sharding.unreduced:  # partial sums move whole, with their device slot
        blocks = list(arr.blocks)
        for dst, got in _kernel(step)(net, [(src, dst, arr.blocks[src]) for dst, src in source.items()]).items():
            blocks[dst] = got
        return DistributedArray(after, shape, blocks, arr.varying)

    own = device_index_ranges(arr.sharding, shape)
    ok, missing = missing_box(own, device_index_ranges(after, shape))
    sends, starts = [], {}
    for d, s in source.items():  # each receiver's one missing box, from its source
        if not ok[d]:
            raise SimulationMismatch(f"device {d} lacks more than one box of its new block")
        start, stop = missing[d, :, 0], missing[d, :, 1]
        sends.append((s, d, _extract(arr.blocks[s], origins[s], start, stop - start)))
        starts[d] = start
    received = _kernel(step)(net, sends)

    def pieces_of(d):
        pieces = [(origins[d], arr.blocks[d])]
        if d in source:
            pieces.append((starts[d], received[d]))
        return pieces

    return _rebuild(arr, after, pieces_of)


def local_slice(arr: DistributedArray, step: Step, net: Network) -> DistributedArray:
    fresh = [a for a in step.after.unreduced if a not in arr.sharding.unreduced]
    if fresh and step.dims:  # dimensions split past their size made whole, pending over their axes: each device's
        # positions in place, zeros elsewhere (its padding, and the positions other devices hold)
        return DistributedArray(step.after, arr.shape, _in_place(arr, step.after), arr.varying)
    if fresh:  # keep a 1/p share: the group's first member keeps the value, the others zero
        mesh = arr.mesh
        pos = devices_to_positions(mesh)
        keep = np.ones(mesh.size, dtype=bool)
        for ref in fresh:
            stride, size = ref.digit(mesh)
            keep &= (pos // stride) % size == 0
        blocks = [b if keep[d] else np.zeros_like(b) for d, b in enumerate(arr.blocks)]
        arr = DistributedArray(arr.sharding, arr.shape, blocks, arr.varying)
    origins = arr.origins()
    return _rebuild(arr, step.after, lambda d: [(origins[d], arr.blocks[d])])


def _in_place(arr: DistributedArray, after: TensorSharding) -> list[np.ndarray]:
    """Each device's block of ``arr`` put where it lies in a zeroed block of ``after`` (its valid part only)."""
    shape, local = arr.shape, after.local_shape(arr.shape)
    new_origins, origins = block_origins(after, shape), arr.origins()
    out = []
    for d, block in enumerate(arr.blocks):
        placed = np.zeros(tuple(local), dtype=block.dtype)
        src, dst = [], []
        for o, w, n, m, size in zip(origins[d], new_origins[d], block.shape, local, shape):
            lo, hi = max(o, w), min(o + n, w + m, size)
            src.append(slice(lo - o, max(lo, hi) - o))
            dst.append(slice(lo - w, max(lo, hi) - w))
        placed[tuple(dst)] = block[tuple(src)]
        out.append(placed)
    return out


EXECUTORS = {
    "AllGather": all_gather,
    "AllReduce": all_reduce,
    "AllToAll": all_to_all,
    "CollectivePermute": collective_permute,
    "ReduceScatter": reduce_scatter,
    "Slice": local_slice,
}


def _kernel(step: Step):
    """The registry's kernel of the step's kind."""
    return STEP_KINDS[step.kind].kernel


def run_step(arr: DistributedArray, step: Step, net: Network) -> DistributedArray:
    """Execute one step; the array must be in the step's ``before`` layout."""
    net.begin_step()
    return EXECUTORS[step.kind](arr, step, net)
