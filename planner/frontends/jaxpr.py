"""A jaxpr walked into a :class:`~planner.frontends.trace.Trace`, one primitive at a time.

:data:`PRIMITIVES` is the one table from JAX primitive names to what they become; a primitive
missing from it is a :class:`~planner.errors.ModelError` naming the primitive and the user's
source line (``jax.extend.source_info_util.summarize``). Call-like primitives (``jit``,
``pjit``, ``custom_jvp_call``, ``custom_vjp_call``, ``closed_call``, ``remat``) are inlined: their
body is walked in place (a custom JVP or VJP rule is not kept: the graph's gradients are the
catalogue's VJPs of the body, which compute the true derivative of what it computes; a remat's
policy is not kept either: what a plan recomputes is the pipeline level's ``recompute``). A jit's
``in_shardings`` / ``out_shardings`` are kept (below).

Mappings (operands are values, literals become ``const`` tensors):

- ``add``, ``sub``, ``mul``, ``div``, ``rem``, ``pow``, ``neg``, ``exp``, ``expm1``, ``log1p``, ``tanh``, ``abs``,
  ``sqrt``, ``rsqrt``, ``sin``, ``cos``, ``sign``, ``floor``, ``ceil``; ``round`` to nearest even (``jnp.round``) ->
  ``round``; ``logistic`` -> ``sigmoid``;
  ``max`` -> ``relu`` when one operand is the constant 0, else ``maximum``; ``min`` -> ``minimum``. JAX's binary
  primitives broadcast size-1 and scalar operands as numpy does, and so do ours;
- ``dot_general`` -> ``matmul`` (with ``transpose_a`` / ``transpose_b``) where it fits, else an
  ``einsum`` whose equation spells the dimension numbers; a ``preferred_element_type`` other than
  the operands' dtype adds a ``cast``;
- ``reduce_sum`` -> ``sum``, ``reduce_max`` -> ``max``, ``reduce_min`` -> ``min``, ``argmax``, ``argmin``, ``cumsum``;
  ``top_k`` -> two ``top_k`` ops (its values and its indices); ``sort`` by one key with at most one payload
  (``jnp.sort``, ``jnp.argsort``) -> a ``sort`` op per result;
  ``reshape``, ``squeeze`` -> ``reshape``;
  ``transpose``; ``rev`` (``jnp.flip``) -> ``flip``; ``convert_element_type`` -> ``cast`` (nothing when only weak typing changes);
  ``concatenate`` -> ``concat`` (of ``x[..., k:]`` and ``x[..., :k]``: ``roll``, as ``jnp.roll`` is written);
  ``dynamic_slice`` and ``dynamic_update_slice`` (their constant starts in ``starts``, the others operands; a
  window at constant starts only is a ``slice``); ``slice`` without strides (cutting several dimensions: a
  ``slice`` per dimension, in order); ``split`` -> a ``slice`` per piece; ``copy``
  is the operand; ``stack`` -> a size-1 ``reshape`` of each operand and a ``concat``, ``tile`` -> ``reshape``,
  broadcast and ``reshape``, as JAX lowers them; ``pad`` by a constant at the edges -> ``pad`` (a ``slice`` of a
  ``pad`` along its padded dimension, its only reader, folds into it: ``jnp.pad(x, ((0, 0), (1, 0)))[:, :-1]`` is
  one shift, as XLA simplifies it); ``iota``;
- ``broadcast_in_dim``: a ``reshape`` where it only inserts size-1 dimensions, else an
  internal ``broadcast`` that an elementwise reader absorbs (numpy broadcasting) or that is
  materialised as ``add`` of zeros of the broadcast shape;
- ``gather`` of whole slices of a table along one axis by a trailing index vector (``jnp.take(t, i, axis)``,
  ``t[:, i]``) -> ``gather``; of one element per index along an axis, the other dimensions batched (``jnp.take_along_axis``) ->
  ``take_along_axis`` (indices in range; JAX's clip and fill modes agree with both there); one element per row of a
  matrix picked by ``x[jnp.arange(n), labels]`` -> ``take_along_axis`` of the labels along the columns, reshaped;
- ``integer_pow`` and ``square`` become internal nodes for
  :mod:`planner.frontends.fusion` (``sqrt`` and ``rsqrt`` are catalogue ops it may fold into a norm); so does
  the ``select_n(i < 0, i, i + n)`` with which ``t[i]`` wraps negative indices (the indices themselves where a
  ``gather`` reads it: they are in range; a ``select`` elsewhere);
- ``eq``, ``ne``, ``lt``, ``le``, ``gt``, ``ge`` -> ``comparison`` (its ``direction``); ``is_finite``; ``and``,
  ``or``, ``xor`` of bool masks -> ``logical`` (its ``operation``), ``not`` -> ``logical_not`` (of integers, bitwise,
  refused);
  ``select_n(p, a, b)`` of a bool ``p`` (``jnp.where(p, b, a)``, ``lax.select``) -> ``select(p, b, a)``; an
  integer ``select_n`` of more cases is refused;
- a primitive of :data:`FOLDABLE` whose operands are all constants is computed at trace time
  (``jnp.var`` divides by ``N - ddof`` and chooses NaN when that is not positive);
- ``add_any`` (``jax.grad``'s sum of cotangents) -> ``add``.

Shardings the program states are read, never dropped (:meth:`Walker.sharded`):
``sharding_constraint``, ``reshard``, ``device_put`` and a nested jit's ``in_shardings`` / ``out_shardings`` ->
``sharding_constraint`` ops; any primitive's ``out_sharding`` / ``sharding`` parameter -> the
``out_sharding`` of the op making its result; ``shard_alike`` -> a ``shard_as`` group;
``shard_map`` -> a manual region whose body holds ``psum`` (``psum_invariant``), ``pmax``, ``pmin``,
``pbroadcast`` (``pvary``), ``all_gather``, ``psum_scatter`` (``reduce_scatter``), ``all_to_all``,
``ppermute`` and ``axis_index``. Every sharding must be on one mesh (the trace's).

A handler that cannot express its primitive raises; the walker turns that into a ``refused``
node, an error only if an output needs its value.
"""

from __future__ import annotations

import os
import string
from typing import Any, Callable

import numpy as np

from graphs.ops.pointwise import COMPARISONS
from graphs.ops.registry import get_op
from planner.errors import ModelError
from planner.frontends.trace import Region, Trace

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


