"""Device-variance types (seed 004): an array type plus the mesh axes its value may vary over.

Inside a ``shmap`` body every device runs the same program on its own values. A
value is *device-invariant* along a mesh axis when all devices along that axis
are guaranteed to hold the same value, and (possibly) *device-varying* otherwise.
Seed 004 writes the set of axes a value may vary over after its shape::

    shaped_array         ::= <dtype>[<int_literal>, ...]<device_variance_type>
    device_variance_type ::= {<axis_name>, ...}

so ``x:f32[3,4]{i}`` varies along ``i`` and is invariant along every other axis,
and ``f32[8]`` (also written ``f32[8]{}``) is invariant everywhere.

Axis names are plain strings; an :class:`~planner.ir.axis.AxisRef` (a sub-axis such
as ``"x":(1)2``) is accepted too, as an opaque hashable name shown by its ``str``.

>>> t = VarType("f32", (3, 4), frozenset({"i"}))
>>> str(t), t.text(), repr(t)
('f32[3,4]{i}', 'f32[3,4]{i}', "VarType('f32[3,4]{i}')")
>>> parse_type("f32[]{j,i}").text(order=("i", "j"))
'f32[]{i,j}'
>>> parse_type("f32[8]{}") == parse_type("f32[8]") == VarType("f32", (8,))
True
>>> parse_type("f32[8]{i}").invariant_over("j"), parse_type("f32[8]{i}").varies_over("i")
(True, True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Hashable, Iterable, Sequence

from planner.errors import ParseError, quote
from planner.ir.text import parse_axis_ref

__all__ = ["VarType", "axes_text", "axis_text", "parse_type"]

_DTYPE = re.compile(r"^[a-z][a-z0-9]*$")
_TYPE = re.compile(r"^\s*([a-z][a-z0-9]*)\s*\[([^\]]*)\]\s*(?:\{([^}]*)\})?\s*$")


def axis_text(axis: Hashable) -> str:
    """How an axis is written inside ``{...}``: a name as is, an AxisRef by its ``str``.

    >>> from planner.ir.axis import AxisRef
    >>> axis_text("i"), axis_text(AxisRef("x", 1, 2))
    ('i', '"x":(1)2')
    """
    return axis if isinstance(axis, str) else str(axis)


def axes_text(axes: Iterable[Hashable], order: Sequence[Hashable] | None = None) -> str:
    """``{i,j}`` for a set of axes: in ``order`` (e.g. the mesh's) first, the rest sorted; ``""`` if empty.

    >>> axes_text({"j", "i"}), axes_text({"j", "i"}, order=("j", "i")), axes_text(())
    ('{i,j}', '{j,i}', '')
    """
    axes = set(axes)
    if not axes:
        return ""
    ranked = [a for a in (order or ()) if a in axes]
    rest = sorted((a for a in axes if a not in set(ranked)), key=axis_text)
    return "{" + ",".join(axis_text(a) for a in ranked + rest) + "}"


@dataclass(frozen=True, slots=True)
class VarType:
    """``dtype[shape]{varies}``: a per-device array type and the axes it may vary over."""

    dtype: str
    shape: tuple[int, ...]
    varies: frozenset = field(default=frozenset())

    def __post_init__(self):
        if not isinstance(self.dtype, str) or not _DTYPE.match(self.dtype):
            raise ParseError(f"dtype {quote(self.dtype)} is not a dtype name such as 'f32' or 'i32'")
        shape = tuple(self.shape)
        for n in shape:
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ParseError(f"shape {quote(shape)} of a {self.dtype} array: sizes are integers >= 0")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "varies", frozenset(self.varies))

    @property
    def size(self) -> int:
        """Number of elements of one device's array."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    def varies_over(self, axis: Hashable) -> bool:
        return axis in self.varies

    def invariant_over(self, axis: Hashable) -> bool:
        return axis not in self.varies

    def with_varies(self, varies: Iterable[Hashable]) -> "VarType":
        """The same array type, varying over ``varies`` instead."""
        return replace(self, varies=frozenset(varies))

    def text(self, order: Sequence[Hashable] | None = None) -> str:
        """Seed 004's syntax, e.g. ``f32[3,4]{i}``; axes in ``order`` first, then sorted."""
        return f"{self.dtype}[{','.join(map(str, self.shape))}]{axes_text(self.varies, order)}"

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"VarType({self.text()!r})"


def parse_type(text: str) -> VarType:
    """Parse ``f32[3,4]{i,j}`` (``{}`` or no braces: invariant everywhere).

    An axis written with quotes or as a sub-axis (``"x":(1)2``) becomes an
    :class:`~planner.ir.axis.AxisRef`; a full axis stays a plain name.

    >>> parse_type('f32[2]{"x":(1)2, y}').text()
    'f32[2]{"x":(1)2,y}'
    >>> parse_type("f32[3,]")
    Traceback (most recent call last):
    ...
    planner.errors.ParseError: 'f32[3,]' is not a device-variance type: a size is empty; write e.g. f32[3,4]{i}
    """
    m = _TYPE.match(text) if isinstance(text, str) else None
    if not m:
        raise ParseError(f"{quote(text)} is not a device-variance type; write e.g. f32[3,4]{{i}}")
    dtype, dims, axes = m.groups()
    shape: list[int] = []
    if dims.strip():
        for piece in dims.split(","):
            piece = piece.strip()
            if not piece:
                raise ParseError(f"{quote(text)} is not a device-variance type: a size is empty; write e.g. f32[3,4]{{i}}")
            if not piece.isdigit():
                raise ParseError(f"{quote(text)} is not a device-variance type: size {quote(piece)} is not an integer")
            shape.append(int(piece))
    return VarType(dtype, tuple(shape), frozenset(_parse_axis(a) for a in (axes or "").split(",") if a.strip()))


def _parse_axis(text: str) -> Hashable:
    text = text.strip()
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", text):
        return text
    ref = parse_axis_ref(text)
    return ref.name if ref.is_full else ref

