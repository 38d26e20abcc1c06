"""A jaxpr walked into a :class:`~planner.frontends.trace.Trace`, one primitive at a time.

:data:`PRIMITIVES` is the one table from JAX primitive names to what they become; a primitive
missing from it is a :class:`~planner.errors.ModelError` naming the primitive and the user's
source line (``jax.extend.source_info_util.summarize``). Call-like primitives (``jit``,
``pjit``, ``custom_jvp_call``, ``custom_vjp_call``, ``closed_call``, ``remat``) are inlined: their
body is walked in place (a custom JVP or VJP rule is not kept: the graph's gradients are the
catalogue's VJPs of the body, which compute the true derivative of what it computes).

Mappings (operands are values, literals become ``const`` tensors):

- ``add``, ``sub``, ``mul``, ``div``, ``neg``, ``exp``, ``tanh``; ``logistic`` -> ``sigmoid``;
  ``max`` -> ``relu`` when one operand is the constant 0, else ``maximum``. JAX's binary
  primitives broadcast size-1 and scalar operands as numpy does, and so do ours;
- ``dot_general`` -> ``matmul`` (with ``transpose_a`` / ``transpose_b``) where it fits, else an
  ``einsum`` whose equation spells the dimension numbers; a ``preferred_element_type`` other than
  the operands' dtype adds a ``cast``;
- ``reduce_sum`` -> ``sum``, ``reduce_max`` -> ``max``; ``reshape``, ``squeeze`` -> ``reshape``;
  ``transpose``; ``convert_element_type`` -> ``cast`` (nothing when only weak typing changes);
  ``concatenate`` -> ``concat``; ``slice`` without strides; ``copy`` is the operand;
- ``broadcast_in_dim``: a ``reshape`` where it only inserts size-1 dimensions, else an
  internal ``broadcast`` that an elementwise reader absorbs (numpy broadcasting) or that is
  materialised as ``add`` of zeros of the broadcast shape;
- ``gather`` of whole rows of a table by a trailing index vector (``jnp.take(t, i, axis=0)``) ->
  ``gather`` (indices in range; JAX's clip and fill modes agree with it there);
- ``integer_pow``, ``square``, ``sqrt``, ``rsqrt``, ``stop_gradient`` become internal nodes for
  :mod:`planner.frontends.fusion`; so do ``lt`` and the ``select_n(i < 0, i, i + n)`` with which
  ``t[i]`` wraps negative indices (kept only where a ``gather`` reads it: its indices are in range);
- a primitive of :data:`FOLDABLE` whose operands are all constants is computed at trace time
  (``jnp.var`` divides by ``N - ddof`` and chooses NaN when that is not positive).
"""

from __future__ import annotations

import os
import string
from typing import Any, Callable

import numpy as np

from planner.errors import ModelError
from planner.frontends.trace import Trace

_DTYPES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "i32", "int64": "i64", "bool": "bool"}
_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
          "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
          "remat": "jaxpr", "checkpoint": "jaxpr"}


def where(eqn, outer: str = "") -> str:
    """The user's source line of ``eqn``, ``file:line:column (function)``, file relative to the cwd;
    ``outer`` (the line of the call being inlined) when JAX records none inside a library function."""
    from jax.extend.source_info_util import summarize

    text = summarize(eqn.source_info) or outer
    path, sep, rest = text.partition(":")
    if sep and os.path.isabs(path):
        rel = os.path.relpath(path)
        text = f"{rel if not rel.startswith('..') else path}:{rest}"
    return text


def dtype_of(aval, what: str) -> str:
    """The catalogue dtype of a JAX abstract value; ModelError for one the catalogue lacks."""
    name = np.dtype(aval.dtype).name
    if name not in _DTYPES:
        raise ModelError(f"{what} has dtype {name}, which shardplan's models do not have "
                         f"(dtypes: {', '.join(_DTYPES)})")
    return _DTYPES[name]