def partition_spec_text(spec, rank: int, what: str, open_dims=(), open_all: bool = False,
                        replicated=()) -> str:
    """Shardy text for a ``PartitionSpec`` of a rank-``rank`` array (padded with replicated dimensions);
    ``open_dims`` and ``PartitionSpec.UNCONSTRAINED`` entries are open (``{?}``), and with ``open_all`` every
    dimension is (``{"x", ?}``: a shard_map's specs where some mesh axes stay free); ``replicated`` axes are
    listed as ``replicated={...}``, and its ``unreduced`` axes as ``unreduced={...}`` (a pending sum)."""
    if getattr(spec, "reduced", None):
        raise ModelError(f"{what}: PartitionSpec {spec} has reduced axes, which the frontend does not read (a model's "
                         "sharding has pending sums, unreduced={...}, but no reduced axes); leave them out")
    entries = list(getattr(spec, "partitions", spec))  # iterating a spec with unreduced axes is refused by JAX
    if len(entries) > rank:
        raise ModelError(f"{what}: PartitionSpec {spec} has {len(entries)} entries for a rank-{rank} array")
    dims = []
    for i, e in enumerate(entries + [None] * (rank - len(entries))):
        if i in open_dims or (e is not None and not isinstance(e, (str, tuple, list))):  # UNCONSTRAINED
            dims.append("{?}")
            continue
        names = [] if e is None else [e] if isinstance(e, str) else list(e)
        dims.append("{" + ", ".join([*(f'"{a}"' for a in names), *(["?"] if open_all else [])]) + "}")
    text = "[" + ", ".join(dims) + "]"
    if getattr(spec, "unreduced", None):  # a value pending a sum over those axes
        text += ", unreduced={" + ", ".join(f'"{a}"' for a in sorted(spec.unreduced)) + "}"
    return text + (", replicated={" + ", ".join(f'"{a}"' for a in replicated) + "}" if replicated else "")


def mesh_axes(jax_mesh) -> tuple[tuple[str, int, str], ...]:
    """``(name, size, type)`` per axis of a JAX ``Mesh`` or ``AbstractMesh``."""
    names = tuple(jax_mesh.axis_names)
    sizes = getattr(jax_mesh, "axis_sizes", None)
    sizes = tuple(jax_mesh.devices.shape if sizes is None else sizes)
    types = tuple(t.name for t in (getattr(jax_mesh, "axis_types", None) or ())) or ("Auto",) * len(names)
    return tuple(zip(names, map(int, sizes), types))


def _mesh_text(axes) -> str:
    return ",".join(f"{n}={s}" for n, s, _ in axes)


def _types_text(axes) -> str:
    return "(" + ", ".join(f"{n}: {t}" for n, _, t in axes) + ")"




