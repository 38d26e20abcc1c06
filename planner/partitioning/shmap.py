"""A tiny ``shmap`` language: per-device programs over named mesh axes, typed by device variance.

This module makes seed 004 ("efficient transposition of replication-inducing
collectives") executable. A :class:`Shmap` is one body every device of a mesh
runs on its own block of the inputs; ``in_specs``/``out_specs`` (:class:`P`) say
how global arrays are cut into blocks and put back together. Every value has a
device-variance type (:mod:`planner.ir.variance`): the mesh axes it may vary
over. The rules:

* an input varies over exactly the axes its ``in_spec`` names;
* a local op with several operands needs them to vary over the same axes, and
  its result does too; :func:`insert_pbroadcasts` makes that so by inserting
  ``pbroadcast`` (a no-op) where operands disagree, which :func:`shmap` does by
  default; a number literal fits any variance;
* a collective follows the one registry, :mod:`planner.redistribution.primitives`;
* an output must be invariant over every axis its ``out_spec`` omits (this
  replaces the "replication check").

:func:`transpose` transposes a body linear in some inputs, one small rule per
primitive: ``psum`` <-> ``pbroadcast``, ``all_gather`` <-> ``psum_scatter``,
``all_gather_invariant`` <-> ``pscatter`` ... so a cotangent known to be
invariant is never summed again and ``transpose(transpose(f)) == f``.
``transpose(..., variance=False)`` is the old scheme the seed criticises.
:func:`run` executes a program on every device with numpy; :func:`linearize`
gives the tangent program a gradient needs; :func:`collectives` and
:func:`comm_bytes_per_device` count what the communication costs.

Example 1 of the seed, ``shmap(lambda x: psum(g(x), 'i'), in_specs=P('i'), out_specs=P())``:

>>> f1 = shmap(lambda x: psum(reduce_sum(x, (0, 1)), "i"), P("i"), P(), mesh={"i": 8}, in_types=["f32[3,4]"])
>>> print(f1)
@shmap(mesh={i=8}, in_specs=(P('i'),), out_specs=(P(),))
def f(x:f32[3,4]{i}):
  a:f32[]{i} = reduce_sum(x, axes=(0, 1))
  b:f32[] = psum(a, 'i')
  return b
>>> print(transpose(f1, (0,)))
@shmap(mesh={i=8}, in_specs=(P(),), out_specs=(P('i'),))
def f(bbar:f32[]):
  a:f32[]{i} = pbroadcast(bbar, 'i')
  b:f32[3,4]{i} = broadcast(a, dims=(), shape=(3, 4))
  return b
>>> canonical(transpose(transpose(f1, (0,)), (0,))) == canonical(f1), collectives(transpose(f1, (0,)))
(True, Counter())
"""

from __future__ import annotations

import contextvars
import inspect
import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from costmodels.cluster import Link
from costmodels.collectives import (
    all_gather_cost, all_reduce_cost, all_to_all_cost, chunk_bytes, collective_permute_cost, reduce_scatter_cost,
)
from planner.errors import InternalError, RuleError, ShardingError, VarianceError, did_you_mean
from planner.ir.variance import VarType, axes_text, parse_type
from planner.redistribution.primitives import PRIMITIVES, as_axes, primitive, result_variance, transpose_of, \
    transpose_params

__all__ = [
    "Body", "Eqn", "Frozen", "P", "Shmap", "Tracer", "Var",
    "all_gather", "all_gather_invariant", "all_to_all", "axis_index", "broadcast", "canonical", "collectives",
    "comm_bytes_per_device", "dot", "insert_pbroadcasts", "linearize", "mean", "pbroadcast", "pmean", "ppermute",
    "pscatter", "psum", "psum_scatter", "reduce_sum", "run", "shmap", "transpose", "typecheck", "zeros",
]


# ---------------------------------------------------------------------------
# Specs and the IR
# ---------------------------------------------------------------------------
class P(tuple):
    """A partition spec, one entry per dimension: ``None``, an axis name or a tuple of names.

    As JAX's ``P``; missing trailing entries are ``None``.

    >>> P("i", None), P(("i", "j")), P(("i",)).axes
    (P('i', None), P(('i', 'j')), ('i',))
    """

    def __new__(cls, *dims):
        out = []
        for d in dims:
            if d is None or isinstance(d, str):
                out.append(d)
            elif isinstance(d, (tuple, list)) and all(isinstance(a, str) for a in d):
                out.append(None if not d else d[0] if len(d) == 1 else tuple(d))
            else:
                raise ShardingError(f"partition spec entry {d!r} is not None, an axis name or a tuple of names")
        return super().__new__(cls, out)

    def dim_axes(self, k: int) -> tuple[str, ...]:
        """The mesh axes that split dimension ``k`` (major to minor)."""
        d = self[k] if k < len(self) else None
        return () if d is None else (d,) if isinstance(d, str) else d

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(a for k in range(len(self)) for a in self.dim_axes(k))

    def __repr__(self) -> str:
        return f"P({', '.join(map(repr, self))})"


class Frozen(Mapping):
    """A read-only, hashable mapping that keeps its order (an eqn's params, a mesh's axes)."""

    __slots__ = ("_items", "_dict")

    def __init__(self, items=()):
        items = tuple(items.items() if isinstance(items, Mapping) else items)
        self._items, self._dict = items, dict(items)

    def __getitem__(self, key):
        return self._dict[key]

    def __iter__(self):
        return iter(self._dict)

    def __len__(self):
        return len(self._dict)

    def __hash__(self):
        return hash(self._items)

    def __eq__(self, other):
        return isinstance(other, Frozen) and self._items == other._items

    def __repr__(self):
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self._items) + "}"


@dataclass(frozen=True, slots=True)
class Var:
    """A named value of one device, ``x:f32[3,4]{i}``."""

    name: str
    type: VarType

    def __str__(self) -> str:
        return f"{self.name}:{self.type}"


@dataclass(frozen=True, slots=True)
class Eqn:
    """``outputs = prim(inputs, **params)``; an input is a :class:`Var` or a number literal."""

    prim: str
    inputs: tuple
    outputs: tuple[Var, ...]
    params: Frozen

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if not isinstance(self.params, Frozen):
            object.__setattr__(self, "params", Frozen(sorted(dict(self.params).items())))


@dataclass(frozen=True, slots=True)
class Body:
    """A straight-line per-device program."""

    inputs: tuple[Var, ...]
    outputs: tuple[Var, ...]
    eqns: tuple[Eqn, ...]

    def __post_init__(self):
        for f in ("inputs", "outputs", "eqns"):
            object.__setattr__(self, f, tuple(getattr(self, f)))


