"""JAX views of a sharding: ``PartitionSpec`` text and the type string ``f32[4@X,8]``.

A ``PartitionSpec`` names, per dimension, ``None``, one axis or a tuple of axes
(major to minor). It cannot name sub-axes or pending reductions, so those raise
:class:`~planner.errors.NotExpressibleError` instead of guessing. Open dimensions
without axes are JAX's ``P.UNCONSTRAINED``; an open dimension that already has
axes has no PartitionSpec form.

The type string follows seed 001 (``int32[4@X,2]`` printed with the short dtype,
``f32[8@(x,y),4]`` for several axes). Sub-axes and unreduced axes are printed in
our own extension (``8@x:(1)2``, ``{unreduced:y}``) so that every sharding has a
type string; :func:`from_jax_type` reads all of it back.

>>> from planner.ir.text import parse_mesh, parse_sharding
>>> mesh = parse_mesh('@m = <["X"=2, "Y"=4]>')
>>> s = parse_sharding('[{"X"}, {}]', mesh)
>>> to_partition_spec(s), to_jax_type(s, (4, 8), "f32")
("P('X', None)", 'f32[4@X,8]')
>>> str(from_partition_spec("P(('X', 'Y'), None)", mesh, rank=2))
'sharding<@m, [{"X", "Y"}, {}]>'
"""

from __future__ import annotations

import ast
import re
from typing import Sequence

from planner.errors import NotExpressibleError, ParseError, quote
from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh
from planner.ir.sharding import DimSharding, TensorSharding
from planner.ir.text import parse_axis_ref


def _plain_axis(ref: AxisRef) -> str:
    return ref.name if ref.is_full else f"{ref.name}:({ref.pre_size}){ref.size}"


#: The entry of an open, empty dimension in :func:`partition_spec_entries` (JAX's ``P.UNCONSTRAINED``).
UNCONSTRAINED = "P.UNCONSTRAINED"


def partition_spec_entries(sharding: TensorSharding) -> list:
    """The ``PartitionSpec`` as data, one entry per dimension: None (unsharded), an axis name, a list of
    axis names (several axes, major to minor) or :data:`UNCONSTRAINED`; ``P(*entries)`` (lists as tuples)
    is the spec. Raises NotExpressibleError for sub-axes, open dims with axes, unreduced.

    >>> from planner.ir.text import parse_mesh, parse_sharding
    >>> partition_spec_entries(parse_sharding('[{"x", "y"}, {}]', parse_mesh('@m = <["x"=2, "y"=2]>')))
    [['x', 'y'], None]
    """
    if sharding.unreduced:
        raise NotExpressibleError(
            f"{sharding} has pending reductions (unreduced axes); a PartitionSpec cannot express them"
        )
    entries: list = []
    for i, dim in enumerate(sharding.dims):
        subs = [a for a in dim.axes if not a.is_full]
        if subs:
            raise NotExpressibleError(
                f"dimension {i} of {sharding} uses sub-axis {subs[0]}; a PartitionSpec can name only "
                "whole mesh axes (seed 000: JAX's NamedSharding cannot express sub-axes)"
            )
        if dim.is_open and dim.axes:
            raise NotExpressibleError(
                f"dimension {i} of {sharding} is open with axes already on it; a PartitionSpec entry is "
                "either axes (closed) or P.UNCONSTRAINED (open and empty)"
            )
        if dim.is_open:
            entries.append(UNCONSTRAINED)
        elif not dim.axes:
            entries.append(None)
        elif len(dim.axes) == 1:
            entries.append(dim.axes[0].name)
        else:
            entries.append([a.name for a in dim.axes])
    return entries


def _entry_text(entry) -> str:
    if entry is None or entry == UNCONSTRAINED:
        return str(entry)
    if isinstance(entry, list):
        return "(" + ", ".join(map(repr, entry)) + ")"
    return repr(entry)


def to_partition_spec(sharding: TensorSharding) -> str:
    """``P(...)`` text of :func:`partition_spec_entries`."""
    return "P(" + ", ".join(_entry_text(e) for e in partition_spec_entries(sharding)) + ")"


