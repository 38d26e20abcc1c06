"""What a flow or a node moves for given candidates, defined once.

:func:`link_moves` and :func:`node_moves` are what the cost tables
(:mod:`planner.model.tables`) price and what the lowering
(:mod:`planner.partitioning.program`) emits, so the objective a search optimises
is what the program does.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.caches import memoize
from planner.enumeration import Strategy
from planner.ir.axis import AxisRef
from planner.ir.sharding import TensorSharding
from planner.model.nodes import Model, OpNode, SourceNode
from planner.redistribution.engine import planning_seconds
from planner.redistribution.steps import ReshardPlan
from planner.redistribution.transpose import transpose_plan
from planner.redistribution.xla_policy import reshard_with_policy

__all__ = ["Transfer", "fanout_layouts", "link_moves", "move_plan", "move_time_s", "node_moves", "own_params",
           "op_moves", "completion_order", "producer_side", "reader_entry", "reader_side", "reshard_plan",
           "reshard_seconds", "split_cotangents"]


@dataclass(frozen=True)
class Transfer:
    """One redistribution a plan makes, in ``phase``.

    Forward: ``tensor`` from ``source`` to ``destination``. Backward and gradient:
    the *transpose* of that forward move, taking the cotangent of the
    ``destination`` copy (pending over ``pending``) back to ``source``'s
    (:func:`planner.redistribution.transpose.transpose_plan`).
    """

    tensor: str
    source: TensorSharding
    destination: TensorSharding
    phase: str  # "forward", "backward" or "gradient"
    pending: tuple[AxisRef, ...] = ()
    groups: tuple[tuple[AxisRef, ...], ...] = ()  # how the xla policy completes the source's pending sum
    # how the xla policy completes the cotangent's pending sum (:meth:`~planner.model.nodes.OpNode.cotangent_groups`)
    cotangent_groups: tuple[tuple[AxisRef, ...], ...] = ()
    # the xla policy's completion of one reader's pending cotangent where it lies (``source == destination``): the
    # op whose cotangent this move completes by itself; the result joins the other readers' cotangents in that
    # layout, which the link's shared transpose then takes home (:func:`split_cotangents`). None: any other move
    reader: str | None = None
    # under the xla policy, how the reading dot groups the devices (:meth:`OpNode.regroup`; a backward move: of the
    # forward move it transposes); () otherwise
    regroup: tuple = ()


def _grad_phase(m: Model, tensor: str) -> str:
    """A parameter's gradient reduction is the ``gradient`` phase; any other cotangent is ``backward``."""
    return "gradient" if m.graph.tensor(tensor).kind == "param" else "backward"


def link_moves(m: Model, k: int, choice) -> list[Transfer]:
    """The redistributions link ``k`` makes under ``choice`` (the costs price exactly these)."""
    link = m.flows[k]
    t = link.tensor
    u, c = m.nodes[link.producer], choice[link.producer]
    src, groups = (u.layouts[c], ()) if isinstance(u, SourceNode) else (
        u.strategies[c].result, completion_order(m, u, u.strategies[c]))
    layouts: dict[tuple, None] = {}  # (layout, regroup)
    grads: dict[tuple, None] = {}
    completions: dict[tuple, None] = {}
    xla = m.options.reshard_policy == "xla"
    for v, ks in zip(link.readers, link.operands):
        node = m.nodes[v]
        lays, gs = reader_entry(node, node.strategies[choice[v]], ks, link.backward, xla)
        layouts.update(dict.fromkeys(lays))
        own, shared = split_cotangents(gs, xla)
        completions.update(dict.fromkeys((node.name, *c) for c in own))
        grads.update(dict.fromkeys(shared))
    out = [Transfer(t, src, lay, "forward", groups=groups, regroup=regroup) for lay, regroup in layouts]
    phase = _grad_phase(m, t)
    out += [Transfer(t, lay, lay, phase, pending, (), cotangent, reader)
            for reader, lay, pending, cotangent in completions]
    out += [Transfer(t, src, lay, phase, pending, groups, cotangent, regroup=regroup)
            for lay, pending, cotangent, regroup in grads]
    return out