@dataclass(frozen=True, slots=True)
class Shmap:
    """A body mapped over the mesh ``axes`` (name -> size, row-major device order).

    ``check_variance=False`` marks a program of the old scheme: every value is
    treated as varying over every axis, and only shapes are checked.
    """

    axes: Frozen
    body: Body
    in_specs: tuple[P, ...]
    out_specs: tuple[P, ...]
    check_variance: bool = True

    def __post_init__(self):
        axes = Frozen(self.axes)
        object.__setattr__(self, "axes", axes)
        for name, size in axes.items():
            if not isinstance(name, str) or isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ShardingError(f"mesh axis {name!r}={size!r}: give axis names with integer sizes >= 1")
        object.__setattr__(self, "in_specs", _specs(self.in_specs, len(self.body.inputs), "in_specs"))
        object.__setattr__(self, "out_specs", _specs(self.out_specs, len(self.body.outputs), "out_specs"))
        for spec in self.in_specs + self.out_specs:
            unknown = [a for a in spec.axes if a not in axes]
            if unknown or len(set(spec.axes)) != len(spec.axes):
                raise ShardingError(
                    f"{spec!r} names {'axis ' + repr(unknown[0]) if unknown else 'an axis twice'}; "
                    f"each mesh axis ({', '.join(axes)}) may split one dimension once")

    def __str__(self) -> str:
        order = tuple(self.axes)
        mesh = ", ".join(f"{k}={v}" for k, v in self.axes.items())
        check = "" if self.check_variance else ", check_variance=False"
        lines = [f"@shmap(mesh={{{mesh}}}, in_specs={self.in_specs!r}, out_specs={self.out_specs!r}{check})",
                 f"def f({', '.join(_var_text(v, order) for v in self.body.inputs)}):"]
        lines += [f"  {_eqn_text(e, order)}" for e in self.body.eqns]
        lines.append(f"  return {', '.join(v.name for v in self.body.outputs)}")
        return "\n".join(lines)


def _specs(specs, n: int, what: str) -> tuple[P, ...]:
    if isinstance(specs, P):
        specs = (specs,)
    specs = tuple(s if isinstance(s, P) else P(*s) for s in specs)
    if len(specs) != n:
        raise ShardingError(f"{what} has {len(specs)} specs for {n} values; give one P(...) each")
    return specs


def _var_text(v: Var, order) -> str:
    return f"{v.name}:{v.type.text(order)}"


def _atom_text(a) -> str:
    return a.name if isinstance(a, Var) else repr(a)


def _eqn_text(e: Eqn, order=None, typed: bool = True) -> str:
    args = [_atom_text(a) for a in e.inputs]
    params = dict(e.params)
    if "axis_name" in params:
        axes = params.pop("axis_name")
        args.append(repr(axes[0]) if len(axes) == 1 else repr(axes))
    if e.prim == "all_to_all":
        args += [str(params.pop("split_axis")), str(params.pop("concat_axis"))]
    if params.get("axis") == 0:
        params.pop("axis")
    args += [f"{k}={v!r}" for k, v in params.items()]
    outs = ", ".join(_var_text(v, order) if typed else v.name for v in e.outputs)
    return f"{outs} = {e.prim}({', '.join(args)})"


# ---------------------------------------------------------------------------
# Primitive rules: shape, per-device numpy, transpose, tangent — one entry each
# ---------------------------------------------------------------------------
class _Rule(NamedTuple):
    shape: Callable  # (in_types, params, sizes) -> (dtype, shape)
    impl: Callable  # local: (*arrays, **params) -> array; collective: (values, groups, params) -> values
    transpose: Callable | None  # (builder, eqn, ct, linear flags, inputs) -> [(operand index, cotangent)]
    jvp: Callable | None  # (builder, eqn, inputs, tangents) -> tangent var or None


def _shapes(types) -> list[tuple[int, ...]]:
    return [t.shape for t in types if t is not None]


def _elementwise_shape(types, params, sizes):
    shapes = _shapes(types)
    if not shapes:
        raise RuleError("an elementwise op needs at least one array operand (not only literals)")
    if any(s != shapes[0] for s in shapes):
        raise RuleError(f"elementwise operands must have equal shapes, got {', '.join(map(str, shapes))}")
    return next(t for t in types if t is not None).dtype, shapes[0]


def _unary(prim):
    def jvp(b, eqn, ins, tans):
        return b.emit(prim, (tans[0],), eqn.params)
    return jvp


def _t_add(b, eqn, ct, lin, ins):
    return [(i, ct) for i in range(2) if lin[i]]


def _t_sub(b, eqn, ct, lin, ins):
    return ([(0, ct)] if lin[0] else []) + ([(1, b.emit("neg", (ct,)))] if lin[1] else [])


def _jvp_add_sub(b, eqn, ins, tans):
    ta, tb = tans
    if ta is not None and tb is not None:
        return b.emit(eqn.prim, (ta, tb))
    if ta is not None:
        return ta
    return tb if eqn.prim == "add" else b.emit("neg", (tb,))


def _t_neg(b, eqn, ct, lin, ins):
    return [(0, b.emit("neg", (ct,)))]


def _t_bilinear(b, eqn, ct, lin, ins):
    """``mul``/``dot`` are linear in one operand when the other is not linear."""
    if all(lin):
        raise RuleError(f"{eqn.prim} of two linear values is not linear; "
                        "only one operand may depend on the linear inputs")
    k = lin.index(True)
    params = dict(eqn.params)
    if eqn.prim == "dot":
        subs, out = _parse_spec(params["spec"])
        other = subs[1 - k]
        if set(subs[k]) - set(other) - set(out):
            raise RuleError(f"dot {params['spec']!r} is not transposable in operand {k}: "
                            "a letter is summed inside that operand alone")
        params["spec"] = f"{out},{other}->{subs[0]}" if k == 0 else f"{other},{out}->{subs[1]}"
    operands = (ct, ins[1]) if k == 0 else (ins[0], ct)
    return [(k, b.emit(eqn.prim, operands, params))]


def _jvp_bilinear(b, eqn, ins, tans):
    terms = [b.emit(eqn.prim, (t, ins[1]) if k == 0 else (ins[0], t), eqn.params)
             for k, t in enumerate(tans) if t is not None]
    return terms[0] if len(terms) == 1 else b.emit("add", terms)


def _t_div(b, eqn, ct, lin, ins):
    if lin[1]:
        raise RuleError("div is linear in its numerator only; the denominator depends on the linear inputs")
    return [(0, b.emit("div", (ct, ins[1])))]


def _jvp_div(b, eqn, ins, tans):
    if tans[1] is not None:
        raise RuleError("div: only a constant denominator is supported (it has a tangent here)")
    return b.emit("div", (tans[0], ins[1]))


def _reduce_sum_shape(types, params, sizes):
    (t,) = types
    axes = params["axes"]
    if len(set(axes)) != len(axes) or any(not 0 <= a < len(t.shape) for a in axes):
        raise RuleError(f"reduce_sum axes {axes} do not name distinct dimensions of {t}")
    return t.dtype, tuple(n for k, n in enumerate(t.shape) if k not in axes)


