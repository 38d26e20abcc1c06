"""Rule-based sharding propagation to a fixed point, as Shardy does it (seed 003): the engine the passes share.

Where BFS and the ILP price every candidate strategy, this pass only moves the
shardings the user wrote along the ops' factor rules (:mod:`planner.rules`), so a
compiler engineer can ask what propagation will do. Its result is a sharding per
tensor, where each axis came from and what every tensor looked like after each
phase; :mod:`planner.searches.propagate.plan` turns it into a plan. The passes
(:mod:`~planner.searches.propagate.basic`, :mod:`~planner.searches.propagate.aggressive`,
:mod:`~planner.searches.propagate.op_priority`, :mod:`~planner.searches.propagate.user_priority`)
are each a subclass of the previous one's :class:`Propagator`, overriding one step.

**Factors.** Visiting an op, every tensor it reads or writes is projected onto the
op's factors (a tensor dimension's axes split over its factors major to minor). Per
factor, the *compatible major axes* are the longest common prefix of the maximal
axis lists the tensors give it (:func:`compatible_axes`; a list that is a prefix of
another adds nothing, and ``"a":(1)2`` is a prefix of ``"a":(1)4``). Each tensor that
carries the factor then grows its own list towards them, minor-wards only, axis by
axis, and stops at the first axis that it already uses, that is explicitly
replicated or unreduced on it, that would land in a closed dimension or behind a
sharded more-minor factor, or that the factor cannot take (a size the factor does not
admit; the minor-most factor of a dimension may be split unevenly, Shardy's
``isMinorMost``: the dimension is padded).

Axes are handled as *atoms*: each mesh axis cut into prime pieces (in an order that
keeps every sub-axis the user wrote whole), so prefixes and conflicts of sub-axes are
plain comparisons.

**Passes** (``PASSES``), each building on the previous one:

* ``basic``: a factor's axes are also truncated at the first axis that another factor
  of the op wants or uses, and at the first one any tensor of the op cannot hold
  (:meth:`Propagator.truncated`), so every tensor grows to the same list;
* ``aggressive``: conflicts between factors are resolved instead: factors are taken
  in the order of the size of the tensor their axes come from (larger first, an
  elementwise op's operand at its broadcast size, then for
  an elementwise op the most sharded, then operand index, the result last), each
  tensor keeps what does not conflict with what it already got, results grow first and
  an elementwise op's operands take no more than its result then holds;
* ``op-priority``: the aggressive pass in levels (:data:`LEVELS`), each run to a fixed
  point: pass-through ops whose operands have a single use, then every pass-through op,
  then any op along its pass-through factors (a broadcast operand only receives),
  then every factor (still not from a broadcast operand), then everything;
* ``user-priority`` (the default): annotations of priority ``p0`` propagate through
  the whole program (with op priorities) before those of ``p1`` are restored, and so
  on; until its round a dimension of a later priority is closed and empty and its axes
  are explicitly replicated on its tensor; it is restored as written when its priority
  comes.

**Groups**, as Shardy's sharding groups: ``shard_as`` groups that share a tensor are
one group; where the members that have a sharding agree on it, every member starts
with it and a change to one member is copied to all (:meth:`Propagator._sync_groups`).
A ``shard_as`` group whose members' annotations differ, and a ``shard_like`` group
(soft), propagate between their members like an identity op; at the end of each phase
the members of such a ``shard_as`` group are made identical (the common prefix of
their dimensions). A ``propagation_barrier`` op lets shardings through only in its
``allowed_direction``; an op Shardy has no sharding rule for (``OpDef.shardy_rule``: ``erf``, ``erfc``,
CHLO ops) lets none through. A ``sharding_constraint`` op's result is annotated (its
``out_sharding``) and propagates from there; a fully closed one is also copied onto
its input, as Shardy's import pass does (:meth:`Propagator._apply_constraints`).

Propagation is a worklist: when a tensor changes, its producer, its readers and its
groups are revisited. Each visit only grows tensors, so it ends after at most the
number of atoms per tensor rounds of changes: linear in ops times mesh atoms.

Shardy's documented example (factor shardings of three tensors, basic pass):

>>> from planner.ir.axis import AxisRef
>>> a, b, c, d, e = (AxisRef(n) for n in "abcde")
>>> [str(x) for x in compatible_axes([(a,), (a, b)])], [str(x) for x in compatible_axes([(c, d), (c, e)])]
(['"a"', '"b"'], ['"c"'])
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Sequence

from graphs.ops.annotation import barrier_allows, is_sharding_constraint
from planner.errors import PlanningError, ShardplanError
from planner.ir.axis import AxisRef, make_axis, merge_adjacent, prime_factors
from planner.ir.mesh import Mesh
from planner.enumeration import search_pieces
from planner.ir.sharding import DimSharding, TensorSharding
from planner.model.decision import AxisOrigin, Phase, Propagation
from planner.rules import RESULT, FactorKind, OpShardingRule, rule_for, strategy_to_factor_axes



# -- atoms --------------------------------------------------------------------------------------

class _Atoms:
    """Each mesh axis cut into prime pieces, keeping the sub-axes the user wrote whole."""

    def __init__(self, mesh: Mesh, refs: Sequence[AxisRef]):
        self.mesh = mesh
        pieces = search_pieces(mesh, refs)  # the axes cut at every boundary of refs (a chain of divisors)
        bounds = {(p.name, b) for p in pieces for b in p.interval(mesh)}
        for ref in refs:
            if any((ref.name, b) not in bounds for b in ref.interval(mesh)):
                bad = [r for r in refs if r.name == ref.name]
                raise PlanningError(
                    f"the sub-axes {', '.join(map(str, bad))} of axis \"{ref.name}\" "
                    f"(size {mesh.axis_size(ref.name)}) do not nest in one factorisation of the axis, which "
                    "rule-based propagation needs; use --search bfs or ilp")
        by_axis: dict[str, list[AxisRef]] = {a.name: [] for a in mesh.axes}
        for piece in pieces:
            pre = piece.interval(mesh)[0]
            for prime in prime_factors(piece.size_in(mesh)):
                by_axis[piece.name].append(make_axis(mesh, piece.name, pre, prime))
                pre *= prime
        self.by_axis = {name: tuple(atoms) for name, atoms in by_axis.items()}
        self.size = {a: a.size_in(mesh) for atoms in self.by_axis.values() for a in atoms}
        self._memo: dict[AxisRef, tuple[AxisRef, ...]] = {}

    def of(self, ref: AxisRef) -> tuple[AxisRef, ...]:
        out = self._memo.get(ref)
        if out is None:
            lo, hi = ref.interval(self.mesh)
            out = tuple(a for a in self.by_axis[ref.name] if lo <= a.interval(self.mesh)[0] < hi)
            self._memo[ref] = out
        return out

    def of_all(self, refs: Sequence[AxisRef]) -> list[AxisRef]:
        return [a for r in refs for a in self.of(r)]


# -- the compatible axes of a factor ------------------------------------------------------------

def compatible_axes(lists: Sequence[Sequence[AxisRef]]) -> tuple[AxisRef, ...]:
    """The longest axes every list is compatible with (a prefix of it, or it a prefix of the list),
    among the maximal lists: their longest common prefix. Lists are of atoms (or of whole axes)."""
    lists = [tuple(x) for x in lists]
    maximal = [a for a in dict.fromkeys(lists)
               if not any(len(b) > len(a) and b[:len(a)] == a for b in lists)]
    if not maximal:
        return ()
    out = maximal[0]
    for other in maximal[1:]:
        k = 0
        while k < len(out) and k < len(other) and out[k] == other[k]:
            k += 1
        out = out[:k]
    return out


# -- the mutable state of one tensor ------------------------------------------------------------

class _Tensor:
    __slots__ = ("name", "shape", "nbytes", "dims", "origins", "open", "user", "blocked", "held")

    def __init__(self, name: str, shape, nbytes: int):
        self.name, self.shape, self.nbytes = name, tuple(shape), nbytes
        self.dims: list[list[AxisRef]] = [[] for _ in shape]
        self.origins: list[list[tuple[str, str]]] = [[] for _ in shape]
        self.open = [True] * len(shape)
        self.user = [0] * len(shape)  # per dimension, how many leading atoms are the user's annotation
        self.blocked: set[AxisRef] = set()  # explicitly replicated or unreduced atoms
        self.held: dict[int, list[AxisRef]] = {}  # per dimension whose priority has not come, its atoms

    def used(self) -> set[AxisRef]:
        return {a for d in self.dims for a in d}


@dataclass(frozen=True)
class Level:
    """One op-priority level: which ops and factors it visits, and whether a broadcast operand gives."""

    label: str
    pass_through_ops: bool
    single_use: bool
    pass_through_factors: bool
    broadcast_gives: bool


ALL = Level("", False, False, False, True)


# -- propagation --------------------------------------------------------------------------------

def user_strategies(graph, mesh: Mesh) -> dict[str, tuple]:
    """The factor axes of every op the user gave a (MindSpore) strategy, on ``mesh``."""
    out = {}
    for op in graph.ops:
        if op.strategy is None:
            continue
        rule = rule_for(op, [graph.tensor(t).shape for t in op.inputs], graph.tensor(op.output).shape)
        try:
            out[op.name] = strategy_to_factor_axes(rule, op.strategy, mesh)
        except ShardplanError as e:
            where = f"{graph.source}:{op.line}" if graph.source and op.line else graph.source
            raise PlanningError(f"op {op.name!r}: strategy {op.strategy}: {e.message}", where=where) from None
    return out


class Propagator:
    """The state of one propagation and the steps every pass shares; a pass overrides
    :meth:`rounds` (user priorities), :meth:`levels` (op priorities) or :meth:`order`
    (how conflicts between factors are resolved)."""

    how = ""  # the pass's name

    def __init__(self, graph, mesh: Mesh, annotation, strategies, defaults, typed_axes, boundaries):
        self.graph, self.mesh = graph, mesh
        get = annotation or (lambda name: graph.tensor(name).sharding)
        self.annotations: dict[str, TensorSharding] = dict(defaults)
        self.defaults = frozenset(defaults)
        for name, t in graph.tensors.items():
            if t.sharding is not None:
                self.annotations[name] = get(name)
            elif name in boundaries:
                self.annotations[name] = boundaries[name]
        self.given: dict[str, str] = {}  # an annotation copied onto a tensor the user left bare: why
        self._apply_constraints()
        self.merged_as = _merged_groups(graph.shard_as)
        self.copy_groups: dict[str, tuple[str, ...]] = {}  # a member of a shard_as group in sync: its group
        self._sync_groups()
        self.strategies = dict(strategies)
        refs = [a for s in self.annotations.values() for a in s.used_axes()]
        refs += [a for fa in self.strategies.values() for axes in fa for a in axes]
        self.atoms = _Atoms(mesh, refs)
        self.tensors = {name: _Tensor(name, t.shape, t.nbytes) for name, t in graph.tensors.items()}
        for name, ann in self.annotations.items():  # explicitly replicated and unreduced axes: never used
            self.tensors[name].blocked = set(self.atoms.of_all(ann.replicated)) | set(self.atoms.of_all(ann.unreduced))
        for name, axes in typed_axes.items():
            self.tensors[name].blocked |= {a for axis in axes for a in self.atoms.by_axis[axis]}
        self._always_blocked = {name: frozenset(t.blocked) for name, t in self.tensors.items()}
        self.identity_rules: dict[tuple, OpShardingRule] = {}  # a group's rule, per shape and size
        self.ops = list(graph.ops)
        self.rules: list[OpShardingRule] = []
        for op in self.ops:
            shapes = [graph.tensor(t).shape for t in op.inputs]
            self.rules.append(rule_for(op, shapes, graph.tensor(op.output).shape))
        self.uses = {name: len(graph.consumers(name)) for name in graph.tensors}
        self.op_defs = [graph.op_def(op.name) for op in self.ops]
        # shard_as groups in sync are kept alike by copying (see _copy_to_group); the others, whose members'
        # annotations differ, and shard_like groups propagate between their members like an identity op
        self.groups = [("shard_as", g) for g in self.merged_as if g[0] not in self.copy_groups]
        self.groups += [("shard_like", tuple(g)) for g in graph.shard_like]
        self.readers: dict[str, list[int]] = {name: [] for name in graph.tensors}
        self.producer: dict[str, int] = {}
        for i, op in enumerate(self.ops):
            for t in dict.fromkeys(op.inputs):
                self.readers[t].append(i)
            self.producer[op.output] = i
        self.in_groups: dict[str, list[int]] = {}
        for g, (_, members) in enumerate(self.groups):
            for t in members:
                self.in_groups.setdefault(t, []).append(len(self.ops) + g)
        self.phase = ""
        self.phases: list[Phase] = []
        self.last_snapshot: dict | None = None  # tensor -> (its state, its sharding) at the last snapshot

    # -- annotations ------------------------------------------------------------------------
    def _apply_constraints(self) -> None:
        """Shardy's import pass ``apply_sharding_constraints.cc`` (``shouldApply``): a sharding constraint's
        sharding is copied onto its input when the input has no sharding of its own, the constraint's
        sharding is fully closed, and no other constraint on the input has a different sharding."""
        constraints: dict[str, list] = {}
        for op in self.graph.ops:
            if is_sharding_constraint(op) and op.output in self.annotations:
                constraints.setdefault(op.inputs[0], []).append(op)
        for t, ops in constraints.items():
            for op in ops:
                sharding = self.annotations[op.output]
                if t in self.annotations or any(d.is_open for d in sharding.dims):
                    continue
                if any(self.annotations[other.output] != sharding for other in ops):
                    continue
                self.annotations[t] = sharding
                self.given[t] = f"sharding constraint {op.name}, fully closed, copied onto its input"

    def _sync_groups(self) -> None:
        """Shardy's ``syncGroupMemberShardings`` (``sharding_group_map.cc``): where the members of a shard_as
        group that have a sharding (other than fully open and empty) all have the same one, every member
        gets it, and from then on a change to one member is copied to all (``updateTensorSharding`` in
        ``basic_propagation.cc``). A group whose members' shardings differ is not synced."""
        for members in self.merged_as:
            given = {self.annotations[t] for t in members if t in self.annotations
                     and not all(d.is_open and not d.axes for d in self.annotations[t].dims)}
            if len(given) > 1:
                continue
            if given:
                (sharding,) = given
                for t in members:
                    if t not in self.annotations:
                        self.annotations[t] = sharding
                        self.given[t] = f"shard_as group [{', '.join(members)}], synced with its members' sharding"
            for t in members:
                self.copy_groups[t] = members

    def _levels_of_priority(self) -> list[int]:
        return sorted({d.priority for s in self.annotations.values() for d in s.dims}) or [0]

    def _hold_back(self, first: int) -> None:
        """Before the first round, a dimension whose priority comes later is closed and empty, and its axes
        are explicitly replicated on its tensor until then (Shardy's ``getInitializedSharding`` in
        ``user_priority_propagation.cc``): nothing propagates into it, nor its axes elsewhere on the tensor."""
        for name, ann in self.annotations.items():
            t = self.tensors[name]
            for d, dim in enumerate(ann.dims):
                if dim.priority > first:
                    t.held[d] = self.atoms.of_all(dim.axes)
                    t.dims[d], t.origins[d], t.open[d], t.user[d] = [], [], False, 0
            t.blocked |= {a for atoms in t.held.values() for a in atoms}

    def _apply_annotations(self, level: int | None) -> None:
        """Restore the annotations' dimensions of priority ``level`` (all when None) as written."""
        for name, ann in self.annotations.items():
            t = self.tensors[name]
            for d, dim in enumerate(ann.dims):
                if level is not None and dim.priority != level:
                    continue
                mine = self.atoms.of_all(dim.axes)
                if d in t.held:  # its priority has come: its axes are no longer held replicated
                    t.blocked -= set(t.held.pop(d)) - self._always_blocked[name]
                why = ("default annotation (the model has none: inputs batch-sharded on the first mesh axis)"
                       if name in self.defaults else self.given.get(name, "user annotation"))
                if not (dim.is_open and t.dims[d][:len(mine)] == mine):
                    t.dims[d], t.origins[d] = list(mine), [(self.phase, why)] * len(mine)
                else:  # open and already extending the annotation: keep the extension
                    t.origins[d][:len(mine)] = [(self.phase, why)] * len(mine)
                t.open[d], t.user[d] = dim.is_open, len(mine)
                for e in range(len(t.dims)):  # what the annotation takes leaves the others' propagated axes
                    if e != d:
                        cut = next((k for k, a in enumerate(t.dims[e]) if k >= t.user[e] and a in mine), None)
                        if cut is not None:
                            del t.dims[e][cut:], t.origins[e][cut:]

    def _seed_strategies(self) -> None:
        """Ops with a user strategy give their operands and result its sharding (where they have none)."""
        for i, op in enumerate(self.ops):
            fa = self.strategies.get(op.name)
            if fa is None:
                continue
            rule = self.rules[i]
            for which, name in [*enumerate(op.inputs), (RESULT, op.output)]:
                t = self.tensors[name]
                if name in self.annotations or any(t.dims):
                    continue
                for d, factors in enumerate(rule.tensor_dims(which)):
                    atoms = [a for f in factors for a in self.atoms.of_all(fa[f])]
                    t.dims[d] = atoms
                    t.origins[d] = [(self.phase, f"strategy of op {op.name}")] * len(atoms)

    # -- the run ----------------------------------------------------------------------------
    # -- what a pass decides ------------------------------------------------------------------
    def rounds(self, priorities: list[int]) -> list[int | None]:
        """The annotation rounds: None restores every annotation at once."""
        return [None]

    def round_label(self, priority: int | None) -> str:
        return self.how

    def levels(self) -> list[Level]:
        """The op-priority levels each round runs to a fixed point."""
        return [ALL]

    caps_operands = False  # whether an elementwise op's operands take no more than its result holds

    def cut(self, rule, tensors, whiches, proj, f: int, axes) -> tuple[AxisRef, ...]:
        """The compatible axes of factor ``f`` as the pass propagates them to the op's tensors."""
        return tuple(axes)

    def order(self, rule, tensors, wanted: dict, origin: dict, proj, elementwise: bool) -> list[int]:
        """The factors an op visit grows, in order, after ``wanted`` is cut to what does not conflict."""
        raise NotImplementedError

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> Propagation:
        priorities = self._levels_of_priority()
        first = priorities[0]
        rounds = self.rounds(priorities)
        if rounds[0] is not None:
            self._hold_back(rounds[0])
        for r in rounds:
            prefix = self.round_label(r)
            self.phase = f"{prefix}: user annotations"
            self._apply_annotations(r)
            if r is None or r == first:
                self._seed_strategies()
            for k, level in enumerate(self.levels()):
                self.phase = prefix if not level.label else f"{prefix} level {k + 1}: {level.label}"
                visits = self._fixed_point(level)
                self._unify_shard_as()
                self.phases.append(Phase(self.phase, self._snapshot(), visits))
        shardings = self._snapshot()
        origins = {name: tuple(tuple(AxisOrigin(ax, *self._origin_of(t, d, ax)) for ax in shardings[name].dims[d].axes)
                               for d in range(len(t.dims)))
                   for name, t in self.tensors.items()}
        return Propagation(self.how, self.mesh, shardings, MappingProxyType(origins), tuple(self.phases))

    def _origin_of(self, t: _Tensor, d: int, ref: AxisRef) -> tuple[str, str]:
        atoms = self.atoms.of(ref)
        k = t.dims[d].index(atoms[0])
        return t.origins[d][k]

    def _snapshot(self) -> Mapping[str, TensorSharding]:
        """Every tensor's sharding now; tensors that did not change since the last snapshot keep its object."""
        last = self.last_snapshot
        out = {}
        for name, t in self.tensors.items():
            state = (tuple(tuple(d) for d in t.dims), tuple(t.open))
            if last is not None and last[name][0] == state:
                out[name] = last[name]
                continue
            ann = self.annotations.get(name) if name not in self.defaults else None
            dims = tuple(DimSharding(merge_adjacent(t.dims[d], self.mesh), is_open=t.open[d])
                         for d in range(len(t.dims)))
            out[name] = (state, TensorSharding(self.mesh, dims, ann.replicated if ann else (),
                                               ann.unreduced if ann else ()))
        self.last_snapshot = out
        return MappingProxyType({name: s for name, (_, s) in out.items()})

    def _fixed_point(self, level: Level) -> int:
        n_ops = len(self.ops)
        queue = deque(range(n_ops + len(self.groups)))
        queued = [True] * (n_ops + len(self.groups))
        visits = 0
        while queue:
            i = queue.popleft()
            queued[i] = False
            visits += 1
            changed = self._visit_op(i, level) if i < n_ops else self._visit_group(i - n_ops)
            for name in changed:
                again = self.readers[name] + self.in_groups.get(name, [])
                if name in self.producer:
                    again.append(self.producer[name])
                for j in again:
                    if j != i and not queued[j]:
                        queued[j] = True
                        queue.append(j)
        return visits

    # -- one op ----------------------------------------------------------------------------
    def _visit_op(self, i: int, level: Level) -> list[str]:
        op, rule, opdef = self.ops[i], self.rules[i], self.op_defs[i]
        if not opdef.shardy_rule:  # Shardy has no rule for it (a CHLO op): nothing passes through
            return []
        pass_through_op = opdef.passes_shardings
        if level.pass_through_ops and not pass_through_op:
            return []
        if level.single_use and any(self.uses[t] != 1 for t in op.inputs):
            return []
        names = list(op.inputs) + [op.output]
        whiches = list(range(len(op.inputs))) + [RESULT]
        give = [True] * len(names)
        take = [True] * len(names)
        if op.op == "propagation_barrier":
            forward, backward = barrier_allows(op, "forward"), barrier_allows(op, "backward")
            give = [forward] * len(op.inputs) + [backward]
            take = [backward] * len(op.inputs) + [forward]
        if opdef.elementwise and not level.broadcast_gives:
            out_numel = _numel(self.graph.tensor(op.output).shape)
            for k, t in enumerate(op.inputs):
                if _numel(self.graph.tensor(t).shape) < out_numel:
                    give[k] = False  # a broadcast operand only receives
        factors = range(rule.num_factors)
        if level.pass_through_factors:
            factors = [f for f in factors if rule.factor_kinds[f] is FactorKind.PASS_THROUGH]
        tensors = [self.tensors[n] for n in names]
        return self._propagate(rule, tensors, whiches, give, take, list(factors), f"op {op.name}", opdef.elementwise)

    def _visit_group(self, g: int) -> list[str]:
        kind, members = self.groups[g]
        tensors = [self.tensors[n] for n in members]
        rule = self._identity_rule(tensors[0].shape, len(members))
        whiches = list(range(len(members) - 1)) + [RESULT]
        n = len(members)
        label = f"{kind} group [{', '.join(members)}]"
        return self._propagate(rule, tensors, whiches, [True] * n, [True] * n, list(range(rule.num_factors)), label)

    def _propagate(self, rule, tensors, whiches, give, take, factors, source, elementwise=False) -> list[str]:
        proj = [self._project(rule, w, t) for w, t in zip(whiches, tensors)]
        wanted: dict[int, tuple[AxisRef, ...]] = {}
        origin: dict[int, int] = {}  # factor -> the giver its axes come from (the longest list, first)
        for f in factors:
            lists = [(k, p[0][f]) for k, (p, g) in enumerate(zip(proj, give)) if g and f in p[1]]
            axes = self.cut(rule, tensors, whiches, proj, f, compatible_axes([x for _, x in lists]))
            if axes:
                wanted[f] = axes
                origin[f] = max(lists, key=lambda kx: (len(kx[1]), -kx[0]))[0]
        if not wanted:
            return []
        order = self.order(rule, tensors, wanted, origin, proj, elementwise)
        changed = []
        results = [k for k, w in enumerate(whiches) if w == RESULT]
        for k in results + [k for k, w in enumerate(whiches) if w != RESULT]:  # results first, as Shardy's
            t, which = tensors[k], whiches[k]
            if not take[k]:
                continue
            grew = False
            for f in order:
                if f not in proj[k][1]:
                    continue
                axes = wanted[f]
                if elementwise and which != RESULT and self.caps_operands:
                    axes = self._capped_by_results(rule, tensors, whiches, results, f, axes)
                if self._grow(rule, which, t, proj[k], f, axes, source):
                    grew = True
            if grew:
                changed.append(t.name)
                changed += self._copy_to_group(t, source)
        return changed

    def _capped_by_results(self, rule, tensors, whiches, results, f: int, axes):
        """An elementwise op's operands take along ``f`` no more than its result holds now (Shardy's aggressive
        factor propagation: it does not propagate sideways to an operand what the result cannot hold)."""
        for k in results:
            per, where, _ = self._project(rule, whiches[k], tensors[k])
            if f in where:
                held = tuple(per[f])
                if len(held) < len(axes) and axes[:len(held)] == held:
                    axes = held
        return axes

    def _copy_to_group(self, t: _Tensor, source: str) -> list[str]:
        """The other members of ``t``'s synced shard_as group made identical to it (their names)."""
        out = []
        for name in self.copy_groups.get(t.name, ()):
            if name == t.name:
                continue
            m = self.tensors[name]
            if m.dims == t.dims and m.open == t.open:
                continue
            why = (self.phase, f"shard_as group [{', '.join(self.copy_groups[t.name])}], copied from {t.name}")
            for d, axes in enumerate(t.dims):
                keep = 0
                while keep < min(len(axes), len(m.dims[d])) and axes[keep] == m.dims[d][keep]:
                    keep += 1
                m.origins[d] = m.origins[d][:keep] + [why] * (len(axes) - keep)
                m.dims[d] = list(axes)
            m.open = list(t.open)
            out.append(name)
        return out

    def truncated(self, rule, tensors, whiches, proj, f: int, axes) -> tuple[AxisRef, ...]:
        """``axes`` cut before the first atom some tensor of the op cannot hold on factor ``f`` (Shardy's
        ``getCompatibleMajorShardingAxes``, ``basic_factor_propagation.cc``): one another factor of a tensor
        holds, or (where the tensor has ``f``) one it has replicated or unreduced, or that it does not
        already hold and cannot add (a closed dimension, an overflowing one, a size ``f`` does not admit).
        So one tensor that cannot take an axis keeps it from every tensor along that factor."""
        size = self.atoms.size
        held = 1
        for k, a in enumerate(axes):
            for t, which, (per, where, stray) in zip(tensors, whiches, proj):
                if a in stray or any(a in per[g] for g in range(rule.num_factors) if g != f):
                    return tuple(axes[:k])
                if f not in where:
                    continue
                if a in t.blocked:
                    return tuple(axes[:k])
                if a not in per[f] and not self._can_add(rule, which, t, (per, where, stray), f, held, size[a]):
                    return tuple(axes[:k])
            held *= size[a]
        return tuple(axes)

    def _can_add(self, rule, which, t: _Tensor, proj, f: int, held: int, atom_size: int) -> bool:
        """Whether tensor ``t`` can add an atom of ``atom_size`` to factor ``f`` that holds ``held`` already."""
        per, where, stray = proj
        d, j = where[f]
        if not t.open[d] or any(a in t.dims[d] for a in stray):
            return False
        factors = rule.tensor_dims(which)[d]
        if sum(1 for g in factors if g == f) > 1 or any(per[g] for g in factors[j + 1:]):
            return False
        # whether the more-major factors of the dimension are full is known only once the op's factors have
        # grown (Shardy builds the tensor's sharding from all of them at once): _grow checks it
        return rule.admits(f, held * atom_size) or self._minor_most_admits(rule, factors, f, held * atom_size)

    @staticmethod
    def _minor_most_admits(rule, factors, f: int, axes_size: int) -> bool:
        """The minor-most factor of a dimension may be split unevenly (Shardy's ``isMinorMost`` in
        ``compatiblePrefixNoConflictsWithinFactor``), past its size too: the dimension is padded (as Shardy keeps
        a slice's window of fewer positions than devices split through pointwise ops)."""
        return factors[-1] == f and rule.factor_kinds[f] is FactorKind.PASS_THROUGH and 1 < axes_size

    def _project(self, rule: OpShardingRule, which, t: _Tensor):
        """(axes per factor, {factor: (dimension, position)}, atoms that fit no factor) of ``t``."""
        per = [[] for _ in range(rule.num_factors)]
        where: dict[int, tuple[int, int]] = {}
        stray: list[AxisRef] = []
        size = self.atoms.size
        for d, factors in enumerate(rule.tensor_dims(which)):
            for j, f in enumerate(factors):
                where.setdefault(f, (d, j))
            atoms = t.dims[d]
            if not atoms:
                continue
            if not factors:
                stray += atoms
                continue
            if len(factors) == 1:
                per[factors[0]] = list(atoms)
                continue
            j, room = 0, rule.factor_sizes[factors[0]]
            for k, a in enumerate(atoms):
                while room == 1 and j + 1 < len(factors):
                    j += 1
                    room = rule.factor_sizes[factors[j]]
                if room % size[a] and not (j == len(factors) - 1 and room > 1 and size[a] <= room
                                           and self._minor_most_admits(rule, factors, factors[j], size[a])):
                    stray += atoms[k:]
                    break
                per[factors[j]].append(a)
                room //= size[a]
        return per, where, stray

    def _grow(self, rule, which, t: _Tensor, proj, f: int, axes, source: str) -> bool:
        per, where, stray = proj
        cur = per[f]
        if len(cur) >= len(axes) or tuple(cur) != tuple(axes[:len(cur)]):
            return False
        d, j = where[f]
        if not t.open[d] or stray and any(a in t.dims[d] for a in stray):
            return False
        factors = rule.tensor_dims(which)[d]
        if sum(1 for g in factors if g == f) > 1:
            return False
        if any(per[g] for g in factors[j + 1:]):
            return False  # a more-minor factor is sharded: growing here would not be minor-wards
        size = self.atoms.size
        for g in factors[:j]:
            held = 1
            for a in per[g]:
                held *= size[a]
            if held != rule.factor_sizes[g]:
                return False  # a more-major factor is not fully sharded
        used = t.used()
        held = 1
        for a in cur:
            held *= size[a]
        grew = False
        for a in axes[len(cur):]:
            if a in used or a in t.blocked or not (rule.admits(f, held * size[a])
                                                   or self._minor_most_admits(rule, factors, f, held * size[a])):
                break
            held *= size[a]
            t.dims[d].append(a)
            t.origins[d].append((self.phase, source))
            per[f].append(a)
            used.add(a)
            grew = True
        return grew

    def _identity_rule(self, shape, n: int) -> OpShardingRule:
        """``n`` tensors of ``shape`` sharing one factor per dimension (a group as an op)."""
        key = (tuple(shape), n)
        rule = self.identity_rules.get(key)
        if rule is None:
            dims = tuple((d,) for d in range(len(shape)))
            rule = OpShardingRule(tuple(shape), (FactorKind.PASS_THROUGH,) * len(shape),
                                  tuple(f"d{d}" for d in range(len(shape))), (dims,) * (n - 1), dims)
            self.identity_rules[key] = rule
        return rule

    def _unify_shard_as(self) -> None:
        """The members of a shard_as group end a phase alike: per dimension, their common prefix."""
        for kind, members in self.groups:
            if kind != "shard_as":
                continue
            ts = [self.tensors[n] for n in members]
            for d in range(len(ts[0].dims)):
                common = ts[0].dims[d]
                for t in ts[1:]:
                    k = 0
                    while k < len(common) and k < len(t.dims[d]) and common[k] == t.dims[d][k]:
                        k += 1
                    common = common[:k]
                for t in ts:
                    if len(t.dims[d]) > len(common):
                        if t.user[d] > len(common):
                            raise PlanningError(
                                f"shard_as group [{', '.join(members)}] cannot hold: tensor {t.name!r} is annotated "
                                f"with {_axes_text(merge_adjacent(t.dims[d], self.mesh))} on dimension {d} and another member "
                                "disagrees; make the members' annotations agree")
                        del t.dims[d][len(common):], t.origins[d][len(common):]


def _merged_groups(groups) -> list[tuple[str, ...]]:
    """Groups that share a tensor merged into one, as Shardy's ``sharding_group_import.cc`` unifies
    group ids; members in first-seen order, groups in the order of their first member."""
    merged: list[list[str]] = []
    for g in groups:
        hits = [m for m in merged if any(t in m for t in g)]
        into = hits[0] if hits else []
        if not hits:
            merged.append(into)
        for other in hits[1:]:
            into += [t for t in other if t not in into]
            merged.remove(other)
        into += [t for t in g if t not in into]
    return [tuple(m) for m in merged]


def _axes_text(axes) -> str:
    """Axes as the text grammar writes a dimension: ``{"x", "y"}``."""
    return "{" + ", ".join(map(str, axes)) + "}"


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