def split_cotangents(grads, xla: bool) -> tuple[tuple, tuple]:
    """A reader's cotangents ``(layout, pending, cotangent groups, regroup)`` as ``(completions, transposes)``:
    under the ``xla`` policy, each pending one is completed where it lies, by that reader alone (XLA's partitioner
    all-reduces each dot's partial result as it makes it, so several readers' pending cotangents are not added
    first), a completion as ``(layout, pending, cotangent groups)``, and every cotangent then comes home by the
    link's transpose of its forward move (its layout and regroup), shared by the readers of that move.
    Otherwise no completions: the pending sums travel with the transposes, which add them where it is cheapest."""
    if not xla:
        return (), tuple(grads)
    own = tuple(g[:3] for g in grads if g[1])
    return own, tuple(dict.fromkeys((lay, (), (), regroup) for lay, _, _, regroup in grads))


def completion_order(m: Model, node: OpNode, s: Strategy) -> tuple[tuple[AxisRef, ...], ...]:
    """The order the ``xla`` redistribution policy completes the pending reduction of ``node``'s result under
    ``s`` in (:meth:`OpNode.pending_groups`); () under ``cheapest``, whose engine chooses its own."""
    return node.pending_groups(s) if m.options.reshard_policy == "xla" else ()


def producer_side(m: Model, node) -> list[tuple[TensorSharding, tuple]]:
    """Per candidate of a producer: the layout its result (or stored source) has, and its
    :func:`completion_order`."""
    if isinstance(node, SourceNode):
        return [(lay, ()) for lay in node.layouts]
    return [(s.result, completion_order(m, node, s)) for s in node.strategies]


def fanout_layouts(m: Model, k: int, choice) -> list[TensorSharding]:
    """The distinct layouts the readers of fanout link ``k`` need under ``choice``, in reader order."""
    return list(dict.fromkeys(mv.destination for mv in link_moves(m, k, choice) if mv.phase == "forward"))


def node_moves(m: Model, i: int, choice) -> list[Transfer]:
    """The redistributions op node ``i`` itself makes: its graph output's delivery and its own parameters' gradients."""
    node = m.nodes[i]
    if not isinstance(node, OpNode):
        return []
    return op_moves(m.graph, node, node.strategies[choice[i]], m)


def op_moves(graph, node: OpNode, s: Strategy, m: Model, own=None) -> list[Transfer]:
    op = node.op
    out: list[Transfer] = []
    if op.output in graph.outputs:
        final = m.final_layout(op.name, s)
        groups = completion_order(m, node, s)
        out.append(Transfer(op.output, s.result, final, "forward", groups=groups))
        if m.options.training and m.needs_grad.get(op.output, False):
            # the seeded cotangent goes back
            out.append(Transfer(op.output, s.result, final, "backward", groups=groups))
    if m.options.training:
        for t, k in own if own is not None else own_params(graph, node, m.private_sources):
            if m.needs_grad.get(t, False):
                groups = node.cotangent_groups(s, k) if m.options.reshard_policy == "xla" else ()
                out.append(Transfer(t, s.operands[k], s.operands[k], "gradient", node.pending(s, k),
                                    cotangent_groups=groups))
    return out


def own_params(graph, node: OpNode, private) -> list[tuple[str, int]]:
    return [(t, k) for k, t in enumerate(node.op.inputs)
            if t in private and private[t][0] == node.name and private[t][1] == k
            and graph.tensor(t).kind == "param"]


def move_time_s(m: Model, move: Transfer) -> float:
    """Seconds the engine's plan for ``move`` takes on the model's cluster (:func:`reshard_seconds`)."""
    spec = m.graph.tensor(move.tensor)
    return reshard_seconds(spec.shape, spec.dtype, move.source, move.destination, move.phase != "forward",
                           move.pending, m.cluster, m.options.insert_pbroadcast, m.reshard_pieces,
                           m.options.reshard_policy, move.groups, move.cotangent_groups, move.regroup)


