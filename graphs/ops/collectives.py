"""Collectives of manual computation regions (seed 004) and the region boundary ops.

These ops are valid only inside a manual region (:mod:`graphs.manual_regions`):
a region's body works on *local* blocks, one per coordinate of its manual axes,
and a collective combines the blocks of one *group*: the devices that differ only
in the collective's ``axes`` (a subset of the region's manual axes). Within a
group a device has a *linear index* (row-major over ``axes`` as listed, the first
axis major). The region builder fills the attribute ``group_size`` (the product
of the sizes of ``axes`` on the mesh); a collective without it is outside a
region, an error.

The ``reference`` and ``vjp`` of a collective take its operand *stacked over the
group*: an array ``[G, *local]`` whose row ``c`` is the block of the device with
linear index ``c``, and return the result stacked the same way. Semantics (``x_c``
the operand of device ``c``, ``y_c`` its result):

- ``psum``: ``y_c = sum_d x_d``; VJP: the psum of the cotangents.
- ``pmean``: ``y_c = sum_d x_d / G``; VJP: the pmean of the cotangents.
- ``pmax``, ``pmin``: ``y_c = max_d x_d`` (``min_d``), an all-reduce with that computation; not
  differentiable (JAX has no rule for either: a region using one is not trained through it).
- ``pbroadcast``: ``y_c = x_c`` (a type change only: an invariant value becomes
  device-varying); VJP: identity per device (the reduction it implies, seed 004's
  pbroadcast -> psum, is made by the planner from variance types).
- ``all_gather`` (``dim``): ``y_c = concat_d x_d`` along ``dim`` (tiled);
  VJP: psum_scatter along ``dim``.
- ``psum_scatter`` (``dim``): ``y_c`` = block ``c`` of ``sum_d x_d`` along ``dim``
  (which ``G`` must divide); VJP: all_gather along ``dim``.
- ``all_gather_invariant`` (``dim``): ``all_gather``'s values, typed invariant over
  ``axes`` (seed 004: it has no pbroadcast fused in); VJP: psum_scatter on the
  stacked copies, whose transpose on the devices is ``pscatter`` (the cotangent of
  an invariant value is whole on every device: each keeps its piece).
- ``pscatter`` (``dim``): ``y_c`` = block ``c`` of ``x_c`` along ``dim``, of an
  operand invariant over ``axes`` (no communication); VJP: each device's
  cotangent back at its block, zeros elsewhere; on the devices its transpose is
  ``all_gather_invariant``.
- ``all_to_all`` (``split_dim``, ``concat_dim``): ``x_d`` is cut into ``G`` blocks
  along ``split_dim``; ``y_c`` concatenates block ``c`` of every ``x_d`` (in ``d``
  order) along ``concat_dim``; VJP: all_to_all with the two dims swapped.
- ``ppermute`` (``perm``: ``[source, destination]`` pairs of linear indices, each
  source and each destination at most once): ``y_dst = x_src``; a device that is no
  destination gets zeros; VJP: ppermute with the pairs reversed.
- ``axis_index`` (no operand): the int32 scalar ``c``; not differentiable.

FLOP convention: 0, and 0 bytes accessed (their time is communication, costed by
:mod:`costmodels.collectives`; the boundary ops only re-type a value as blocks).

``manual_enter`` and ``manual_exit`` are the region's boundary, one per region
input and output, made by the region builder (never written in a model):
``manual_enter`` reads the global value and gives the body argument, each
device's block under the manual axes of the in-sharding; ``manual_exit`` reads
the body result and gives the global value assembled from the blocks under the
out-sharding. Their ``reference`` / ``vjp`` work on arrays stacked over *every*
manual coordinate of the region (``[*manual_sizes, *local]``): see
:func:`enter_reference` and :func:`exit_reference`.

>>> import numpy as np
>>> COLLECTIVES["psum"].reference([np.array([[1.0], [2.0], [3.0]])], {"axes": ("x",), "group_size": 3}).ravel().tolist()
[6.0, 6.0, 6.0]
>>> COLLECTIVES["all_gather"].infer([(2, 4)], ["f32"], {"axes": ("x",), "dim": 0, "group_size": 3})
((6, 4), 'f32')
"""