class Walker:
    """Walks one (closed) jaxpr into ``program``; ``env`` maps jaxpr variables to value names."""

    def __init__(self, program: Trace):
        self.p = program
        self.outer = ""  # the source line of the call being inlined

    # -- values --------------------------------------------------------------------------
    def read(self, env: dict, atom, eqn=None) -> str:
        from jax.extend.core import Literal

        if isinstance(atom, Literal):
            what = f"a literal at {self.where(eqn)}" if eqn is not None else "a literal"
            return self.p.const(_scalar(atom.val, what), tuple(atom.aval.shape), dtype_of(atom.aval, what))
        return env[atom]

    def constant(self, array, what: str) -> str:
        """A captured array: a ``const`` when every element is equal, else an error (the format has no arrays)."""
        arr = np.asarray(array)
        dtype = dtype_of(arr, what)
        flat = arr.reshape(-1)
        if flat.size and not np.all(flat == flat[0]):
            raise ModelError(f"{what} is a constant array of shape {list(arr.shape)} with different elements; "
                             "a model's constants hold one value each: pass the array as an argument instead")
        return self.p.const(float(flat[0]) if flat.size else 0.0, arr.shape, dtype)

    # -- walking -------------------------------------------------------------------------
    def closed(self, closed_jaxpr, args: list[str]) -> list[str]:
        """Walk a ClosedJaxpr on argument values; returns its result values."""
        consts = [self.constant(c, f"a constant captured by the function ({type(c).__name__})")
                  for c in closed_jaxpr.consts]
        return self.jaxpr(closed_jaxpr.jaxpr, consts, args)

    def jaxpr(self, jaxpr, consts: list[str], args: list[str]) -> list[str]:
        env: dict = dict(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))
        for eqn in jaxpr.eqns:
            ins = [self.read(env, a, eqn) for a in eqn.invars]
            name = eqn.primitive.name
            if name in _CALLS:
                outs = self.call(eqn, ins)
            elif name in FOLDABLE and all(self.p.const_value(v) is not None for v in ins):
                outs = [self.fold(eqn, ins)]
            else:
                handler = PRIMITIVES.get(name)
                if handler is None:
                    raise ModelError(
                        f"JAX primitive {name!r} has no op in shardplan's catalogue (supported: "
                        f"{', '.join(sorted([*PRIMITIVES, *_CALLS]))}); rewrite that line with supported "
                        "operations or leave it outside the traced function", where=self.where(eqn))
                outs = [handler(self, eqn, ins)]
            for var, value in zip(eqn.outvars, outs):
                env[var] = value
        return [self.read(env, v) for v in jaxpr.outvars]

    def call(self, eqn, ins: list[str]) -> list[str]:
        body = eqn.params.get(_CALLS[eqn.primitive.name])
        if body is None:
            raise ModelError(f"cannot inline JAX primitive {eqn.primitive.name!r}: it carries no body",
                             where=self.where(eqn))
        saved, self.outer = self.outer, self.where(eqn)
        try:
            if hasattr(body, "jaxpr") and hasattr(body, "consts"):
                return self.closed(body, ins)
            return self.jaxpr(body, [], ins)
        finally:
            self.outer = saved

    def where(self, eqn) -> str:
        return where(eqn, self.outer)

    def fold(self, eqn, ins: list[str]) -> str:
        """A primitive on constants computed now: the constant it gives (JAX's dtype rules, float64 inside)."""
        aval = eqn.outvars[0].aval
        args = [np.full(self.shape(v), self.p.const_value(v)) for v in ins]
        with np.errstate(all="ignore"):
            value = np.asarray(FOLDABLE[eqn.primitive.name](args, eqn.params))
        dtype = dtype_of(aval, f"the result of {eqn.primitive.name}")
        if dtype in ("i32", "i64"):
            value = np.trunc(value)
        return self.p.const(float(value.reshape(-1)[0]) if value.size else 0.0, tuple(aval.shape), dtype)

    # -- emitting ------------------------------------------------------------------------
    def emit(self, eqn, op: str, ins, /, **attrs) -> str:
        aval = eqn.outvars[0].aval
        return self.p.add(op, ins, tuple(aval.shape), dtype_of(aval, f"the result of {eqn.primitive.name}"),
                          where=self.where(eqn), primitive=eqn.primitive.name, **attrs)

    def shape(self, value: str) -> tuple[int, ...]:
        return self.p.values[value].shape