class Walker:
    """Walks one (closed) jaxpr into ``program``; ``env`` maps jaxpr variables to value names.

    ``mesh`` is the trace's mesh as ``(name, size, type)`` per axis, or None: then the first mesh a sharding in
    the program names becomes :attr:`seen_mesh`, and every other sharding must be on the same mesh."""

    def __init__(self, program: Trace, mesh=None):
        self.p = program
        self.outer = ""  # the source line of the call being inlined
        self.region = ""  # the manual region (shard_map) being walked
        self.mesh = tuple(mesh) if mesh is not None else None
        self.seen_mesh = None

    # -- shardings -----------------------------------------------------------------------
    def check_mesh(self, jax_mesh, what: str) -> None:
        """``jax_mesh`` (of a sharding in the program) is the trace's mesh, or becomes it."""
        axes = mesh_axes(jax_mesh)
        known = self.mesh or self.seen_mesh
        if known is None:
            self.seen_mesh = axes
        elif [(n, s) for n, s, _ in axes] != [(n, s) for n, s, _ in known]:
            raise ModelError(f"{what} is on mesh {_mesh_text(axes)} but the traced program's mesh is "
                             f"{_mesh_text(known)}; use one mesh (pass it as mesh=)")
        elif [t for _, _, t in axes] != [t for _, _, t in known]:
            raise ModelError(f"{what} is on mesh {_mesh_text(axes)} with axis types {_types_text(axes)}, but the "
                             f"traced program's are {_types_text(known)}: jax.sharding.auto_axes and explicit_axes "
                             "(and a sharding inside a shard_map) change axis types, which the frontend does not "
                             "read; trace the function on one mesh, or write the region as auto_axes / "
                             "explicit_axes in the model file")

    def sharding_text(self, sharding, rank: int, what: str, open_dims=(), typed: bool = False) -> str:
        """Shardy text for a ``NamedSharding`` (or a bare ``PartitionSpec`` on the trace's mesh) in the program.

        A ``typed`` one (a result type: ``out_sharding=``, ``reshard``) names the Explicit axes only; on a mesh
        that also has Auto axes its dimensions are open to them and the unused Explicit axes replicated, as
        JAX lowers it (``[{"x", ?}, {?}]``, ``[{?}, {?}], replicated={"x"}``)."""
        spec = getattr(sharding, "spec", None)
        if spec is None and type(sharding).__name__ == "PartitionSpec":
            spec, axes = sharding, self.mesh or self.seen_mesh or ()
        elif spec is None or not hasattr(sharding, "mesh"):
            raise ModelError(f"{what} is a {type(sharding).__name__}; the frontend reads NamedShardings and "
                             "PartitionSpecs only")
        else:
            self.check_mesh(sharding.mesh, what)
            axes = mesh_axes(sharding.mesh)
        explicit = [n for n, _, t in axes if t == "Explicit"]
        if not typed or len(explicit) == len(axes):
            return partition_spec_text(spec, rank, what, open_dims)
        used = {a for e in getattr(spec, "partitions", spec) for a in ((e,) if isinstance(e, str) else e if isinstance(e, (tuple, list)) else ())}
        return partition_spec_text(spec, rank, what, open_dims, open_all=True,
                                   replicated=[a for a in explicit if a not in used])

    def refused(self, eqn, ins: list[str], message: str) -> list[str]:
        """One ``refused`` node per result of ``eqn`` (reading its operands, so that the first refused primitive
        an output needs is the one reported): the error, raised if an output needs it."""
        outs = []
        for var in eqn.outvars:
            try:
                dtype = dtype_of(var.aval, "a refused result")
            except ModelError:
                dtype = "f32"
            outs.append(self.p.add("refused", ins, tuple(getattr(var.aval, "shape", ())), dtype,
                                   where=self.where(eqn), primitive=eqn.primitive.name, region=self.region,
                                   message=message))
        return outs

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
            start = len(self.p.nodes)
            handler = PRIMITIVES.get(name)
            if name in _CALLS:
                outs = self.call(eqn, ins)
            elif handler is None and not (name in FOLDABLE and self.constants(ins)):
                advice = (f"rewrite that line with supported operations or leave it outside the traced function "
                          f"(supported: {', '.join(sorted([*PRIMITIVES, *_CALLS]))})")
                outs = self.refused(eqn, ins, f"JAX primitive {name!r} has no op in shardplan's catalogue; {advice}")
            else:
                try:
                    made = self.fold(eqn, ins) if name in FOLDABLE and self.constants(ins) else handler(self, eqn, ins)
                    outs = self.sharded(eqn, [made] if isinstance(made, str) else list(made), start)
                except ModelError as e:  # refused: an error only if an output needs the result
                    outs = self.refused(eqn, ins, e.message)
            for var, value in zip(eqn.outvars, outs):
                env[var] = value
        return [self.read(env, v) for v in jaxpr.outvars]

    def constants(self, values: list[str]) -> bool:
        return all(self.p.const_value(v) is not None for v in values)

    def sharded(self, eqn, outs: list[str], start: int) -> list[str]:
        """``outs`` with the result sharding ``eqn`` gives (``out_sharding=`` of jnp.matmul, einsum, reshape,
        reductions, ...): the op that makes the result (a node after ``start``) gets it as its ``out_sharding``;
        a result the op did not make (a reshape to the same shape, a folded constant) is constrained by a
        ``sharding_constraint``."""
        if eqn.primitive.name in _OWN_SHARDINGS:
            return outs
        given = eqn.params.get("out_sharding", eqn.params.get("sharding"))
        if given is None:
            return outs
        if len(outs) != 1:
            raise ModelError(f"JAX primitive {eqn.primitive.name!r} gives {len(outs)} results a sharding; the "
                             "frontend reads one", where=self.where(eqn))
        v = outs[0]
        text = self.sharding_text(given, len(self.shape(v)), f"the out_sharding of {eqn.primitive.name}", typed=True)
        if _unconstrained(text):  # every dimension open and empty (JAX under an Auto mesh): it constrains nothing
            return outs
        made = self.p.producer(v)
        if made is not None and any(n is made for n in self.p.nodes[start:]) and v not in self.p.shardings:
            self.p.shardings[v] = text
            return [v]
        return [self.constrain(eqn, v, text)]

    def constrain(self, eqn, value: str, text: str) -> str:
        """``value`` through a ``sharding_constraint`` to ``text``."""
        return self.add(eqn, "sharding_constraint", [value], self.shape(value), self.p.values[value].dtype,
                        out_sharding=text)

    def call(self, eqn, ins: list[str]) -> list[str]:
        """An inlined call; a jit's ``in_shardings`` / ``out_shardings`` constrain its operands and results."""
        body = eqn.params.get(_CALLS[eqn.primitive.name])
        if body is None:
            raise ModelError(f"cannot inline JAX primitive {eqn.primitive.name!r}: it carries no body",
                             where=self.where(eqn))
        ins = self.jit_shardings(eqn, ins, "in_shardings")
        saved, self.outer = self.outer, self.where(eqn)
        try:
            if hasattr(body, "jaxpr") and hasattr(body, "consts"):
                outs = self.closed(body, ins)
            else:
                outs = self.jaxpr(body, [], ins)
        finally:
            self.outer = saved
        return self.jit_shardings(eqn, outs, "out_shardings")

    def jit_shardings(self, eqn, values: list[str], key: str) -> list[str]:
        """``values`` constrained by a nested jit's ``key`` (``in_shardings`` / ``out_shardings``) where it gives one
        (``UnspecifiedValue`` and ``AUTO`` leave a value to the search)."""
        given = eqn.params.get(key) or ()
        out = list(values)
        for i, s in enumerate(given):
            if type(s).__name__ in ("UnspecifiedValue", "AUTO") or s is None:
                continue
            what = f"jax.jit's {key}[{i}]"
            try:
                out[i] = self.constrain(eqn, out[i], self.sharding_text(s, len(self.shape(out[i])), what))
            except ModelError as e:
                raise ModelError(e.message, where=self.where(eqn)) from None
        return out

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
        """A node for ``eqn``'s (first) result."""
        aval = eqn.outvars[0].aval
        return self.add(eqn, op, ins, tuple(aval.shape), dtype_of(aval, f"the result of {eqn.primitive.name}"),
                        **attrs)

    def add(self, eqn, op: str, ins, shape, dtype: str, /, **attrs) -> str:
        """A node of ``eqn``'s line and region."""
        return self.p.add(op, ins, tuple(shape), dtype, where=self.where(eqn), primitive=eqn.primitive.name,
                          region=self.region, **attrs)

    def shape(self, value: str) -> tuple[int, ...]:
        return self.p.values[value].shape


def _unconstrained(text: str) -> bool:
    """Whether sharding ``text`` leaves every dimension open and unsharded (``[{?}, {?}]``)."""
    dims = text.strip()
    return dims.startswith("[") and dims.endswith("]") and all(
        d.strip() == "{?}" for d in dims[1:-1].split(",")) if dims != "[]" else False


def _scalar(value, what: str) -> float:
    arr = np.asarray(value)
    if arr.size != 1:
        raise ModelError(f"{what} is not a scalar")
    v = arr.reshape(-1)[0]
    return bool(v) if arr.dtype == bool else float(v)


def _simple(op: str) -> Callable:
    return lambda w, eqn, ins: w.emit(eqn, op, ins)


def _logical(operation: str | None) -> Callable:
    """``and``, ``or``, ``xor`` (``&``, ``|``, ``^``) and ``not`` (``~``) of bool masks -> ``logical`` and
    ``logical_not``; of integers they are bitwise, which has no op."""
    def handler(w: Walker, eqn, ins) -> str:
        name = eqn.primitive.name
        kinds = {w.p.values[v].dtype for v in ins}
        if kinds != {"bool"}:
            raise ModelError(f"JAX primitive {name!r} of {', '.join(sorted(kinds))} operands is bitwise, which has no "
                             "op in shardplan's catalogue; its logical form (bool masks) has", where=w.where(eqn))
        return w.emit(eqn, "logical_not", ins) if operation is None else \
            w.emit(eqn, "logical", ins, operation=operation)

    return handler


def _dynamic_slice(w: Walker, eqn, ins) -> str:
    """``lax.dynamic_slice`` (``x[i]`` at a computed ``i``) -> ``dynamic_slice``: its ``slice_sizes`` the op's
    ``sizes``, a constant start kept in ``starts``, the others operands; with every start a constant, ``slice`` ops
    of the clamped window."""
    starts, dynamic = _starts(w, ins[1:])
    sizes = tuple(int(k) for k in eqn.params["slice_sizes"])
    if not dynamic:  # every start a constant: a slice, as StableHLO canonicalises it
        first = tuple(min(max(a, 0), n - k) for a, n, k in zip(starts, w.shape(ins[0]), sizes))
        return _slices(w, eqn, ins[0], first, tuple(a + k for a, k in zip(first, sizes)))
    return w.emit(eqn, "dynamic_slice", ins[:1] + dynamic, sizes=sizes, starts=starts)