def from_partition_spec(text: str, mesh: Mesh, rank: int | None = None) -> TensorSharding:
    """Read ``P('x', None)`` / ``PartitionSpec(('x','y'),)``; missing trailing entries are None."""
    src = text.strip()
    m = re.fullmatch(r"(?:P|PartitionSpec|jax\.sharding\.PartitionSpec)\((.*)\)", src, re.S)
    if not m:
        raise ParseError(f"cannot parse PartitionSpec {quote(text)}: expected P(...)")
    body = m.group(1).replace("P.UNCONSTRAINED", "'__UNCONSTRAINED__'")
    try:
        node = ast.parse("(" + body + ",)" if body.strip() else "()", mode="eval").body
        items = ast.literal_eval(node)
    except (SyntaxError, ValueError):
        raise ParseError(
            f"cannot parse PartitionSpec {quote(text)}: entries must be None, 'axis' or ('axis', ...)"
        ) from None
    items = list(items)
    if rank is not None:
        if len(items) > rank:
            raise ParseError(f"PartitionSpec {quote(text)} has {len(items)} entries for a rank-{rank} tensor")
        items += [None] * (rank - len(items))
    dims = []
    for entry in items:
        if entry is None:
            dims.append(DimSharding())
        elif entry == "__UNCONSTRAINED__":
            dims.append(DimSharding((), is_open=True))
        else:
            names = (entry,) if isinstance(entry, str) else tuple(entry)
            if not all(isinstance(n, str) for n in names):
                raise ParseError(f"cannot parse PartitionSpec {quote(text)}: axis names must be strings")
            dims.append(DimSharding(tuple(AxisRef(n) for n in names)))
    return TensorSharding(mesh, tuple(dims))


def _dim_text(size: int, axes: Sequence[AxisRef]) -> str:
    if not axes:
        return str(size)
    if len(axes) == 1:
        return f"{size}@{_plain_axis(axes[0])}"
    return f"{size}@(" + ",".join(_plain_axis(a) for a in axes) + ")"


def to_jax_type(sharding: TensorSharding, shape: Sequence[int], dtype: str = "f32") -> str:
    """Seed 001's type string: ``f32[4@X,8]`` (our extension for sub-axes and unreduced)."""
    sharding.check_rank(shape)
    text = f"{dtype}[" + ",".join(_dim_text(d, dim.axes) for d, dim in zip(shape, sharding.dims)) + "]"
    if sharding.unreduced:
        text += "{unreduced:" + ",".join(_plain_axis(a) for a in sharding.unreduced) + "}"
    return text


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur.append(ch)
    parts.append("".join(cur))
    return parts


_TYPE = re.compile(r"^\s*([A-Za-z0-9_]+)\[(.*)\](\{unreduced:([^}]*)\})?\s*$")


def from_jax_type(text: str, mesh: Mesh) -> tuple[TensorSharding, tuple[int, ...], str]:
    """Parse ``f32[4@X,8]`` into ``(sharding, shape, dtype)``."""
    m = _TYPE.match(text)
    if not m:
        raise ParseError(f"cannot parse type {quote(text)}: expected dtype[dims], e.g. f32[4@X,8]")
    dtype, body, _, unreduced = m.groups()
    shape, dims = [], []
    for part in _split_top(body) if body.strip() else []:
        size, at, axes = part.strip().partition("@")
        if not size.strip().isdigit() or (at and not axes.strip()):
            raise ParseError(f"cannot parse type {quote(text)}: bad dimension {quote(part.strip())}")
        shape.append(int(size))
        axes = axes.strip()
        if axes.startswith("(") and axes.endswith(")"):
            names = _split_top(axes[1:-1])
        else:
            names = [axes] if axes else []
        dims.append(DimSharding(tuple(parse_axis_ref(a) for a in names)))
    unr = tuple(parse_axis_ref(a) for a in _split_top(unreduced) if a) if unreduced else ()
    return TensorSharding(mesh, tuple(dims), (), unr), tuple(shape), dtype