def _scalar(value, what: str) -> float:
    arr = np.asarray(value)
    if arr.size != 1:
        raise ModelError(f"{what} is not a scalar")
    v = arr.reshape(-1)[0]
    return bool(v) if arr.dtype == bool else float(v)


def _simple(op: str) -> Callable:
    return lambda w, eqn, ins: w.emit(eqn, op, ins)


def _max(w: Walker, eqn, ins) -> str:
    out = tuple(eqn.outvars[0].aval.shape)
    for i in (0, 1):
        if w.p.const_value(ins[i]) == 0.0 and w.shape(ins[1 - i]) == out:
            return w.emit(eqn, "relu", [ins[1 - i]])
    return w.emit(eqn, "maximum", ins)


def _dot_general(w: Walker, eqn, ins) -> str:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = map(tuple, (lc, rc, lb, rb))
    a, b = w.shape(ins[0]), w.shape(ins[1])
    attrs = _as_matmul(len(a), len(b), lc, rc, lb, rb)
    aval = eqn.outvars[0].aval
    in_dtype = w.p.values[ins[0]].dtype
    out_dtype = dtype_of(aval, "the result of dot_general")
    op, attrs = ("matmul", attrs) if attrs is not None else ("einsum", {"equation": _equation(len(a), len(b), lc, rc,
                                                                                               lb, rb)})
    if out_dtype == in_dtype:
        return w.emit(eqn, op, ins, **attrs)
    mid = w.p.add(op, ins, tuple(aval.shape), in_dtype, where=w.where(eqn), primitive="dot_general", **attrs)
    return w.emit(eqn, "cast", [mid], dtype=out_dtype)


def _as_matmul(p: int, q: int, lc, rc, lb, rb) -> dict | None:
    """``transpose_a`` / ``transpose_b`` when the dot_general is a (batched) matmul, else None."""
    if len(lc) != 1:
        return None
    nb = len(lb)
    if nb:
        if lb != rb or lb != tuple(range(nb)) or p != nb + 2 or q != nb + 2:
            return None
    elif q != 2 or p < 2:
        return None
    if lc[0] not in (p - 1, p - 2) or rc[0] not in (q - 2, q - 1):
        return None
    return {"transpose_a": lc[0] == p - 2, "transpose_b": rc[0] == q - 1}


def _equation(p: int, q: int, lc, rc, lb, rb) -> str:
    """The einsum spelling of dot_general's dimension numbers: batch, lhs free, rhs free."""
    letters = iter(string.ascii_letters)
    left = [next(letters) for _ in range(p)]
    right = [""] * q
    for i, j in (*zip(lb, rb), *zip(lc, rc)):
        right[j] = left[i]
    right = [c or next(letters) for c in right]
    out = [left[i] for i in lb] + [left[i] for i in range(p) if i not in lb and i not in lc] + \
          [right[j] for j in range(q) if j not in rb and j not in rc]
    return f"{''.join(left)},{''.join(right)}->{''.join(out)}"


def _reduce(op: str) -> Callable:
    def handler(w, eqn, ins):
        return w.emit(eqn, op, ins, axes=tuple(int(a) for a in eqn.params["axes"]), keepdims=False)

    return handler


