"""Logical meshes: named, ordered axes over a set of devices (seed 000).

A mesh ``<["x"=2, "y"=4]>`` reshapes the devices ``0..N-1`` row-major into the
shape ``(2, 4)``; the last axis is the minor one. ``device_ids`` (a permutation of
``0..N-1``) says which device sits at each position of that row-major order, so
several meshes can describe the same devices in different orders.

Every axis, and every sub-axis ``"x":(m)k`` of it, is one *digit* of the flat
mesh position: ``digit = (position // stride) % size``. :meth:`Mesh.digit` gives
that ``(stride, size)`` pair; the layout code works only with digits, which is
what makes ``[{"x"}, {"y"}]`` on ``x=4, y=2`` and
``[{"devices":(1)4}, {"devices":(4)2}]`` on ``devices=8`` the same layout.

>>> mesh = Mesh.from_sizes("mesh_xy", {"x": 2, "y": 4, "z": 2})
>>> mesh.size, mesh.shape
(16, (2, 4, 2))
>>> str(mesh)
'@mesh_xy = <["x"=2, "y"=4, "z"=2]>'
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from planner.errors import MeshError, clip, quote
from planner.limits import check_mesh_size

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


class AxisType(enum.Enum):
    """How a mesh axis is partitioned (seed 001): by the planner, by explicit types, or by hand."""

    AUTO = "Auto"
    EXPLICIT = "Explicit"
    MANUAL = "Manual"

    @classmethod
    def parse(cls, text: str) -> "AxisType":
        for member in cls:
            if member.value.lower() == str(text).lower():
                return member
        raise MeshError(f"unknown axis type {quote(text)}; use one of Auto, Explicit, Manual")


@dataclass(frozen=True, slots=True)
class MeshAxis:
    """One named axis of a mesh."""

    name: str
    size: int
    type: AxisType = AxisType.AUTO

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise MeshError(
                f"mesh axis name {quote(self.name)} is not a valid name "
                "(letters, digits, '_', '.', '-'; not starting with a digit)"
            )
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise MeshError(f"mesh axis {quote(self.name)} has size {quote(self.size)}; sizes are integers >= 1")


@dataclass(frozen=True, slots=True)
class Mesh:
    """A named logical mesh: ordered axes (major to minor) and optional device ids."""

    name: str
    axes: tuple[MeshAxis, ...]
    device_ids: tuple[int, ...] | None = None
    _index: dict = field(default=None, init=False, repr=False, compare=False, hash=False)
    _size: int = field(default=0, init=False, repr=False, compare=False, hash=False)
    _hash: int = field(default=0, init=False, repr=False, compare=False, hash=False)

    def __hash__(self) -> int:  # computed once: meshes key the planner's caches
        return self._hash

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise MeshError(f"mesh name {quote(self.name)} is not a valid name")
        axes = tuple(self.axes)
        object.__setattr__(self, "axes", axes)
        if not axes:
            raise MeshError(f"mesh @{self.name} has no axes; give at least one, e.g. <[\"x\"=2]>")
        index = {}
        for i, axis in enumerate(axes):
            if axis.name in index:
                raise MeshError(f"mesh @{self.name} names axis {quote(axis.name)} twice")
            index[axis.name] = i
        object.__setattr__(self, "_index", index)
        n = check_mesh_size(self.name, (a.size for a in axes))  # before anything per device is built
        object.__setattr__(self, "_size", n)
        if self.device_ids is not None:
            ids = tuple(self.device_ids)
            object.__setattr__(self, "device_ids", ids)
            if len(ids) != n:
                raise MeshError(
                    f"mesh @{self.name} has {n} positions but device_ids lists {len(ids)} ids; "
                    "give one id per position"
                )
            if sorted(ids) != list(range(n)):
                raise MeshError(
                    f"mesh @{self.name}: device_ids must be a permutation of 0..{n - 1}, got {list(ids)}"
                )
        object.__setattr__(self, "_hash", hash((self.name, self.axes, self.device_ids)))

    # -- construction -------------------------------------------------------
    @classmethod
    def from_sizes(
        cls,
        name: str,
        sizes: Mapping[str, int] | Iterable[tuple[str, int]],
        device_ids: Iterable[int] | None = None,
        types: Mapping[str, AxisType | str] | None = None,
    ) -> "Mesh":
        """Build a mesh from ``{"x": 2, "y": 4}`` (insertion order is mesh order)."""
        items = list(sizes.items()) if isinstance(sizes, Mapping) else list(sizes)
        types = dict(types or {})
        axes = tuple(
            MeshAxis(str(n), s, AxisType.parse(types[n]) if isinstance(types.get(n), str) else types.get(n, AxisType.AUTO))
            for n, s in items
        )
        return cls(name, axes, None if device_ids is None else tuple(device_ids))

    # -- queries ----------------------------------------------------------------
    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.axes)

    @property
    def size(self) -> int:
        """Number of devices."""
        return self._size

    @property
    def devices(self) -> tuple[int, ...]:
        """Device id at each row-major position of the mesh."""
        return self.device_ids if self.device_ids is not None else tuple(range(self.size))

    def has_axis(self, name: str) -> bool:
        return name in self._index

    def axis_index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise MeshError(
                f'axis "{clip(name)}" is not in mesh @{self.name} (its axes are {", ".join(self.axis_names)})'
            ) from None

    def axis_size(self, name: str) -> int:
        return self.axes[self.axis_index(name)].size

    def axis_stride(self, name: str) -> int:
        """Distance in flat positions between neighbours along axis ``name``."""
        stride = 1
        for axis in self.axes[self.axis_index(name) + 1:]:
            stride *= axis.size
        return stride

    def digit(self, name: str, pre_size: int = 1, size: int | None = None) -> tuple[int, int]:
        """``(stride, size)`` of axis ``name`` or its sub-axis ``(pre_size)size`` in flat positions."""
        n = self.axis_size(name)
        k = n if size is None else size
        return self.axis_stride(name) * (n // (pre_size * k)), k

    def same_devices(self, other: "Mesh") -> bool:
        return self.size == other.size

    def with_types(self, types: Mapping[str, AxisType]) -> "Mesh":
        axes = tuple(MeshAxis(a.name, a.size, types.get(a.name, a.type)) for a in self.axes)
        return Mesh(self.name, axes, self.device_ids)

    def axes_text(self) -> str:
        """The axes in the seed's notation: ``<["x"=2, "y"=4]>``."""
        return "<[" + ", ".join(f'"{a.name}"={a.size}' for a in self.axes) + "]>"

    def __str__(self) -> str:
        axes = self.axes_text()
        if self.device_ids is None:
            return f"@{self.name} = {axes}"
        return f"@{self.name} = {{{axes}, device_ids=[{', '.join(map(str, self.device_ids))}]}}"

    def short(self) -> str:
        """Compact form used in tables: ``x=2,y=4``."""
        return ",".join(f"{a.name}={a.size}" for a in self.axes)