def _t_reduce_sum(b, eqn, ct, lin, ins):
    shape = eqn.inputs[0].type.shape
    dims = tuple(k for k in range(len(shape)) if k not in eqn.params["axes"])
    return [(0, b.emit("broadcast", (ct,), {"shape": shape, "dims": dims}))]


def _broadcast_shape(types, params, sizes):
    (t,) = types
    shape, dims = tuple(params["shape"]), tuple(params["dims"])
    if (len(dims) != len(t.shape) or list(dims) != sorted(set(dims))
            or any(not 0 <= d < len(shape) or shape[d] != n for d, n in zip(dims, t.shape))):
        raise RuleError(f"broadcast of {t} to shape {shape} with dims {dims}: dims must map each operand "
                        "dimension, in order, to an output dimension of the same size")
    return t.dtype, shape


def _broadcast_impl(a, shape, dims):
    expanded = np.reshape(a, [shape[k] if k in dims else 1 for k in range(len(shape))])
    return np.array(np.broadcast_to(expanded, shape))


def _t_broadcast(b, eqn, ct, lin, ins):
    dims = eqn.params["dims"]
    axes = tuple(k for k in range(len(eqn.params["shape"])) if k not in dims)
    return [(0, b.emit("reduce_sum", (ct,), {"axes": axes}))]


_SPEC = re.compile(r"^([a-z]*),([a-z]*)->([a-z]*)$")


def _parse_spec(spec: str) -> tuple[tuple[str, str], str]:
    m = _SPEC.match(spec.replace(" ", ""))
    if not m or any(len(set(s)) != len(s) for s in m.groups()):
        raise RuleError(f"dot spec {spec!r} is not a two-operand einsum such as 'ij,jk->ik' (no repeated letter)")
    a, b, out = m.groups()
    if set(out) - set(a) - set(b):
        raise RuleError(f"dot spec {spec!r}: output letters must appear in an operand")
    return (a, b), out


def _dot_shape(types, params, sizes):
    (sa, sb), out = _parse_spec(params["spec"])
    ta, tb = types
    if ta is None or tb is None:
        raise RuleError("dot needs two arrays, not a number")
    if len(sa) != len(ta.shape) or len(sb) != len(tb.shape):
        raise RuleError(f"dot spec {params['spec']!r} does not fit operands {ta} and {tb}")
    size = {}
    for letters, shape in ((sa, ta.shape), (sb, tb.shape)):
        for c, n in zip(letters, shape):
            if size.setdefault(c, n) != n:
                raise RuleError(f"dot {params['spec']!r}: letter {c!r} has sizes {size[c]} and {n} in {ta}, {tb}")
    return ta.dtype, tuple(size[c] for c in out)


def _zeros_shape(types, params, sizes):
    return params["dtype"], tuple(params["shape"])


def _group_size(params, sizes) -> int:
    return math.prod(sizes[a] for a in params["axis_name"])


def _same_shape(types, params, sizes):
    (t,) = types
    return t.dtype, t.shape


def _resized(grow: bool):
    def shape(types, params, sizes):
        (t,) = types
        n, k, s = _group_size(params, sizes), params.get("axis", 0), list(t.shape)
        if not 0 <= k < len(s):
            raise RuleError(f"dimension {k} is not a dimension of {t}")
        if not grow and s[k] % n:
            raise RuleError(f"dimension {k} of {t} has size {s[k]}, which the {n} devices of "
                            f"{params['axis_name']} do not divide")
        s[k] = s[k] * n if grow else s[k] // n
        return t.dtype, tuple(s)
    return shape


def _all_to_all_shape(types, params, sizes):
    (t,) = types
    n, s = _group_size(params, sizes), list(t.shape)
    split, concat = params["split_axis"], params["concat_axis"]
    if not (0 <= split < len(s) and 0 <= concat < len(s)) or s[split] % n:
        raise RuleError(f"all_to_all of {t}: split_axis {split} must be a dimension whose size {n} divides")
    s[split] //= n
    s[concat] *= n
    return t.dtype, tuple(s)


def _ppermute_shape(types, params, sizes):
    n, perm = _group_size(params, sizes), params["perm"]
    srcs, dsts = [p[0] for p in perm], [p[1] for p in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts) or any(not 0 <= i < n for i in srcs + dsts):
        raise RuleError(f"ppermute perm {perm}: pairs (source, destination) of distinct indices in 0..{n - 1}")
    return _same_shape(types, params, sizes)


def _axis_index_shape(types, params, sizes):
    return "i32", ()


# Collectives on all devices at once: ``groups[d] = (members in group order, d's index)``.
def _c_psum(vals, groups, params):
    return [sum(vals[m] for m in g) for g, _ in groups]


def _c_identity(vals, groups, params):
    return list(vals)


def _c_all_gather(vals, groups, params):
    return [np.concatenate([vals[m] for m in g], axis=params.get("axis", 0)) for g, _ in groups]


def _c_psum_scatter(vals, groups, params):
    sums = _c_psum(vals, groups, params)
    return [np.split(s, len(g), axis=params.get("axis", 0))[k] for s, (g, k) in zip(sums, groups)]


def _c_pscatter(vals, groups, params):
    return [np.split(v, len(g), axis=params.get("axis", 0))[k] for v, (g, k) in zip(vals, groups)]


def _c_all_to_all(vals, groups, params):
    split, concat = params["split_axis"], params["concat_axis"]
    return [np.concatenate([np.split(vals[m], len(g), axis=split)[k] for m in g], axis=concat) for g, k in groups]


def _c_ppermute(vals, groups, params):
    source = {dst: src for src, dst in params["perm"]}
    return [vals[g[source[k]]] if k in source else np.zeros_like(vals[g[k]]) for g, k in groups]


def _c_axis_index(vals, groups, params):
    return [np.asarray(k, dtype=np.int32) for _, k in groups]


def _t_collective(b, eqn, ct, lin, ins):
    """Seed 004: the registry names the transpose and how its parameters change."""
    return [(0, b.emit(transpose_of(eqn.prim).name, (ct,), transpose_params(eqn.prim, eqn.params)))]