def _reshape(w: Walker, eqn, ins) -> str:
    if eqn.primitive.name == "reshape" and eqn.params.get("dimensions") is not None:
        raise ModelError("reshape with a dimensions permutation has no op in shardplan's catalogue; transpose first",
                         where=w.where(eqn))
    out = tuple(eqn.outvars[0].aval.shape)
    return ins[0] if w.shape(ins[0]) == out else w.emit(eqn, "reshape", ins, shape=out)


def _broadcast_in_dim(w: Walker, eqn, ins) -> str:
    out = tuple(int(d) for d in eqn.params["shape"])
    dims = tuple(int(d) for d in eqn.params["broadcast_dimensions"])
    src = w.shape(ins[0])
    if src == out:
        return ins[0]
    const = w.p.const_value(ins[0])
    if const is not None:  # a constant broadcast is the constant of the new shape
        return w.p.const(const, out, w.p.values[ins[0]].dtype)
    kept = [1] * len(out)
    for i, d in enumerate(dims):
        kept[d] = src[i]
    kept = tuple(kept)
    dtype = w.p.values[ins[0]].dtype
    mid = ins[0] if kept == src else w.p.add("reshape", ins, kept, dtype, where=w.where(eqn),
                                             primitive="broadcast_in_dim", shape=kept)
    return mid if kept == out else w.emit(eqn, "broadcast", [mid], shape=out)


def _transpose(w: Walker, eqn, ins) -> str:
    perm = tuple(int(d) for d in eqn.params["permutation"])
    return ins[0] if perm == tuple(range(len(perm))) else w.emit(eqn, "transpose", ins, perm=perm)


def _convert(w: Walker, eqn, ins) -> str:
    target = dtype_of(eqn.outvars[0].aval, "the result of convert_element_type")
    if target == w.p.values[ins[0]].dtype:
        return ins[0]
    const = w.p.const_value(ins[0])
    if const is not None:
        return w.p.const(const, w.shape(ins[0]), target)
    return w.emit(eqn, "cast", ins, dtype=target)


def _concatenate(w: Walker, eqn, ins) -> str:
    return w.emit(eqn, "concat", ins, axis=int(eqn.params["dimension"]))


def _slice(w: Walker, eqn, ins) -> str:
    strides = eqn.params.get("strides")
    if strides is not None and any(int(s) != 1 for s in strides):
        raise ModelError(f"slice with strides {tuple(strides)} has no op in shardplan's catalogue (slices are "
                         "contiguous)", where=w.where(eqn))
    return w.emit(eqn, "slice", ins, starts=tuple(int(s) for s in eqn.params["start_indices"]),
                  stops=tuple(int(s) for s in eqn.params["limit_indices"]))


def _gather(w: Walker, eqn, ins) -> str:
    dn = eqn.params["dimension_numbers"]
    table, idx = w.shape(ins[0]), w.shape(ins[1])
    rows = (tuple(dn.collapsed_slice_dims) == (0,) and tuple(dn.start_index_map) == (0,)
            and not tuple(getattr(dn, "operand_batching_dims", ()))
            and tuple(eqn.params["slice_sizes"]) == (1, *table[1:])
            and len(idx) >= 1 and idx[-1] == 1
            and tuple(dn.offset_dims) == tuple(range(len(idx) - 1, len(idx) - 1 + len(table) - 1)))
    if not rows:
        raise ModelError("gather other than whole rows of a table by an index array (jnp.take(table, indices, "
                         f"axis=0)) has no op in shardplan's catalogue; got {dn}", where=w.where(eqn))
    batch = idx[:-1]
    producer = w.p.producer(ins[1])
    if producer is not None and producer.op == "reshape" and w.shape(producer.inputs[0]) == batch:
        indices = producer.inputs[0]  # the index vector dimension jnp added
    else:
        indices = w.p.add("reshape", [ins[1]], batch, w.p.values[ins[1]].dtype, where=w.where(eqn),
                          primitive="gather", shape=batch)
    return w.emit(eqn, "gather", [ins[0], indices])