from __future__ import annotations

import itertools
import math
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np

from graphs.ops.common import check_int, normalize_axis, shape_text
from graphs.ops.opdef import REQUIRED, OpDef, check_wrt, no_bytes_accessed
from planner.collectives import REGION_COLLECTIVES, primitive, stacked_vjp
from planner.errors import ModelError, quote

#: The collective ops, alphabetically: the registry's primitives a region's body may apply.
COLLECTIVE_OPS = REGION_COLLECTIVES
#: The boundary ops a region builder makes.
BOUNDARY_OPS = ("manual_enter", "manual_exit")


def is_collective(op: Any) -> bool:
    """Whether ``op`` (an OpSpec or an op name) is a collective of a manual region's body."""
    return (op if isinstance(op, str) else op.op) in COLLECTIVE_OPS


def _zero_flops(in_shapes, out_shape, attrs) -> int:
    return 0


def group_size(name: str, attrs: Mapping[str, Any]) -> int:
    """The collective's group size; ModelError when no region filled it (the op is outside a region)."""
    g = attrs.get("group_size")
    if g is None:
        raise ModelError(f"{name} is a collective: it is valid only inside a manual region's body "
                         f"(regions:), over that region's manual axes")
    if isinstance(g, bool) or not isinstance(g, int) or g < 1:  # given by hand outside a region
        raise ModelError(f"{name}: group_size is {quote(g)}; the manual region fills it from the sizes of its axes: "
                         "leave it out")
    return g


def _axes(name: str, attrs: Mapping[str, Any]) -> tuple[str, ...]:
    axes = attrs.get("axes")
    if isinstance(axes, str):
        axes = (axes,)
    if not isinstance(axes, (list, tuple)) or not axes or not all(isinstance(a, str) for a in axes):
        raise ModelError(f"{name} needs `axes`: a non-empty list of manual axes of its region, got {axes!r}")
    return tuple(axes)


def _canonical(shapes, attrs) -> dict:
    out = dict(attrs)
    out["axes"] = _axes("collective", attrs)
    rank = len(shapes[0]) if shapes else 0
    for key in ("dim", "split_dim", "concat_dim"):
        if key in out:
            out[key] = normalize_axis(out[key], rank, key)
    if "perm" in out:
        out["perm"] = tuple(tuple(int(v) for v in p) for p in out["perm"])
    return out


def _same_infer(name: str):
    def infer(shapes, dtypes, attrs, names=None):
        _axes(name, attrs)
        group_size(name, attrs)
        return tuple(shapes[0]), dtypes[0]

    return infer


def _dim(name: str, key: str, shape, attrs) -> int:
    if not shape:
        raise ModelError(f"{name} needs an operand of rank >= 1 (it has a scalar)")
    return normalize_axis(attrs.get(key), len(shape), f"{name} {key}")


def _divides(shape, d: int, g: int, operand, what: str) -> None:
    """Refuse a group of ``g`` devices that does not divide dimension ``d`` (``what`` says how it is cut)."""
    if shape[d] % g:
        raise ModelError(f"{what}, which does not divide it (operand {shape_text(operand)})")


def _resize_infer(name: str, grows: tuple[str, ...], shrinks: tuple[str, ...], cut: str):
    """The inference of a collective that divides the dimensions its ``shrinks`` attributes name by its group
    and multiplies those its ``grows`` attributes name; ``cut`` says how a shrunk dimension is cut (``{name}
    scatters``: ``"scatters dimension {d} of size {n} over a group of {g} devices"``)."""
    def infer(shapes, dtypes, attrs, names=None):
        _axes(name, attrs)
        g = group_size(name, attrs)
        shape = list(shapes[0])
        dims = {key: _dim(name, key, shape, attrs) for key in (*shrinks, *grows)}
        for key in shrinks:
            d = dims[key]
            _divides(shape, d, g, shapes[0], f"{name} " + cut.format(d=d, n=shape[d], g=g))
            shape[d] //= g
        for key in grows:
            shape[dims[key]] *= g
        return tuple(shape), dtypes[0]

    return infer