def _dynamic_update_slice(w: Walker, eqn, ins) -> str:
    """``lax.dynamic_update_slice`` -> ``dynamic_update_slice``: a constant start (a literal, or computed from
    constants) is kept in ``starts`` (XLA partitions a window at a constant position without gathering), the
    others stay operands."""
    starts, dynamic = _starts(w, ins[2:])
    return w.emit(eqn, "dynamic_update_slice", ins[:2] + dynamic, starts=starts)


def _starts(w: Walker, values: list[str]) -> tuple[tuple[int | None, ...], list[str]]:
    """A dynamic slice's start operands as the op's ``starts`` (a constant's value, None for a computed one) and
    the computed ones, its operands."""
    consts = [w.p.const_value(v) for v in values]
    return tuple(None if c is None else int(c) for c in consts), [v for v, c in zip(values, consts) if c is None]


def _round(w: Walker, eqn, ins) -> str:
    """``lax.round`` to nearest even (``jnp.round``) -> ``round``; away from zero (``lax.round``'s default) has
    no op."""
    if int(eqn.params.get("rounding_method", 0)) != 1:  # lax.RoundingMethod: 0 AWAY_FROM_ZERO, 1 TO_NEAREST_EVEN
        raise ModelError("lax.round away from zero has no op in shardplan's catalogue (its `round` is jnp.round's, "
                         "half to even): use jnp.round", where=w.where(eqn))
    return w.emit(eqn, "round", ins)


def _max(w: Walker, eqn, ins) -> str:
    out = tuple(eqn.outvars[0].aval.shape)
    for i in (0, 1):
        if w.p.const_value(ins[i]) == 0.0 and w.shape(ins[1 - i]) == out:
            return w.emit(eqn, "relu", [ins[1 - i]])
    return w.emit(eqn, "maximum", ins)


def _min(w: Walker, eqn, ins) -> str:
    return w.emit(eqn, "minimum", ins)


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
    mid = w.add(eqn, op, ins, tuple(aval.shape), in_dtype, **attrs)
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
    """The einsum spelling of dot_general's dimension numbers: batch, lhs free, rhs free. The contracting letters
    are in the order of the dimension numbers (``lc``), as the einsum's completion of a pending sum reads them
    (:meth:`planner.model.nodes.OpNode.pending_groups`: XLA reduces the last contracting dimension first)."""
    letters = iter(string.ascii_letters)
    left = [next(letters) for _ in range(p)]
    for i, c in zip(lc, sorted(left[i] for i in lc)):
        left[i] = c
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


def _arg(op: str) -> Callable:
    """``jnp.argmax`` / ``argmin`` (lax's ``argmax`` over one axis) -> ``argmax`` / ``argmin``."""
    def handler(w, eqn, ins):
        (axis,) = eqn.params["axes"]
        return w.emit(eqn, op, ins, axis=int(axis), index_dtype=dtype_of(eqn.outvars[0].aval, f"the index of {op}"))

    return handler


def _cumsum(w: Walker, eqn, ins) -> str:
    """``jnp.cumsum`` / ``lax.cumsum`` -> ``cumsum``."""
    return w.emit(eqn, "cumsum", ins, axis=int(eqn.params["axis"]), reverse=bool(eqn.params["reverse"]))


def _top_k(w: Walker, eqn, ins) -> list[str]:
    """``lax.top_k`` -> two ``top_k`` ops, its ``values`` and its ``indices``."""
    axis, k = int(eqn.params.get("axis", -1)), int(eqn.params["k"])
    values, indices = (eqn.outvars[0].aval, eqn.outvars[1].aval)
    return [w.add(eqn, "top_k", ins, tuple(values.shape), dtype_of(values, "the values of top_k"), k=k, axis=axis,
                  returns="values"),
            w.add(eqn, "top_k", ins, tuple(indices.shape), dtype_of(indices, "the indices of top_k"), k=k, axis=axis,
                  returns="indices")]


def _sort(w: Walker, eqn, ins) -> list[str]:
    """``lax.sort`` of keys and at most one payload by the keys (``jnp.sort``, ``jnp.argsort``: its payload an
    iota) -> a ``sort`` op per result, the keys sorted and the payload permuted alike."""
    if int(eqn.params.get("num_keys", 1)) != 1 or len(ins) > 2:
        raise ModelError(f"lax.sort of {len(ins)} operands by {eqn.params.get('num_keys')} keys has no op in "
                         "shardplan's catalogue; sort by one key, with at most one payload (jnp.sort, jnp.argsort)",
                         where=w.where(eqn))
    axis = int(eqn.params["dimension"])
    return [w.add(eqn, "sort", ins, tuple(v.aval.shape), dtype_of(v.aval, f"the {returns} of sort"), axis=axis,
                  returns=returns) for v, returns in zip(eqn.outvars, ("keys", "payload"))]


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
    mid = ins[0] if kept == src else w.add(eqn, "reshape", ins, kept, dtype, shape=kept)
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
    axis = int(eqn.params["dimension"])
    rolled = _rotation(w, ins, axis)
    if rolled is not None:
        return w.emit(eqn, "roll", [rolled[0]], shift=rolled[1], axis=axis)
    return w.emit(eqn, "concat", ins, axis=axis)


def _rotation(w: Walker, ins, axis: int) -> tuple[str, int] | None:
    """``(x, shift)`` where ``ins`` are ``x[..., k:]`` and ``x[..., :k]`` along ``axis`` (the rest of ``x``
    whole), in this region: ``jnp.roll(x, -k, axis)``, as JAX writes a roll by a constant and XLA partitions it
    (a rotation); None otherwise."""
    if len(ins) != 2:
        return None
    pieces = [w.p.producer(v) for v in ins]
    if any(p is None or p.op != "slice" or p.region != w.region or {k for k, _ in p.attrs} != {"starts", "stops"}
           for p in pieces):
        return None
    (tail, head) = pieces
    if tail.inputs != head.inputs:
        return None
    shape = w.shape(tail.inputs[0])
    k = head.attr("stops")[axis]
    for d, n in enumerate(shape):
        want = ((k, n), (0, k)) if d == axis else ((0, n), (0, n))
        if ((tail.attr("starts")[d], tail.attr("stops")[d]), (head.attr("starts")[d], head.attr("stops")[d])) != want:
            return None
    return tail.inputs[0], -k