_RULES: Mapping[str, _Rule] = {
    # local primitives
    "add": _Rule(_elementwise_shape, np.add, _t_add, _jvp_add_sub),
    "broadcast": _Rule(_broadcast_shape, _broadcast_impl, _t_broadcast, _unary("broadcast")),
    "div": _Rule(_elementwise_shape, np.divide, _t_div, _jvp_div),
    "dot": _Rule(_dot_shape, lambda a, b, spec: np.einsum(spec, a, b), _t_bilinear, _jvp_bilinear),
    "mul": _Rule(_elementwise_shape, np.multiply, _t_bilinear, _jvp_bilinear),
    "neg": _Rule(_elementwise_shape, np.negative, _t_neg, _unary("neg")),
    "reduce_sum": _Rule(_reduce_sum_shape, lambda a, axes: np.asarray(np.sum(a, axis=axes)), _t_reduce_sum,
                        _unary("reduce_sum")),
    "sub": _Rule(_elementwise_shape, np.subtract, _t_sub, _jvp_add_sub),
    "zeros": _Rule(_zeros_shape, lambda shape, dtype: np.zeros(shape, _np_dtype(dtype)), None, None),
    # collectives (their variance types, lowerings and transposes: the registry in primitives.py)
    "all_gather": _Rule(_resized(grow=True), _c_all_gather, _t_collective, _unary("all_gather")),
    "all_gather_invariant": _Rule(_resized(grow=True), _c_all_gather, _t_collective, _unary("all_gather_invariant")),
    "all_to_all": _Rule(_all_to_all_shape, _c_all_to_all, _t_collective, _unary("all_to_all")),
    "axis_index": _Rule(_axis_index_shape, _c_axis_index, None, None),
    "pbroadcast": _Rule(_same_shape, _c_identity, _t_collective, _unary("pbroadcast")),
    "ppermute": _Rule(_ppermute_shape, _c_ppermute, _t_collective, _unary("ppermute")),
    "pscatter": _Rule(_resized(grow=False), _c_pscatter, _t_collective, _unary("pscatter")),
    "psum": _Rule(_same_shape, _c_psum, _t_collective, _unary("psum")),
    "psum_scatter": _Rule(_resized(grow=False), _c_psum_scatter, _t_collective, _unary("psum_scatter")),
}
_LOCAL_MULTI = frozenset({"add", "div", "dot", "mul", "sub"})
_ARITY = {**{prim: 2 for prim in _LOCAL_MULTI}, "axis_index": 0, "zeros": 0}  # the others take one array


def _wasteful_transpose(name: str):
    """The old scheme's rules: psum is its own transpose, every gather transposes to psum_scatter."""
    if name == "pbroadcast":  # an identity on every device's own value
        return lambda b, eqn, ct, lin, ins: [(0, ct)]
    if name == "pscatter":
        def refuse(b, eqn, ct, lin, ins):
            raise RuleError("pscatter did not exist in the old scheme; transpose with variance=True")
        return refuse
    target = {"psum": "psum", "all_gather": "psum_scatter", "all_gather_invariant": "psum_scatter",
              "psum_scatter": "all_gather"}.get(name)
    if target is None:
        return _RULES[name].transpose
    return lambda b, eqn, ct, lin, ins: [(0, b.emit(target, (ct,), eqn.params))]


def _np_dtype(dtype: str):
    return {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64,
            "bool": np.bool_}.get(dtype, np.float64)


def _rule(prim: str) -> _Rule:
    try:
        return _RULES[prim]
    except KeyError:
        raise RuleError(f"unknown shmap primitive {prim!r}{did_you_mean(prim, _RULES)}") from None


# ---------------------------------------------------------------------------
# Typing
# ---------------------------------------------------------------------------
def _out_type(axes: Frozen, prim: str, inputs, params, *, checked: bool, strict: bool, where: str) -> VarType:
    """The type of ``prim(inputs)``: shape from its rule, variance from seed 004's rules.

    ``strict=False`` takes the union of disagreeing operands' variance (what
    :func:`insert_pbroadcasts` then makes explicit); ``checked=False`` is the old
    scheme: everything varies over every axis.
    """
    rule = _rule(prim)
    arity = _ARITY.get(prim, 1)
    if len(inputs) != arity:
        raise RuleError(f"{prim} takes {arity} operand{'s' * (arity != 1)}, got {len(inputs)}", where=where)
    if arity == 1 and not isinstance(inputs[0], Var):
        raise RuleError(f"{prim} needs an array operand, not the number {inputs[0]!r}", where=where)
    for a in params.get("axis_name", ()):
        if a not in axes:
            raise VarianceError(f"{prim} over {a!r}: not an axis of this shmap's mesh ({', '.join(axes)})",
                                where=where)
    types = [v.type if isinstance(v, Var) else None for v in inputs]
    try:
        dtype, shape = rule.shape(types, params, axes)
    except RuleError as e:
        raise e.located(where) from None
    if not checked:
        return VarType(dtype, shape, frozenset(axes))
    if prim in PRIMITIVES:
        operand = inputs[0] if inputs else None
        return VarType(dtype, shape, result_variance(
            prim, operand.type.varies if operand is not None else (), params["axis_name"], where=where,
            operand=_var_text(operand, tuple(axes)) if operand is not None else ""))
    varied = [v for v in inputs if isinstance(v, Var)]
    union = frozenset().union(*(v.type.varies for v in varied))
    if strict:
        for v in varied:
            if v.type.varies != union:
                axis = next(a for a in axes if a in union - v.type.varies)
                other = next(w for w in varied if axis in w.type.varies)
                raise VarianceError(
                    f"{prim} needs operands that vary over the same axes, but {_var_text(other, tuple(axes))} "
                    f"varies over {axis!r} and {_var_text(v, tuple(axes))} does not (a multi-argument op's "
                    f"operands and result share one variance type); insert pbroadcast({v.name}, {axis!r}) "
                    "or let shmap insert it", where=where)
    return VarType(dtype, shape, union)


def _input_type(axes: Frozen, t: VarType, spec: P, checked: bool) -> VarType:
    return t.with_varies(spec.axes if checked else axes)


def typecheck(f: Shmap) -> None:
    """Check every variable's type against seed 004's rules; raise :class:`VarianceError` (or
    :class:`RuleError` for shapes) naming the equation, the axis and the rule.

    An input varies over exactly the axes its ``in_spec`` names; each equation's
    output has the type its inputs give; an output is invariant over every axis its
    ``out_spec`` does not name. With ``check_variance=False`` only shapes are checked.

    >>> bad = Shmap({"i": 8}, Body([Var("x", parse_type("f32[3]{i}"))], [Var("x", parse_type("f32[3]{i}"))], []),
    ...             in_specs=[P("i")], out_specs=[P()])
    >>> typecheck(bad)
    Traceback (most recent call last):
    ...
    planner.errors.VarianceError: output 0: x:f32[3]{i} varies over 'i', but out_specs P() does not name 'i', so every device along 'i' must return the same value; psum it over 'i' or name 'i' in out_specs
    """
    order, checked = tuple(f.axes), f.check_variance
    defined: dict[str, Var] = {}

    def define(v: Var, where: str) -> None:
        if v.name in defined:
            raise RuleError(f"variable {v.name} is defined twice", where=where)
        defined[v.name] = v

    for k, (v, spec) in enumerate(zip(f.body.inputs, f.in_specs)):
        _check_spec_fits(spec, v, f"input {k}")
        want = _input_type(f.axes, v.type, spec, checked)
        if v.type != want:
            raise VarianceError(f"input {k} {_var_text(v, order)} has in_specs {spec!r}, so its type is "
                                f"{want.text(order)}")
        define(v, f"input {k}")
    for e in f.body.eqns:
        where = _eqn_text(e, order, typed=False)
        for a in e.inputs:
            if isinstance(a, Var) and defined.get(a.name) != a:
                raise RuleError(f"{a} is used before it is defined", where=where)
            if not isinstance(a, (Var, int, float)) or isinstance(a, bool):
                raise RuleError(f"operand {a!r} is neither a variable nor a number", where=where)
        if len(e.outputs) != 1:
            raise RuleError(f"{e.prim} has one output, got {len(e.outputs)}", where=where)
        want = _out_type(f.axes, e.prim, e.inputs, e.params, checked=checked, strict=True, where=where)
        if e.outputs[0].type != want:
            raise VarianceError(f"{e.outputs[0].name} is typed {e.outputs[0].type.text(order)} but "
                                f"{e.prim} of its operands gives {want.text(order)}", where=where)
        define(e.outputs[0], where)
    for k, (v, spec) in enumerate(zip(f.body.outputs, f.out_specs)):
        if not isinstance(v, Var) or defined.get(v.name) != v:
            raise RuleError(f"output {k} ({v}) is not a variable of the body")
        _check_spec_fits(spec, v, f"output {k}")
        if checked:
            for axis in order:
                if axis in v.type.varies and axis not in spec.axes:
                    raise VarianceError(
                        f"output {k}: {_var_text(v, order)} varies over {axis!r}, but out_specs {spec!r} does not "
                        f"name {axis!r}, so every device along {axis!r} must return the same value; "
                        f"psum it over {axis!r} or name {axis!r} in out_specs")


