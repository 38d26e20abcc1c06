"""Explicit ("typed") sharding mode (seed 001): shardings flow forward op by op, typed as JAX types them.

:func:`explicit_shardings` walks the graph in topological order. Graph inputs,
parameters and constants start from their ``sharding`` (replicated without
one); an op's ``out_sharding`` overrides its result; otherwise the op's factor
rule (:mod:`planner.rules`) decides, **per factor**, by seed 001's consensus:

- unsharded if every operand leaves it unsharded;
- the common sharding if exactly one distinct non-empty sharding appears;
- otherwise a :class:`~planner.errors.RuleError`: ``... has conflicting shardings
  for one dimension: ...``.

A result that would use one mesh axis twice is the error of seed 001
(``add operation with inputs: i32[4@X,4], i32[4,4@X] produces an illegally
sharded result: i32[4@X,4@X]``). Every error ends with advice to give that op an
explicit ``out_sharding``. Where JAX 0.10.2's rule for an op is not plain
consensus, this module follows JAX (``tests/model/test_explicit_vs_jax.py`` runs
the same programs through JAX):

- **dots** (two-operand matmul and einsum, JAX's ``dot_general``): a batch factor
  takes the left operand's axes; a contracting factor sharded in *both* operands is
  ambiguous, an error asking for ``out_sharding``; sharded in one it is summed
  (an :class:`AllReduce`) and the result is replicated on its axes. An
  ``out_sharding`` may leave the sum pending (``unreduced=``) over exactly the
  contracting axes, sharded alike on both sides; only a ``sharding_constraint``
  (JAX's ``reshard``) reads a pending sum, and reduces it.
- **reductions** (``sum``, ``mean``, ``max``): the reduced dimensions' axes are
  dropped (a sum records its AllReduce);
- **normalisations** (``softmax``, ``layernorm``, ``rmsnorm``) keep the normalised
  axis's sharding, as JAX types their decomposition (local statistics, reduced);
- **concat** needs every operand sharded alike and keeps that sharding, the
  concatenated dimension included; **slice** keeps its operand's, where the
  shards divide each sliced dimension; **roll** too, where they divide both its
  pieces (``jnp.roll`` is two slices and a concatenate);
- **reshape** is JAX's rule: singleton dimensions aside, a split of one dimension
  deals its axes, major to minor, to the pieces (each axis must divide what is left
  of its piece), a merge of one run of dimensions keeps their axes when the sharded
  ones are the most major; any other reshape of a sharded tensor is an error.

- **gathers** (``gather``, ``take_along_axis``) are JAX's rule: the indexed dimension and the
  indices' own dimensions replicated, batch dimensions sharded alike (else an error asking
  for an out_sharding); the result takes the indices' and the operand's other axes.

Other need-replication factors (a sharded loss axis; collectives inside
manual regions) are errors. In an ``auto_axes`` region the region's axes are Auto:
its ops are typed without them and its outputs leave typed by its out-shardings.
Op strategies are ignored in this mode.

>>> from graphs.graph_builder import GraphBuilder
>>> b = GraphBuilder("seed001", {"X": 2, "Y": 4})
>>> a = b.tensor("a", [4, 1], sharding='[{"X"}, {}]')
>>> c = b.tensor("c", [1, 8], sharding='[{}, {"Y"}]')
>>> _ = b.op("add", [a, c], output="s", name="add")
>>> result = explicit_shardings(b.build())
>>> result.type_text("s"), result.reason("s")
('f32[4@X,8@Y]', "op 'add' (add): consensus of its inputs a, c")
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Sequence

from graphs.axis_regions import region_of
from graphs.ops.registry import get_op
from planner.errors import RuleError, ShardplanError
from planner.ir.axis import AxisRef, merge_adjacent, sort_axes
from planner.ir.mesh import Mesh
from planner.ir.sharding import PENDING_SUM, DimSharding, TensorSharding
from planner.model.annotations import translate
from planner.rules import (
    FactorKind,
    OpShardingRule,
    check_factor_axes,
    factor_axes_from_tensor,
    rule_for,
)
from planner.notations.jax import to_jax_type


@dataclass(frozen=True, slots=True)
class AllReduce:
    """A reduction over ``axes`` inserted after an op whose reduction factor was sharded: a sum (JAX's psum) after
    a contraction or a sum, a maximum (pmax) after ``max``: ``reduction`` is the rule's."""

    tensor: str
    axes: tuple[AxisRef, ...]
    reduction: str = PENDING_SUM

    def __str__(self) -> str:
        kind = "" if self.reduction == PENDING_SUM else f" by {self.reduction}"
        return f"AllReduce({self.tensor}) over {{{', '.join(map(str, self.axes))}}}{kind}"


@dataclass(frozen=True, slots=True)
class TypedTensor:
    """A tensor's type in explicit mode: its sharding and why it has it (which annotation or op decided)."""

    sharding: TensorSharding
    reason: str


@dataclass(frozen=True, slots=True)
class ExplicitResult:
    """Per tensor a :class:`TypedTensor`; per op the collectives it inserted (``()`` for none)."""

    tensors: Mapping[str, TypedTensor]
    collectives: Mapping[str, tuple[AllReduce, ...]]
    dtypes: Mapping[str, str]
    shapes: Mapping[str, tuple[int, ...]]

    def sharding(self, tensor: str) -> TensorSharding:
        return self.tensors[tensor].sharding

    def reason(self, tensor: str) -> str:
        return self.tensors[tensor].reason

    def type_text(self, tensor: str) -> str:
        """Seed 001's type string of ``tensor``: ``f32[4@X,8@Y]``."""
        return to_jax_type(self.sharding(tensor), self.shapes[tensor], self.dtypes[tensor])


# -- errors ------------------------------------------------------------------------------

def _axis_text(ref: AxisRef) -> str:
    return ref.name if ref.is_full else f"{ref.name}:({ref.pre_size}){ref.size}"


def _dims_type(dtype: str, shape: Sequence[int], dims: Sequence[Sequence[AxisRef]],
               unreduced: Sequence[AxisRef] = ()) -> str:
    """A type string for axes that need not form a valid sharding (the illegal result)."""
    def dim(size, axes):
        if not axes:
            return str(size)
        if len(axes) == 1:
            return f"{size}@{_axis_text(axes[0])}"
        return f"{size}@(" + ",".join(map(_axis_text, axes)) + ")"
    text = f"{dtype}[" + ",".join(dim(s, a) for s, a in zip(shape, dims)) + "]"
    if unreduced:
        text += "{unreduced:" + ",".join(map(_axis_text, unreduced)) + "}"
    return text


class _OpContext:
    """What error messages about one op need: its name, kind, input types and location."""

    def __init__(self, op, in_types: Sequence[str], where: str | None):
        self.op = op
        self.head = f"{op.op} operation with inputs: {', '.join(in_types)}"
        self.where = where

    def error(self, problem: str) -> RuleError:
        advice = f". Pass an explicit out_sharding to op {self.op.name!r} to choose how its result is sharded"
        return RuleError(f"{self.head} {problem}{advice}", where=self.where)


# -- the rules JAX types ops by ------------------------------------------------------------------

def _size(axes: Sequence[AxisRef], mesh: Mesh) -> int:
    n = 1
    for a in axes:
        n *= a.size_in(mesh)
    return n


def _factor_dims(rule: OpShardingRule, f: int) -> list[tuple[int, int]]:
    """``(operand, dimension)`` of every operand dimension factor ``f`` appears in."""
    return [(i, d) for i, dims in enumerate(rule.operands) for d, factors in enumerate(dims) if f in factors]


def _read(ctx: _OpContext, rule: OpShardingRule,
          ins: Sequence[TensorSharding]) -> list[tuple[tuple[AxisRef, ...], ...]]:
    try:
        return [factor_axes_from_tensor(rule, i, s) for i, s in enumerate(ins)]
    except RuleError as e:
        raise ctx.error(f"has a sharding its rule cannot read: {e.message}") from None


def _agree(ctx: _OpContext, rule: OpShardingRule, per_operand, f: int) -> tuple[AxisRef, ...]:
    """Seed 001's consensus for factor ``f``: unsharded, the one sharding that appears, else an error."""
    seen: dict[tuple[AxisRef, ...], str] = {}
    for i, d in _factor_dims(rule, f):
        if per_operand[i][f]:
            seen.setdefault(per_operand[i][f], f"input {i} dimension {d}")
    if len(seen) > 1:
        parts = [f"{{{', '.join(map(_axis_text, axes))}}} ({where})" for axes, where in seen.items()]
        raise ctx.error(f"has conflicting shardings for one dimension: {' and '.join(parts)}")
    return next(iter(seen), ())


def _dot_factor(ctx: _OpContext, rule: OpShardingRule, per_operand, f: int) -> tuple[AxisRef, ...]:
    """JAX's dot_general rule for a factor both operands have: a batch factor takes the left operand's
    axes (after checking the right one's do not conflict); a contracting factor sharded on both
    sides is ambiguous (JAX asks for ``out_sharding``); sharded on one side it is summed and dropped."""
    left, right = per_operand[0][f], per_operand[1][f]
    contracting = f not in {g for factors in rule.result for g in factors}
    name = "contracting" if contracting else "batch"
    if left and right and left != right:
        raise ctx.error(f"shards its {name} dimension differently in its two inputs: "
                        f"{{{', '.join(map(_axis_text, left))}}} and {{{', '.join(map(_axis_text, right))}}}")
    if contracting and left and right:
        raise ctx.error(f"shards its contracting dimension over {', '.join(map(_axis_text, left))} in both "
                        "inputs, so it is ambiguous how the result is sharded (a pending sum to reduce, "
                        "or scatter)")
    return left or right if contracting else left


def _positional(ctx: _OpContext, ins: Sequence[TensorSharding], in_shapes, out_shape, mesh: Mesh,
                rotated: tuple[int, int] | None = None):
    """JAX's rules of concatenate (every operand sharded alike; the result as they are), slice (the
    result as the operand, each sliced sharded dimension divisible by its axes), roll (``rotated``: its dimension
    and rotation; its two slices' rule, the result as the operand) and iota (no operand: the result replicated, as
    JAX types ``lax.iota`` without a ``sharding``)."""
    if not ins:
        return [() for _ in out_shape]
    if len(ins) > 1:
        if len({s.layout_only().dims_text() for s in ins}) > 1:
            raise ctx.error("needs every input sharded alike, and they are not")
        return [d.axes for d in ins[0].dims]
    for d, (n, m, dim) in enumerate(zip(in_shapes[0], out_shape, ins[0].dims)):
        # jnp.roll slices the rolled dimension in two pieces: each a slice of the operand
        pieces = (rotated[1], n - rotated[1]) if rotated is not None and d == rotated[0] else (m,)
        for piece in pieces:
            if n != piece and dim.axes and piece % _size(dim.axes, mesh):
                names = ", ".join(map(_axis_text, dim.axes))
                change = f"keeps {piece} of the {n} elements" if piece < n else f"pads to {piece} the {n} elements"
                raise ctx.error(f"{change} of dimension {d}, sharded over {names}, and "
                                f"{_size(dim.axes, mesh)} shards do not divide {piece}")
    return [d.axes for d in ins[0].dims]


def _typed_axes(ctx: _OpContext, graph, op, rule: OpShardingRule, ins: Sequence[TensorSharding], in_specs,
                out_spec, mesh: Mesh) -> tuple[list[tuple[AxisRef, ...]], tuple[AxisRef, ...]]:
    """Per result dimension its axes, and the axes a summed factor drops (reduced by an AllReduce)."""
    family = get_op(op.op).family
    in_region = graph.region_of_op(op.name) is not None  # a manual region's body computes on local blocks
    per_operand = _read(ctx, rule, ins)
    in_result = {f for factors in rule.result for f in factors}
    only_in_result = [f for f in in_result if not _factor_dims(rule, f)]
    moved = rule.factors_of_kind(FactorKind.PERMUTATION)  # concat's axis: JAX types it by position
    if (only_in_result or moved) and family == "shape" and not in_region:
        rotated = None if rule.rotation is None else (
            next(d for d, factors in enumerate(rule.result) if moved[0] in factors), rule.rotation)
        dims = _positional(ctx, ins, [t.shape for t in in_specs], out_spec.shape, mesh, rotated)
        return [tuple(a) for a in dims], ()
    if family == "indexing" and not in_region:
        _gather_resolves(ctx, rule, per_operand)
    alike = tuple(i for i in get_op(op.op).sharded_alike if i < len(ins))
    full = all(tuple(in_specs[i].shape) == tuple(out_spec.shape) for i in alike)
    if full and len({ins[i].layout_only().dims_text() for i in alike}) > 1:  # JAX's select: cases (and predicate) alike
        raise ctx.error("needs its inputs of the result's shape sharded alike (JAX's select: the cases, and a "
                        "predicate that is not a scalar; its sort: keys and payload), and they are not: "
                        + ", ".join(f"input {i} {ins[i].layout_only().dims_text()}" for i in alike))
    typed = get_op(op.op).typed_alike
    if len({ins[i].layout_only().dims_text() for i in typed}) > 1:  # JAX's dynamic_update_slice: operand, update
        raise ctx.error("needs its inputs sharded alike (JAX's dynamic_update_slice: the operand and the update), "
                        "and they are not: "
                        + ", ".join(f"input {i} {ins[i].layout_only().dims_text()}" for i in typed))
    # a dot (JAX's dot_general): two operands on the matmul units, no windowed factor (a convolution's)
    dot = get_op(op.op).matmul_units and len(ins) == 2 and FactorKind.NEED_REPLICATION not in rule.factor_kinds
    chosen: list[tuple[AxisRef, ...]] = []
    summed: list[AxisRef] = []
    for f in range(rule.num_factors):
        operands = {i for i, _ in _factor_dims(rule, f)}
        if dot and operands == {0, 1}:
            axes = _dot_factor(ctx, rule, per_operand, f)
        else:
            axes = _agree(ctx, rule, per_operand, f)
        kind = rule.factor_kinds[f]
        if f not in in_result:  # reduced away: the result is replicated on its axes
            if kind is FactorKind.REDUCTION:
                summed += axes
            elif axes and kind is FactorKind.NEED_REPLICATION and (family != "reduction" or in_region):
                _needs_replication(ctx, rule, f, axes)
            axes = ()
        elif axes and kind is FactorKind.NEED_REPLICATION and (family != "normalization" or in_region):
            _needs_replication(ctx, rule, f, axes)
        elif axes and kind is FactorKind.PERMUTATION and (rule.whole_permutation or family == "selection") \
                and not in_region:  # JAX's cumulative reductions and sort: "unsharded over the axis"
            _needs_replication(ctx, rule, f, axes)
        chosen.append(axes)
    dims = [tuple(a for f in factors for a in chosen[f]) for factors in rule.result]
    used = [a for axes in dims for a in axes]
    if any(a.overlaps(b) for k, a in enumerate(used) for b in used[k + 1:]):
        raise ctx.error(f"produces an illegally sharded result: {_dims_type(out_spec.dtype, out_spec.shape, dims)}")
    checked = tuple(() if rule.factor_kinds[f] is FactorKind.NEED_REPLICATION else axes
                    for f, axes in enumerate(chosen))
    try:
        check_factor_axes(rule, checked, mesh)
    except RuleError as e:
        raise ctx.error(f"cannot shard its result: {e.message}") from None
    pending = tuple(a for a in sort_axes(summed, mesh) if not any(a.overlaps(b) for b in used))
    return dims, pending


def _gather_resolves(ctx: _OpContext, rule: OpShardingRule, per_operand) -> None:
    """JAX's typing of a gather (``_gather_spec_computation``): the operand's indexed dimension replicated, every
    dimension of the indices that is not a batch dimension shared with the operand replicated (its backward
    would scatter across devices), and a batch dimension sharded alike wherever both shard it; else JAX asks for
    an out_sharding."""
    for f in range(rule.num_factors):
        sides = {i: per_operand[i][f] for i, _ in _factor_dims(rule, f)}
        sharded = {i: axes for i, axes in sides.items() if axes}
        if not sharded:
            continue
        if rule.factor_kinds[f] is FactorKind.REDUCTION:
            why = "the dimension it indexes into"
        elif 0 not in sides:
            why = "a dimension of its indices that the operand does not share"
        elif len(set(sharded.values())) > 1:
            why = "a batch dimension, differently in the operand and the indices"
        else:
            continue
        i, d = next((i, d) for i, d in _factor_dims(rule, f) if i in sharded)
        names = ", ".join(map(_axis_text, sharded[i]))
        raise ctx.error(f"shards {why} (input {i} dimension {d}, over {names}): the gather's result type cannot "
                        "be resolved unambiguously (reshard the operands first, or see below)")


def _needs_replication(ctx: _OpContext, rule: OpShardingRule, f: int, axes) -> None:
    i, d = _factor_dims(rule, f)[0]
    names = ", ".join(map(_axis_text, axes))
    raise ctx.error(f"shards dimension {d} of input {i} over {names}, but {ctx.op.op} needs that "
                    "dimension replicated")


def _check_out_sharding(ctx: _OpContext, rule: OpShardingRule | None, ins: Sequence[TensorSharding],
                        out: TensorSharding) -> None:
    """JAX's checks of an ``out_sharding`` naming pending sums: only a summing op may leave them, over
    exactly the axes its operands shard the summed factors by, alike in every operand."""
    if not out.unreduced:
        return
    summed = [] if rule is None else rule.factors_of_kind(FactorKind.REDUCTION)
    if not summed:
        raise ctx.error(f"is given an out_sharding with pending sums over "
                        f"{', '.join(map(_axis_text, out.unreduced))}, but it sums over nothing")
    per_operand = _read(ctx, rule, ins)
    for f in summed:
        sides = {per_operand[i][f] for i, _ in _factor_dims(rule, f)}
        if len(sides) > 1:
            raise ctx.error("is given an out_sharding with pending sums, which needs its summed dimensions "
                            "sharded alike in every input, and they are not")
    axes = sort_axes((a for f in summed for a in per_operand[_factor_dims(rule, f)[0][0]][f]), out.mesh)
    if set(merge_adjacent(axes, out.mesh)) != set(out.unreduced):
        raise ctx.error(f"is given an out_sharding with pending sums over {', '.join(map(_axis_text, out.unreduced))}, "
                        f"but its summed dimensions are sharded over {{{', '.join(map(_axis_text, axes))}}}; "
                        "the pending sums must be those axes")


# -- reshape (JAX's rule) ------------------------------------------------------------------------

class _Unsupported(Exception):
    """A reshape JAX does not type (it asks for ``out_sharding``)."""


def _split_on_one_axis(op_shape: Sequence[int], new_sizes: Sequence[int]) -> tuple[bool, list]:
    """JAX's ``_split_on_one_axis``: whether the reshape splits exactly one dimension, and per input
    dimension its size (kept) or the list of sizes it splits into."""
    if len(new_sizes) <= len(op_shape):
        return False, []
    op_shape, new_sizes = list(op_shape), list(new_sizes)
    num_1s = 0
    while op_shape and new_sizes and op_shape[-1] == 1 and new_sizes[-1] == 1:
        num_1s += 1
        op_shape, new_sizes = op_shape[:-1], new_sizes[:-1]
    i, j, count, out = 0, 0, 0, []
    try:
        while j < len(new_sizes):
            if op_shape[i] == new_sizes[j]:
                out.append(op_shape[i])
            else:
                count += 1
                if count > 1:
                    raise _Unsupported
                temp = [new_sizes[j]]
                next_j, next_i = j + 1, i + 1
                while math.prod(temp) != op_shape[i] or (next_j < len(new_sizes) and new_sizes[next_j] == 1):
                    if math.prod(temp) > op_shape[i]:
                        return False, []
                    if (math.prod(temp) == op_shape[i] and next_i < len(op_shape)
                            and new_sizes[next_j] == op_shape[next_i]):
                        break
                    j += 1
                    if j >= len(new_sizes):
                        return False, []
                    temp.append(new_sizes[j])
                    next_j += 1
                out.append(temp)
            i += 1
            j += 1
    except IndexError:
        raise _Unsupported from None
    out.extend([1] * num_1s)
    if len(out) != len(op_shape) + num_1s:
        raise _Unsupported
    return True, out


def _split_partitions(axes: Sequence[AxisRef], pieces: Sequence[int], mesh: Mesh) -> list[tuple[AxisRef, ...]]:
    """JAX's ``split_partitions``: deal whole axes, major to minor, to the pieces of a dimension; each
    piece takes axes until they fill it, and every axis must divide what is left of its piece."""
    rest = list(axes)
    out = []
    for o in pieces:
        taken = []
        while o > 1 and rest:
            a = rest.pop(0)
            o, remainder = divmod(o, a.size_in(mesh))
            if remainder:
                raise _Unsupported
            taken.append(a)
        out.append(tuple(taken))
    if rest:
        raise _Unsupported
    return out


def _reshape_axes(sharding: TensorSharding, in_shape: Sequence[int], out_shape: Sequence[int]):
    """JAX's reshape rule: per output dimension its axes, and what kind of reshape it was."""
    mesh = sharding.mesh
    axes = [d.axes for d in sharding.dims]
    if not any(axes):
        return [() for _ in out_shape], "unsharded"
    if [n for n in in_shape if n != 1] == [n for n in out_shape if n != 1]:
        kept = iter(a for n, a in zip(in_shape, axes) if n != 1)
        return [() if n == 1 else next(kept) for n in out_shape], "singleton dimensions only"
    is_split, split = _split_on_one_axis(in_shape, out_shape)
    if is_split:
        out = []
        for piece, a in zip(split, axes):
            if not isinstance(piece, list):
                out.append(a)
            elif not a:
                out += [()] * len(piece)
            else:
                out += _split_partitions(a, piece, mesh)
        return out, "split"
    is_merge, merge = (False, []) if len(out_shape) >= len(in_shape) else _split_on_one_axis(out_shape, in_shape)
    if is_merge:
        out, k = [], 0
        for n, piece in zip(out_shape, merge):
            if not isinstance(piece, list):
                out.append(axes[k])
                k += 1
                continue
            group = [axes[k + m] for m in range(len(piece))]
            k += len(piece)
            while group and not group[-1]:
                group.pop()
            if not group:
                out.append(())
            elif not all(group):  # an unsharded dimension more major than a sharded one
                raise _Unsupported
            else:
                out += _split_partitions([a for g in group for a in g], [n], mesh)
        return out, "merge"
    raise _Unsupported


def _reshape_dims(ctx: _OpContext, sharding: TensorSharding, in_shape: Sequence[int],
                  out_shape: Sequence[int]) -> tuple[list[tuple[AxisRef, ...]], str]:
    for d, (size, dim) in enumerate(zip(in_shape, sharding.dims)):
        if size == 1 and dim.axes:
            raise ctx.error(f"shards dimension {d} of size 1; singleton dimensions cannot be sharded")
    try:
        return _reshape_axes(sharding, in_shape, out_shape)
    except _Unsupported:
        raise ctx.error(
            f"reshapes to {'x'.join(map(str, out_shape))} in a way JAX does not type: only a split of one "
            "dimension whose axes, major to minor, each divide the piece they fall in, or a merge of one run "
            "of dimensions whose sharded ones are its most major, keeps a sharding") from None


# -- the walk ----------------------------------------------------------------------------------------

def _keep(sharding: TensorSharding, keep) -> TensorSharding:
    """``sharding`` with only the axes ``keep`` accepts (an ``auto_axes`` region's operands, typed without its axes)."""
    dims = tuple(DimSharding(tuple(a for a in d.axes if keep(a)), d.is_open) for d in sharding.dims)
    return TensorSharding(sharding.mesh, dims, tuple(filter(keep, sharding.replicated)),
                          tuple(filter(keep, sharding.unreduced)))


def _where(graph, op) -> str | None:
    return None if op.line is None else f"{graph.source or '<string>'}:{op.line}"


def _uneven(sharding: TensorSharding, shape: Sequence[int]) -> str | None:
    """How ``sharding`` fails to split ``shape`` into equal shards (JAX's types hold equal shards only), or None."""
    for d, (size, dim) in enumerate(zip(shape, sharding.dims)):
        n = _size(dim.axes, sharding.mesh)
        if size % n:
            return (f"splits dimension {d} {n} ways (over {', '.join(map(_axis_text, dim.axes))}), which does not "
                    f"evenly divide the dimension size {size}; in explicit mode every shard of a typed value has the "
                    f"same size, as in JAX: shard dimension {d} over axes whose sizes divide {size}, or pad it")
    return None


def _start(graph) -> dict[str, TypedTensor]:
    decided = {}
    for t in graph.tensors.values():
        if t.kind == "activation":
            continue
        if t.sharding is None:
            decided[t.name] = TypedTensor(TensorSharding.replicated_on(graph.mesh, t.rank),
                                       f"{t.kind} {t.name!r} has no sharding: replicated")
        else:
            problem = _uneven(t.sharding, t.shape)
            if problem is not None:
                where = None if t.line is None else f"{graph.source or '<string>'}:{t.line}"
                raise RuleError(f"{t.kind} {t.name!r} {to_jax_type(t.sharding, t.shape, t.dtype)}: its sharding "
                                f"{problem}", where=where)
            decided[t.name] = TypedTensor(t.sharding, f"annotation on {t.kind} {t.name!r}")
    return decided


def decide_op(graph, op, ins: Sequence[TensorSharding], in_specs, out_spec) -> tuple[TypedTensor, tuple[AllReduce, ...]]:
    """One op's result type from its operands' types (JAX's rule for the op, or its ``out_sharding``), and
    the AllReduce a summed factor that the typing drops inserts; errors as :func:`explicit_shardings`'."""
    types = [to_jax_type(s, t.shape, t.dtype) for s, t in zip(ins, in_specs)]
    ctx = _OpContext(op, types, _where(graph, op))
    meshes = {s.mesh for s in ins}
    if len(meshes) > 1:
        raise ctx.error("has inputs on different meshes (" + ", ".join(sorted("@" + m.name for m in meshes)) + ")")
    mesh = ins[0].mesh if ins else graph.mesh
    head = f"op {op.name!r} ({op.op})"
    if op.out_sharding is not None:
        problem = _uneven(op.out_sharding, out_spec.shape)
        if problem is not None:
            raise RuleError(f"{ctx.head}: the out_sharding given to op {op.name!r} for its result of shape "
                            f"{list(out_spec.shape)} {problem}", where=ctx.where)
        rule = None if op.op == "reshape" else _rule(ctx, op, in_specs, out_spec)
        _check_out_sharding(ctx, rule, ins, op.out_sharding)
        if not get_op(op.op).requires_out_sharding:  # a sharding constraint reduces, as JAX's reshard
            _check_reduced(ctx, ins)
        return TypedTensor(op.out_sharding, f"out_sharding given on op {op.name!r}"), ()
    pending = _pending_through(ctx, op, ins)
    if pending:
        ins = [s.with_unreduced(()) for s in ins]
    if op.op == "reshape":
        dims, how = _reshape_dims(ctx, ins[0], in_specs[0].shape, out_spec.shape)
        return TypedTensor(TensorSharding.build(mesh, dims), f"{head}: JAX's reshape rule ({how})"), ()
    rule = _rule(ctx, op, in_specs, out_spec)
    dims, reduced = _typed_axes(ctx, graph, op, rule, ins, in_specs, out_spec, mesh)
    reason = f"{head}: consensus of its inputs {', '.join(op.inputs)}"
    collectives: tuple[AllReduce, ...] = ()
    if reduced:
        how = "summed" if rule.reduction == PENDING_SUM else f"reduced by {rule.reduction}"
        reason += f"; {how} over {{{', '.join(map(str, reduced))}}}, reduced by an AllReduce"
        collectives = (AllReduce(op.output, reduced, rule.reduction),)
    if pending:
        reason += f"; pending over {{{', '.join(map(_axis_text, pending))}}} as its inputs are (a linear op)"
    return TypedTensor(TensorSharding.build(mesh, dims, unreduced=pending), reason), collectives


def _pending_through(ctx: _OpContext, op, ins: Sequence[TensorSharding]) -> tuple[AxisRef, ...]:
    """The axes the op's result stays pending over: those its inputs are pending over, where the op is linear in
    them jointly (:attr:`~graphs.ops.opdef.OpDef.keeps_pending`) and every input is pending over the same axes (a
    sum only); otherwise an input pending at all is an error, as in JAX."""
    pending = [s.unreduced for s in ins]
    if not any(pending):
        return ()
    if not get_op(op.op).keeps_pending:
        _check_reduced(ctx, ins)
        return ()
    if len({frozenset(p) for p in pending}) == 1 and all(s.reduction == PENDING_SUM for s in ins):
        return pending[0]
    sides = "; ".join(f"input {i} over {{{', '.join(map(_axis_text, p))}}}" if p else f"input {i} over none"
                      for i, p in enumerate(pending))
    first = next(i for i, p in enumerate(pending) if p)
    raise ctx.error(f"reads input {first} with pending sums, and {op.op} passes a pending sum on only when "
                    f"every input is pending over the same axes ({sides}); reduce them first (a "
                    "sharding_constraint whose out_sharding names no pending sums)")


def _rule(ctx: _OpContext, op, in_specs, out_spec) -> OpShardingRule:
    try:
        return rule_for(op, [t.shape for t in in_specs], out_spec.shape, op.attrs_dict)
    except RuleError as e:
        raise ctx.error(f"has no usable sharding rule: {e.message}") from None


def _check_reduced(ctx: _OpContext, ins: Sequence[TensorSharding]) -> None:
    for i, s in enumerate(ins):
        if s.unreduced:
            raise ctx.error(f"reads input {i} with pending sums over {{{', '.join(map(_axis_text, s.unreduced))}}}; "
                            "reduce them first (a sharding_constraint whose out_sharding names no pending sums)")


def explicit_shardings(graph) -> ExplicitResult:
    """Seed 001's explicit mode over a whole :class:`~graphs.graph.ComputationGraph` (see the module docstring).

    In an ``auto_axes`` region (:mod:`graphs.axis_regions`) the region's axes are Auto: its ops are typed on
    the other axes, and each output leaves typed by the region's out-sharding on the region's axes.

    Raises :class:`~planner.errors.RuleError` at the first op whose result the
    consensus rule cannot decide.
    """
    decided = _start(graph)
    collectives: dict[str, tuple[AllReduce, ...]] = {}
    for op, in_specs, out_spec in graph.walk():
        ins = [decided[t.name].sharding for t in in_specs]
        region = region_of(graph.axis_regions, op.name)
        auto = frozenset(region.axes) if region is not None and region.kind == "auto" else frozenset()
        try:
            decision, inserted = decide_op(graph, op, [_keep(s, lambda a: a.name not in auto) for s in ins],
                                           in_specs, out_spec)
            leaving = region.sharding(op.output) if auto else None
            if leaving is not None:  # back to the caller typed by the region's out-sharding on its axes
                out = translate(leaving, decision.sharding.mesh, out_spec.shape)
                typed = TensorSharding.build(out.mesh, [
                    d.axes + tuple(a for a in o.axes if a.name in auto)
                    for d, o in zip(decision.sharding.dims, out.dims)], unreduced=decision.sharding.unreduced)
                decision = TypedTensor(typed, f"{decision.reason}; leaves auto_axes region {region.name!r} typed "
                                              f"by its out_shardings {leaving.dims_text()}")
        except RuleError:
            raise
        except ShardplanError as e:  # a sharding the representation rejects, e.g. from out_sharding
            raise RuleError(f"op {op.name!r}: {e.message}", where=_where(graph, op)) from None
        decided[op.output] = decision
        collectives[op.name] = inserted
    return ExplicitResult(
        MappingProxyType(decided),
        MappingProxyType(collectives),
        MappingProxyType({t.name: t.dtype for t in graph.tensors.values()}),
        MappingProxyType({t.name: t.shape for t in graph.tensors.values()}),
    )


__all__ = ["AllReduce", "TypedTensor", "ExplicitResult", "decide_op", "explicit_shardings"]


def factor_axes_computing(rule, operands, result, mesh) -> tuple:
    """The factor sharding computing ``result`` from ``operands`` as they are, else in ``result``'s (a
    dimension the rule needs whole computed whole, and ``result`` sliced from it). An operand with pending
    sums (read only by a constraint, JAX's reshard) is reduced into ``result``'s layout: a reduce-scatter
    where ``result`` is sharded, not an all-reduce and a slice."""
    try:
        per_operand = [factor_axes_from_tensor(rule, k, s) for k, s in enumerate(operands)]
    except RuleError:
        per_operand = None
    if any(s.unreduced for s in operands):
        per_operand = None
    agreed = [] if per_operand is not None else None
    for f in range(rule.num_factors if per_operand is not None else 0):
        seen = {fa[f] for fa in per_operand if fa[f]}
        if len(seen) > 1:
            agreed = None
            break
        agreed.append(next(iter(seen), ()))
    if agreed is not None:
        try:
            check_factor_axes(rule, tuple(agreed), mesh)
            return tuple(agreed)
        except RuleError:
            pass
    from_result = tuple(merge_adjacent(a, mesh) for a in factor_axes_from_tensor(rule, "result", result))
    try:
        check_factor_axes(rule, from_result, mesh)
        return from_result
    except RuleError:  # a dimension JAX keeps sharded that the rule needs whole: computed whole, then sliced
        return tuple(() if rule.factor_kinds[f] is FactorKind.NEED_REPLICATION else a
                     for f, a in enumerate(from_result))
