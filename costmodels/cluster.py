"""Clusters: device peak and roofline, device memory, and which link a collective over some mesh axes uses.

A :class:`Cluster` describes identical devices grouped into nodes of
``devices_per_node`` (device ``d`` is in node ``d // devices_per_node``), an
``intra_node`` link (NVLink) and an ``inter_node`` link (InfiniBand), each with an
alpha–beta pair: latency ``latency_s`` and per-device bandwidth
``bandwidth_bytes_per_s`` in each direction. Optional ``axis_links`` override the
link of a mesh axis by name. ``roofline`` (:class:`~costmodels.roofline.Roofline`)
holds what ops compute at beside ``device_peak_flops``: per-dtype peaks, the vector
rate, memory bandwidth, kernel overhead and the matmul efficiency curve; its default
prices FLOPs at 100% of ``device_peak_flops`` and nothing else.

:meth:`Cluster.link_for` picks the link of a collective over a set of mesh axes:

1. every axis with an override contributes its override (a sub-axis ``"x":(m)k``
   takes the override of ``"x"``);
2. the remaining axes together form device groups (the devices whose mesh
   positions differ only in those axes' digits); if any group holds devices of
   more than one node they contribute ``inter_node``, else ``intra_node``;
3. the collective uses the slowest of the contributed links
   (:func:`slowest_link`, a documented and replaceable choice: pass another
   ``combine`` function).

>>> from planner.ir.axis import AxisRef
>>> from planner.ir.mesh import Mesh
>>> nvlink, ib = Link(450e9, 3e-6), Link(50e9, 10e-6)
>>> cluster = Cluster("two-nodes", 989e12, 80 * 10**9, 8, nvlink, ib)
>>> mesh = Mesh.from_sizes("mesh", {"dp": 2, "tp": 8})
>>> cluster.link_for(mesh, [AxisRef("tp")]) == nvlink
True
>>> cluster.link_for(mesh, [AxisRef("dp")]) == ib
True
>>> str(cluster.link_for(mesh, [AxisRef("dp"), AxisRef("tp")]))
'50GB/s, 10us'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from costmodels.roofline import Roofline
from costmodels.units import format_quantity
from planner.caches import memoize
from planner.errors import ClusterError, CostModelError, ShardingError, quote
from planner.ir.axis import AxisRef
from planner.ir.layout import positions_to_devices
from planner.ir.mesh import Mesh
from planner.limits import MAX_DEVICES_PER_NODE

__all__ = ["Cluster", "Link", "group_spans_nodes", "slowest_link"]


def _check_positive(owner: str, name: str, value: object, *, allow_zero: bool = False) -> None:
    ok = (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        wanted = "a finite number >= 0" if allow_zero else "a finite number > 0"
        raise ClusterError(f"{owner}: {name} is {quote(value)}; it must be {wanted}")


@dataclass(frozen=True, slots=True)
class Link:
    """One kind of link: per-device bandwidth in each direction (bytes/s), latency (s)
    and a fixed overhead per collective call (s).

    In the alpha–beta model moving ``n`` bytes in one step costs
    ``latency_s + n / bandwidth_bytes_per_s``; every collective also pays
    ``overhead_s`` once (LogP's *o*: launching the kernel and synchronising the
    group), so that two collectives cost more than one that moves the same bytes
    in the same number of steps. Latency and overhead may be 0 (an idealised
    link); a bandwidth must be positive.

    >>> str(Link(450e9, 3e-6)), str(Link(450e9, 3e-6, 2e-6))
    ('450GB/s, 3us', '450GB/s, 3us, 2us per call')
    """

    bandwidth_bytes_per_s: float
    latency_s: float
    overhead_s: float = 0.0

    def __post_init__(self):
        _check_positive("link", "bandwidth_bytes_per_s", self.bandwidth_bytes_per_s)
        _check_positive("link", "latency_s", self.latency_s, allow_zero=True)
        _check_positive("link", "overhead_s", self.overhead_s, allow_zero=True)

    def __str__(self) -> str:
        text = f"{format_quantity(self.bandwidth_bytes_per_s, 'bytes/s')}, {format_quantity(self.latency_s, 's')}"
        if self.overhead_s:
            text += f", {format_quantity(self.overhead_s, 's')} per call"
        return text


def slowest_link(links: Sequence[Link]) -> Link:
    """The default policy for a collective over several links: the lowest bandwidth wins,
    and among equal bandwidths the highest latency.

    A ring over several links runs at the pace of its slowest hop; large
    collectives are bandwidth-bound, hence bandwidth first. Replace it by passing
    another ``combine`` to :meth:`Cluster.link_for`.

    >>> str(slowest_link([Link(450e9, 3e-6), Link(50e9, 10e-6), Link(50e9, 2e-6)]))
    '50GB/s, 10us'
    """
    if not links:
        raise CostModelError("slowest_link needs at least one link")
    return min(links, key=lambda link: (link.bandwidth_bytes_per_s, -link.latency_s, -link.overhead_s))


@dataclass(frozen=True, slots=True)
class Cluster:
    """Identical devices in nodes of ``devices_per_node``, and the links between them.

    ``axis_links`` may be given as a mapping or as ``(axis name, Link)`` pairs; it is
    stored sorted by axis name so that equal clusters compare and hash equal.
    """

    name: str
    device_peak_flops: float
    device_memory_bytes: int
    devices_per_node: int
    intra_node: Link
    inter_node: Link
    axis_links: tuple[tuple[str, Link], ...] = ()
    roofline: Roofline = Roofline()
    _overrides: dict = field(default=None, init=False, repr=False, compare=False, hash=False)
    _hash: int = field(default=0, init=False, repr=False, compare=False, hash=False)

    def __hash__(self) -> int:  # computed once: clusters key the planner's caches
        return self._hash

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ClusterError(f"a cluster needs a non-empty name, got {quote(self.name)}")
        owner = f"cluster {quote(self.name)}"
        _check_positive(owner, "device_peak_flops", self.device_peak_flops)
        if isinstance(self.device_memory_bytes, bool) or not isinstance(self.device_memory_bytes, int):
            raise ClusterError(f"{owner}: device_memory_bytes is {quote(self.device_memory_bytes)}; it must be an integer")
        _check_positive(owner, "device_memory_bytes", self.device_memory_bytes)
        if isinstance(self.devices_per_node, bool) or not isinstance(self.devices_per_node, int):
            raise ClusterError(f"{owner}: devices_per_node is {quote(self.devices_per_node)}; it must be an integer >= 1")
        _check_positive(owner, "devices_per_node", self.devices_per_node)
        if self.devices_per_node > MAX_DEVICES_PER_NODE:  # node ids are computed in int64
            raise ClusterError(f"{owner}: devices_per_node is {quote(self.devices_per_node)}, more than shardplan's "
                               f"limit of {MAX_DEVICES_PER_NODE:,} (the most devices of a mesh)")
        for name in ("intra_node", "inter_node"):
            if not isinstance(getattr(self, name), Link):
                raise ClusterError(f"{owner}: {name} must be a Link, got {quote(getattr(self, name))}")
        if not isinstance(self.roofline, Roofline):
            raise ClusterError(f"{owner}: roofline must be a Roofline, got {quote(self.roofline)}")
        pairs = self.axis_links.items() if isinstance(self.axis_links, Mapping) else self.axis_links
        overrides: dict[str, Link] = {}
        for axis, link in pairs:
            if axis in overrides:
                raise ClusterError(f"{owner}: axis {quote(axis)} has two link overrides; give one")
            if not isinstance(link, Link):
                raise ClusterError(f"{owner}: the override of axis {quote(axis)} must be a Link, got {quote(link)}")
            overrides[axis] = link
        object.__setattr__(self, "axis_links", tuple(sorted(overrides.items())))
        object.__setattr__(self, "_overrides", overrides)
        object.__setattr__(self, "_hash", hash((self.name, self.device_peak_flops, self.device_memory_bytes,
                                                self.devices_per_node, self.intra_node, self.inter_node,
                                                self.axis_links, self.roofline)))

    def link_for(
        self,
        mesh: Mesh,
        axes: Iterable[AxisRef],
        *,
        combine: Callable[[Sequence[Link]], Link] = slowest_link,
    ) -> Link:
        """The link a collective over ``axes`` of ``mesh`` uses (see the module docstring).

        With no axes there is nothing to communicate; the answer is ``intra_node``.
        """
        axes = tuple(axes)
        links = [self._overrides[ref.name] for ref in axes if ref.name in self._overrides]
        rest = tuple(ref for ref in axes if ref.name not in self._overrides)
        if rest or not links:
            spans = group_spans_nodes(mesh, rest, self.devices_per_node)
            links.append(self.inter_node if spans else self.intra_node)
        return combine(links)

    def __str__(self) -> str:
        text = (
            f"{self.name}: {format_quantity(self.device_peak_flops, 'FLOP/s')}, "
            f"{format_quantity(self.device_memory_bytes, 'bytes')} per device, "
            f"{self.devices_per_node} devices per node; intra-node {self.intra_node}; "
            f"inter-node {self.inter_node}"
        )
        for axis, link in self.axis_links:
            text += f'; axis "{axis}" {link}'
        if not self.roofline.is_default:
            text += f"; {self.roofline}"
        return text


def group_spans_nodes(mesh: Mesh, axes: Iterable[AxisRef], devices_per_node: int) -> bool:
    """Whether some group of a collective over ``axes`` holds devices of more than one node.

    A group is the set of devices whose mesh positions differ only in the digits
    of ``axes``. Results are cached per ``(mesh, axes, devices_per_node)``.

    >>> mesh = Mesh.from_sizes("d16", {"d": 16})
    >>> group_spans_nodes(mesh, [AxisRef("d", 1, 2)], 8), group_spans_nodes(mesh, [AxisRef("d", 2, 8)], 8)
    (True, False)
    """
    key = tuple(sorted(set(axes), key=lambda r: (r.name, r.pre_size, r.size or 0)))
    return _group_spans_nodes(mesh, key, devices_per_node)


@memoize("cluster node spans", maxsize=4096)
def _group_spans_nodes(mesh: Mesh, axes: tuple[AxisRef, ...], devices_per_node: int) -> bool:
    for i, ref in enumerate(axes):
        ref.validate(mesh)
        for other in axes[i + 1:]:
            if ref.overlaps(other):
                raise ShardingError(f"axes {ref} and {other} overlap; a collective runs over distinct axes")
    positions = np.arange(mesh.size, dtype=np.int64)
    first = positions.copy()  # the group's member with all of the axes' digits zero
    for ref in axes:
        stride, size = ref.digit(mesh)
        first -= (positions // stride) % size * stride
    node = positions_to_devices(mesh) // devices_per_node
    return bool(np.any(node != node[first]))
