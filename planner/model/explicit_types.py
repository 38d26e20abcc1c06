"""Explicit ("typed") sharding mode (seed 001): shardings flow forward op by op by consensus.

:func:`explicit_shardings` walks the graph in topological order. Graph inputs,
parameters and constants start from their ``sharding`` (replicated without
one); an op's ``out_sharding`` overrides its result; otherwise the op's factor
rule (:mod:`planner.rules`) decides, **per factor**:

- unsharded if every operand leaves it unsharded;
- the common sharding if exactly one distinct non-empty sharding appears;
- otherwise a :class:`~planner.errors.RuleError`: ``... has conflicting shardings
  for one dimension: ...``.

A result that would use one mesh axis twice is the error of seed 001
(``add operation with inputs: i32[4@X,4], i32[4,4@X] produces an illegally
sharded result: i32[4@X,4@X]``). A sharded ``NEED_REPLICATION`` factor (a
softmax axis, a concat axis) is an error too. Every error ends with advice to
give that op an explicit ``out_sharding``. A sharded ``REDUCTION`` factor is
reduced at once, as JAX inserts a psum: the result is replicated on those axes
and the op records an :class:`AllReduce`.

``reshape`` follows seed 001 instead of its factor rule: singleton dims are
stripped; a split or merge of an unsharded dimension gives unsharded dimensions,
other dimensions follow their input dimensions; anything else is an error. Our
extension: a split of a *sharded* dimension whose axes split evenly
over the new dimensions, major to minor, keeps the layout with sub-axes
(``tensor<8>`` ``[{"x"}]`` on ``x=4`` reshaped to ``2x4`` gives
``[{"x":(1)2}, {"x":(2)2}]``). Op strategies are ignored in this mode.

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

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Sequence

from planner.errors import RuleError, ShardplanError
from planner.ir.axis import AxisRef, merge_adjacent, sort_axes
from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding
from planner.rules import (
    FactorKind,
    OpShardingRule,
    check_factor_axes,
    factor_axes_from_tensor,
    reshape_rule,
    rule_for,
)
from planner.notations.jax import to_jax_type


@dataclass(frozen=True, slots=True)
class AllReduce:
    """A sum over ``axes`` inserted after an op whose contracting factor was sharded (JAX's psum)."""

    tensor: str
    axes: tuple[AxisRef, ...]

    def __str__(self) -> str:
        return f"AllReduce({self.tensor}) over {{{', '.join(map(str, self.axes))}}}"


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


# -- consensus ------------------------------------------------------------------------------

def _consensus(ctx: _OpContext, rule: OpShardingRule, ins: Sequence[TensorSharding]) -> list[tuple[AxisRef, ...]]:
    per_operand = []
    for i, s in enumerate(ins):
        try:
            per_operand.append(factor_axes_from_tensor(rule, i, s))
        except RuleError as e:
            raise ctx.error(f"has a sharding its rule cannot read: {e.message}") from None
    chosen: list[tuple[AxisRef, ...]] = []
    for f in range(rule.num_factors):
        seen: dict[tuple[AxisRef, ...], list[str]] = {}
        for i, fa in enumerate(per_operand):
            if fa[f]:
                dims = [d for d, factors in enumerate(rule.operands[i]) if f in factors]
                seen.setdefault(fa[f], []).append(f"input {i} dimension {dims[0]}")
        if len(seen) > 1:
            parts = [f"{{{', '.join(map(_axis_text, axes))}}} ({where[0]})" for axes, where in seen.items()]
            raise ctx.error(f"has conflicting shardings for one dimension: {' and '.join(parts)}")
        chosen.append(next(iter(seen), ()))
    return chosen


def _check_chosen(ctx: _OpContext, rule: OpShardingRule, chosen: Sequence[tuple[AxisRef, ...]],
                  out_shape: Sequence[int], out_dtype: str, mesh: Mesh) -> None:
    for f, axes in enumerate(chosen):
        if axes and rule.factor_kinds[f] is FactorKind.NEED_REPLICATION:
            i = next(i for i, dims in enumerate(rule.operands) if any(f in d for d in dims))
            d = next(d for d, factors in enumerate(rule.operands[i]) if f in factors)
            names = ", ".join(map(_axis_text, axes))
            raise ctx.error(f"shards dimension {d} of input {i} over {names}, but {ctx.op.op} needs that "
                            "dimension replicated")
    used = [a for axes in chosen for a in axes]
    if any(a.overlaps(b) for k, a in enumerate(used) for b in used[k + 1:]):
        dims = [[a for f in factors for a in chosen[f]] for factors in rule.result]
        pending = sort_axes((a for f in rule.factors_of_kind(FactorKind.REDUCTION) for a in chosen[f]), mesh)
        raise ctx.error(f"produces an illegally sharded result: {_dims_type(out_dtype, out_shape, dims, pending)}")
    try:
        check_factor_axes(rule, tuple(chosen), mesh)
    except RuleError as e:
        raise ctx.error(f"cannot shard its result: {e.message}") from None


# -- reshape (seed 001) ---------------------------------------------------------------------------

def _groups(a: Sequence[int], b: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Pair runs of ``a``'s dims with runs of ``b``'s whose sizes multiply to the same number."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        gi, gj, pa, pb = [i], [j], a[i], b[j]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                gi.append(i)
                pa *= a[i]
                i += 1
            else:
                gj.append(j)
                pb *= b[j]
                j += 1
        out.append((gi, gj))
    return out


def _reshape_dims(ctx: _OpContext, sharding: TensorSharding, in_shape: Sequence[int],
                  out_shape: Sequence[int]) -> tuple[list[tuple[AxisRef, ...]], str]:
    """Output axes per dimension under seed 001's reshape rule (plus sub-axis splits), and how."""
    for d, (size, dim) in enumerate(zip(in_shape, sharding.dims)):
        if size == 1 and dim.axes:
            raise ctx.error(f"shards dimension {d} of size 1; singleton dimensions cannot be sharded")
    src = [d for d, size in enumerate(in_shape) if size != 1]
    dst = [d for d, size in enumerate(out_shape) if size != 1]
    out: list[tuple[AxisRef, ...]] = [() for _ in out_shape]
    how = []
    for gi, gj in _groups([in_shape[d] for d in src], [out_shape[d] for d in dst]):
        ins, outs = [src[k] for k in gi], [dst[k] for k in gj]
        axes = [sharding.dims[d].axes for d in ins]
        if len(ins) == 1 and len(outs) == 1:
            out[outs[0]] = axes[0]
            continue
        if not any(axes):
            how.append("split" if len(ins) == 1 else "merge" if len(outs) == 1 else "regroup")
            continue
        if len(ins) == 1:
            out_sizes = [out_shape[d] for d in outs]
            rule = reshape_rule((in_shape[ins[0]],), out_sizes)
            one_dim = TensorSharding.build(sharding.mesh, [axes[0]])
            try:
                fa = factor_axes_from_tensor(rule, 0, one_dim)
                check_factor_axes(rule, fa, sharding.mesh)
            except RuleError:
                names = ", ".join(map(_axis_text, axes[0]))
                raise ctx.error(
                    f"splits dimension {ins[0]} sharded over {names} into sizes "
                    f"{'x'.join(map(str, out_sizes))}, and those axes do not split evenly over them major to minor"
                ) from None
            for d, factors in zip(outs, rule.result):
                out[d] = tuple(a for f in factors for a in fa[f])
            how.append("split of a sharded dimension into sub-axes")
            continue
        kind = f"merges dimensions {ins}" if len(outs) == 1 else f"regroups dimensions {ins} into {outs}"
        raise ctx.error(f"{kind} of which some are sharded; only a split or merge of unsharded dimensions "
                        "(or an even split of a sharded one) keeps the sharding")
    return out, ", ".join(how) if how else "dimensions kept"


# -- the walk ----------------------------------------------------------------------------------------

def _where(graph, op) -> str | None:
    return None if op.line is None else f"{graph.source or '<string>'}:{op.line}"


def _start(graph) -> dict[str, TypedTensor]:
    decided = {}
    for t in graph.tensors.values():
        if t.kind == "activation":
            continue
        if t.sharding is None:
            decided[t.name] = TypedTensor(TensorSharding.replicated_on(graph.mesh, t.rank),
                                       f"{t.kind} {t.name!r} has no sharding: replicated")
        else:
            decided[t.name] = TypedTensor(t.sharding, f"annotation on {t.kind} {t.name!r}")
    return decided


def decide_op(graph, op, ins: Sequence[TensorSharding], in_specs, out_spec) -> tuple[TypedTensor, tuple[AllReduce, ...]]:
    """One op's result type from its operands' types (the consensus rule, or its ``out_sharding``), and the
    AllReduce a summed factor sharded by the consensus inserts; errors as :func:`explicit_shardings`'."""
    types = [to_jax_type(s, t.shape, t.dtype) for s, t in zip(ins, in_specs)]
    ctx = _OpContext(op, types, _where(graph, op))
    if op.out_sharding is not None:
        return TypedTensor(op.out_sharding, f"out_sharding given on op {op.name!r}"), ()
    for i, s in enumerate(ins):
        if s.unreduced:
            raise ctx.error(f"reads input {i} with pending sums over {s.unreduced}; explicit mode reduces "
                            "results at once and takes no unreduced inputs")
    meshes = {s.mesh for s in ins}
    if len(meshes) > 1:
        raise ctx.error("has inputs on different meshes (" + ", ".join(sorted("@" + m.name for m in meshes)) + ")")
    mesh = ins[0].mesh if ins else graph.mesh
    head = f"op {op.name!r} ({op.op})"
    if op.op == "reshape":
        dims, how = _reshape_dims(ctx, ins[0], in_specs[0].shape, out_spec.shape)
        return TypedTensor(TensorSharding.build(mesh, dims), f"{head}: reshape rule of seed 001 ({how})"), ()
    try:
        rule = rule_for(op, [t.shape for t in in_specs], out_spec.shape, op.attrs_dict)
    except RuleError as e:
        raise ctx.error(f"has no usable sharding rule: {e.message}") from None
    chosen = _consensus(ctx, rule, ins)
    _check_chosen(ctx, rule, chosen, out_spec.shape, out_spec.dtype, mesh)
    dims = [[a for f in factors for a in chosen[f]] for factors in rule.result]
    reason = f"{head}: consensus of its inputs {', '.join(op.inputs)}"
    reduced = sort_axes((a for f in rule.factors_of_kind(FactorKind.REDUCTION) for a in chosen[f]), mesh)
    collectives: tuple[AllReduce, ...] = ()
    if reduced:
        factors = ",".join(rule.factor_names[f] for f in rule.factors_of_kind(FactorKind.REDUCTION) if chosen[f])
        reason += f"; summed factor {factors} reduced by an AllReduce over {{{', '.join(map(str, reduced))}}}"
        collectives = (AllReduce(op.output, reduced),)
    return TypedTensor(TensorSharding.build(mesh, dims), reason), collectives


def explicit_shardings(graph) -> ExplicitResult:
    """Seed 001's explicit mode over a whole :class:`~graphs.graph.ComputationGraph` (see the module docstring).

    Raises :class:`~planner.errors.RuleError` at the first op whose result the
    consensus rule cannot decide.
    """
    decided = _start(graph)
    collectives: dict[str, tuple[AllReduce, ...]] = {}
    for op, in_specs, out_spec in graph.walk():
        ins = [decided[t.name].sharding for t in in_specs]
        try:
            decision, inserted = decide_op(graph, op, ins, in_specs, out_spec)
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
    """The factor sharding computing ``result`` from ``operands`` as they are, else in ``result``'s."""
    try:
        per_operand = [factor_axes_from_tensor(rule, k, s) for k, s in enumerate(operands)]
    except RuleError:
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
    from_result = factor_axes_from_tensor(rule, "result", result)
    return tuple(merge_adjacent(a, mesh) for a in from_result)