def _with_shape(w: Walker, eqn, x: str, shape: tuple[int, ...]) -> str:
    """``x`` reshaped to ``shape`` (a constant: the constant of that shape)."""
    if w.shape(x) == shape:
        return x
    const = w.p.const_value(x)
    if const is not None:
        return w.p.const(const, shape, w.p.values[x].dtype)
    return w.add(eqn, "reshape", [x], shape, w.p.values[x].dtype, shape=shape)


def _stack(w: Walker, eqn, ins) -> str:
    """``jnp.stack`` (a primitive in JAX 0.10): each operand with a size-1 dimension at ``axis``, concatenated
    along it, as JAX lowers it (``broadcast_in_dim`` then ``concatenate``)."""
    axis = int(eqn.params["axis"])
    pieces = [_with_shape(w, eqn, x, w.shape(x)[:axis] + (1,) + w.shape(x)[axis:]) for x in ins]
    if len(pieces) == 1:
        return w.emit(eqn, "reshape", ins, shape=tuple(eqn.outvars[0].aval.shape))
    return w.emit(eqn, "concat", pieces, axis=axis)


def _pad(w: Walker, eqn, ins) -> str:
    """``jnp.pad`` / ``lax.pad`` by a constant value, at the edges (a negative count crops) -> ``pad`` (interior
    padding is refused)."""
    config = [tuple(int(v) for v in c) for c in eqn.params["padding_config"]]
    value = w.p.const_value(ins[1])
    if value is None or any(inner for _, _, inner in config):
        raise ModelError("pad with a computed value or interior padding has no op in shardplan's catalogue; pad "
                         "by a constant, at the edges", where=w.where(eqn))
    if not any(lo or hi for lo, hi, _ in config):
        return ins[0]
    return w.emit(eqn, "pad", [ins[0]], low=tuple(lo for lo, _, _ in config), high=tuple(hi for _, hi, _ in config),
                  value=float(value))


def _iota(w: Walker, eqn, ins) -> str:
    """``lax.iota`` / ``broadcasted_iota`` (``jnp.arange``, ``jax.nn.one_hot``, ``jnp.tril``) -> ``iota``."""
    aval = eqn.outvars[0].aval
    return w.emit(eqn, "iota", [], shape=tuple(int(d) for d in aval.shape), dimension=int(eqn.params["dimension"]),
                  dtype=dtype_of(aval, "the result of iota"))


def _tile(w: Walker, eqn, ins) -> str:
    """``jnp.tile`` (a primitive in JAX 0.10), as JAX lowers it: a size-1 dimension before each repeated one, a
    broadcast of those to the repeats (materialised: an ``add`` of zeros), and a reshape merging each pair."""
    reps = tuple(int(r) for r in eqn.params["reps"])
    shape = w.shape(ins[0])
    if len(reps) != len(shape):
        raise ModelError(f"tile with {len(reps)} repeats of a rank-{len(shape)} array has no op in shardplan's "
                         "catalogue; reshape it to that rank first", where=w.where(eqn))
    if all(r == 1 for r in reps):
        return ins[0]
    split = tuple(x for r, d in zip(reps, shape) for x in ((1, d) if r != 1 else (d,)))
    grown = tuple(x for r, d in zip(reps, shape) for x in ((r, d) if r != 1 else (d,)))
    dtype = w.p.values[ins[0]].dtype
    mid = w.add(eqn, "broadcast", [_with_shape(w, eqn, ins[0], split)], grown, dtype, shape=grown)
    return w.emit(eqn, "reshape", [mid], shape=tuple(eqn.outvars[0].aval.shape))


def _slice(w: Walker, eqn, ins) -> str:
    strides = eqn.params.get("strides")
    if strides is not None and any(int(s) != 1 for s in strides):
        raise ModelError(f"slice with strides {tuple(strides)} has no op in shardplan's catalogue (slices are "
                         "contiguous)", where=w.where(eqn))
    starts = tuple(int(s) for s in eqn.params["start_indices"])
    stops = tuple(int(s) for s in eqn.params["limit_indices"])
    return _slices(w, eqn, ins[0], starts, stops)


def _slices(w: Walker, eqn, x: str, starts: tuple[int, ...], stops: tuple[int, ...]) -> str:
    """``x[starts:stops]``: several dimensions cut, one ``slice`` per dimension, in dimension order, as XLA's
    windowed reshard takes them (and Shardy shards each window, a cut to one position too)."""
    shape = w.shape(x)
    cut = [d for d, (a, b, n) in enumerate(zip(starts, stops, shape)) if (a, b) != (0, n)]
    now = list(shape)
    for d in cut[:-1]:
        first, last = [0] * len(shape), list(now)
        first[d], last[d] = starts[d], stops[d]
        now[d] = stops[d] - starts[d]
        x = w.add(eqn, "slice", [x], tuple(now), w.p.values[x].dtype, starts=tuple(first), stops=tuple(last))
    first, last = [0] * len(shape), list(now)
    for d in cut[-1:]:
        first[d], last[d] = starts[d], stops[d]
    return w.emit(eqn, "slice", [x], starts=tuple(first), stops=tuple(last))


def _split(w: Walker, eqn, ins) -> list[str]:
    """``jnp.split`` (a primitive in JAX 0.10) -> one ``slice`` per piece, as JAX lowers it."""
    axis, shape = int(eqn.params["axis"]), w.shape(ins[0])
    outs, start = [], 0
    for size, var in zip(eqn.params["sizes"], eqn.outvars):
        starts, stops = [0] * len(shape), list(shape)
        starts[axis], stops[axis] = start, start + int(size)
        start += int(size)
        outs.append(ins[0] if int(size) == shape[axis] else
                    w.add(eqn, "slice", ins, tuple(var.aval.shape), dtype_of(var.aval, "a piece of split"),
                          starts=tuple(starts), stops=tuple(stops)))
    return outs


def _gather(w: Walker, eqn, ins) -> str:
    """Whole slices of a table along an axis (``jnp.take(t, i, axis)``, ``t[i]``, ``t[:, i]``) -> ``gather``; one
    element per index along an axis, the other dimensions batched (``jnp.take_along_axis``) ->
    ``take_along_axis``."""
    dn = eqn.params["dimension_numbers"]
    table, idx = w.shape(ins[0]), w.shape(ins[1])
    along = _along_axis(dn, eqn.params["slice_sizes"], table, idx)
    if along is not None:
        return w.emit(eqn, "take_along_axis", [ins[0], _index_vector_dropped(w, eqn, ins[1], idx[:-1])], axis=along)
    picked = _picked_by_rows(w, eqn, ins)
    if picked is not None:
        return picked
    collapsed = tuple(dn.collapsed_slice_dims)
    axis = collapsed[0] if len(collapsed) == 1 else -1
    whole = (axis >= 0 and tuple(dn.start_index_map) == (axis,)
             and not tuple(getattr(dn, "operand_batching_dims", ()))
             and tuple(eqn.params["slice_sizes"]) == (*table[:axis], 1, *table[axis + 1:])
             and len(idx) >= 1 and idx[-1] == 1
             and tuple(dn.offset_dims) == (*range(axis), *range(axis + len(idx) - 1, len(idx) - 2 + len(table))))
    if not whole:
        raise ModelError("gather other than whole slices of a table by an index array (jnp.take(table, indices, "
                         f"axis)) or jnp.take_along_axis has no op in shardplan's catalogue; got {dn}",
                         where=w.where(eqn))
    indices = _index_vector_dropped(w, eqn, ins[1], idx[:-1])
    return w.emit(eqn, "gather", [ins[0], indices], **({"axis": axis} if axis else {}))


