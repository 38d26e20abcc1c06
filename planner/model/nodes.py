"""The planning model's parts: op and source nodes, the flows between them, and :class:`Model`.

One node per op (its candidates are the strategies its rule admits, minus those
the user's constraints forbid) and one per *source* tensor (input, parameter,
constant) that several ops read or that the user annotated (its candidates are
the layouts it may be stored in). A source read by one op has no node: it is
stored as that op reads it.

Nodes are joined by :class:`Flow` s, each one kind of data movement:

* ``data``: a tensor from its producer (an op or a source node) to its only
  reader: the forward redistribution to each distinct layout the reader needs;
* ``fanout``: a tensor read by several ops: one forward redistribution per
  *distinct* layout the readers need, shared by every reader of that layout.

With training the backward of each flow is the forward program transposed
(seed 004, :mod:`planner.redistribution.transpose`): the cotangents of the readers
of one forward copy that come back pending over the same axes (the psums that
transpose the pbroadcasts of :func:`planner.training.gradients.operand_gradient`)
are added locally, and that sum goes back through the transpose of the copy's
forward redistribution; the producer adds what arrives from its copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from costmodels import Cluster
from graphs.graph import ComputationGraph
from graphs.ops.registry import get_op
from graphs.specs import OpSpec
from planner.caches import BoundedCache
from planner.enumeration import Strategy
from planner.errors import ShardplanError
from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding
from planner.model.annotations import satisfies
from planner.model.options import Options
from planner.model.problem import SearchProblem
from planner.redistribution import reshard_for_planning
from planner.rules.factors import FactorKind, OpShardingRule
from planner.training.gradients import operand_gradient

__all__ = ["Flow", "Model", "OpNode", "PlanNode", "SourceNode", "final_layout"]


@dataclass(frozen=True, eq=False)
class OpNode:
    """An op's candidate strategies and why they are what they are."""

    name: str
    op: OpSpec
    rule: OpShardingRule
    strategies: tuple[Strategy, ...]
    user: str | None = None  # why the user's annotations pinned or narrowed this op
    manual_pending: tuple = ()  # per operand: manual axes its cotangent is pending over (manual regions)

    def pending(self, s: Strategy, k: int) -> tuple[AxisRef, ...]:
        """The axes operand ``k``'s cotangent comes back pending over under ``s``."""
        return _pending(self.rule, s, k, self.manual_pending[k] if self.manual_pending else ())

    def operand_gradient(self, s: Strategy, k: int) -> TensorSharding:
        """The layout of operand ``k``'s cotangent under ``s`` (:func:`operand_gradient`)."""
        return operand_gradient(self.rule, s, k, self.manual_pending[k] if self.manual_pending else ())

    def candidates(self) -> int:
        return len(self.strategies)

    def pending_groups(self, s: Strategy) -> tuple[tuple[AxisRef, ...], ...]:
        """The order XLA completes the result's pending reduction in, for an op that completes it by dimension
        (``OpDef.reduces_by_dimension``): the axes of each reduced factor, in reverse order of the factors' names
        (a reduction's are its dimensions in order; an einsum's its letters, as ``jnp.einsum`` orders the
        contracting dimensions of its ``dot_general``); () when one AllReduce over every pending axis is how
        XLA completes it."""
        if not s.result.unreduced or not get_op(self.op.op).reduces_by_dimension:
            return ()
        pending = set(s.result.unreduced)
        reduced = sorted((f for f, kind in enumerate(self.rule.factor_kinds) if kind is FactorKind.REDUCTION),
                         key=lambda f: self.rule.factor_names[f], reverse=True)
        groups = tuple(g for g in (tuple(a for a in s.factor_axes[f] if a in pending) for f in reduced) if g)
        if len(groups) < 2 or {a for g in groups for a in g} != pending:
            return ()  # one dimension, or sub-axes the result's pending axes merged: one AllReduce
        return groups

    def regroup(self, s: Strategy, k: int) -> tuple[AxisRef, ...]:
        """How XLA's dot partitioner groups the devices when operand ``k`` is read under ``s``, for an op it
        partitions so (``OpDef.xla_groups_operands``): the mesh axes the result is split over that the operand's
        layout under ``s`` lacks (the axes the devices are grouped by); () for any other op, or when there are
        none. The ``xla`` redistribution policy reads it (:func:`planner.redistribution.xla_policy.regrouped`)."""
        if not get_op(self.op.op).xla_groups_operands:
            return ()
        mine = set(s.operands[k].sharding_axes())
        return tuple(a for a in s.result.sharding_axes() if a not in mine)

    def cotangent_groups(self, s: Strategy, k: int) -> tuple[tuple[AxisRef, ...], ...]:
        """The order XLA completes operand ``k``'s pending cotangent in, for an op whose VJP sums it over the
        dimensions the operand lacks by a dot or a reduce_sum (``OpDef.reduces_cotangents_by_dimension``): the
        axes of each such factor, the last of the other operands' dimensions first (those of the dot's other
        operand, as JAX's transpose orders its contracting dimensions; then the result's); () when one AllReduce
        over every pending axis is how XLA completes it (one dimension, or manual axes)."""
        pending = set(self.pending(s, k))
        if len(pending) < 2 or not get_op(self.op.op).reduces_cotangents_by_dimension:
            return ()
        rule = self.rule
        mine = {f for dim in rule.operands[k] for f in dim}
        order: list[int] = []
        for dims in [*(d for i, d in enumerate(rule.operands) if i != k), rule.result]:
            order += [f for dim in dims for f in dim if f not in mine and f not in order]
        groups = tuple(g for g in (tuple(a for a in s.factor_axes[f] if a in pending) for f in reversed(order)) if g)
        if len(groups) < 2 or {a for g in groups for a in g} != pending:
            return ()
        return groups