def _permute_infer(name: str):
    def infer(shapes, dtypes, attrs, names=None):
        _axes(name, attrs)
        g = group_size(name, attrs)
        perm = attrs.get("perm")
        if not isinstance(perm, (list, tuple)) or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in perm):
            raise ModelError(f"{name} needs `perm`: a list of [source, destination] pairs, got {perm!r}")
        sources, destinations = set(), set()
        for src, dst in perm:
            for v, what in ((src, "source"), (dst, "destination")):
                check_int(v, f"{name} {what}")
                if not 0 <= v < g:
                    raise ModelError(f"{name} {what} {v} is not a linear index of its group of {g} devices "
                                     f"(0 to {g - 1})")
            if src in sources or dst in destinations:
                raise ModelError(f"{name} pair [{src}, {dst}] repeats a source or a destination; each device sends "
                                 "at most once and receives at most once")
            sources.add(src)
            destinations.add(dst)
        return tuple(shapes[0]), dtypes[0]

    return infer


def _axis_index_infer(shapes, dtypes, attrs, names=None):
    _axes("axis_index", attrs)
    group_size("axis_index", attrs)
    return (), "i32"



# -- semantics on arrays stacked over the group: the registry's (planner.collectives) -----------

def _reference(name: str):
    forward = primitive(name).reference

    def reference(arrays, attrs):
        return forward(np.asarray(arrays[0]), attrs)

    return reference


def _vjp(name: str):
    """The reference's per-coordinate chain rule: psum's is the psum of the cotangents, all_gather's
    psum_scatter ... (:func:`planner.collectives.stacked_vjp`)."""
    def vjp(arrays, attrs, result, cotangent, wrt):
        check_wrt(name, arrays, wrt)
        g = stacked_vjp(name, np.asarray(cotangent), attrs)
        return tuple(g.copy() for _ in wrt)

    return vjp


def _axis_index_reference(arrays, attrs):
    return primitive("axis_index").reference(None, attrs)


def _axis_index_vjp(arrays, attrs, result, cotangent, wrt):
    check_wrt("axis_index", arrays, wrt)
    return ()


#: Per :attr:`~planner.collectives.Primitive.shape`: the shape inference and the attributes besides ``axes``.
_BY_SHAPE = {
    "same": (_same_infer, ()),
    "gathers": (lambda name: _resize_infer(name, ("dim",), (), ""), (("dim", REQUIRED),)),
    "scatters": (lambda name: _resize_infer(name, (), ("dim",), "scatters dimension {d} of size {n} over a group of "
                                                                 "{g} devices"), (("dim", REQUIRED),)),
    "exchanges": (lambda name: _resize_infer(name, ("concat_dim",), ("split_dim",), "splits dimension {d} of size {n} "
                                                                                       "into {g} blocks (its group)"),
                  (("split_dim", REQUIRED), ("concat_dim", REQUIRED))),
    "permutes": (_permute_infer, (("perm", REQUIRED),)),
}


