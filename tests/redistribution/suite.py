"""The exhaustive redistribution suites, shared by the tests and ``benchmarks/reshard.py``.

The 2-D suite: on a mesh ``x=2, y=4`` every sharding of a rank-2 tensor built
from, per axis, {replicated, dimension 0, dimension 1} — both axes on one dimension
in either order — is a destination (11 shardings); sources are those plus the ones
where some axes carry a pending sum (7 more).

The 3-D suite: the same kinds of layouts on the meshes ``x=2, y=2, z=2`` and
``x=2, y=4, z=2`` (axes sharing a dimension in every order: 49 destinations, 92
sources per mesh).
"""

from __future__ import annotations

import itertools
from typing import Iterator

from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding

MESH = Mesh.from_sizes("mesh", {"x": 2, "y": 4})
SHAPES = ((64, 32), (6, 10))
MESHES_3D = (Mesh.from_sizes("mesh", {"x": 2, "y": 2, "z": 2}), Mesh.from_sizes("mesh", {"x": 2, "y": 4, "z": 2}))


def shardings(mesh: Mesh = MESH, unreduced: bool = False) -> list[TensorSharding]:
    names = mesh.axis_names
    places = ("R", 0, 1, "U") if unreduced else ("R", 0, 1)
    out: list[TensorSharding] = []
    for combo in itertools.product(places, repeat=len(names)):
        if unreduced and "U" not in combo:
            continue
        dims: list[list[str]] = [[], []]
        for name, place in zip(names, combo):
            if isinstance(place, int):
                dims[place].append(name)
        unr = [n for n, p in zip(names, combo) if p == "U"]
        for first in itertools.permutations(dims[0]):  # the axes of a dimension in every order
            for second in itertools.permutations(dims[1]):
                out.append(TensorSharding.build(mesh, [list(first), list(second)], unreduced=unr))
    return out


def pairs(mesh: Mesh = MESH) -> Iterator[tuple[TensorSharding, TensorSharding]]:
    """Every (source, destination) pair of the suite."""
    destinations = shardings(mesh)
    for src in destinations + shardings(mesh, unreduced=True):
        for dst in destinations:
            yield src, dst
