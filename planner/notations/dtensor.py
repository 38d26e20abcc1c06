"""PyTorch DTensor placements: one placement per mesh axis (``Shard(d)``, ``Replicate()``, ``Partial()``).

DTensor indexes by mesh axis, we index by tensor dimension. The two agree only
when every dimension's axes are whole mesh axes listed in mesh order (DTensor
shards a dimension over mesh axes left to right) and, for a dimension split by
several axes, when its size divides evenly (DTensor splits recursively with
``torch.chunk``, which pads differently from one flat ``ceil(d / n)``). Anything
else raises :class:`~planner.errors.NotExpressibleError` rather than guess.

>>> from planner.ir.text import parse_mesh, parse_sharding
>>> mesh = parse_mesh('@m = <["x"=2, "y"=4]>')
>>> to_placements(parse_sharding('[{"y"}, {}], unreduced={"x"}', mesh))
'[Partial(), Shard(0)]'
"""

from __future__ import annotations

import re
from typing import Sequence

from planner.errors import NotExpressibleError, ParseError, quote
from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding


def placement_objects(sharding: TensorSharding, shape: Sequence[int] | None = None) -> list[dict]:
    """The placements as data, one per mesh axis, with DTensor's field names: ``{"type": "Shard", "dim": d}``,
    ``{"type": "Replicate"}`` or ``{"type": "Partial", "reduce_op": "sum"}``.

    >>> from planner.ir.text import parse_mesh, parse_sharding
    >>> mesh = parse_mesh('@m = <["x"=2, "y"=4]>')
    >>> placement_objects(parse_sharding('[{"y"}, {}], unreduced={"x"}', mesh))
    [{'type': 'Partial', 'reduce_op': 'sum'}, {'type': 'Shard', 'dim': 0}]
    """
    mesh = sharding.mesh
    placement: list[dict] = [{"type": "Replicate"} for _ in mesh.axes]
    for i, dim in enumerate(sharding.dims):
        for ref in dim.axes:
            if not ref.is_full:
                raise NotExpressibleError(
                    f"dimension {i} of {sharding} uses sub-axis {ref}; DTensor placements name whole mesh dims"
                )
        order = [mesh.axis_index(a.name) for a in dim.axes]
        if order != sorted(order):
            raise NotExpressibleError(
                f"dimension {i} of {sharding} is split by {', '.join(map(str, dim.axes))} in an order other "
                "than the mesh's; DTensor would need _StridedShard for that"
            )
        if shape is not None and len(dim.axes) > 1:
            n = 1
            for a in dim.axes:
                n *= a.size_in(mesh)
            if shape[i] % n:
                raise NotExpressibleError(
                    f"dimension {i} (size {shape[i]}) of {sharding} is split {n} ways unevenly by several "
                    "axes; DTensor's nested torch.chunk pads it differently"
                )
        for k in order:
            placement[k] = {"type": "Shard", "dim": i}
    for ref in sharding.unreduced:
        if not ref.is_full:
            raise NotExpressibleError(f"{sharding} is unreduced over sub-axis {ref}; DTensor's Partial needs a whole mesh dim")
        placement[mesh.axis_index(ref.name)] = {"type": "Partial", "reduce_op": "sum"}  # a pending sum
    return placement


def _placement_text(p: dict) -> str:
    return f"Shard({p['dim']})" if p["type"] == "Shard" else f"{p['type']}()"


def to_placements(sharding: TensorSharding, shape: Sequence[int] | None = None) -> str:
    """Placements text such as ``[Shard(0), Replicate()]`` (:func:`placement_objects` as DTensor prints them)."""
    return "[" + ", ".join(_placement_text(p) for p in placement_objects(sharding, shape)) + "]"


_PLACEMENT = re.compile(r"\s*(Shard\((\d+)\)|Replicate\(\)|Partial\((?:'sum'|\"sum\")?\)|S\((\d+)\)|R|P)\s*")


def from_placements(text: str, mesh: Mesh, rank: int) -> TensorSharding:
    """Read ``[Shard(0), Replicate()]`` (or the short ``[S(0), R]``) on ``mesh`` for a rank-``rank`` tensor."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ParseError(f"cannot parse placements {quote(text)}: expected [Shard(0), Replicate(), ...]")
    items = [p for p in body[1:-1].split(",") if p.strip()] if body[1:-1].strip() else []
    if len(items) != len(mesh.axes):
        raise ParseError(
            f"placements {quote(text)} has {len(items)} entries but mesh @{mesh.name} has {len(mesh.axes)} axes"
        )
    dims: list[list[AxisRef]] = [[] for _ in range(rank)]
    unreduced: list[AxisRef] = []
    for axis, item in zip(mesh.axes, items):
        m = _PLACEMENT.fullmatch(item)
        if not m:
            raise ParseError(f"cannot parse placement {quote(item.strip())}; use Shard(d), Replicate() or Partial()")
        d = m.group(2) or m.group(3)
        if d is not None:
            d = int(d)
            if d >= rank:
                raise ParseError(f"placement {item.strip()} shards dimension {d} of a rank-{rank} tensor")
            dims[d].append(AxisRef(axis.name))
        elif m.group(1).startswith("P"):
            unreduced.append(AxisRef(axis.name))
    return TensorSharding.build(mesh, dims, unreduced=unreduced)