@dataclass(frozen=True, eq=False)
class SourceNode:
    """A source tensor stored in one of ``layouts`` (read by several ops, or annotated)."""

    tensor: str
    layouts: tuple[TensorSharding, ...]
    user: str | None = None

    @property
    def name(self) -> str:
        return self.tensor

    def candidates(self) -> int:
        return len(self.layouts)


PlanNode = OpNode | SourceNode


@dataclass(frozen=True)
class Flow:
    """One kind of movement of ``tensor`` between nodes (see the module docstring).

    ``producer`` is where the data comes from; ``readers`` where it goes, with
    ``operands[j]`` the operand positions of reader ``j`` that read the tensor;
    ``backward``: the tensor's gradient is needed (training), so the link also
    carries the transposes of its forward moves. Flow ``k`` of a model is link
    ``k`` of its search problem.
    """

    kind: str
    tensor: str
    producer: int
    readers: tuple[int, ...]
    operands: tuple[tuple[int, ...], ...]
    backward: bool = False


@dataclass(frozen=True, eq=False)
class Model:
    """The built problem and everything needed to read a choice of it.

    ``nodes[i]`` is decision ``i`` of ``problem``; ``flows[k]`` is its link ``k``
    (``problem.edges`` then ``problem.fanouts``).
    """

    graph: ComputationGraph
    mesh: Mesh
    cluster: Cluster
    options: Options
    pieces: tuple[AxisRef, ...]
    nodes: tuple[PlanNode, ...]
    flows: tuple[Flow, ...]
    problem: SearchProblem
    needs_grad: Mapping[str, bool]
    annotations: Mapping[str, TensorSharding]  # tensor -> its active annotation on the planning mesh
    op_index: Mapping[str, int]
    source_index: Mapping[str, int]  # sources with a node
    private_sources: Mapping[str, tuple[str, int]]  # source read by one op -> (that op, first operand)

    @property
    def reshard_pieces(self) -> tuple[AxisRef, ...] | None:
        """The mesh pieces its redistributions may use: in an axis phase those of the phases so far
        (the later pieces are not in this problem yet, so its collectives do not borrow them);
        None: every piece (the whole problem, or the last phase)."""
        allowed = self.options.phase_allowed
        if allowed is None or not set(self.pieces) - set(allowed):
            return None
        return allowed

    # -- reading a choice ---------------------------------------------------------------------
    def strategy(self, op: str, choice) -> Strategy:
        i = self.op_index[op]
        return self.nodes[i].strategies[choice[i]]

    def deciding_node(self, tensor: str) -> int | None:
        """The node whose choice decides ``tensor``'s layout (None for a tensor nobody reads or makes)."""
        producer = self.graph.producer(tensor)
        if producer is not None:
            return self.op_index[producer]
        if tensor in self.source_index:
            return self.source_index[tensor]
        if tensor in self.private_sources:
            return self.op_index[self.private_sources[tensor][0]]
        return None

    def layout(self, tensor: str, choice) -> TensorSharding:
        """Where ``tensor`` lives under ``choice``: its producer's result or how its source is stored."""
        producer = self.graph.producer(tensor)
        if producer is not None:
            return self.strategy(producer, choice).result
        if tensor in self.source_index:
            i = self.source_index[tensor]
            return self.nodes[i].layouts[choice[i]]
        op, k = self.private_sources[tensor]
        return self.strategy(op, choice).operands[k]

    def reported_sharding(self, tensor: str, choice) -> TensorSharding:
        """The sharding a plan reports for ``tensor``: its layout (a typed model reports its type)."""
        return self.layout(tensor, choice)

    def keeps_pending(self, tensor: str) -> bool:
        """A training loss (a scalar graph output) keeps its pending sum: its value is only reported. Not under
        the ``xla`` policy (propagate, which plans what XLA compiles): a JAX training step returns its loss whole
        (``jax.value_and_grad``), and XLA all-reduces it."""
        return (self.options.training and self.graph.tensor(tensor).rank == 0
                and self.options.reshard_policy != "xla")

    def final_layout(self, op: str, strategy: Strategy) -> TensorSharding:
        """The layout graph output ``op`` delivers under ``strategy`` (see :func:`final_layout`)."""
        out = self.graph.tensor(self.graph.op(op).output)
        if self.keeps_pending(out.name):
            return strategy.result
        return final_layout(strategy.result, self.annotations.get(out.name), self.options.outputs_layout,
                            out.shape, out.dtype, self.cluster, self.reshard_pieces)


