"""Device-variance types of a lowered program (seed 004), and its type check.

In the per-device program every value has a type such as ``f32[512,768]{dp}``: its
local shape and the mesh axes (sub-axes included) over which it may differ from
device to device. A value laid out as ``L`` varies over the axes that shard one of
its dimensions and over the axes it is a pending sum over; it is device-invariant
over every other axis (:func:`variance`).

Every instruction has a type rule:

* a redistribution step is the seed-004 collective its kind is in the registry
  :mod:`planner.collectives` (``AllReduce`` is ``psum``, ``AllGather`` is
  ``all_gather_invariant``: fused with a reader's pbroadcast it is ``all_gather``;
  a ``Slice`` that splits a dimension or starts a pending sum is ``pscatter``, no
  communication), checked by that primitive's type rule;
* a local op's operands must have one variance type: an operand that does not vary
  over an axis the op varies over is ``pbroadcast`` there (seed 004's automatic
  insertion, listed by :func:`pbroadcasts`); the result varies exactly where the op
  does (more only through a local slice: pscatter);
* the transpose of a local op gives each operand's cotangent the op's variance:
  its layout plus a pending sum over the operand's pbroadcast axes (the psum that
  transposes them);
* backward steps are the transposes of forward ones and follow the same rules.

:func:`planner.partitioning.program.typecheck` applies these rules to a whole
program and raises :class:`~planner.errors.VarianceError` naming the instruction,
the axis and the rule; the lowering runs it on every program it makes.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphs.ops.collectives import COLLECTIVE_OPS
from graphs.ops.registry import get_op
from planner.collectives import primitive, result_variance, step_kind
from planner.errors import VarianceError
from planner.ir.axis import AxisRef, merge_adjacent, sort_axes
from planner.ir.sharding import TensorSharding
from planner.ir.variance import VarType
from planner.redistribution.engine import permute_axes


@dataclass(frozen=True, order=True)
class _Atom:
    """An indivisible piece of a mesh axis: ``[lo, hi)`` of its index digits (sub-axes compare by pieces)."""

    axis: str
    lo: int
    hi: int

    def __str__(self) -> str:
        return f'"{self.axis}":({self.lo}){self.hi // self.lo}'


def _atoms(ref: AxisRef, mesh) -> frozenset:
    """``ref`` as prime pieces of its axis (any two sub-axes of one axis compare through them)."""
    lo, hi = ref.interval(mesh)
    out = []
    n = lo
    while n < hi:
        p = _smallest_prime(hi // n)
        out.append(_Atom(ref.name, n, n * p))
        n *= p
    return frozenset(out)


def _smallest_prime(n: int) -> int:
    p = 2
    while p * p <= n:
        if n % p == 0:
            return p
        p += 1
    return n


def variance(layout: TensorSharding) -> frozenset:
    """The pieces of mesh axes a value laid out as ``layout`` varies over (dims and pending sums)."""
    mesh = layout.mesh
    out: set = set()
    for ref in layout.used_axes():
        out |= _atoms(ref, mesh)
    return frozenset(out)


def _refs(atoms: frozenset, mesh) -> tuple[AxisRef, ...]:
    """The pieces merged back into (sub-)axes, in mesh order."""
    refs = [AxisRef(a.axis, a.lo, a.hi // a.lo) if (a.lo, a.hi) != (1, mesh.axis_size(a.axis)) else AxisRef(a.axis)
            for a in sorted(atoms)]
    return merge_adjacent(sort_axes(refs, mesh), mesh) if refs else ()


def variance_text(atoms: frozenset, mesh) -> str:
    """``{"dp", "tp"}``: the pieces merged back into (sub-)axes, in mesh order."""
    return "{" + ", ".join(map(str, _refs(atoms, mesh))) + "}"


def type_text(dtype: str, shape, layout: TensorSharding, manual=()) -> str:
    """Seed 004's ``f32[3,4]{"i"}`` (:class:`planner.ir.variance.VarType`): the local shape and the
    variance of ``layout`` (plus the manual axes ``manual`` of a region's body value), as (sub-)axes in
    mesh order."""
    refs = _refs(variance(layout) | manual_atoms(manual, layout.mesh), layout.mesh)
    return VarType(dtype, tuple(layout.local_shape(shape)), frozenset(refs)).text(order=refs)


def step_primitive(step) -> str:
    """The seed-004 collective a redistribution step is (forward or transposed)."""
    return step_kind(step.kind).primitive


def check_step(step, where: str) -> None:
    """The type rule of one redistribution step (a :class:`~planner.redistribution.steps.Step`).

    A step may also slice pieces its group does not use (a fused pscatter: those
    pieces were invariant and become varying); what it may never do is lose a
    piece its collective does not sum or gather (that would need a psum).
    """
    if step.before.mesh != step.after.mesh:
        return  # a change of device order: a ppermute between meshes, typed by its own pairs
    mesh = step.before.mesh
    before, after = variance(step.before), variance(step.after)
    name = step_primitive(step)
    proven = frozenset()
    if step.kind == "Slice":
        axes = after - before
    elif step.kind == "CollectivePermute":
        axes, proven = _permute_types(step, mesh, before, after)
    else:
        axes = frozenset().union(*(_atoms(a, mesh) for a in step.axes))
    if not axes:
        got = before
    else:
        operand = before | axes if step.kind == "CollectivePermute" else before  # its implicit pbroadcast
        got = result_variance(name, operand, tuple(sorted(axes)), where=where,
                              operand=f"{step.before.dims_text()} (varying over {variance_text(before, mesh)})")
    lost = got - after - proven
    if lost:
        raise VarianceError(
            f"{name} over {variance_text(axes, mesh)} gives a value varying over {variance_text(got, mesh)}, but "
            f"the step's result {step.after.dims_text()} varies only over {variance_text(after, mesh)}: axis "
            f"{variance_text(frozenset({min(lost)}), mesh)} is dropped without a psum or a gather "
            f"(rule: {name} {primitive(name).operand} -> {primitive(name).result})",
            where=where,
        )


def _permute_types(step, mesh, before: frozenset, after: frozenset) -> tuple[frozenset, frozenset]:
    """A ``CollectivePermute``'s ppermute: the axis pieces it runs over (those its pairs move blocks along, and
    those the value varies over before and after), and those its result is invariant over although ppermute's
    rule says varying (seed 004: varying -> varying; an operand invariant over some of them is pbroadcast first,
    as JAX's ``ppermute`` does).

    The engine builds the pairs on the device index map, so every device ends with its block of ``step.after``:
    along a piece the pairs move blocks along and ``step.after`` does not use, every device of a group holds the
    same block (``[{"dp"}]`` to ``[{"tp"}]``: the device that lacks its quarter receives it from one along
    ``dp`` that holds it). The value is invariant there, which seed 004's static rule cannot see; the planner
    types it by its layout. A piece the pairs do not move along stays as the rule says (dropping one needs a
    psum or a gather). Its transpose is the inverse permute of the cotangent (whole: a pending cotangent is
    summed first, :mod:`planner.redistribution.transpose`)."""
    moved = frozenset().union(*(_atoms(a, mesh) for a in permute_axes(mesh, step.pairs)))
    return (before & after) | moved, moved - after


def pbroadcasts(strategy) -> tuple[frozenset, ...]:
    """Per operand: the axis pieces it is pbroadcast over (the op varies there, the operand does not)."""
    op_var = frozenset().union(*(variance(o) for o in strategy.operands)) if strategy.operands else frozenset()
    return tuple(op_var - variance(o) for o in strategy.operands)


def manual_atoms(names, mesh) -> frozenset:
    """The pieces of the (whole) manual axes ``names`` a body value varies over besides its layout."""
    return frozenset().union(*(_atoms(AxisRef(a), mesh) for a in names)) if names else frozenset()


def check_compute(ins, where: str) -> None:
    """A local op: its result varies where its (pbroadcast) operands do, or more through a local slice; an op
    that gathers its statistics (argmax over a sharded axis) is invariant over the axes it gathers over.

    In a manual region a value also varies over the manual axes ``ins.manual`` names; a body
    collective's manual types follow its primitive (checked when they are derived,
    :func:`planner.model.manual.manual_variance`), so only its free axes are checked here."""
    s = ins.strategy
    manual = getattr(ins, "manual", None)
    collective = manual is not None and ins.op.op in COLLECTIVE_OPS
    extra_in = manual[0] if manual is not None and not collective else ((),) * len(s.operands)
    extra_out = manual[1] if manual is not None and not collective else ()
    mesh = s.result.mesh
    op_var = frozenset().union(*(variance(o) | manual_atoms(e, mesh) for o, e in zip(s.operands, extra_in))) \
        if s.operands else frozenset()
    res = variance(s.result) | manual_atoms(extra_out, mesh)
    lost = op_var - res
    if lost and get_op(ins.op.op).gathered_statistics:  # its AllGathers give every device all the statistics
        lost -= frozenset().union(*(_atoms(a, mesh) for c in ins.collectives for a in c.axes))
    if lost:
        axis = variance_text(frozenset({min(lost)}), s.result.mesh)
        raise VarianceError(
            f"{where}: the operands vary over {axis} but the result {s.result.dims_text()} does not: a local op's "
            "result has its operands' variance type (rule: local ops keep variance); a psum is missing"
        )


def check_backprop(ins, where: str) -> None:
    """The transpose of a local op: every operand cotangent has the op's variance (pending where pbroadcast)."""
    s = ins.strategy
    manual = getattr(ins, "manual", None)
    if manual is not None and ins.op.op in COLLECTIVE_OPS:
        return  # a body collective's transpose is typed by its primitive (planner.model.manual)
    ins_manual, out_manual = manual if manual is not None else (((),) * len(s.operands), ())
    mesh = s.result.mesh
    op_var = variance(s.result) | manual_atoms(out_manual, mesh) | frozenset().union(
        *(variance(o) | manual_atoms(e, mesh) for o, e in zip(s.operands, ins_manual)))
    for k, lay in zip(ins.wrt, ins.cotangents):
        got = variance(lay) | manual_atoms(ins_manual[k], mesh)
        if got != op_var:
            diff = min(got ^ op_var)
            raise VarianceError(
                f"{where}: the cotangent of operand {k} laid out as {lay.dims_text()} varies over "
                f"{variance_text(got, lay.mesh)}, but the op varies over {variance_text(op_var, lay.mesh)} "
                f"(axis {variance_text(frozenset({diff}), lay.mesh)}; rule: the transpose of pbroadcast is psum, "
                "so an operand's cotangent is pending over its pbroadcast axes)"
            )
