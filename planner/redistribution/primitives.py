"""The one registry of collective primitives, their device-variance types and transposes (seed 004).

Every collective applied over mesh ``axes`` takes a *varying* or an *invariant*
operand along those axes and returns a varying or invariant result (see
:mod:`planner.ir.variance`). Passing the other kind is a type error. The table
(seed 004's, row by row; ``{...}`` after a type lists the axes it varies over):

======================  =====================  ==========================================  =================  ======================
name                    type                   example                                     lowers to          transpose
======================  =====================  ==========================================  =================  ======================
psum                    varying -> invariant   ``y:f32[3]{j} = psum(x:f32[3]{i,j}, 'i')``  AllReduce          pbroadcast
pbroadcast              invariant -> varying   ``y:f32[3]{i} = pbroadcast(x:f32[3], 'i')`` no-op (a cast)     psum
all_to_all              varying -> varying     ``y:f32[16]{i} = all_to_all(x:f32[16]{i},   AllToAll           all_to_all (split and
                                               'i', 0, 0)``                                                   concat axes swapped)
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
``pscatter`` complete the set. Lowerings use the step kinds of
:mod:`planner.redistribution.steps`.

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
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Hashable, Mapping

from planner.errors import RuleError, VarianceError, did_you_mean
from planner.redistribution.steps import KINDS

__all__ = [
    "INVARIANT",
    "PRIMITIVES",
    "Primitive",
    "VARYING",
    "as_axes",
    "primitive",
    "result_variance",
    "transpose_of",
    "transpose_params",
]

VARYING = "varying"
INVARIANT = "invariant"


@dataclass(frozen=True, slots=True)
class Primitive:
    """One collective: the variance it needs and gives over its axes, how it lowers, its transpose.

    ``operand`` is ``None`` for a primitive without an operand (``axis_index``);
    ``lowering`` is the communicating step kind, ``None`` when the primitive runs
    locally, and then ``local`` says what runs; ``transpose`` names the
    transpose primitive (``None``: not linear).
    """

    name: str
    operand: str | None
    result: str
    lowering: str | None
    local: str | None
    transpose: str | None

    def __post_init__(self):
        if self.operand not in (VARYING, INVARIANT, None) or self.result not in (VARYING, INVARIANT):
            raise RuleError(f"primitive {self.name}: operand and result are 'varying' or 'invariant'")
        if (self.lowering is None) == (self.local is None):
            raise RuleError(f"primitive {self.name}: give either a lowering or what runs locally, not both")
        if self.lowering is not None and self.lowering not in KINDS:
            raise RuleError(f"primitive {self.name}: lowering {self.lowering!r} is not a step kind {KINDS}")

    @property
    def communicates(self) -> bool:
        return self.lowering is not None

    def __str__(self) -> str:
        operand = self.operand or "()"
        transpose = f"transposes to {self.transpose}" if self.transpose else "no transpose"
        return f"{self.name}: {operand} -> {self.result}, {self.lowering or self.local}, {transpose}"


def _registry(*prims: Primitive) -> Mapping[str, Primitive]:
    table = {p.name: p for p in prims}
    for p in prims:  # transposes come in pairs
        if p.transpose is not None and table[p.transpose].transpose != p.name:
            raise RuleError(f"primitive {p.name} transposes to {p.transpose}, which does not transpose back")
    return types.MappingProxyType(table)


PRIMITIVES: Mapping[str, Primitive] = _registry(
    # name                   operand    result     lowering            local                           transpose
    Primitive("all_gather", VARYING, VARYING, "AllGather", None, "psum_scatter"),
    Primitive("all_gather_invariant", VARYING, INVARIANT, "AllGather", None, "pscatter"),
    Primitive("all_to_all", VARYING, VARYING, "AllToAll", None, "all_to_all"),
    Primitive("axis_index", None, VARYING, None, "replica id arithmetic", None),
    Primitive("pbroadcast", INVARIANT, VARYING, None, "no-op (a cast)", "psum"),
    Primitive("ppermute", VARYING, VARYING, "CollectivePermute", None, "ppermute"),
    Primitive("pscatter", INVARIANT, VARYING, None, "local slice x[axis_index]", "all_gather_invariant"),
    Primitive("psum", VARYING, INVARIANT, "AllReduce", None, "pbroadcast"),
    Primitive("psum_scatter", VARYING, VARYING, "ReduceScatter", None, "all_gather"),
)
"""Name -> :class:`Primitive`, read-only, in alphabetical order."""

# What to do about an ill-typed operand, by primitive (said after the rule).
_FIX_NEEDS_VARYING = {
    "psum": "insert pbroadcast or drop the psum",
    "psum_scatter": "insert pbroadcast before it, or use pscatter to take this device's piece without communication",
    "all_gather_invariant": "the value is already the same on every device: drop the gather or insert pbroadcast",
}
_FIX_NEEDS_INVARIANT = {
    "pbroadcast": "it already varies there: drop the pbroadcast",
    "pscatter": "use psum_scatter to sum varying values, or psum first",
}


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
    """The parameters of the transpose of ``name`` applied with ``params``.

    ``all_to_all`` swaps ``split_axis`` and ``concat_axis``; ``ppermute`` inverts
    ``perm`` (pairs ``(source, destination)``, sorted); the others keep theirs.

    >>> transpose_params("all_to_all", {"axis_name": ("i",), "split_axis": 0, "concat_axis": 1})
    {'axis_name': ('i',), 'split_axis': 1, 'concat_axis': 0}
    >>> transpose_params("ppermute", {"axis_name": ("i",), "perm": ((0, 1), (1, 2), (2, 0))})
    {'axis_name': ('i',), 'perm': ((0, 2), (1, 0), (2, 1))}
    """
    transpose_of(name)
    out = dict(params)
    if name == "all_to_all":
        out["split_axis"], out["concat_axis"] = params["concat_axis"], params["split_axis"]
    elif name == "ppermute":
        out["perm"] = tuple(sorted((dst, src) for src, dst in params["perm"]))
    return out


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
                fix = _FIX_NEEDS_VARYING.get(name, f"insert pbroadcast before the {name}")
                raise VarianceError(
                    f"{name} over {over} needs an operand that varies over {_quote(axis)}, "
                    f"but {operand} is invariant over it {rule}; {fix}",
                    where=where,
                )
    else:
        for axis in axes:
            if axis in varies:
                raise VarianceError(
                    f"{name} over {over} needs an operand that is invariant over {_quote(axis)}, "
                    f"but {operand} varies over it {rule}; {_FIX_NEEDS_INVARIANT[name]}",
                    where=where,
                )
    return varies | frozenset(axes) if prim.result == VARYING else varies - frozenset(axes)


def _quote(axis: Hashable) -> str:
    return repr(axis) if isinstance(axis, str) else str(axis)