# -- the moves (one definition for costs and lowering) ---------------------------------------

def final_layout(result: TensorSharding, annotation: TensorSharding | None, policy: str, shape, dtype,
                 cluster: Cluster, within: tuple[AxisRef, ...] | None = None) -> TensorSharding:
    """The layout a graph output is delivered in.

    A closed annotation is delivered as written. Otherwise, with ``policy``
    ``replicated`` every device gets the whole value; with ``free`` the result keeps
    its layout and a pending sum is resolved the cheapest way: reduced in place
    (AllReduce) or reduce-scattered onto one of its dimensions (ties: in place, then
    the lowest dimension); ``even`` is ``free`` then kept to the whole axes that divide
    each dimension (:meth:`~planner.ir.sharding.TensorSharding.whole_even`: what a JAX
    array holds, so XLA gathers a traced function's sub-axis or padded results).
    """
    if annotation is not None and all(d.is_closed for d in annotation.dims):
        return annotation.layout_only()
    if policy == "replicated":
        return TensorSharding.replicated_on(result.mesh, result.rank)
    deliver = (lambda lay: lay.whole_even(shape)) if policy == "even" else (lambda lay: lay)
    if not result.unreduced:
        return deliver(result)
    options = [deliver(result.with_unreduced(()))]
    for d in range(result.rank):
        dims = [list(x.axes) for x in result.dims]
        dims[d] += list(result.unreduced)
        try:
            candidate = deliver(result.with_unreduced(()).with_dims(dims))
        except ShardplanError:
            continue
        if annotation is None or satisfies(candidate, annotation):
            options.append(candidate)
    return min(options, key=lambda lay: reshard_for_planning(shape, dtype, result, lay, cluster, within).time_s)


def _pending(rule: OpShardingRule, s: Strategy, k: int, manual: tuple = ()) -> tuple[AxisRef, ...]:
    """The axes operand ``k``'s cotangent comes back pending over (the transposes of its pbroadcasts)."""
    return PENDING.get_or_compute((rule, s, k, manual), _pending_now, rule, s, k, manual)


def _pending_now(rule: OpShardingRule, s: Strategy, k: int, manual: tuple) -> tuple[AxisRef, ...]:
    return operand_gradient(rule, s, k, manual).unreduced


PENDING = BoundedCache("operand cotangent pending axes", maxsize=262144)
"""By (rule, strategy, operand): strategies are made once per enumeration, so the key is cheap."""