def _collective(name: str) -> OpDef:
    """The graph op of the registry's primitive ``name``: its shape from the primitive's ``shape``, its meaning
    and VJP from the primitive's stacked reference."""
    if primitive(name).shape == "indexes":
        return OpDef(name, "collective", 0, 0, (("axes", REQUIRED), ("group_size", None)), _axis_index_infer,
                     _zero_flops, _axis_index_reference, canonical=_canonical, vjp=_axis_index_vjp,
                     vjp_reads_inputs=False, rule="regions.collective", bytes_accessed=no_bytes_accessed)
    infer, extra = _BY_SHAPE[primitive(name).shape]
    attrs = (("axes", REQUIRED),) + extra + (("group_size", None),)
    linear = primitive(name).transpose is not None or primitive(name).adjoint is not None
    return OpDef(name, "collective", 1, 1, attrs, infer(name), _zero_flops, _reference(name), canonical=_canonical,
                 vjp=_vjp(name) if linear else None, vjp_reads_inputs=False, rule="regions.collective",
                 bytes_accessed=no_bytes_accessed)


#: The collective ops by name, alphabetically: one per primitive of the registry a region's body may apply.
COLLECTIVES: Mapping[str, OpDef] = MappingProxyType({name: _collective(name) for name in COLLECTIVE_OPS})


# -- region boundary ---------------------------------------------------------------------------

def _boundary_attrs(attrs) -> tuple[tuple[str, ...], tuple[int, ...], tuple[tuple[str, ...], ...]]:
    axes = tuple(attrs["manual_axes"])
    sizes = tuple(int(s) for s in attrs["manual_sizes"])
    dims = tuple(tuple(d) for d in attrs["dims"])
    return axes, sizes, dims


def _check_boundary_rank(name: str, shape, dims, attrs) -> None:
    if len(dims) != len(shape):
        raise ModelError(f"region {attrs.get('region')!r}: the {attrs.get('side', 'sharding')} of "
                         f"{attrs.get('tensor')!r} has {len(dims)} dimensions but the tensor has rank {len(shape)} "
                         f"({shape_text(shape)}); give one {{...}} per dimension")