def _check_spec_fits(spec: P, v: Var, what: str) -> None:
    if len(spec) > len(v.type.shape):
        raise ShardingError(f"{what}: {spec!r} has {len(spec)} entries but {v.name} has rank {len(v.type.shape)}")


# ---------------------------------------------------------------------------
# Building programs: the builder, tracing, pbroadcast insertion
# ---------------------------------------------------------------------------
class _Builder:
    """Emits typed equations into a new body, naming variables freshly."""

    def __init__(self, axes: Frozen, checked: bool, taken: Iterable[str] = ()):
        self.axes, self.checked, self.eqns = axes, checked, []
        self._taken = set(taken)
        self._counter = itertools.count()

    def fresh(self, type: VarType, hint: str | None = None) -> Var:
        if hint is not None and hint not in self._taken and re.fullmatch(r"[A-Za-z_]\w*", hint):
            name = hint
        else:
            name = next(n for n in map(_letters, self._counter) if n not in self._taken)
        self._taken.add(name)
        return Var(name, type)

    def emit(self, prim: str, inputs: Sequence, params: Mapping | None = None, *, strict: bool = False,
             hint: str | None = None) -> Var:
        params = Frozen(sorted((params or {}).items()))
        if hint is not None and hint not in self._taken:
            name = hint
        else:
            name = next(n for n in map(_letters, self._counter) if n not in self._taken)
        where = f"{name} = {prim}({', '.join(_atom_text(a) for a in inputs)})"
        out = self.fresh(_out_type(self.axes, prim, inputs, params, checked=self.checked, strict=strict,
                                   where=where), name)
        self.eqns.append(Eqn(prim, tuple(inputs), (out,), params))
        return out


def _letters(i: int) -> str:
    """a, b, ..., z, ba, bb, ... (JAX's variable names)."""
    s = ""
    while True:
        s = chr(ord("a") + i % 26) + s
        i //= 26
        if not i:
            return s


_TRACE: contextvars.ContextVar = contextvars.ContextVar("shmap_trace")


class Tracer:
    """A value inside a body being traced by :func:`shmap`; supports ``+ - * /`` and unary ``-``."""

    __slots__ = ("var",)

    def __init__(self, var: Var):
        self.var = var

    def __add__(self, o):
        return _bind("add", self, o)

    def __radd__(self, o):
        return _bind("add", o, self)

    def __sub__(self, o):
        return _bind("sub", self, o)

    def __rsub__(self, o):
        return _bind("sub", o, self)

    def __mul__(self, o):
        return _bind("mul", self, o)

    def __rmul__(self, o):
        return _bind("mul", o, self)

    def __truediv__(self, o):
        return _bind("div", self, o)

    def __neg__(self):
        return _bind("neg", self)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.var.type.shape

    def __repr__(self) -> str:
        return f"Tracer({self.var})"


def _builder(prim: str) -> "_Builder":
    builder = _TRACE.get(None)
    if builder is None:
        raise RuleError(f"{prim} can only be called inside a body traced by shmap(...)")
    return builder


def _bind(prim: str, *operands, **params) -> Tracer:
    builder = _builder(prim)
    inputs = []
    for o in operands:
        if isinstance(o, Tracer):
            inputs.append(o.var)
        elif isinstance(o, (int, float)) and not isinstance(o, bool):
            inputs.append(o)
        else:
            raise RuleError(f"{prim}: operand {o!r} is neither a traced value nor a number")
    return Tracer(builder.emit(prim, inputs, params))


def reduce_sum(x: Tracer, axes=None) -> Tracer:
    """Sum over dimensions ``axes`` (all if ``None``; negative counts from the end)."""
    rank = len(x.shape)
    axes = tuple(range(rank)) if axes is None else (axes,) if isinstance(axes, int) else tuple(axes)
    return _bind("reduce_sum", x, axes=tuple(sorted(a % rank if rank else a for a in axes)))


def broadcast(x: Tracer, shape, dims=()) -> Tracer:
    """``x`` placed in ``shape``: operand dimension ``k`` becomes output dimension ``dims[k]``."""
    return _bind("broadcast", x, shape=tuple(shape), dims=tuple(dims))


def dot(a: Tracer, b: Tracer, spec: str = "ij,jk->ik") -> Tracer:
    """A two-operand einsum (a matmul by default)."""
    return _bind("dot", a, b, spec=spec)


def zeros(shape, dtype: str = "f32") -> Tracer:
    """An array of zeros, invariant on every axis."""
    return _bind("zeros", shape=tuple(shape), dtype=dtype)


