"""The one registry of collectives: seed 004's primitives and the step kinds they lower to.

Two levels, each written once here and looked up everywhere else.

**Primitives** (:class:`Primitive`, :data:`PRIMITIVES`) are the collectives of seed
004 as a program applies them over mesh ``axes``. Each takes a *varying* or an
*invariant* operand along those axes and returns a varying or invariant result
(see :mod:`planner.ir.variance`); passing the other kind is a type error. The
table (seed 004's, row by row; ``{...}`` after a type lists the axes it varies over):

======================  =====================  ==========================================  =================  ======================
name                    type                   example                                     lowers to          transpose
======================  =====================  ==========================================  =================  ======================
psum                    varying -> invariant   ``y:f32[3]{j} = psum(x:f32[3]{i,j}, 'i')``  AllReduce          pbroadcast
pbroadcast              invariant -> varying   ``y:f32[3]{i} = pbroadcast(x:f32[3], 'i')`` no-op (a cast)     psum
all_to_all              varying -> varying     ``y:f32[16]{i} = all_to_all(x:f32[16]{i},   AllToAll           all_to_all (split and
                                               'i', 0, 0)``                                                   concat dims swapped)
axis_index              () -> varying          ``idx:i32[]{i} = axis_index('i')``          replica id arith.  n/a
psum_scatter            varying -> varying     ``y:f32[2]{i} = psum_scatter(x:f32[16]{i},  ReduceScatter      all_gather
                                               'i')``
all_gather              varying -> varying     ``y:f32[16]{i} = all_gather(x:f32[2]{i},    AllGather          psum_scatter
                                               'i')``
pscatter                invariant -> varying   ``y:f32[2]{i} = pscatter(x:f32[16], 'i')``  local slice        all_gather_invariant
all_gather_invariant    varying -> invariant   ``y:f32[16] = all_gather_invariant(         AllGather          pscatter
                                               x:f32[2]{i}, 'i')``
ppermute                varying -> varying     ``y:f32[3]{i} = ppermute(x:f32[3]{i}, 'i',  CollectivePermute  ppermute (inverse
                                               perm)``                                                        permutation)
======================  =====================  ==========================================  =================  ======================

``pbroadcast`` exists so that ``psum`` can transpose to a physical no-op;
``all_gather`` has a varying result so that it transposes to ``psum_scatter``
(it has a ``pbroadcast`` fused in); ``all_gather_invariant`` and its transpose
``pscatter`` complete the set. ``pmean`` is ``psum`` divided by the group size
(its type, lowering and transpose are psum's, scaled); it is not a row of the seed.

Besides its type and transpose a primitive carries what every layer needs of it:
the advice an ill-typed operand gets, its meaning on a group's blocks stacked
``[G, *local]`` (``reference``: the graph op's semantics), its kernel on the
simulated devices' blocks (``kernel``: moves blocks through a byte-counting
network with its step kind's algorithm), its ``jax.lax`` lowering (``jax``), and
whether a manual region's body may apply it (``in_regions``). Parameters are the
graph op's attributes: ``axes``, ``dim`` (all_gather, psum_scatter, pscatter),
``split_dim`` and ``concat_dim`` (all_to_all), ``perm`` (ppermute:
``(source, destination)`` pairs of linear indices in the group).

**Step kinds** (:class:`StepKind`, :data:`STEP_KINDS`) are the communication a
program's redistributions and body collectives run, ``p`` the group size:

==================  ========================  ====================  ==================  ==================
kind                primitive it is           rounds of sends       unit moved a round  HLO
==================  ========================  ====================  ==================  ==================
AllReduce           psum                      ``2(p-1)``            ``ceil(n/p)``       all-reduce
ReduceScatter       psum_scatter              ``p-1``               the result ``n``    reduce-scatter
AllGather           all_gather_invariant      ``p-1``               the operand ``n``   all-gather
AllToAll            all_to_all                ``p-1``               ``ceil(n/p)``       all-to-all
CollectivePermute   ppermute                  1 (0: nothing moves)  the operand ``n``   collective-permute
Slice               pscatter                  0                     (local)             (none)
==================  ========================  ====================  ==================  ==================

A device receives ``rounds x unit`` bytes (ring algorithms: AllReduce is a
ReduceScatter then an AllGather of ``p`` padded chunks; AllToAll keeps one of its
``p`` chunks). :mod:`costmodels.collectives` prices the rounds with a link's
latency and bandwidth, the simulator's ``kernel`` moves exactly those bytes, and
:mod:`planner.engines.xla_hlo` counts XLA's collectives the same way.

This module is the bottom layer beside :mod:`planner.ir`: it imports numpy and
:mod:`planner.errors` only (JAX, an optional extra, inside the JAX lowerings).

>>> primitive("psum")
Primitive(name='psum', operand='varying', result='invariant', lowering='AllReduce', local=None, transpose='pbroadcast')
>>> str(transpose_of("pbroadcast")), str(primitive("pscatter"))
('psum: varying -> invariant, AllReduce, transposes to pbroadcast', 'pscatter: invariant -> varying, local slice x[axis_index], transposes to all_gather_invariant')
>>> sorted(result_variance("psum", {"i", "j"}, ("i",)))
['j']
>>> result_variance("psum", set(), "i", where="f1", operand="x:f32[3]")
Traceback (most recent call last):
...
planner.errors.VarianceError: f1: psum over 'i' needs an operand that varies over 'i', but x:f32[3] is invariant over it (psum: varying -> invariant); insert pbroadcast or drop the psum
>>> step_kind("AllReduce").received(4, 100), step_kind("AllReduce").hlo, step_kind("AllReduce").primitive
(600, 'all-reduce', 'psum')
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Mapping, Sequence

import numpy as np

from planner.errors import InternalError, RuleError, VarianceError, did_you_mean

__all__ = [
    "HLO_KINDS",
    "INVARIANT",
    "KINDS",
    "PRIMITIVES",
    "Primitive",
    "REGION_COLLECTIVES",
    "STEP_KINDS",
    "StepKind",
    "VARYING",
    "as_axes",
    "backprop_primitive",
    "exchange",
    "jax_attrs",
    "jax_function",
    "jax_linear_index",
    "jax_lowering",
    "permute",
    "primitive",
    "result_variance",
    "ring_all_gather",
    "ring_all_reduce",
    "ring_reduce_scatter",
    "run_kernel",
    "seed_name",
    "stacked_vjp",
    "step_kind",
    "transpose_of",
    "transpose_params",
]

VARYING = "varying"
INVARIANT = "invariant"


# -- the step kinds' kernels on the simulated devices -------------------------------------------
# ``net`` counts what each device receives: ``net.send(src, dst, data)`` delivers ``data`` (free from a
# device to itself) and ``net.begin_step()`` opens a new step, which the caller does once for all the groups of
# one collective (they run at once: a device's bytes per step are its group's); ``members`` are the group's
# device ids in member order.

def ring_all_gather(net, members, items: list) -> list[list]:
    """Ring all-gather of one item per member; returns every member's list of all items."""
    p = len(members)
    have = [{r: items[r]} for r in range(p)]
    for t in range(p - 1):
        sends = [(r, (r - t) % p) for r in range(p)]
        for r, j in sends:
            dst = (r + 1) % p
            origin, data = have[r][j]
            have[dst][j] = (origin, net.send(int(members[r]), int(members[dst]), data))
    return [[have[r][j] for j in range(p)] for r in range(p)]