def move_plan(m: Model, move: Transfer) -> ReshardPlan:
    """The engine's plan for ``move``: forward, or the transpose of the forward move (backward, gradient)."""
    spec = m.graph.tensor(move.tensor)
    return reshard_plan(spec.shape, spec.dtype, move.source, move.destination, move.phase != "forward", move.pending,
                        m.cluster, m.options.insert_pbroadcast, m.reshard_pieces, m.options.reshard_policy,
                        move.groups, move.cotangent_groups, move.regroup)


@memoize("planned move seconds", maxsize=65536)
def reshard_seconds(shape, dtype, source, destination, backward: bool, pending, cluster, insert_pbroadcast=True,
                    within=None, policy="cheapest", groups=(), cotangent_groups=(), regroup=()) -> float:
    """``reshard_plan(...).time_s``: a forward move under the ``cheapest`` policy is priced without building its
    plan (:func:`~planner.redistribution.engine.planning_seconds`); every other move reads its plan."""
    if not backward and policy == "cheapest":
        return planning_seconds(shape, dtype, source, destination, cluster, within)
    return reshard_plan(shape, dtype, source, destination, backward, pending, cluster, insert_pbroadcast, within,
                        policy, groups, cotangent_groups, regroup).time_s


@memoize("planned moves", maxsize=65536)
def reshard_plan(shape, dtype, source, destination, backward: bool, pending, cluster, insert_pbroadcast=True,
                 within=None, policy="cheapest", groups=(), cotangent_groups=(), regroup=()) -> ReshardPlan:
    """The redistribution of one move under ``policy`` (:mod:`planner.redistribution.xla_policy`): forward,
    or the transpose of the forward plan; ``groups``: the order the ``xla`` policy completes a pending sum in;
    ``cotangent_groups``: the order it completes the cotangent's (XLA's per-dimension AllReduces, as the ``xla``
    policy completes a forward sum); ``regroup``: how the reading dot groups the devices (``xla``:
    :meth:`~planner.model.nodes.OpNode.regroup`; a backward move transposes the forward move it made).
    Cached: a model's alike layers ask for the same moves again and again."""
    forward = reshard_with_policy(shape, dtype, source, destination, cluster, within, policy, groups, regroup)
    if not backward:
        return forward
    return transpose_plan(forward, pending, cluster, insert_pbroadcast=insert_pbroadcast, within=within,
                          policy=policy, groups=cotangent_groups if insert_pbroadcast else ())


def reader_side(consumer: OpNode, ks, backward: bool, xla: bool = False) -> list:
    """Per strategy of a reader: the distinct ``(layout, regroup)`` its reads need (with ``xla``, how a dot
    groups the devices, :meth:`~planner.model.nodes.OpNode.regroup`; else ()) and, with ``backward``,
    the distinct ``(layout, pending, cotangent groups, regroup)`` its cotangents come back in (with ``xla``, the
    groups are how the xla policy completes the pending sum, :meth:`~planner.model.nodes.OpNode.cotangent_groups`,
    and the regroup that of the forward move they transpose; else none and ())."""
    return [reader_entry(consumer, s, ks, backward, xla) for s in consumer.strategies]


def reader_entry(consumer: OpNode, s: Strategy, ks, backward: bool, xla: bool = False) -> tuple:
    """One strategy's entry of :func:`reader_side`."""
    regroups = [consumer.regroup(s, k) for k in ks] if xla else [()] * len(ks)
    layouts = tuple(dict.fromkeys((s.operands[k], r) for k, r in zip(ks, regroups)))
    grads = tuple(dict.fromkeys((s.operands[k], consumer.pending(s, k),
                                 consumer.cotangent_groups(s, k) if xla else (), r)
                                for k, r in zip(ks, regroups))) if backward else ()
    return layouts, grads
