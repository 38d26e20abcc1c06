"""The exhaustive redistribution suite of issue 4, shared by the tests and ``benchmarks/reshard.py``.

On a mesh ``x=2, y=4`` every sharding of a rank-2 tensor built from, per axis,
{replicated, dimension 0, dimension 1} — both axes on one dimension in either
order — is a destination (11 shardings); sources are those plus the ones where
some axes carry a pending sum (7 more).
"""

from __future__ import annotations

import itertools
from typing import Iterator

from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding

MESH = Mesh.from_sizes("mesh", {"x": 2, "y": 4})
SHAPES = ((64, 32), (6, 10))


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
        orders = [dims]
        for d in (0, 1):
            if len(dims[d]) > 1:
                orders = [o for base in orders for o in (base, [list(reversed(base[0])), base[1]] if d == 0
                                                          else [base[0], list(reversed(base[1]))])]
        for o in orders:
            out.append(TensorSharding.build(mesh, o, unreduced=unr))
    return out


def pairs(mesh: Mesh = MESH) -> Iterator[tuple[TensorSharding, TensorSharding]]:
    """Every (source, destination) pair of the suite."""
    destinations = shardings(mesh)
    for src in destinations + shardings(mesh, unreduced=True):
        for dst in destinations:
            yield src, dst