def _picked_by_rows(w: Walker, eqn, ins) -> str | None:
    """``x[jnp.arange(n), labels]`` (one element per row of a matrix, the rows' indices ``arange`` over its first
    dimension, their columns ``labels``): ``take_along_axis`` of ``labels[:, None]`` along the columns, reshaped
    to ``(n,)``, the same values; None for another gather."""
    dn = eqn.params["dimension_numbers"]
    table, idx = w.shape(ins[0]), w.shape(ins[1])
    if (len(table) != 2 or tuple(dn.collapsed_slice_dims) != (0, 1) or tuple(dn.start_index_map) != (0, 1)
            or tuple(dn.offset_dims) or tuple(getattr(dn, "operand_batching_dims", ()))
            or tuple(int(s) for s in eqn.params["slice_sizes"]) != (1, 1) or idx != (table[0], 2)):
        return None
    joined = w.p.producer(ins[1])
    if joined is None or joined.op != "concat" or joined.attr("axis") not in (1, -1) or len(joined.inputs) != 2:
        return None
    rows, cols = joined.inputs
    if not _is_arange(w, rows, table[0]) or w.shape(cols) != (table[0], 1):
        return None
    column = w.p.producer(cols)
    wrap = w.p.producer(column.inputs[0]) if column is not None and column.op == "reshape" else None
    if wrap is not None and wrap.op == "index_wrap":  # jnp's wrap of the labels before the column: in range, the labels
        cols = w.add(eqn, "reshape", [wrap.inputs[0]], (table[0], 1), w.p.values[cols].dtype, shape=(table[0], 1))
    picked = w.add(eqn, "take_along_axis", [ins[0], cols], (table[0], 1), w.p.values[ins[0]].dtype, axis=1)
    return w.emit(eqn, "reshape", [picked], shape=(table[0],))


def _is_arange(w: Walker, name: str, n: int) -> bool:
    """Whether ``name`` is ``jnp.arange(n)`` as a column (an ``iota`` of ``n`` along its first dimension, through
    jnp's index wrap and the reshape to ``(n, 1)``)."""
    node = w.p.producer(name)
    while node is not None and node.op in ("reshape", "index_wrap") and w.shape(node.inputs[0]) in ((n,), (n, 1)):
        node = w.p.producer(node.inputs[0])
    return (node is not None and node.op == "iota" and node.attr("dimension") == 0
            and tuple(node.attr("shape")) in ((n,), (n, 1)))


def _along_axis(dn, slice_sizes, operand: tuple, idx: tuple) -> int | None:
    """The axis of a ``jnp.take_along_axis`` gather (one index per element along it, every other dimension a
    batching dimension of operand and indices alike, a trailing index vector of 1); None for another gather."""
    if len(dn.collapsed_slice_dims) != 1 or len(idx) != len(operand) + 1 or idx[-1] != 1:
        return None
    axis = int(dn.collapsed_slice_dims[0])
    others = tuple(d for d in range(len(operand)) if d != axis)
    fits = (tuple(dn.start_index_map) == (axis,) and not tuple(dn.offset_dims)
            and tuple(dn.operand_batching_dims) == others and tuple(dn.start_indices_batching_dims) == others
            and all(int(s) == 1 for s in slice_sizes)
            and all(idx[d] == operand[d] for d in others))
    return axis if fits else None


def _index_vector_dropped(w: Walker, eqn, indices: str, batch: tuple) -> str:
    """A gather's indices without their trailing index vector of 1 (the dimension jnp added, or a reshape)."""
    producer = w.p.producer(indices)
    if producer is not None and producer.op == "reshape" and w.shape(producer.inputs[0]) == batch:
        return producer.inputs[0]
    return w.add(eqn, "reshape", [indices], batch, w.p.values[indices].dtype, shape=batch)


def _compare(direction: str) -> Callable:
    return lambda w, eqn, ins: w.emit(eqn, "comparison", ins, direction=direction)


def _select_n(w: Walker, eqn, ins) -> str:
    """A constant choice; ``jnp``'s index wrap ``select_n(i < 0, i, i + n)`` (``t[i]``, a
    ``lax.dynamic_update_slice`` start), which is ``i`` for a gather's in-range indices
    (:mod:`~planner.frontends.fusion`); else ``select(p, on_true, on_false)`` of a bool predicate (``select_n``
    takes the false case first)."""
    choice = w.p.const_value(ins[0])
    if choice is not None:  # a choice made by constants (jnp.var's where(N - ddof > 0, ...))
        return ins[1 + int(choice)]
    test = w.p.producer(ins[0])
    if (len(ins) == 3 and test is not None and test.op == "comparison" and test.attr("direction") == "lt"
            and test.inputs[0] == ins[1] and w.p.const_value(test.inputs[1]) == 0.0):
        shifted = w.p.producer(ins[2])
        if shifted is not None and shifted.op == "add" and ins[1] in shifted.inputs:
            return w.emit(eqn, "index_wrap", [ins[1], ins[0], ins[2]])  # i, then i < 0 and i + n
    if len(ins) != 3 or w.p.values[ins[0]].dtype != "bool":
        raise ModelError(f"JAX primitive 'select_n' with an integer case index ({len(ins) - 1} cases) has no op in "
                         "shardplan's catalogue; choose between two values with a bool predicate (jnp.where)",
                         where=w.where(eqn))
    return w.emit(eqn, "select", [ins[0], ins[2], ins[1]])


def _integer_pow(w: Walker, eqn, ins) -> str:
    return w.emit(eqn, "integer_pow", ins, y=int(eqn.params["y"]))


# -- what the program says about shardings --------------------------------------------------