def _enter_infer(shapes, dtypes, attrs, names=None):
    axes, sizes, dims = _boundary_attrs(attrs)
    shape = tuple(shapes[0])
    _check_boundary_rank("manual_enter", shape, dims, attrs)
    size = dict(zip(axes, sizes))
    local = []
    for i, (n, d) in enumerate(zip(shape, dims)):
        k = math.prod(size[a] for a in d)
        if n % k:
            raise ModelError(f"region {attrs['region']!r}: dimension {i} of input {attrs['tensor']!r} has size {n}, "
                             f"which its manual axes {', '.join(d)} ({k} blocks) do not divide; change the "
                             f"in-sharding or the shape")
        local.append(n // k)
    return tuple(local), dtypes[0]


def _exit_infer(shapes, dtypes, attrs, names=None):
    axes, sizes, dims = _boundary_attrs(attrs)
    shape = tuple(shapes[0])
    _check_boundary_rank("manual_exit", shape, dims, attrs)
    size = dict(zip(axes, sizes))
    return tuple(n * math.prod(size[a] for a in d) for n, d in zip(shape, dims)), dtypes[0]


def _block_slices(axes, sizes, dims, coordinate, local) -> tuple[slice, ...]:
    """The global index ranges of the block at ``coordinate`` (one index per manual axis)."""
    at = dict(zip(axes, coordinate))
    size = dict(zip(axes, sizes))
    out = []
    for d, n in zip(dims, local):
        index = 0
        for a in d:  # row-major: the first axis of the dimension is major
            index = index * size[a] + at[a]
        out.append(slice(index * n, (index + 1) * n))
    return tuple(out)


def _replicated_axes(axes, dims) -> tuple[int, ...]:
    used = {a for d in dims for a in d}
    return tuple(k for k, a in enumerate(axes) if a not in used)


def enter_reference(arrays, attrs):
    """The global operand -> the body argument stacked over manual coordinates ``[*sizes, *local]``."""
    axes, sizes, dims = _boundary_attrs(attrs)
    x = np.asarray(arrays[0])
    local, _ = _enter_infer([x.shape], ["f32"], attrs)
    out = np.empty(tuple(sizes) + tuple(local), dtype=x.dtype)
    for c in itertools.product(*(range(s) for s in sizes)):
        out[c] = x[_block_slices(axes, sizes, dims, c, local)]
    return out


def _enter_vjp(arrays, attrs, result, cotangent, wrt):
    """Sums the cotangents of coordinates that read one block (replicated manual axes), places the blocks."""
    check_wrt("manual_enter", arrays, wrt)
    axes, sizes, dims = _boundary_attrs(attrs)
    c = np.asarray(cotangent)
    local = c.shape[len(sizes):]
    out = np.zeros(np.asarray(arrays[0]).shape, dtype=c.dtype)
    for k in itertools.product(*(range(s) for s in sizes)):
        out[_block_slices(axes, sizes, dims, k, local)] += c[k]
    return tuple(out if i == 0 else out.copy() for i, _ in enumerate(wrt))


def exit_reference(arrays, attrs):
    """The body result stacked ``[*sizes, *local]`` -> the global value: each block from the coordinate
    that is 0 on every manual axis the out-sharding replicates; ModelError if the other coordinates of a
    replicated axis hold a different value (the out-sharding claims an invariance the body breaks)."""
    axes, sizes, dims = _boundary_attrs(attrs)
    x = np.asarray(arrays[0])
    local = x.shape[len(sizes):]
    shape, _ = _exit_infer([local], ["f32"], attrs)
    out = np.empty(shape, dtype=x.dtype)
    replicated = _replicated_axes(axes, dims)
    for k in itertools.product(*(range(s) for s in sizes)):
        block = _block_slices(axes, sizes, dims, k, local)
        if any(k[r] for r in replicated):
            first = tuple(0 if j in replicated else v for j, v in enumerate(k))
            if not np.allclose(x[k], x[first], rtol=1e-9, atol=1e-12, equal_nan=True):
                varying = ", ".join(axes[r] for r in replicated if k[r])
                raise ModelError(f"output {attrs['tensor']!r} of region {attrs['region']!r} varies over {varying} "
                                 f"but its out-sharding replicates it; reduce it over {varying} (psum) or shard it")
            continue
        out[block] = x[k]
    return out


def _exit_vjp(arrays, attrs, result, cotangent, wrt):
    """Sends each block of the cotangent to the coordinate the forward read it from (0 on replicated axes)."""
    check_wrt("manual_exit", arrays, wrt)
    axes, sizes, dims = _boundary_attrs(attrs)
    c = np.asarray(cotangent)
    local = np.asarray(arrays[0]).shape[len(sizes):]
    out = np.zeros(tuple(sizes) + tuple(local), dtype=c.dtype)
    replicated = _replicated_axes(axes, dims)
    for k in itertools.product(*(range(s) for s in sizes)):
        if not any(k[r] for r in replicated):
            out[k] = c[_block_slices(axes, sizes, dims, k, local)]
    return tuple(out if i == 0 else out.copy() for i, _ in enumerate(wrt))


_BOUNDARY = (("region", REQUIRED), ("tensor", REQUIRED), ("side", "sharding"), ("manual_axes", REQUIRED),
             ("manual_sizes", REQUIRED), ("dims", REQUIRED))

MANUAL_ENTER = OpDef("manual_enter", "region", 1, 1, _BOUNDARY, _enter_infer, _zero_flops, enter_reference,
                     vjp=_enter_vjp, vjp_reads_inputs=False, rule="regions.manual_enter",
                     bytes_accessed=no_bytes_accessed)
MANUAL_EXIT = OpDef("manual_exit", "region", 1, 1, _BOUNDARY, _exit_infer, _zero_flops, exit_reference,
                    vjp=_exit_vjp, vjp_reads_inputs=False, rule="regions.manual_exit",
                    bytes_accessed=no_bytes_accessed)


__all__ = ["BOUNDARY_OPS", "COLLECTIVES", "COLLECTIVE_OPS", "MANUAL_ENTER", "MANUAL_EXIT", "enter_reference",
           "exit_reference", "group_size", "is_collective"]
