"""Alpha–beta costs of the five collectives, ring algorithms by default.

For a group of ``p`` devices on a :class:`~costmodels.cluster.Link` with latency
``α = latency_s`` and bandwidth ``β = bandwidth_bytes_per_s``, a step kind of
:mod:`planner.collectives` receives ``rounds`` units one after another (its
``rounds`` and ``received``, defined there once), and takes ``rounds·α + received/β``:

==================  =================================  ==================================
collective          bytes received per device          time
==================  =================================  ==================================
AllGather           ``(p-1)·shard``                    ``(p-1)·α + received/β``
ReduceScatter       ``(p-1)·shard`` (shard = output)   ``(p-1)·α + received/β``
AllReduce           ``2·(p-1)·chunk``                  ``2(p-1)·α + received/β``
AllToAll            ``(p-1)·chunk``                    ``(p-1)·α + received/β``
CollectivePermute   ``bytes_received``                 ``α + received/β`` (0 if nothing)
==================  =================================  ==================================

Byte counts are integers and must equal what the numpy device simulator counts,
so callers pass whole pieces: :func:`chunk_bytes` rounds a buffer cut into ``p``
pieces up to whole (padded) pieces. A group of one device costs nothing.

AllGather and ReduceScatter are rings of ``p-1`` steps; AllReduce is a
ReduceScatter followed by an AllGather; AllToAll is ``p-1`` pairwise exchanges.
Another algorithm (trees, recursive halving) is another :class:`CollectiveModel`
with functions of the same signatures; :data:`RING` is the default.

>>> from costmodels.cluster import Link
>>> link = Link(bandwidth_bytes_per_s=100e9, latency_s=5e-6)
>>> all_gather_cost(4, 1_000_000, link)
CollectiveCost(bytes_per_device=3000000, time_s=4.5e-05)
>>> all_reduce_cost(4, chunk_bytes(1_000_000, 4, 4), link)
CollectiveCost(bytes_per_device=6000000, time_s=9e-05)
>>> all_gather_cost(1, 1_000_000, link)
CollectiveCost(bytes_per_device=0, time_s=0.0)
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, NamedTuple

from costmodels.cluster import Link
from costmodels.units import format_bytes, format_seconds, nonnegative_int
from planner.collectives import STEP_KINDS, step_kind
from planner.errors import CostModelError

__all__ = [
    "RING",
    "CollectiveCost",
    "CollectiveModel",
    "all_gather_cost",
    "all_reduce_cost",
    "all_to_all_cost",
    "chunk_bytes",
    "collective_permute_cost",
    "reduce_scatter_cost",
]


@dataclass(frozen=True, slots=True)
class CollectiveCost:
    """What one collective costs each device: bytes it receives and time it takes.

    Costs of steps run one after another add up:

    >>> CollectiveCost(100, 1e-6) + CollectiveCost(50, 2e-6)
    CollectiveCost(bytes_per_device=150, time_s=3e-06)
    >>> str(CollectiveCost(3_000_000, 4.5e-05))
    '3.00 MB, 45.0 us'
    """

    bytes_per_device: int
    time_s: float

    def __add__(self, other: "CollectiveCost") -> "CollectiveCost":
        if not isinstance(other, CollectiveCost):
            return NotImplemented
        return CollectiveCost(self.bytes_per_device + other.bytes_per_device, self.time_s + other.time_s)

    def __str__(self) -> str:
        return f"{format_bytes(self.bytes_per_device)}, {format_seconds(self.time_s)}"


NO_COST = CollectiveCost(0, 0.0)


def chunk_bytes(elements: int, p: int, itemsize: int) -> int:
    """Bytes of one of ``p`` equal pieces of ``elements`` items, padded up to a whole piece.

    >>> chunk_bytes(10, 4, 4)  # ceil(10 / 4) = 3 elements of 4 bytes
    12
    """
    elements, p, itemsize = nonnegative_int(elements, "elements"), _group(p), nonnegative_int(itemsize, "itemsize")
    return -(-elements // p) * itemsize


def all_gather_cost(p: int, shard_bytes: int, link: Link) -> CollectiveCost:
    """Each of ``p`` devices contributes ``shard_bytes`` and ends with all ``p`` shards.

    >>> all_gather_cost(4, 100, Link(100.0, 1.0))
    CollectiveCost(bytes_per_device=300, time_s=6.0)
    """
    return _kind_cost("AllGather", _group(p), nonnegative_int(shard_bytes, "shard_bytes"), link)


def reduce_scatter_cost(p: int, shard_bytes: int, link: Link) -> CollectiveCost:
    """``p`` devices sum a buffer and each keeps one piece of ``shard_bytes``.

    >>> reduce_scatter_cost(4, 100, Link(100.0, 1.0))
    CollectiveCost(bytes_per_device=300, time_s=6.0)
    """
    return _kind_cost("ReduceScatter", _group(p), nonnegative_int(shard_bytes, "shard_bytes"), link)


def all_reduce_cost(p: int, chunk_bytes: int, link: Link) -> CollectiveCost:
    """``p`` devices sum a buffer cut into ``p`` chunks of ``chunk_bytes`` (padded by the caller).

    >>> all_reduce_cost(4, 100, Link(100.0, 1.0))
    CollectiveCost(bytes_per_device=600, time_s=12.0)
    """
    return _kind_cost("AllReduce", _group(p), nonnegative_int(chunk_bytes, "chunk_bytes"), link)


def all_to_all_cost(p: int, chunk_bytes: int, link: Link) -> CollectiveCost:
    """Each of ``p`` devices sends one chunk of ``chunk_bytes`` to each other member.

    A device's local buffer is ``p * chunk_bytes``; it keeps one chunk, so it
    receives ``(p-1)/p`` of its local bytes.

    >>> all_to_all_cost(4, 100, Link(100.0, 1.0))
    CollectiveCost(bytes_per_device=300, time_s=6.0)
    """
    return _kind_cost("AllToAll", _group(p), nonnegative_int(chunk_bytes, "chunk_bytes"), link)


def collective_permute_cost(bytes_received: int, link: Link) -> CollectiveCost:
    """Every device receives ``bytes_received`` from one other device in one step.

    >>> collective_permute_cost(400, Link(100.0, 1.0)), collective_permute_cost(0, Link(100.0, 1.0))
    (CollectiveCost(bytes_per_device=400, time_s=5.0), CollectiveCost(bytes_per_device=0, time_s=0.0))
    """
    return _kind_cost("CollectivePermute", 2, nonnegative_int(bytes_received, "bytes_received"), link)


class CollectiveModel(NamedTuple):
    """One algorithm per collective; callers that take a model can be given another."""

    all_gather: Callable[[int, int, Link], CollectiveCost]
    reduce_scatter: Callable[[int, int, Link], CollectiveCost]
    all_reduce: Callable[[int, int, Link], CollectiveCost]
    all_to_all: Callable[[int, int, Link], CollectiveCost]
    collective_permute: Callable[[int, Link], CollectiveCost]

    def cost(self, kind: str, p: int, unit_bytes: int, link: Link) -> CollectiveCost:
        """The cost of a step of ``kind`` (``AllGather`` ...) whose group of ``p`` devices moves ``unit_bytes``
        a round (a permute: what a receiving device gets; a Slice costs nothing).

        >>> RING.cost("AllReduce", 4, 100, Link(100.0, 1.0)) == RING.all_reduce(4, 100, Link(100.0, 1.0))
        True
        """
        if kind == "CollectivePermute":  # priced by what a receiver gets, whatever the group
            return self.collective_permute(unit_bytes, link)
        fn = _MODEL_FIELDS.get(kind)
        if fn is None:  # a Slice: no rounds (an unknown kind is a RuleError)
            return _kind_cost(kind, p, unit_bytes, link)
        return getattr(self, fn)(p, unit_bytes, link)


RING = CollectiveModel(all_gather_cost, reduce_scatter_cost, all_reduce_cost, all_to_all_cost, collective_permute_cost)
"""The default model: the ring formulas of this module."""


def _snake(kind: str) -> str:
    """``AllGather`` -> ``all_gather``: the model's field of a step kind."""
    return "".join("_" + c.lower() if c.isupper() else c for c in kind).lstrip("_")


#: A grouped step kind -> the :class:`CollectiveModel` field pricing it (``AllGather`` -> ``all_gather``).
_MODEL_FIELDS = {k.name: _snake(k.name) for k in STEP_KINDS.values() if k.grouped}


def _kind_cost(kind: str, p: int, unit_bytes: int, link: Link) -> CollectiveCost:
    """The registry's rounds of ``kind`` for a group of ``p`` priced on ``link``."""
    k = step_kind(kind)
    return _cost(k.rounds(p, unit_bytes), k.received(p, unit_bytes), link)


def _cost(steps: int, received: int, link: Link) -> CollectiveCost:
    """``steps`` latencies, the bytes at the link's bandwidth, and the per-call overhead once."""
    if steps == 0:
        return NO_COST
    return CollectiveCost(
        received, link.overhead_s + steps * link.latency_s + received / link.bandwidth_bytes_per_s
    )


def _group(p: int) -> int:
    p = operator.index(p)
    if p < 1:
        raise CostModelError(f"a collective group has at least one device, got p={p}")
    return p