def _sharding_constraint(w: Walker, eqn, ins) -> str:
    """``with_sharding_constraint``: a ``sharding_constraint`` op (unconstrained dimensions open)."""
    if eqn.params.get("layout") is not None:
        raise ModelError("with_sharding_constraint with a layout: shardplan models shardings, not memory layouts; "
                         "drop the layout", where=w.where(eqn))
    open_dims = tuple(eqn.params.get("unconstrained_dims") or ())
    text = w.sharding_text(eqn.params["sharding"], len(w.shape(ins[0])), "with_sharding_constraint", open_dims)
    return w.constrain(eqn, ins[0], text)


def _reshard(w: Walker, eqn, ins) -> str:
    """``jax.sharding.reshard``: the value retyped to ``dst_sharding`` (a ``sharding_constraint``)."""
    text = w.sharding_text(eqn.params["dst_sharding"], len(w.shape(ins[0])), "jax.sharding.reshard", typed=True)
    return w.constrain(eqn, ins[0], text)


def _device_put(w: Walker, eqn, ins) -> list[str]:
    """``jax.device_put(x, sharding)`` inside a traced function: on an Explicit mesh a reshard of each operand (its
    type changes); on an Auto mesh nothing, as JAX lowers it inside jit."""
    outs = []
    for i, (v, target) in enumerate(zip(ins, eqn.params["devices"])):
        if target is None or (hasattr(target, "mesh") and "Explicit" not in [t for _, _, t in mesh_axes(target.mesh)]):
            outs.append(v)
            continue
        if not hasattr(target, "spec"):
            raise ModelError(f"jax.device_put to {target!r}: the frontend reads device_put to a NamedSharding "
                             "(or a PartitionSpec) only; place whole arrays outside the traced function",
                             where=w.where(eqn))
        text = w.sharding_text(target, len(w.shape(v)), f"jax.device_put's sharding {i}", typed=True)
        outs.append(w.constrain(eqn, v, text))
    return outs


def _shard_alike(w: Walker, eqn, ins) -> list[str]:
    """``shard_alike(x, y)``: both operands, which the graph's ``shard_as`` groups."""
    if len(set(ins)) > 1:
        w.p.shard_as.append(tuple(ins))
    return list(ins)


def _manual_axes(w: Walker, eqn, key: str) -> tuple[str, ...]:
    """A collective's axes (``axes`` or ``axis_name``): names of the manual axes of the region being walked."""
    if not w.region:
        raise ModelError(f"JAX collective {eqn.primitive.name!r} outside a shard_map; collectives run in a "
                         "shard_map's body only", where=w.where(eqn))
    if eqn.params.get("axis_index_groups") is not None:
        raise ModelError(f"{eqn.primitive.name} with axis_index_groups has no op in shardplan's catalogue; "
                         "collectives run over whole manual axes", where=w.where(eqn))
    axes = eqn.params[key]
    axes = (axes,) if isinstance(axes, str) else tuple(axes)
    if not all(isinstance(a, str) for a in axes):
        raise ModelError(f"{eqn.primitive.name} over positional axes {axes} has no op in shardplan's catalogue; "
                         "collectives run over named mesh axes", where=w.where(eqn))
    return axes


def _each(op: str, key: str) -> Callable:
    """A collective applied to each operand alone (``psum`` of several arrays)."""
    def handler(w, eqn, ins):
        axes = _manual_axes(w, eqn, key)
        return [w.add(eqn, op, [v], tuple(var.aval.shape), dtype_of(var.aval, f"the result of {op}"), axes=axes)
                for v, var in zip(ins, eqn.outvars)]

    return handler


def _all_gather(w: Walker, eqn, ins) -> str:
    """``all_gather``: tiled along its dimension; untiled stacks a new dimension there (a size-1 one gathered)."""
    axes, dim = _manual_axes(w, eqn, "axis_name"), int(eqn.params["all_gather_dimension"])
    x = ins[0]
    if not eqn.params["tiled"]:
        shape = list(w.shape(x))
        x = w.add(eqn, "reshape", [x], (*shape[:dim], 1, *shape[dim:]), w.p.values[x].dtype,
                  shape=(*shape[:dim], 1, *shape[dim:]))
    return w.emit(eqn, "all_gather", [x], axes=axes, dim=dim)


def _reduce_scatter(w: Walker, eqn, ins) -> str:
    """``psum_scatter``: tiled along its dimension; untiled drops that (then size-1) dimension."""
    axes, dim = _manual_axes(w, eqn, "axis_name"), int(eqn.params["scatter_dimension"])
    if eqn.params["tiled"]:
        return w.emit(eqn, "psum_scatter", ins, axes=axes, dim=dim)
    shape = list(w.shape(ins[0]))
    shape[dim] = 1  # untiled: the dimension is the group's size, one element each
    part = w.add(eqn, "psum_scatter", ins, shape, w.p.values[ins[0]].dtype, axes=axes, dim=dim)
    return w.emit(eqn, "reshape", [part], shape=tuple(eqn.outvars[0].aval.shape))


def _all_to_all(w: Walker, eqn, ins) -> str:
    axes = _manual_axes(w, eqn, "axis_name")
    if not eqn.params.get("tiled", False):
        raise ModelError("all_to_all with tiled=False has no op in shardplan's catalogue; write tiled=True",
                         where=w.where(eqn))
    return w.emit(eqn, "all_to_all", ins, axes=axes, split_dim=int(eqn.params["split_axis"]),
                  concat_dim=int(eqn.params["concat_axis"]))


def _ppermute(w: Walker, eqn, ins) -> str:
    axes = _manual_axes(w, eqn, "axis_name")
    return w.emit(eqn, "ppermute", ins, axes=axes, perm=tuple((int(a), int(b)) for a, b in eqn.params["perm"]))


def _axis_index(w: Walker, eqn, ins) -> str:
    return w.emit(eqn, "axis_index", [], axes=_manual_axes(w, eqn, "axis_name"))