def ring_reduce_scatter(net, members, chunks: list[list[np.ndarray]], combine=np.add) -> list[np.ndarray]:
    """``chunks[r][c]``: member r's partial of chunk c. Member r ends with the sum of chunk r (``combine``:
    ``np.maximum`` or ``np.minimum`` for a pending maximum or minimum)."""
    p = len(members)
    acc = [[c.copy() for c in row] for row in chunks]
    for t in range(p - 1):
        sends = []
        for r in range(p):
            c = (r - t - 1) % p
            sends.append((r, c, acc[r][c]))
        for r, c, data in sends:
            dst = (r + 1) % p
            acc[dst][c] = combine(acc[dst][c], net.send(int(members[r]), int(members[dst]), data))
    return [acc[r][r] for r in range(p)]


def ring_all_reduce(net, members, blocks: list[np.ndarray], combine=np.add) -> list[np.ndarray]:
    """Each member's sum of the members' equal-shape ``blocks`` (``combine``: another elementwise reduction): a
    ring reduce-scatter of ``p`` padded chunks, then a ring all-gather of them (the bytes AllReduce's rounds
    price)."""
    p = len(members)
    flat = [b.reshape(-1) for b in blocks]
    n = flat[0].size
    c = -(-n // p) if n else 0
    padded = [np.concatenate([f, np.zeros(c * p - n, dtype=f.dtype)]) for f in flat]
    chunks = [[padded[r][j * c:(j + 1) * c] for j in range(p)] for r in range(p)]
    reduced = ring_reduce_scatter(net, members, chunks, combine)
    gathered = ring_all_gather(net, members, [((j,), reduced[j]) for j in range(p)])
    return [np.concatenate([a for _, a in items])[:n].reshape(blocks[0].shape) for items in gathered]


def exchange(net, members, pieces) -> list[list]:
    """All-to-all: ``pieces[m][n]`` goes from member ``m`` to member ``n``; member ``n`` gets its pieces in
    member order."""
    p = len(members)
    return [[net.send(int(members[m]), int(members[n]), pieces[m][n]) for m in range(p)] for n in range(p)]


def permute(net, sends) -> dict:
    """Collective permute: every ``(source, destination, data)`` of ``sends`` delivered; destination ->
    what it received."""
    return {dst: net.send(src, dst, data) for src, dst, data in sends}


# -- step kinds ---------------------------------------------------------------------------------

def _ring(p: int, unit: int = 1) -> int:
    return p - 1


def _two_rings(p: int, unit: int = 1) -> int:
    return 2 * (p - 1)


def _one_if_moved(p: int, unit: int = 1) -> int:
    return 1 if unit else 0


def _no_rounds(p: int, unit: int = 1) -> int:
    return 0


def _chunk(operand: int, result: int, p: int) -> int:
    """One of ``p`` chunks of the operand, padded up to whole elements."""
    return -(-operand // p)


def _whole_operand(operand: int, result: int, p: int) -> int:
    return operand


def _whole_result(operand: int, result: int, p: int) -> int:
    return result


def _same_size(result: int, p: int) -> int:
    return result


def _one_of_p(result: int, p: int) -> int:
    """A gather's operand: one of the ``p`` shards of its result."""
    return result // p


def _p_of(result: int, p: int) -> int:
    """A scatter's operand: ``p`` pieces the size of its result."""
    return result * p


@dataclass(frozen=True, slots=True)
class StepKind:
    """One kind of communication step (see the module docstring's table).

    ``rounds(p, unit)`` is how many units each device of a group of ``p`` receives one
    after another (``unit`` matters only to a permute: nothing moved is no round);
    ``unit(operand, result, p)`` is the unit in elements, from the local operand and
    result sizes; ``operand(result, p)`` the local operand size from the result's (what
    an HLO instruction prints); ``kernel`` moves blocks on the simulated devices;
    ``grouped``: it acts on groups of devices along mesh axes (a permute acts on
    pairs, a slice on each device alone).
    """

    name: str
    primitive: str
    hlo: str | None
    grouped: bool
    rounds: Callable[..., int] = field(repr=False)
    unit: Callable[[int, int, int], int] | None = field(repr=False)
    operand: Callable[[int, int], int] | None = field(repr=False)
    kernel: Callable | None = field(repr=False)

    def received(self, p: int, unit_bytes: int) -> int:
        """Bytes each device receives: ``rounds x unit``."""
        return self.rounds(p, unit_bytes) * unit_bytes

    def unit_bytes(self, operand: int, result: int, p: int, itemsize: int) -> int:
        """The unit a round moves, in bytes, from the local operand and result element counts."""
        return self.unit(operand, result, p) * itemsize if self.unit is not None else 0


STEP_KINDS: Mapping[str, StepKind] = types.MappingProxyType({k.name: k for k in (
    # name               primitive               HLO                   grouped rounds         unit            operand
    StepKind("AllReduce", "psum", "all-reduce", True, _two_rings, _chunk, _same_size, ring_all_reduce),
    StepKind("ReduceScatter", "psum_scatter", "reduce-scatter", True, _ring, _whole_result, _p_of,
             ring_reduce_scatter),
    StepKind("AllGather", "all_gather_invariant", "all-gather", True, _ring, _whole_operand, _one_of_p,
             ring_all_gather),
    StepKind("AllToAll", "all_to_all", "all-to-all", True, _ring, _chunk, _same_size, exchange),
    StepKind("CollectivePermute", "ppermute", "collective-permute", False, _one_if_moved, _whole_operand,
             _same_size, permute),
    StepKind("Slice", "pscatter", None, False, _no_rounds, None, None, None),
)})
"""Step kind name -> :class:`StepKind`, read-only, in :data:`KINDS` order."""

KINDS = tuple(STEP_KINDS)
"""The step kinds of :class:`planner.redistribution.steps.Step`."""

HLO_KINDS: Mapping[str, str] = types.MappingProxyType({k.hlo: k.name for k in STEP_KINDS.values() if k.hlo})
"""XLA's collective instruction name -> our step kind (``all-gather`` -> ``AllGather``)."""


def step_kind(name: str) -> StepKind:
    """The registered step kind ``name`` (``AllGather`` ...)."""
    try:
        return STEP_KINDS[name]
    except (KeyError, TypeError):
        raise RuleError(f"unknown step kind {name!r}{did_you_mean(name, STEP_KINDS)}") from None


# -- primitives: meaning on a group's blocks stacked [G, *local] ----------------------------------

def _stacked_psum(x, attrs):
    return np.broadcast_to(x.sum(axis=0), x.shape).copy()


def _stacked_pmean(x, attrs):
    return _stacked_psum(x, attrs) / x.shape[0]


def _stacked_pmax(x, attrs):
    return np.broadcast_to(x.max(axis=0), x.shape).copy()


def _stacked_pmin(x, attrs):
    return np.broadcast_to(x.min(axis=0), x.shape).copy()


def _stacked_identity(x, attrs):
    return x.copy()


def _stacked_all_gather(x, attrs):
    whole = np.concatenate(list(x), axis=attrs["dim"])
    return np.stack([whole] * x.shape[0])


def _stacked_psum_scatter(x, attrs):
    return np.stack(np.split(x.sum(axis=0), x.shape[0], axis=attrs["dim"]))


def _stacked_pscatter(x, attrs):
    return np.stack([np.split(block, x.shape[0], axis=attrs["dim"])[c] for c, block in enumerate(x)])


def _stacked_pscatter_adjoint(x, attrs):
    """The adjoint of :func:`_stacked_pscatter`: row ``c``'s cotangent placed at piece ``c`` of zeros (each row held
    its whole block and kept piece ``c``; the other pieces it dropped get no cotangent)."""
    g, dim = x.shape[0], attrs["dim"]
    out = np.zeros(x.shape[:dim + 1] + (x.shape[dim + 1] * g,) + x.shape[dim + 2:], dtype=x.dtype)
    n = x.shape[dim + 1]
    for c in range(g):
        index = [c] + [slice(None)] * (x.ndim - 1)
        index[dim + 1] = slice(c * n, (c + 1) * n)
        out[tuple(index)] = x[c]
    return out


def _stacked_all_to_all(x, attrs):
    g = x.shape[0]
    pieces = [np.split(block, g, axis=attrs["split_dim"]) for block in x]  # pieces[d][c]
    return np.stack([np.concatenate([pieces[d][c] for d in range(g)], axis=attrs["concat_dim"]) for c in range(g)])


def _stacked_ppermute(x, attrs):
    out = np.zeros_like(x)
    for src, dst in attrs["perm"]:
        out[dst] = x[src]
    return out


def _stacked_axis_index(x, attrs):
    return np.arange(int(attrs["group_size"]), dtype=np.int32)


# -- primitives: kernels on the simulated devices' blocks (see the step kernels above) -----------

def _kernel_psum(net, members, blocks, attrs):
    return ring_all_reduce(net, members, blocks)


def _kernel_pmean(net, members, blocks, attrs):
    return [r / len(members) for r in ring_all_reduce(net, members, blocks)]


def _kernel_pmax(net, members, blocks, attrs):
    return ring_all_reduce(net, members, blocks, np.maximum)


def _kernel_pmin(net, members, blocks, attrs):
    return ring_all_reduce(net, members, blocks, np.minimum)


def _kernel_identity(net, members, blocks, attrs):
    return [b.copy() for b in blocks]


def _kernel_all_gather(net, members, blocks, attrs):
    got = ring_all_gather(net, members, [((r,), b) for r, b in enumerate(blocks)])
    return [np.concatenate([a for _, a in items], axis=attrs["dim"]) for items in got]


def _kernel_psum_scatter(net, members, blocks, attrs):
    p = len(members)
    return ring_reduce_scatter(net, members, [list(np.split(b, p, axis=attrs["dim"])) for b in blocks])


def _kernel_pscatter(net, members, blocks, attrs):
    return [np.split(b, len(members), axis=attrs["dim"])[r] for r, b in enumerate(blocks)]


def _kernel_all_to_all(net, members, blocks, attrs):
    p = len(members)
    pieces = [np.split(b, p, axis=attrs["split_dim"]) for b in blocks]  # pieces[m][n]: from member m to member n
    return [np.concatenate(got, axis=attrs["concat_dim"]) for got in exchange(net, members, pieces)]


def _kernel_ppermute(net, members, blocks, attrs):
    out = [np.zeros_like(b) for b in blocks]
    got = permute(net, [(int(members[src]), int(members[dst]), blocks[src]) for src, dst in attrs["perm"]])
    for src, dst in attrs["perm"]:
        out[dst] = got[int(members[dst])]
    return out


def _kernel_axis_index(net, members, blocks, attrs):
    return [np.asarray(r, dtype=np.int32) for r in range(len(members))]


# -- primitives: JAX lowerings (inside jax.shard_map; jax is an optional dependency) --------------

def jax_linear_index(index: int, axes, sizes, mesh_axes) -> int:
    """Our linear index ``index`` over ``axes`` (row-major as listed) as ``lax.ppermute``'s: JAX's ppermute over a
    tuple of axes numbers the devices row-major in the *mesh's* axis order, whatever the tuple's order (measured
    on jax 0.10.2: ``ppermute(x, ("b", "a"), [(0, 1)])`` on a mesh ``(a, b)`` sends device 0 to device 1), where
    ``axis_index``, ``all_gather``, ``psum_scatter`` and ``all_to_all`` take the tuple's order, as ours do.

    >>> jax_linear_index(1, ("b", "a"), (2, 2), ("a", "b"))  # b=0, a=1: mesh order (a, b) makes it 2
    2
    >>> jax_linear_index(1, ("a", "b"), (2, 2), ("a", "b"))
    1
    """
    coords = {}
    for a, n in reversed(list(zip(axes, sizes))):
        coords[a], index = index % n, index // n
    out = 0
    for a in sorted(axes, key=list(mesh_axes).index):
        out = out * sizes[list(axes).index(a)] + coords[a]
    return out


# Each primitive's jax.lax version, ``(jax, x, attrs)`` inside a ``shard_map``: ``attrs["axes"]`` are the JAX
# mesh's axis names and a ppermute's pairs are already in JAX's numbering (:func:`jax_lowering` does both). Each
# is self-contained (it reads only its arguments), so a generated module embeds its source
# (:mod:`planner.engines.jax_spmd`).

def _jax_psum(jax, x, attrs):
    axes = tuple(attrs["axes"])
    return jax.lax.psum(x, axes[0] if len(axes) == 1 else axes)


def _jax_pmean(jax, x, attrs):
    axes = tuple(attrs["axes"])
    return jax.lax.pmean(x, axes[0] if len(axes) == 1 else axes)


def _jax_pmax(jax, x, attrs):
    axes = tuple(attrs["axes"])
    return jax.lax.pmax(x, axes[0] if len(axes) == 1 else axes)


def _jax_pmin(jax, x, attrs):
    axes = tuple(attrs["axes"])
    return jax.lax.pmin(x, axes[0] if len(axes) == 1 else axes)


def _jax_pbroadcast(jax, x, attrs):
    """A type change only: varying over the axes it is not yet varying over (JAX refuses a cast to what it is)."""
    have = jax.typeof(x).manual_axis_type.varying
    todo = tuple(a for a in attrs["axes"] if a not in have)
    return jax.lax.pcast(x, todo, to="varying") if todo else x


def _jax_all_gather(jax, x, attrs):
    axes = tuple(attrs["axes"])
    return jax.lax.all_gather(x, axes[0] if len(axes) == 1 else axes, axis=attrs["dim"], tiled=True)


def _jax_all_gather_invariant(jax, x, attrs):
    """Public in ``jax.lax`` in later releases; in ``jax._src`` in 0.10."""
    axes = tuple(attrs["axes"])
    gather = getattr(jax.lax, "all_gather_invariant", None)
    if gather is None:
        from jax._src.lax.parallel import all_gather_invariant as gather
    return gather(x, axes[0] if len(axes) == 1 else axes, axis=attrs["dim"], tiled=True)


def _jax_pscatter(jax, x, attrs):
    """This device's piece along ``dim`` of a value invariant over the axes (no communication), whose transpose is
    ``all_gather_invariant``. JAX 0.10 has no such primitive (slicing at ``axis_index`` would pbroadcast the
    operand, which transposes to a psum), so it is a ``custom_vjp``."""
    axes = tuple(attrs["axes"])
    name = axes[0] if len(axes) == 1 else axes
    dim = attrs["dim"]

    def forward(v):
        n = jax.lax.axis_size(name)
        size = v.shape[dim] // n
        v = jax.lax.pcast(v, axes, to="varying")
        return jax.lax.dynamic_slice_in_dim(v, jax.lax.axis_index(name) * size, size, axis=dim), None

    def backward(_, cotangent):
        gather = getattr(jax.lax, "all_gather_invariant", None)
        if gather is None:
            from jax._src.lax.parallel import all_gather_invariant as gather
        return (gather(cotangent, name, axis=dim, tiled=True),)

    fn = jax.custom_vjp(lambda v: forward(v)[0])
    fn.defvjp(forward, backward)
    return fn(x)


def _jax_psum_scatter(jax, x, attrs):
    axes = tuple(attrs["axes"])
    return jax.lax.psum_scatter(x, axes[0] if len(axes) == 1 else axes, scatter_dimension=attrs["dim"], tiled=True)


def _jax_all_to_all(jax, x, attrs):
    axes = tuple(attrs["axes"])
    return jax.lax.all_to_all(x, axes[0] if len(axes) == 1 else axes, attrs["split_dim"], attrs["concat_dim"],
                              tiled=True)


def _jax_ppermute(jax, x, attrs):
    axes = tuple(attrs["axes"])
    return jax.lax.ppermute(x, axes[0] if len(axes) == 1 else axes, perm=[(s, d) for s, d in attrs["perm"]])


def _jax_axis_index(jax, x, attrs):
    axes = tuple(attrs["axes"])
    return jax.lax.axis_index(axes[0] if len(axes) == 1 else axes).astype(jax.numpy.int32)


# -- primitives: parameters of the transpose ---------------------------------------------------

def _same_params(params: Mapping[str, object]) -> dict[str, object]:
    return dict(params)


def _swap_split_concat(params: Mapping[str, object]) -> dict[str, object]:
    out = dict(params)
    out["split_dim"], out["concat_dim"] = params["concat_dim"], params["split_dim"]
    return out


def _inverse_perm(params: Mapping[str, object]) -> dict[str, object]:
    out = dict(params)
    out["perm"] = tuple(sorted((dst, src) for src, dst in params["perm"]))
    return out


# -- primitives ---------------------------------------------------------------------------------

#: How a primitive's result shape follows its operand's (:attr:`Primitive.shape`).
SHAPES = ("same", "gathers", "scatters", "exchanges", "permutes", "indexes")


@dataclass(frozen=True, slots=True)
class Primitive:
    """One collective: the variance it needs and gives over its axes, how it lowers, its transpose.

    ``operand`` is ``None`` for a primitive without an operand (``axis_index``);
    ``lowering`` is the communicating step kind, ``None`` when the primitive runs
    locally, and then ``local`` says what runs; ``transpose`` names the
    transpose primitive (``None``: not linear) and ``transpose_params`` its
    parameters from this one's (the same by default). ``fix`` is the advice an
    ill-typed operand gets after the rule; ``mean_of`` names the primitive a
    mean divides by the group size (pmean: psum); ``dim_attrs`` names the
    attributes holding the dimensions it gathers, scatters or exchanges (the
    others it keeps: its sharding rule is elementwise there); ``shape`` how its
    result's shape follows its operand's (:data:`SHAPES`: ``same``, ``gathers``
    grows ``dim`` by the group, ``scatters`` divides it, ``exchanges`` divides
    ``split_dim`` and grows ``concat_dim``, ``permutes`` keeps it and takes ``perm``,
    ``indexes`` is a scalar from nothing), which is all a graph op of it needs.
    ``reference`` and ``kernel``
    are its meaning on stacked blocks and on the simulated devices, ``jax`` its
    ``jax.lax`` lowering (``None``: none), ``in_regions`` whether a manual
    region's body may apply it, ``stacked_adjoint`` the primitive whose
    ``reference`` (with :func:`transpose_params`) is the adjoint of this one's
    (``None``: its transpose's), or ``adjoint`` that adjoint itself where no
    registered primitive's reference is it. They differ where an invariant value is
    involved: on stacked blocks it is held ``G`` times, so the adjoint of psum's
    sum-and-copy is itself, not pbroadcast's identity, and pscatter's keeps each
    row's piece in place where all_gather_invariant's would copy every piece to
    every row.
    """

    name: str
    operand: str | None
    result: str
    lowering: str | None
    local: str | None
    transpose: str | None
    transpose_params: Callable[[Mapping[str, object]], dict[str, object]] = field(
        default=_same_params, repr=False, compare=False)
    fix: str | None = field(default=None, repr=False)
    mean_of: str | None = field(default=None, repr=False)
    dim_attrs: tuple[str, ...] = field(default=(), repr=False)
    reference: Callable | None = field(default=None, repr=False, compare=False)
    kernel: Callable | None = field(default=None, repr=False, compare=False)
    jax: Callable | None = field(default=None, repr=False, compare=False)
    in_regions: bool = field(default=False, repr=False)
    stacked_adjoint: str | None = field(default=None, repr=False)
    adjoint: Callable | None = field(default=None, repr=False, compare=False)
    shape: str = field(default="same", repr=False)

    def __post_init__(self):
        if self.operand not in (VARYING, INVARIANT, None) or self.result not in (VARYING, INVARIANT):
            raise RuleError(f"primitive {self.name}: operand and result are 'varying' or 'invariant'")
        if (self.lowering is None) == (self.local is None):
            raise RuleError(f"primitive {self.name}: give either a lowering or what runs locally, not both")
        if self.shape not in SHAPES:
            raise RuleError(f"primitive {self.name}: shape {self.shape!r} is not one of {', '.join(SHAPES)}")
        if self.lowering is not None and (self.lowering not in STEP_KINDS or self.lowering == "Slice"):
            raise RuleError(f"primitive {self.name}: lowering {self.lowering!r} is not a communicating step kind "
                            f"{KINDS}")

    @property
    def communicates(self) -> bool:
        return self.lowering is not None

    @property
    def advice(self) -> str:
        """What to do about an ill-typed operand (said after the rule)."""
        return self.fix or f"insert pbroadcast before the {self.name}"

    def __str__(self) -> str:
        operand = self.operand or "()"
        transpose = f"transposes to {self.transpose}" if self.transpose else "no transpose"
        return f"{self.name}: {operand} -> {self.result}, {self.lowering or self.local}, {transpose}"


def _registry(*prims: Primitive) -> Mapping[str, Primitive]:
    table = {p.name: p for p in prims}
    for p in prims:  # transposes come in pairs (a mean transposes as the primitive it divides)
        back = table.get(p.transpose)
        if p.transpose is not None and p.mean_of is None and (back is None or back.transpose != p.name):
            raise RuleError(f"primitive {p.name} transposes to {p.transpose}, which does not transpose back")
    for k in STEP_KINDS.values():
        if k.primitive not in table:
            raise RuleError(f"step kind {k.name} is primitive {k.primitive}, which is not registered")
    return types.MappingProxyType(table)


PRIMITIVES: Mapping[str, Primitive] = _registry(
    # name                  operand    result     lowering             local                         transpose
    Primitive("all_gather", VARYING, VARYING, "AllGather", None, "psum_scatter", dim_attrs=("dim",), shape="gathers",
              reference=_stacked_all_gather, kernel=_kernel_all_gather, jax=_jax_all_gather, in_regions=True),
    Primitive("all_gather_invariant", VARYING, INVARIANT, "AllGather", None, "pscatter", dim_attrs=("dim",),
              shape="gathers",
              fix="the value is already the same on every device: drop the gather or insert pbroadcast",
              reference=_stacked_all_gather, kernel=_kernel_all_gather, stacked_adjoint="psum_scatter",
              jax=_jax_all_gather_invariant, in_regions=True),
    Primitive("all_to_all", VARYING, VARYING, "AllToAll", None, "all_to_all", _swap_split_concat,
              dim_attrs=("split_dim", "concat_dim"), shape="exchanges",
              reference=_stacked_all_to_all, kernel=_kernel_all_to_all, jax=_jax_all_to_all, in_regions=True),
    Primitive("axis_index", None, VARYING, None, "replica id arithmetic", None, shape="indexes",
              reference=_stacked_axis_index, kernel=_kernel_axis_index, jax=_jax_axis_index, in_regions=True),
    Primitive("pbroadcast", INVARIANT, VARYING, None, "no-op (a cast)", "psum",
              fix="it already varies there: drop the pbroadcast",
              reference=_stacked_identity, kernel=_kernel_identity, jax=_jax_pbroadcast, in_regions=True,
              stacked_adjoint="pbroadcast"),
    Primitive("pmax", VARYING, INVARIANT, "AllReduce", None, None, fix="insert pbroadcast or drop the pmax",
              reference=_stacked_pmax, kernel=_kernel_pmax, jax=_jax_pmax, in_regions=True),
    Primitive("pmean", VARYING, INVARIANT, "AllReduce", None, "pbroadcast", mean_of="psum",
              reference=_stacked_pmean, kernel=_kernel_pmean, jax=_jax_pmean, in_regions=True,
              stacked_adjoint="pmean"),
    Primitive("pmin", VARYING, INVARIANT, "AllReduce", None, None, fix="insert pbroadcast or drop the pmin",
              reference=_stacked_pmin, kernel=_kernel_pmin, jax=_jax_pmin, in_regions=True),
    Primitive("ppermute", VARYING, VARYING, "CollectivePermute", None, "ppermute", _inverse_perm, shape="permutes",
              reference=_stacked_ppermute, kernel=_kernel_ppermute, jax=_jax_ppermute, in_regions=True),
    Primitive("pscatter", INVARIANT, VARYING, None, "local slice x[axis_index]", "all_gather_invariant",
              dim_attrs=("dim",), shape="scatters",
              fix="use psum_scatter to sum varying values, or psum first",
              reference=_stacked_pscatter, kernel=_kernel_pscatter, adjoint=_stacked_pscatter_adjoint,
              jax=_jax_pscatter, in_regions=True),
    Primitive("psum", VARYING, INVARIANT, "AllReduce", None, "pbroadcast", fix="insert pbroadcast or drop the psum",
              reference=_stacked_psum, kernel=_kernel_psum, jax=_jax_psum, in_regions=True,
              stacked_adjoint="psum"),
    Primitive("psum_scatter", VARYING, VARYING, "ReduceScatter", None, "all_gather", dim_attrs=("dim",),
              shape="scatters",
              fix="insert pbroadcast before it, or use pscatter to take this device's piece without communication",
              reference=_stacked_psum_scatter, kernel=_kernel_psum_scatter, jax=_jax_psum_scatter, in_regions=True),
)
"""Name -> :class:`Primitive`, read-only, in alphabetical order."""

REGION_COLLECTIVES = tuple(name for name, p in PRIMITIVES.items() if p.in_regions)
"""The primitives a manual region's body may apply (graph ops), alphabetically."""


def primitive(name: str) -> Primitive:
    """The registered collective ``name``.

    >>> primitive("pbroadcst")
    Traceback (most recent call last):
    ...
    planner.errors.RuleError: unknown collective primitive 'pbroadcst'; did you mean pbroadcast?
    """
    try:
        return PRIMITIVES[name]
    except (KeyError, TypeError):
        raise RuleError(f"unknown collective primitive {name!r}{did_you_mean(name, PRIMITIVES)}") from None


def seed_name(name: str) -> str:
    """The seed-004 primitive ``name`` is (``pmean`` is a scaled ``psum``)."""
    return primitive(name).mean_of or name


def transpose_of(name: str) -> Primitive:
    """The primitive that ``name`` transposes to (``psum`` -> ``pbroadcast`` ...).

    >>> transpose_of("all_gather").name, transpose_of(transpose_of("all_gather").name).name
    ('psum_scatter', 'all_gather')
    """
    prim = primitive(name)
    if prim.transpose is None:
        raise RuleError(f"{name} has no transpose: it takes no operand, so nothing is linear in it")
    return PRIMITIVES[prim.transpose]


def transpose_params(name: str, params: Mapping[str, object]) -> dict[str, object]:
    """The parameters (graph op attributes) of the transpose of ``name`` applied with ``params``.

    ``all_to_all`` swaps ``split_dim`` and ``concat_dim``; ``ppermute`` inverts
    ``perm`` (pairs ``(source, destination)``, sorted); the others keep theirs.

    >>> transpose_params("all_to_all", {"axes": ("i",), "split_dim": 0, "concat_dim": 1})
    {'axes': ('i',), 'split_dim': 1, 'concat_dim': 0}
    >>> transpose_params("ppermute", {"axes": ("i",), "perm": ((0, 1), (1, 2), (2, 0))})
    {'axes': ('i',), 'perm': ((0, 2), (1, 0), (2, 1))}
    """
    transpose_of(name)
    return primitive(name).transpose_params(params)


def stacked_vjp(name: str, cotangent: np.ndarray, attrs: Mapping[str, Any]) -> np.ndarray:
    """The VJP of ``name``'s ``reference`` on a cotangent stacked over the group: its ``adjoint``, else the
    reference of its ``stacked_adjoint`` (by default its transpose), with :func:`transpose_params`.

    >>> stacked_vjp("all_gather", np.ones((2, 4)), {"axes": ("i",), "dim": 0}).tolist()
    [[2.0, 2.0], [2.0, 2.0]]
    """
    prim = primitive(name)
    if prim.adjoint is not None:
        return prim.adjoint(cotangent, attrs)
    adjoint = transpose_of(name).name if prim.stacked_adjoint is None else prim.stacked_adjoint
    return PRIMITIVES[adjoint].reference(cotangent, transpose_params(name, attrs))


def backprop_primitive(name: str) -> str:
    """The primitive a body collective's backward runs on the cotangents: seed 004's transpose
    (psum -> pbroadcast, all_gather <-> psum_scatter, all_to_all and ppermute to themselves, pmean -> pbroadcast
    scaled by 1/G), except pbroadcast's: its transpose, psum, is made by the redistribution that reduces its
    operand's pending cotangent, so its backward runs pbroadcast (identity) itself.

    >>> backprop_primitive("psum"), backprop_primitive("pbroadcast"), backprop_primitive("all_gather")
    ('pbroadcast', 'pbroadcast', 'psum_scatter')
    """
    return name if name == "pbroadcast" else transpose_of(name).name


def as_axes(axes: Hashable | tuple) -> tuple:
    """One axis name or a tuple of them, as a tuple (``'i'`` -> ``('i',)``)."""
    return tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)


def result_variance(
    name: str, operand_varies, axes, *, where: str = "", operand: str = "the operand"
) -> frozenset:
    """Seed 004's type rule: the axes the result of ``name`` over ``axes`` varies over.

    ``operand_varies`` is the set of axes the operand varies over (ignored for
    ``axis_index``). A primitive that needs a varying operand needs it to vary
    over *every* one of ``axes``; one that needs an invariant operand needs it
    invariant over every one. A varying result varies over the operand's axes
    and ``axes``; an invariant result over the operand's axes minus ``axes``.
    ``where`` (an equation, a file line) and ``operand`` (``x:f32[3]``) only make
    the :class:`~planner.errors.VarianceError` clearer.

    >>> sorted(result_variance("pbroadcast", {"j"}, "i")), sorted(result_variance("axis_index", None, "i"))
    (['i', 'j'], ['i'])
    >>> result_variance("pbroadcast", {"i"}, "i", operand="x:f32[3]{i}")
    Traceback (most recent call last):
    ...
    planner.errors.VarianceError: pbroadcast over 'i' needs an operand that is invariant over 'i', but x:f32[3]{i} varies over it (pbroadcast: invariant -> varying); it already varies there: drop the pbroadcast
    """
    prim = primitive(name)
    axes = as_axes(axes)
    where = where or None
    if not axes:
        raise VarianceError(f"{name} needs at least one mesh axis to act over", where=where)
    if len(set(axes)) != len(axes):
        raise VarianceError(f"{name} names a mesh axis twice in {axes!r}", where=where)
    if prim.operand is None:
        return frozenset(axes)
    varies = frozenset(operand_varies)
    rule = f"({name}: {prim.operand} -> {prim.result})"
    over = ", ".join(_quote(a) for a in axes)
    if prim.operand == VARYING:
        for axis in axes:
            if axis not in varies:
                raise VarianceError(
                    f"{name} over {over} needs an operand that varies over {_quote(axis)}, "
                    f"but {operand} is invariant over it {rule}; {prim.advice}",
                    where=where,
                )
    else:
        for axis in axes:
            if axis in varies:
                raise VarianceError(
                    f"{name} over {over} needs an operand that is invariant over {_quote(axis)}, "
                    f"but {operand} varies over it {rule}; {prim.advice}",
                    where=where,
                )
    return varies | frozenset(axes) if prim.result == VARYING else varies - frozenset(axes)


def run_kernel(name: str, net, members: Sequence, blocks: list, attrs: Mapping[str, Any]) -> list:
    """``name``'s kernel on one group's blocks (member order), moving them through ``net``."""
    kernel = primitive(name).kernel
    if kernel is None:
        raise InternalError(f"collective {name!r} has no simulator kernel in planner/collectives.py")
    return kernel(net, members, blocks, attrs)


def jax_function(name: str) -> Callable:
    """Primitive ``name``'s ``jax.lax`` version, ``(jax, operand or None, attrs) -> result``, with ``attrs`` in
    JAX's terms (:func:`jax_attrs`); a self-contained function whose source a generated module embeds."""
    fn = PRIMITIVES[name].jax if name in PRIMITIVES else None
    if fn is None:
        raise InternalError(f"collective {name!r} has no jax.lax version in planner/collectives.py")
    return fn


def jax_attrs(name: str, attrs: Mapping[str, Any], mesh_axes, sizes: Mapping[str, int]) -> dict:
    """A collective's attributes in JAX's terms on a mesh of axes ``mesh_axes`` (``sizes`` by name): a ppermute
    over several axes has its pairs renumbered (:func:`jax_linear_index`)."""
    out = dict(attrs)
    axes = tuple(out.get("axes", ()))
    if name == "ppermute":
        if len(axes) == 1:
            out["perm"] = [(int(s), int(d)) for s, d in out["perm"]]
        else:
            size = tuple(sizes[a] for a in axes)
            out["perm"] = [(jax_linear_index(s, axes, size, mesh_axes), jax_linear_index(d, axes, size, mesh_axes))
                           for s, d in out["perm"]]
    return out


def jax_lowering(name: str, mesh=None) -> Callable[[Any, Mapping[str, Any]], Any]:
    """The ``jax.lax`` version of primitive ``name`` inside ``shard_map`` on ``mesh`` (a ``jax.sharding.Mesh``,
    which renumbers a ppermute's pairs): ``(operand or None, attrs) -> result`` over ``attrs["axes"]``."""
    fn = jax_function(name)

    def lowered(x, attrs):
        import jax

        if mesh is not None:
            attrs = jax_attrs(name, attrs, tuple(mesh.axis_names), dict(mesh.shape))
        return fn(jax, x, attrs)

    return lowered


def _quote(axis: Hashable) -> str:
    return repr(axis) if isinstance(axis, str) else str(axis)
