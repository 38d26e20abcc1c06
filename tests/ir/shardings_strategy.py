"""Hypothesis strategies that draw valid meshes, shardings and shapes."""

from __future__ import annotations

from hypothesis import strategies as st

from planner.ir import AxisRef, Mesh
from planner.ir.axis import make_axis
from planner.ir.sharding import DimSharding, TensorSharding

AXIS_SIZES = (1, 2, 3, 4, 6, 8)


def _factorisations(n: int) -> list[list[int]]:
    """Ordered factorisations of n into pieces > 1 (n itself included)."""
    if n == 1:
        return [[]]
    out = []
    for k in range(2, n + 1):
        if n % k == 0:
            out += [[k] + rest for rest in _factorisations(n // k)]
    return out


@st.composite
def meshes(draw, max_axes: int = 3, max_devices: int = 64) -> Mesh:
    n_axes = draw(st.integers(1, max_axes))
    sizes = []
    total = 1
    for _ in range(n_axes):
        choices = [s for s in AXIS_SIZES if total * s <= max_devices]
        s = draw(st.sampled_from(choices))
        sizes.append(s)
        total *= s
    names = ["x", "y", "z"][:n_axes]
    permute = draw(st.booleans())
    ids = None
    if permute:
        ids = draw(st.permutations(list(range(total))))
    return Mesh.from_sizes("m", dict(zip(names, sizes)), device_ids=ids)


@st.composite
def shardings(draw, mesh: Mesh | None = None, rank: int | None = None, allow_unreduced: bool = True):
    mesh = mesh if mesh is not None else draw(meshes())
    rank = rank if rank is not None else draw(st.integers(0, 3))
    dims: list[list[AxisRef]] = [[] for _ in range(rank)]
    replicated: list[AxisRef] = []
    unreduced: list[AxisRef] = []
    for axis in mesh.axes:
        pieces = draw(st.sampled_from(_factorisations(axis.size)))
        pre = 1
        for k in pieces:
            ref = make_axis(mesh, axis.name, pre, k)
            pre *= k
            where = draw(st.sampled_from(["dim", "none", "replicated"] + (["unreduced"] if allow_unreduced else [])))
            if where == "dim" and rank:
                dims[draw(st.integers(0, rank - 1))].append(ref)
            elif where == "replicated":
                replicated.append(ref)
            elif where == "unreduced":
                unreduced.append(ref)
    for d in dims:
        perm = draw(st.permutations(d))
        d[:] = perm
    s = TensorSharding.build(mesh, dims, replicated=replicated, unreduced=unreduced)
    flags = []
    for d in s.dims:
        is_open = draw(st.booleans())
        prio = draw(st.integers(0, 3)) if (d.axes or is_open) else 0
        flags.append(DimSharding(d.axes, is_open, prio))
    return TensorSharding(mesh, tuple(flags), s.replicated, s.unreduced)


@st.composite
def shapes_for(draw, rank: int, max_dim: int = 12):
    return tuple(draw(st.integers(1, max_dim)) for _ in range(rank))