def mean(x: Tracer, axes=None) -> Tracer:
    """``reduce_sum`` divided by the number of elements summed."""
    total = reduce_sum(x, axes)
    return total / (math.prod(x.shape) // max(1, math.prod(total.shape)))


def psum(x: Tracer, axes) -> Tracer:
    return _bind("psum", x, axis_name=as_axes(axes))


def pmean(x: Tracer, axes) -> Tracer:
    """``psum(x, axes) / psum(1, axes)``: the seed's pmean (the divisor is known statically)."""
    sizes = _builder("pmean").axes
    return psum(x, axes) / math.prod(sizes[a] for a in as_axes(axes))


def pbroadcast(x: Tracer, axes) -> Tracer:
    return _bind("pbroadcast", x, axis_name=as_axes(axes))


def all_gather(x: Tracer, axes, axis: int = 0) -> Tracer:
    return _bind("all_gather", x, axis_name=as_axes(axes), axis=axis)


def all_gather_invariant(x: Tracer, axes, axis: int = 0) -> Tracer:
    return _bind("all_gather_invariant", x, axis_name=as_axes(axes), axis=axis)


def psum_scatter(x: Tracer, axes, axis: int = 0) -> Tracer:
    return _bind("psum_scatter", x, axis_name=as_axes(axes), axis=axis)


def pscatter(x: Tracer, axes, axis: int = 0) -> Tracer:
    return _bind("pscatter", x, axis_name=as_axes(axes), axis=axis)


def all_to_all(x: Tracer, axes, split_axis: int, concat_axis: int) -> Tracer:
    return _bind("all_to_all", x, axis_name=as_axes(axes), split_axis=split_axis, concat_axis=concat_axis)


def ppermute(x: Tracer, axes, perm) -> Tracer:
    """``perm``: pairs ``(source, destination)`` of indices along ``axes``; devices no pair reaches get zeros."""
    return _bind("ppermute", x, axis_name=as_axes(axes), perm=tuple(sorted(tuple(p) for p in perm)))


def axis_index(axes) -> Tracer:
    """This device's index along ``axes`` (row-major over them), ``i32[]``."""
    return _bind("axis_index", axis_name=as_axes(axes))


def shmap(fun: Callable, in_specs, out_specs, *, mesh: Mapping[str, int], in_types: Sequence,
          auto_pbroadcast: bool = True, check_variance: bool = True) -> Shmap:
    """Trace ``fun`` (per-device code) into a typed :class:`Shmap`.

    ``in_types`` are the per-device types of the inputs (``"f32[3,4]"``); each
    input varies over the axes its spec names. With ``auto_pbroadcast`` (the
    default) pbroadcasts are inserted where a local op's operands disagree, and
    the result is type-checked; ``check_variance=False`` builds a program of the
    old, untyped scheme.

    >>> shmap(lambda x, y: x * y, (P("i"), P()), P("i"), mesh={"i": 2}, in_types=["f32[2]"] * 2,
    ...       auto_pbroadcast=False)
    Traceback (most recent call last):
    ...
    planner.errors.VarianceError: a = mul(x, y): mul needs operands that vary over the same axes, but x:f32[2]{i} varies over 'i' and y:f32[2] does not (a multi-argument op's operands and result share one variance type); insert pbroadcast(y, 'i') or let shmap insert it
    """
    axes = Frozen(mesh)
    names = _param_names(fun, len(in_types))
    in_specs = _specs(in_specs, len(in_types), "in_specs")
    builder = _Builder(axes, check_variance)
    inputs = []
    for name, t, spec in zip(names, in_types, in_specs):
        t = parse_type(t) if isinstance(t, str) else t
        want = _input_type(axes, t, spec, check_variance)
        if t.varies and t.varies != want.varies:
            raise VarianceError(f"input {name}:{t} has in_specs {spec!r}, so it varies over exactly "
                                f"{axes_text(want.varies, tuple(axes)) or 'no axis'}")
        inputs.append(builder.fresh(want, name))
    token = _TRACE.set(builder)
    try:
        outs = fun(*map(Tracer, inputs))
    finally:
        _TRACE.reset(token)
    outs = (outs,) if isinstance(outs, Tracer) or not isinstance(outs, (tuple, list)) else tuple(outs)
    if not all(isinstance(o, Tracer) for o in outs):
        raise RuleError("a shmap body must return traced values (not numbers)")
    f = Shmap(axes, Body(inputs, [o.var for o in outs], builder.eqns), in_specs, out_specs, check_variance)
    f = insert_pbroadcasts(f, enabled=auto_pbroadcast and check_variance)
    typecheck(f)
    return f


def _param_names(fun: Callable, n: int) -> list[str]:
    try:
        params = [p.name for p in inspect.signature(fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[:n] if len(params) >= n else [f"x{k}" for k in range(n)]


def insert_pbroadcasts(f: Shmap, enabled: bool = True) -> Shmap:
    """Insert ``pbroadcast`` where a local op's operands vary over different axes (seed 004).

    Each operand is raised to the union of the operands' axes; the same
    ``(variable, axes)`` pbroadcast is inserted once and reused. With
    ``enabled=False`` the program is returned unchanged (the user is responsible).

    >>> f = shmap(lambda x, y: x * y, (P("i"), P()), P("i"), mesh={"i": 2}, in_types=["f32[2]"] * 2)
    >>> [str(e.prim) for e in f.body.eqns], insert_pbroadcasts(f) == f
    (['pbroadcast', 'mul'], True)
    """
    if not enabled or not f.check_variance:
        return f
    taken = [v.name for v in _all_vars(f.body)]
    b = _Builder(f.axes, True, taken)
    memo: dict[tuple[Var, tuple[str, ...]], Var] = {}
    order = tuple(f.axes)
    for e in f.body.eqns:
        inputs = list(e.inputs)
        if e.prim in _LOCAL_MULTI:
            union = frozenset().union(*(v.type.varies for v in inputs if isinstance(v, Var)))
            for k, v in enumerate(inputs):
                if isinstance(v, Var) and v.type.varies != union:
                    missing = tuple(a for a in order if a in union - v.type.varies)
                    if (v, missing) not in memo:
                        memo[v, missing] = b.emit("pbroadcast", (v,), {"axis_name": missing})
                    inputs[k] = memo[v, missing]
        b.eqns.append(replace(e, inputs=tuple(inputs)))
    return replace(f, body=replace(f.body, eqns=tuple(b.eqns)))


def _all_vars(body: Body) -> Iterator[Var]:
    yield from body.inputs
    for e in body.eqns:
        yield from e.outputs


def canonical(f: Shmap) -> Shmap:
    """``f`` with its variables renamed a, b, c ... in order of definition (inputs first).

    Two programs that differ only in variable names have equal canonical forms.
    """
    names = {v.name: _letters(k) for k, v in enumerate(_all_vars(f.body))}

    def ren(a):
        return Var(names[a.name], a.type) if isinstance(a, Var) else a

    eqns = [Eqn(e.prim, tuple(map(ren, e.inputs)), tuple(map(ren, e.outputs)), e.params) for e in f.body.eqns]
    return replace(f, body=Body(tuple(map(ren, f.body.inputs)), tuple(map(ren, f.body.outputs)), tuple(eqns)))


def _prune(eqns: Sequence[Eqn], outputs: Iterable[Var]) -> tuple[Eqn, ...]:
    """Drop equations whose outputs nothing needs."""
    live = {v.name for v in outputs}
    kept = []
    for e in reversed(eqns):
        if any(o.name in live for o in e.outputs):
            kept.append(e)
            live.update(a.name for a in e.inputs if isinstance(a, Var))
    return tuple(reversed(kept))


# ---------------------------------------------------------------------------
# Transposition and linearization
# ---------------------------------------------------------------------------
def transpose(f: Shmap, linear: Sequence[int], *, variance: bool = True) -> Shmap:
    """The transpose of ``f`` with respect to its inputs at positions ``linear``.

    The other inputs are non-linear (residuals, like ``y`` in the seed's example 2)
    and stay inputs. The result takes the residuals (in order), then one cotangent
    per output of ``f`` (its ``in_specs`` are ``f``'s ``out_specs``), and returns one
    cotangent per linear input (its ``out_specs`` are those inputs' ``in_specs``).
    Cotangents of a variable used several times are summed with ``add``; a linear
    input that nothing uses gets zeros. An output mapped over an axis it does not
    vary over (each device returned the same block) has its cotangent ``psum``-ed
    over that axis. Non-linear equations are copied forward; an output that does
    not depend on the linear inputs contributes nothing.

    ``variance=True`` uses seed 004's rules: the result type-checks and can be
    transposed again. ``variance=False`` is the old scheme: every value is treated
    as varying, the cotangent of an output unmapped over axes is divided by their
    size, ``psum`` transposes to ``psum`` and gathers to ``psum_scatter``, and the
    cotangent of an input unmapped over axes is ``psum``-ed over them.
    """
    linear = tuple(linear)
    body = f.body
    if len(set(linear)) != len(linear) or any(not 0 <= i < len(body.inputs) for i in linear):
        raise RuleError(f"linear positions {linear} must be distinct input positions of 0..{len(body.inputs) - 1}")
    if variance:
        if not f.check_variance:
            raise VarianceError("this program was built without variance checking (the old scheme); "
                                "transpose it with variance=False")
        f = insert_pbroadcasts(f)
        body = f.body
    typecheck(f)
    axes, order = f.axes, tuple(f.axes)
    lin = {body.inputs[i].name for i in linear}
    linear_eqns, forward_eqns = [], []
    for e in body.eqns:
        if any(isinstance(a, Var) and a.name in lin for a in e.inputs):
            linear_eqns.append(e)
            lin.update(o.name for o in e.outputs)
        else:
            forward_eqns.append(e)
    b = _Builder(axes, variance)

    def retype(t: VarType) -> VarType:
        return t if variance else t.with_varies(axes)

    env: dict[str, Var] = {}  # primal non-linear variable -> its copy
    residual_pos = [i for i in range(len(body.inputs)) if i not in linear]
    new_inputs = []
    for i in residual_pos:
        v = body.inputs[i]
        env[v.name] = b.fresh(retype(v.type), v.name)
        new_inputs.append(env[v.name])
    ct_inputs = []
    for o, spec in zip(body.outputs, f.out_specs):
        ct_inputs.append(b.fresh(_input_type(axes, o.type, spec, variance), f"{o.name}bar"))
    new_inputs += ct_inputs

    def mapped(a):
        return env[a.name] if isinstance(a, Var) and a.name in env else a

    for e in forward_eqns:  # the non-linear part runs forward
        env[e.outputs[0].name] = b.emit(e.prim, [mapped(a) for a in e.inputs], e.params, hint=e.outputs[0].name)

    cts: dict[str, Var] = {}

    def accumulate(name: str, ct: Var) -> None:
        cts[name] = b.emit("add", (cts[name], ct)) if name in cts else ct

    for o, spec, ct in zip(body.outputs, f.out_specs, ct_inputs):
        if o.name not in lin:
            continue
        if variance:
            extra = tuple(a for a in order if a in spec.axes and a not in o.type.varies)
            if extra:  # the out_spec broadcast an invariant value: its transpose sums
                ct = b.emit("psum", (ct,), {"axis_name": extra})
        else:
            unmapped = [a for a in order if a not in spec.axes]
            if unmapped:
                ct = b.emit("div", (ct, math.prod(axes[a] for a in unmapped)))
        accumulate(o.name, ct)

    for e in reversed(linear_eqns):
        ct = cts.pop(e.outputs[0].name, None)
        if ct is None:
            continue  # nothing downstream: a zero cotangent
        rule = _rule(e.prim).transpose if variance or e.prim not in PRIMITIVES else _wasteful_transpose(e.prim)
        flags = [isinstance(a, Var) and a.name in lin for a in e.inputs]
        where = _eqn_text(e, order, typed=False)
        try:
            contributions = rule(b, e, ct, flags, [mapped(a) for a in e.inputs])
        except (RuleError, VarianceError) as err:
            raise err.located(f"transposing {where}") from None
        for k, c in contributions:
            accumulate(e.inputs[k].name, c)

    outputs = []
    for i in linear:
        x, spec = body.inputs[i], f.in_specs[i]
        ct = cts.get(x.name)
        if ct is None:
            ct = b.emit("zeros", (), {"shape": x.type.shape, "dtype": x.type.dtype})
            lacking = tuple(a for a in order if a in x.type.varies)
            if variance and lacking:
                ct = b.emit("pbroadcast", (ct,), {"axis_name": lacking})
        elif not variance:
            unmapped = tuple(a for a in order if a not in spec.axes)
            if unmapped:
                ct = b.emit("psum", (ct,), {"axis_name": unmapped})
        outputs.append(ct)
    result = Shmap(axes, Body(new_inputs, outputs, _prune(b.eqns, outputs)),
                   tuple(f.in_specs[i] for i in residual_pos) + f.out_specs,
                   tuple(f.in_specs[i] for i in linear), variance)
    try:
        typecheck(result)
    except (VarianceError, RuleError) as err:
        raise InternalError(f"the transpose of a well-typed program does not type-check: {err}\n{result}") from None
    return result


def linearize(f: Shmap, wrt: Sequence[int]) -> Shmap:
    """The tangent program of ``f`` with respect to its inputs at positions ``wrt``.

    The result takes all of ``f``'s inputs, then one tangent per ``wrt`` input
    (same spec, named ``<x>dot``), and returns one tangent per output; it is
    linear in the tangents, so :func:`transpose` with respect to them gives the
    vector-Jacobian product (a gradient). Products (``mul``, ``dot``) follow the
    product rule; ``div`` needs a constant denominator.
    """
    wrt = tuple(wrt)
    f = insert_pbroadcasts(f)
    typecheck(f)
    body = f.body
    b = _Builder(f.axes, f.check_variance, (v.name for v in _all_vars(body)))
    tangents: dict[str, Var] = {}
    tan_inputs = []
    for i in wrt:
        x = body.inputs[i]
        tangents[x.name] = b.fresh(x.type, f"{x.name}dot")
        tan_inputs.append(tangents[x.name])
    for e in body.eqns:
        b.eqns.append(e)
        tans = [tangents.get(a.name) if isinstance(a, Var) else None for a in e.inputs]
        if any(t is not None for t in tans):
            jvp = _rule(e.prim).jvp
            tangents[e.outputs[0].name] = jvp(b, e, e.inputs, tans)
    outputs = []
    for o in body.outputs:
        t = tangents.get(o.name)
        if t is None:
            t = b.emit("zeros", (), {"shape": o.type.shape, "dtype": o.type.dtype})
            lacking = tuple(a for a in f.axes if a in o.type.varies)
            if lacking and f.check_variance:
                t = b.emit("pbroadcast", (t,), {"axis_name": lacking})
        outputs.append(t)
    result = Shmap(f.axes, Body(body.inputs + tuple(tan_inputs), outputs, _prune(b.eqns, outputs)),
                   f.in_specs + tuple(f.in_specs[i] for i in wrt), f.out_specs, f.check_variance)
    typecheck(result)
    return result


# ---------------------------------------------------------------------------
# Running on every device, counting communication
# ---------------------------------------------------------------------------
def _devices(axes: Frozen) -> list[dict[str, int]]:
    """Device coordinates in row-major order over the mesh axes."""
    return [dict(zip(axes, c)) for c in itertools.product(*(range(n) for n in axes.values()))]


def _groups(axes: Frozen, devices, group_axes) -> list[tuple[list[int], int]]:
    """For each device: the devices that share its coordinates off ``group_axes``, and its index among them."""
    members: dict[tuple, list[tuple[int, int]]] = {}
    index = []
    for d, c in enumerate(devices):
        key = tuple(c[a] for a in axes if a not in group_axes)
        k = 0
        for a in group_axes:
            k = k * axes[a] + c[a]
        members.setdefault(key, []).append((k, d))
        index.append((key, k))
    ordered = {key: [d for _, d in sorted(ms)] for key, ms in members.items()}
    return [(ordered[key], k) for key, k in index]


def _block(spec: P, coords: dict[str, int], axes: Frozen, local_shape) -> tuple[slice, ...]:
    out = []
    for k, n in enumerate(local_shape):
        j = 0
        for a in spec.dim_axes(k):
            j = j * axes[a] + coords[a]
        out.append(slice(j * n, (j + 1) * n))
    return tuple(out)


def _global_shape(spec: P, axes: Frozen, local_shape) -> tuple[int, ...]:
    return tuple(n * math.prod(axes[a] for a in spec.dim_axes(k)) for k, n in enumerate(local_shape))


def run(f: Shmap, *args) -> tuple[np.ndarray, ...]:
    """Run ``f`` on every device with numpy; global arrays in, global arrays out (a tuple).

    Each argument is cut into blocks by its ``in_spec``; the body runs on every
    device (in the arrays' own dtype); outputs are put together by ``out_specs``.
    Along an axis an ``out_spec`` omits, every device's copy must agree (to 1e-12
    relative) and one is kept; otherwise :class:`VarianceError`.

    >>> f = shmap(lambda x: psum(x, "i"), P("i"), P(), mesh={"i": 4}, in_types=["f32[2]"])
    >>> run(f, np.arange(8.0))
    (array([12., 16.]),)
    """
    body, axes = f.body, f.axes
    if len(args) != len(body.inputs):
        raise RuleError(f"the shmap takes {len(body.inputs)} arguments, got {len(args)}")
    devices = _devices(axes)
    env: dict[str, list] = {}
    for k, (v, spec, arg) in enumerate(zip(body.inputs, f.in_specs, args)):
        arg = np.asarray(arg)
        want = _global_shape(spec, axes, v.type.shape)
        if arg.shape != want:
            raise ShardingError(f"argument {k} ({v.name}) has shape {arg.shape}, but its per-device type "
                                f"{v.type} split by {spec!r} needs the global shape {want}")
        env[v.name] = [arg[_block(spec, c, axes, v.type.shape)] for c in devices]
    for e in body.eqns:
        rule = _rule(e.prim)
        values = [env[a.name] if isinstance(a, Var) else [a] * len(devices) for a in e.inputs]
        if e.prim in PRIMITIVES:
            groups = _groups(axes, devices, e.params["axis_name"])
            out = rule.impl(values[0] if values else [None] * len(devices), groups, e.params)
        else:
            out = [np.asarray(rule.impl(*(vs[d] for vs in values), **e.params)) for d in range(len(devices))]
        env[e.outputs[0].name] = out
    return tuple(_assemble(k, v, spec, env[v.name], axes, devices) for k, (v, spec)
                 in enumerate(zip(body.outputs, f.out_specs)))


def _assemble(k: int, v: Var, spec: P, values, axes: Frozen, devices) -> np.ndarray:
    out = np.zeros(_global_shape(spec, axes, v.type.shape), dtype=np.result_type(*values))
    first: dict[tuple, int] = {}
    for d, c in enumerate(devices):
        block = _block(spec, c, axes, v.type.shape)
        key = tuple((s.start, s.stop) for s in block)
        if key not in first:
            first[key] = d
            out[block] = values[d]
            continue
        a, b = np.asarray(values[first[key]], dtype=float), np.asarray(values[d], dtype=float)
        scale = max(np.max(np.abs(a), initial=0.0), np.max(np.abs(b), initial=0.0), 1e-300)
        if np.max(np.abs(a - b), initial=0.0) > 1e-12 * scale:
            differ = [x for x in axes if devices[first[key]][x] != c[x]]
            raise VarianceError(
                f"output {k} ({v.name}) is not replicated over {', '.join(map(repr, differ))}: out_specs {spec!r} "
                f"keeps one copy, but devices {first[key]} and {d} hold values that differ by up to "
                f"{np.max(np.abs(a - b)):.3g}; psum it or name the axis in out_specs")
    return out


def collectives(f: Shmap) -> Counter:
    """How many communicating collectives of each kind (``AllReduce`` ...) the body lowers to."""
    return Counter(primitive(e.prim).lowering for e in f.body.eqns
                   if e.prim in PRIMITIVES and primitive(e.prim).lowering)


def comm_bytes_per_device(f: Shmap, itemsize: int = 4) -> int:
    """Bytes each device receives running ``f``, by the ring formulas of :mod:`costmodels.collectives`.

    >>> f = shmap(lambda x: psum(x, "i"), P("i"), P(), mesh={"i": 4}, in_types=["f32[8]"])
    >>> comm_bytes_per_device(f)  # AllReduce of 8 floats on 4 devices: 2*(4-1) chunks of 2*4 bytes
    48
    """
    link = Link(1.0, 0.0)  # only the byte counts are read
    total = 0
    for e in f.body.eqns:
        prim = PRIMITIVES.get(e.prim)
        if prim is None or prim.lowering is None:
            continue
        p = _group_size(e.params, f.axes)
        operand, out = e.inputs[0].type, e.outputs[0].type
        if prim.lowering == "AllReduce":
            cost = all_reduce_cost(p, chunk_bytes(operand.size, p, itemsize), link)
        elif prim.lowering == "AllGather":
            cost = all_gather_cost(p, operand.size * itemsize, link)
        elif prim.lowering == "ReduceScatter":
            cost = reduce_scatter_cost(p, out.size * itemsize, link)
        elif prim.lowering == "AllToAll":
            cost = all_to_all_cost(p, chunk_bytes(operand.size, p, itemsize), link)
        else:  # CollectivePermute: a device reached by a pair receives one whole buffer
            moved = any(src != dst for src, dst in e.params["perm"])
            cost = collective_permute_cost(operand.size * itemsize if moved else 0, link)
        total += cost.bytes_per_device
    return total
