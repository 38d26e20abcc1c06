"""The mesh cut into whole axes where a program uses sub-axes: what JAX can name.

A ``PartitionSpec`` (and a ``shard_map``'s axis names) names whole mesh axes only, so a plan that uses
sub-axes (``"d":(1)2``) is given to JAX on a *split* mesh: each axis cut where one of the program's sub-axes
begins or ends becomes consecutive axes (``d`` = ``d_0`` x ``d_1``), which keeps the device order. The JAX
export (:mod:`planner.export`) and the shard_map lowering (:mod:`planner.engines.jax_spmd`) both split here.

>>> from planner.ir import AxisRef, parse_mesh
>>> mesh = parse_mesh('@m = <["d"=8]>')
>>> split, pieces = split_mesh(mesh, [AxisRef("d", 1, 2)])
>>> [(a.name, a.size) for a in split.axes], split_names(AxisRef("d"), mesh, pieces)
([('d_0', 2), ('d_1', 4)], ('d_0', 'd_1'))
"""

from __future__ import annotations

from planner.enumeration import search_pieces
from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh


def split_mesh(mesh: Mesh, refs) -> tuple[Mesh, dict[str, list[tuple[int, int, str]]]]:
    """``mesh`` with every axis cut where one of the (sub-)axes ``refs`` begins or ends; per axis its pieces
    ``(lo, hi, name)``, major to minor: an axis cut in pieces becomes axes ``<axis>_0``, ``<axis>_1``, ..."""
    cut = search_pieces(mesh, refs)
    pieces: dict[str, list[tuple[int, int, str]]] = {a.name: [] for a in mesh.axes}
    for p in cut:
        pieces[p.name].append(p.interval(mesh))
    for axis in mesh.axes:  # an axis of size 1 has no piece; it stays in the mesh
        pieces[axis.name] = pieces[axis.name] or [(1, axis.size)]
    named = {axis: [(lo, hi, axis if len(ps) == 1 else f"{axis}_{k}") for k, (lo, hi) in enumerate(ps)]
             for axis, ps in pieces.items()}
    sizes = [(n, hi // lo) for ps in named.values() for lo, hi, n in ps]
    return Mesh.from_sizes(mesh.name, sizes, mesh.device_ids), named


def split_names(ref: AxisRef, mesh: Mesh, pieces) -> tuple[str, ...]:
    """The axes of the split mesh (:func:`split_mesh`) that make up ``ref``, major to minor."""
    lo, hi = ref.interval(mesh)
    return tuple(n for a, b, n in pieces[ref.name] if lo <= a and b <= hi)
