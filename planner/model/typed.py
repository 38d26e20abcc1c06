"""Plans whose every tensor has a sharding fixed before any cost is looked at.

Explicit mode (seed 001) types tensors by consensus, rule-based propagation
(seed 003) propagates them; both then plan the same way: every op gets the one
strategy that computes from those shardings (``Options.fixed_strategies``), every
source read is stored in its sharding and every graph output delivered in it
(:func:`typed_graph`), and the model is built and costed like any search's, so the
plan is lowered, simulated and gated like the others. :class:`TypedModel` reports
each tensor's fixed sharding (with its open marks) instead of a producer's result.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Callable, Mapping

from graphs import ComputationGraph
from planner.ir.sharding import TensorSharding
from planner.model.nodes import Model, OpNode, SourceNode


@dataclass(frozen=True, eq=False)
class TypedModel(Model):
    """A model whose tensors have fixed shardings (``types``): what the plan reports for each tensor.

    A produced tensor's :meth:`layout` is its type (what the op computes, then reduced or
    redistributed to it); sources are stored in their types already.
    """

    types: Mapping[str, TensorSharding] = field(default_factory=dict)

    def layout(self, tensor: str, choice) -> TensorSharding:
        if self.graph.producer(tensor) is not None:
            return self.types[tensor].layout_only()
        return Model.layout(self, tensor, choice)

    def reported_sharding(self, tensor: str, choice) -> TensorSharding:
        return self.types.get(tensor) or Model.reported_sharding(self, tensor, choice)


def typed_graph(graph, types: Mapping[str, TensorSharding], outputs_layout: str) -> ComputationGraph:
    """``graph`` with every read source and every graph output annotated (closed) with its type, no groups.

    An output without ``out_sharding`` keeps none under ``outputs_layout: replicated``, and is delivered in
    its type's whole, even axes under ``even``.
    """
    def typed(name: str) -> TensorSharding:
        return types[name].layout_only()

    def delivered(op) -> TensorSharding | None:
        if op.out_sharding is not None or outputs_layout == "free":
            return typed(op.output)
        if outputs_layout == "even":
            return typed(op.output).with_unreduced(()).whole_even(graph.tensor(op.output).shape)
        return None

    tensors = [replace(t, sharding=typed(t.name)) if graph.consumers(t.name) else t
               for t in graph.tensors.values() if t.kind != "activation"]
    ops = [replace(op, out_sharding=d) if op.output in graph.outputs and (d := delivered(op)) is not None else op
           for op in graph.ops]
    return ComputationGraph(graph.name, dict(graph.meshes), tensors, ops, graph.outputs, (), cluster=graph.cluster,
                            manual_regions=graph.manual_regions,
                            outputs_layout=graph.outputs_layout, source=graph.source)


def typed_model(built: Model, graph, types: Mapping[str, TensorSharding], why: Callable[[str], str],
                op_why: Callable[[object], str | None] | None = None) -> TypedModel:
    """``built`` (from :func:`typed_graph`) reading as ``graph``: the user's own annotations, the tensors' types.

    A source the user did not annotate says ``why(tensor)`` it is stored as it is;
    with ``op_why``, an op node's user reason becomes ``op_why(op)`` (None: the op was
    not pinned by the user).
    """
    def node(n):
        if isinstance(n, SourceNode) and graph.tensor(n.tensor).sharding is None:
            return replace(n, user=why(n.tensor))
        if isinstance(n, OpNode) and op_why is not None:
            return replace(n, user=op_why(graph.op(n.name)))
        return n

    nodes = tuple(node(n) for n in built.nodes)
    kept = {f.name: getattr(built, f.name) for f in fields(Model)}
    kept.update(graph=graph, nodes=nodes)
    return TypedModel(**kept, types=dict(types))