def _shard_map(w: Walker, eqn, ins) -> list[str]:
    """``jax.shard_map``: a manual region; its body walked on local shapes, its specs the region's shardings."""
    if w.region:
        raise ModelError("a shard_map inside a shard_map: shardplan's manual regions do not nest; merge them",
                         where=w.where(eqn))
    params = eqn.params
    mesh = params["mesh"]
    w.check_mesh(mesh, "a shard_map")
    manual = set(params.get("manual_axes") or params.get("newly_manual_axes") or params.get("axis_names") or ())
    axes = tuple(n for n, _, _ in mesh_axes(mesh) if n in manual)
    free = len(axes) < len(mesh_axes(mesh))  # Shardy leaves the free axes open on the boundary
    region = Region(f"shard_map_{len(w.p.regions)}", axes, w.where(eqn))
    w.p.regions.append(region)
    body = params["jaxpr"]
    inner = body.jaxpr if hasattr(body, "consts") else body
    args, entered = [], {}
    for i, (v, spec, var) in enumerate(zip(ins, params["in_specs"], inner.invars)):
        text = partition_spec_text(spec, len(w.shape(v)), f"shard_map in_specs[{i}]", open_all=free)
        if (v, text) not in entered:
            if any(k[0] == v for k in entered):
                raise ModelError(f"shard_map reads one array twice with different in_specs ({text} and "
                                 f"{next(t for u, t in entered if u == v)}); pass it once", where=w.where(eqn))
            entered[v, text] = w.p.add("manual_enter", [v], tuple(var.aval.shape), w.p.values[v].dtype,
                                       where=w.where(eqn), primitive="shard_map", region=region.name, sharding=text)
        args.append(entered[v, text])
    saved, w.region = w.region, region.name
    try:
        results = w.closed(body, args) if hasattr(body, "consts") else w.jaxpr(body, [], args)
        outs = []
        for i, (res, spec, var) in enumerate(zip(results, params["out_specs"], eqn.outvars)):
            made = w.p.producer(res)
            if made is None or made.region != region.name or made.op == "manual_enter" or res in results[:i]:
                res = w.add(eqn, "reshape", [res], w.shape(res), w.p.values[res].dtype, shape=w.shape(res))
            text = partition_spec_text(spec, len(var.aval.shape), f"shard_map out_specs[{i}]", open_all=free)
            outs.append(w.p.add("manual_exit", [res], tuple(var.aval.shape), w.p.values[res].dtype,
                                where=w.where(eqn), primitive="shard_map", region=region.name, sharding=text,
                                index=i, outputs=len(results)))
    finally:
        w.region = saved
    return outs


#: Primitives whose ``sharding`` parameter is what their handler reads (not a result sharding to add).
_OWN_SHARDINGS = ("reshard", "sharding_constraint", "shard_map")

#: What each primitive becomes: a handler returns its result value (or a list, one per result).
PRIMITIVES: dict[str, Callable[[Walker, Any, list[str]], Any]] = {
    "abs": _simple("abs"),
    "add": _simple("add"),
    "add_any": _simple("add"),
    "and": _logical("and"),
    "all_gather": _all_gather,
    "all_to_all": _all_to_all,
    "axis_index": _axis_index,
    "broadcast_in_dim": _broadcast_in_dim,
    "concatenate": _concatenate,
    "convert_element_type": _convert,
    "copy": lambda w, eqn, ins: ins[0],
    "copy_p": lambda w, eqn, ins: ins[0],
    "device_put": _device_put,
    "div": _simple("div"),
    "pow": _simple("pow"),
    "dot_general": _dot_general,
    "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice,
    "eq": _compare("eq"),
    "ge": _compare("ge"),
    "gt": _compare("gt"),
    "le": _compare("le"),
    "lt": _compare("lt"),
    "ne": _compare("ne"),
    "not": _logical(None),
    "or": _logical("or"),
    "rem": _simple("rem"),
    "xor": _logical("xor"),
    "argmax": _arg("argmax"),
    "argmin": _arg("argmin"),
    "cumsum": _cumsum,
    "ceil": _simple("ceil"),
    "cos": _simple("cos"),
    "erf": _simple("erf"),
    "erfc": _simple("erfc"),
    "exp": _simple("exp"),
    "floor": _simple("floor"),
    "expm1": _simple("expm1"),
    "gather": _gather,
    "integer_pow": _integer_pow,
    "iota": _iota,
    "is_finite": _simple("is_finite"),
    "log": _simple("log"),
    "log1p": _simple("log1p"),
    "logistic": _simple("sigmoid"),
    "max": _max,
    "min": _min,
    "mul": _simple("mul"),
    "neg": _simple("neg"),
    "pmax": _each("pmax", "axes"),
    "pmin": _each("pmin", "axes"),
    "ppermute": _ppermute,
    "psum": _each("psum", "axes"),
    "psum_invariant": _each("psum", "axes"),
    "pvary": _each("pbroadcast", "axes"),
    "reduce_max": _reduce("max"),
    "reduce_min": _reduce("min"),
    "reduce_scatter": _reduce_scatter,
    "reduce_sum": _reduce("sum"),
    "reshape": _reshape,
    "reshard": _reshard,
    "round": _round,
    "rsqrt": _simple("rsqrt"),
    "select_n": _select_n,
    "shard_alike": _shard_alike,
    "shard_map": _shard_map,
    "sign": _simple("sign"),
    "sin": _simple("sin"),
    "sharding_constraint": _sharding_constraint,
    "slice": _slice,
    "split": _split,
    "sqrt": _simple("sqrt"),
    "square": _simple("square"),
    "squeeze": _reshape,
    "pad": _pad,
    "stack": _stack,
    "stop_gradient": _simple("stop_gradient"),
    "sub": _simple("sub"),
    "tanh": _simple("tanh"),
    "tile": _tile,
    "rev": lambda w, eqn, ins: w.emit(eqn, "flip", ins, axes=tuple(int(d) for d in eqn.params["dimensions"])),
    "sort": _sort,
    "top_k": _top_k,
    "transpose": _transpose,
}


#: Primitives computed at trace time when every operand is a constant (``jnp.var``'s ``N - ddof``, its
#: ``where(N - ddof > 0, ..., nan)``): ``f(operand arrays, params) -> array``.
FOLDABLE: dict[str, Callable[[list, dict], Any]] = {
    "abs": lambda a, p: np.abs(a[0]),
    "add": lambda a, p: a[0] + a[1],
    "convert_element_type": lambda a, p: a[0],
    "div": lambda a, p: a[0] / a[1],
    "exp": lambda a, p: np.exp(a[0]),
    "integer_pow": lambda a, p: a[0] ** p["y"],
    "log": lambda a, p: np.log(a[0]),
    "max": lambda a, p: np.maximum(a[0], a[1]),
    "min": lambda a, p: np.minimum(a[0], a[1]),
    "mul": lambda a, p: a[0] * a[1],
    "neg": lambda a, p: -a[0],
    "pow": lambda a, p: np.power(a[0], a[1]),
    "rsqrt": lambda a, p: get_op("rsqrt").reference(a, p),
    "select_n": lambda a, p: np.choose(a[0].astype(int), a[1:]),
    "sqrt": lambda a, p: np.sqrt(a[0]),
    "square": lambda a, p: a[0] * a[0],
    "sub": lambda a, p: a[0] - a[1],
    "tanh": lambda a, p: np.tanh(a[0]),
}
FOLDABLE.update({name: (lambda fn: lambda a, p: fn(a[0], a[1]))(fn) for name, fn in COMPARISONS.items()})
