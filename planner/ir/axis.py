"""Axis references: a full mesh axis ``"x"`` or a sub-axis ``"x":(m)k`` (seed 000).

The sub-axis ``"x":(m)k`` of an axis of size ``n`` is the middle piece when ``n``
is reshaped into ``[m, k, n/(m*k)]``: ``m`` (the pre-size) is the product of the
more-major pieces, ``k > 1`` its size. Inside its axis it covers the multiplicative
interval ``[m, m*k)``; two sub-axes of one axis overlap when those intervals do.

>>> AxisRef("x"), AxisRef("x", 2, 2)
(AxisRef('x'), AxisRef('x', 2, 2))
>>> str(AxisRef("x", 2, 2))
'"x":(2)2'
>>> AxisRef("x", 1, 2).overlaps(AxisRef("x", 1, 4))
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from planner.errors import ShardingError
from planner.ir.mesh import Mesh


@dataclass(frozen=True, slots=True)
class AxisRef:
    """A full axis (``size is None``) or the sub-axis ``(pre_size)size`` of axis ``name``."""

    name: str
    pre_size: int = 1
    size: int | None = None

    def __post_init__(self):
        if self.size is None:
            if self.pre_size != 1:
                raise ShardingError(f'axis "{self.name}": a full axis has no pre-size')
            return
        if self.pre_size < 1:
            raise ShardingError(f'sub-axis "{self.name}":({self.pre_size}){self.size}: the pre-size must be >= 1')
        if self.size <= 1:
            raise ShardingError(
                f'sub-axis "{self.name}":({self.pre_size}){self.size}: a sub-axis size must be > 1'
            )

    # -- predicates -------------------------------------------------------------
    @property
    def is_full(self) -> bool:
        return self.size is None

    def size_in(self, mesh: Mesh) -> int:
        return mesh.axis_size(self.name) if self.size is None else self.size

    def interval(self, mesh: Mesh) -> tuple[int, int]:
        """``[pre, pre*size)`` inside the axis's own size."""
        if self.size is None:
            return 1, mesh.axis_size(self.name)
        return self.pre_size, self.pre_size * self.size

    def digit(self, mesh: Mesh) -> tuple[int, int]:
        """``(stride, size)`` of this reference in flat mesh positions (see :mod:`planner.ir.mesh`)."""
        return mesh.digit(self.name, self.pre_size, self.size)

    def overlaps(self, other: "AxisRef", mesh: Mesh | None = None) -> bool:
        """Whether the two references share a piece of the same axis."""
        if self.name != other.name:
            return False
        if self.size is None or other.size is None:
            return True
        a0, a1 = self.pre_size, self.pre_size * self.size
        b0, b1 = other.pre_size, other.pre_size * other.size
        return max(a0, b0) < min(a1, b1)

    def contains(self, other: "AxisRef", mesh: Mesh) -> bool:
        """Whether ``other`` is a piece of ``self``."""
        if self.name != other.name:
            return False
        a0, a1 = self.interval(mesh)
        b0, b1 = other.interval(mesh)
        return a0 <= b0 and b1 <= a1 and b0 % a0 == 0

    def canonical(self, mesh: Mesh) -> "AxisRef":
        """``"x":(1)n`` on an axis of size ``n`` is the full axis ``"x"``."""
        if self.size is not None and self.pre_size == 1 and self.size == mesh.axis_size(self.name):
            return AxisRef(self.name)
        return self

    def validate(self, mesh: Mesh) -> None:
        """Check the reference against ``mesh`` (axis exists, sizes divide)."""
        n = mesh.axis_size(self.name)  # raises MeshError naming the axis
        if self.size is None:
            return
        m, k = self.pre_size, self.size
        if n % m or n % k or n % (m * k):
            raise ShardingError(
                f'sub-axis "{self.name}":({m}){k} does not fit axis "{self.name}" of size {n}: '
                f"the pre-size {m}, the size {k} and their product {m * k} must all divide {n}"
            )

    def split(self, mesh: Mesh, k: int) -> tuple["AxisRef", "AxisRef | None"]:
        """Split into a major piece of size ``k`` and the minor rest (``None`` if nothing is left)."""
        m, _ = self.interval(mesh)
        total = self.size_in(mesh)
        if total % k:
            raise ShardingError(f"cannot take a piece of size {k} from {self} of size {total}")
        major = make_axis(mesh, self.name, m, k)
        rest = None if k == total else make_axis(mesh, self.name, m * k, total // k)
        return major, rest

    def sort_key(self, mesh: Mesh) -> tuple[int, int]:
        return mesh.axis_index(self.name), self.pre_size

    def __str__(self) -> str:
        if self.size is None:
            return f'"{self.name}"'
        return f'"{self.name}":({self.pre_size}){self.size}'

    def __repr__(self) -> str:
        if self.size is None:
            return f"AxisRef({self.name!r})"
        return f"AxisRef({self.name!r}, {self.pre_size}, {self.size})"


def make_axis(mesh: Mesh, name: str, pre_size: int, size: int) -> AxisRef:
    """The canonical reference to the piece ``(pre_size)size`` of axis ``name``."""
    if pre_size == 1 and size == mesh.axis_size(name):
        return AxisRef(name)
    return AxisRef(name, pre_size, size)


def merge_adjacent(axes: Sequence[AxisRef], mesh: Mesh) -> tuple[AxisRef, ...]:
    """Merge consecutive pieces of one axis (``"x":(1)2, "x":(2)4`` -> ``"x":(1)8``).

    Builders call this so that what they produce obeys the maximality invariant.
    """
    out: list[AxisRef] = []
    for ref in axes:
        if out and out[-1].name == ref.name:
            prev = out[-1]
            p0, p1 = prev.interval(mesh)
            q0, q1 = ref.interval(mesh)
            if p1 == q0:
                out[-1] = make_axis(mesh, ref.name, p0, q1 // p0)
                continue
        out.append(ref)
    return tuple(out)


def sort_axes(axes: Iterable[AxisRef], mesh: Mesh) -> tuple[AxisRef, ...]:
    """Mesh order, and pieces of one axis by increasing pre-size (seed 000's canonical order)."""
    return tuple(sorted(axes, key=lambda r: r.sort_key(mesh)))


def product(sizes: Iterable[int]) -> int:
    out = 1
    for s in sizes:
        out *= s
    return out


def prime_factors(n: int) -> list[int]:
    """``12 -> [2, 2, 3]`` (ascending)."""
    out, d = [], 2
    while n > 1:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    return out


def axes_size(axes: Iterable[AxisRef], mesh: Mesh) -> int:
    """Product of the sizes of ``axes`` on ``mesh``."""
    return product(a.size_in(mesh) for a in axes)


def axes_for_digit(mesh: Mesh, stride: int, size: int) -> tuple[AxisRef, ...]:
    """The axis references (major to minor) whose digits together form ``(stride, size)``.

    A digit of the flat mesh position can span several axes (``size=8`` over
    ``x=2, y=4`` is ``("x", "y")``) or be part of one (``"d":(1)2``). Raises
    :class:`ShardingError` when the digit cuts an axis in a way no sub-axis
    can express (it never does for digits built from divisors of axis sizes).
    """
    out: list[AxisRef] = []
    lo, hi = stride, stride * size  # the digit covers flat strides [lo, hi)
    for axis in mesh.axes:
        a_lo = mesh.axis_stride(axis.name)
        a_hi = a_lo * axis.size
        s_lo, s_hi = max(lo, a_lo), min(hi, a_hi)
        if s_lo >= s_hi:
            continue
        if s_lo % a_lo or s_hi % a_lo:
            raise ShardingError(f"digit (stride {stride}, size {size}) does not align with axis {axis.name!r}")
        # inside the axis, strides a_lo..a_hi; the piece [s_lo, s_hi) has
        # size s_hi/s_lo and post-size s_lo/a_lo, so pre-size = n/(size*post).
        k = s_hi // s_lo
        post = s_lo // a_lo
        pre = axis.size // (k * post)
        if pre * k * post != axis.size:
            raise ShardingError(f"digit (stride {stride}, size {size}) does not align with axis {axis.name!r}")
        out.append(make_axis(mesh, axis.name, pre, k))
    if product(a.size_in(mesh) for a in out) != size:
        raise ShardingError(f"digit (stride {stride}, size {size}) is not a piece of mesh @{mesh.name}")
    return tuple(out)