def _select_n(w: Walker, eqn, ins) -> str:
    """A constant choice; or ``jnp``'s index wrap ``select_n(i < 0, i, i + n)`` (``t[i]``), which is ``i`` for a
    gather's in-range indices."""
    choice = w.p.const_value(ins[0])
    if choice is not None:  # a choice made by constants (jnp.var's where(N - ddof > 0, ...))
        return ins[1 + int(choice)]
    test = w.p.producer(ins[0])
    if (len(ins) == 3 and test is not None and test.op == "lt" and test.inputs[0] == ins[1]
            and w.p.const_value(test.inputs[1]) == 0.0):
        shifted = w.p.producer(ins[2])
        if shifted is not None and shifted.op == "add" and ins[1] in shifted.inputs:
            return w.emit(eqn, "index_wrap", [ins[1]])
    raise ModelError("JAX primitive 'select_n' (jnp.where, lax.select) has no op in shardplan's catalogue; only "
                     "its choices between constants and the index wrap of t[i] are supported", where=w.where(eqn))


def _integer_pow(w: Walker, eqn, ins) -> str:
    return w.emit(eqn, "integer_pow", ins, y=int(eqn.params["y"]))


PRIMITIVES: dict[str, Callable[[Walker, Any, list[str]], str]] = {
    "add": _simple("add"),
    "broadcast_in_dim": _broadcast_in_dim,
    "concatenate": _concatenate,
    "convert_element_type": _convert,
    "copy": lambda w, eqn, ins: ins[0],
    "copy_p": lambda w, eqn, ins: ins[0],
    "div": _simple("div"),
    "dot_general": _dot_general,
    "exp": _simple("exp"),
    "gather": _gather,
    "integer_pow": _integer_pow,
    "logistic": _simple("sigmoid"),
    "lt": _simple("lt"),
    "max": _max,
    "mul": _simple("mul"),
    "neg": _simple("neg"),
    "reduce_max": _reduce("max"),
    "reduce_sum": _reduce("sum"),
    "reshape": _reshape,
    "rsqrt": _simple("rsqrt"),
    "select_n": _select_n,
    "slice": _slice,
    "sqrt": _simple("sqrt"),
    "square": _simple("square"),
    "squeeze": _reshape,
    "stop_gradient": _simple("stop_gradient"),
    "sub": _simple("sub"),
    "tanh": _simple("tanh"),
    "transpose": _transpose,
}



def _rsqrt(x):
    return 1.0 / np.sqrt(x)


#: Primitives computed at trace time when every operand is a constant (``jnp.var``'s ``N - ddof``, its
#: ``where(N - ddof > 0, ..., nan)``): ``f(operand arrays, params) -> array``.
FOLDABLE: dict[str, Callable[[list, dict], Any]] = {
    "add": lambda a, p: a[0] + a[1],
    "convert_element_type": lambda a, p: a[0],
    "div": lambda a, p: a[0] / a[1],
    "eq": lambda a, p: a[0] == a[1],
    "exp": lambda a, p: np.exp(a[0]),
    "ge": lambda a, p: a[0] >= a[1],
    "gt": lambda a, p: a[0] > a[1],
    "integer_pow": lambda a, p: a[0] ** p["y"],
    "le": lambda a, p: a[0] <= a[1],
    "lt": lambda a, p: a[0] < a[1],
    "max": lambda a, p: np.maximum(a[0], a[1]),
    "mul": lambda a, p: a[0] * a[1],
    "ne": lambda a, p: a[0] != a[1],
    "neg": lambda a, p: -a[0],
    "rsqrt": lambda a, p: _rsqrt(a[0]),
    "select_n": lambda a, p: np.choose(a[0].astype(int), a[1:]),
    "sqrt": lambda a, p: np.sqrt(a[0]),
    "square": lambda a, p: a[0] * a[0],
    "sub": lambda a, p: a[0] - a[1],
    "tanh": lambda a, p: np.tanh(a[0]),
}
