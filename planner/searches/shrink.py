"""The ILP's shrinking hints: elementwise followers folded, repeated layers solved once."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from graphs.ops.registry import get_op
from planner.model.nodes import Model, OpNode
from planner.model.problem import SearchProblem

__all__ = ["with_shrink_hints"]

_LAYER = re.compile(r"^(tensor:|grad:)?layer(\d+)\.(.*)$")


def with_shrink_hints(m: Model) -> SearchProblem:
    """The model's problem with the two hints of :mod:`planner.model.problem` filled in.

    * an elementwise unary op reading one op's result follows it: it takes the
      layout that result has once its pending sums are reduced;
    * nodes of repeated layers (``layer<i>.rest``) with identical candidates and
      costs get the signature ``rest`` and index ``i``.

    Both restrict the problem; the planner checks the answer against BFS on the
    unrestricted problem and solves that one exactly when the hints cost something.
    """
    nodes = list(m.problem.nodes)
    for i, node in enumerate(m.nodes):
        if not isinstance(node, OpNode) or not get_op(node.op.op).follows_operand:
            continue
        producer = m.graph.producer(node.op.inputs[0])
        if producer is None:
            continue
        parent = m.nodes[m.op_index[producer]]
        by_layout = {}
        for c, s in enumerate(node.strategies):
            by_layout.setdefault(s.operands[0], c)
        mapping = [by_layout.get(s.result.with_unreduced(()) if s.result.unreduced else s.result)
                   for s in parent.strategies]
        if all(c is not None for c in mapping):
            nodes[i] = replace(nodes[i], follows=m.op_index[producer], follow_map=np.array(mapping))
    for i, node in enumerate(m.problem.nodes):
        match = _LAYER.match(node.name)
        if match:
            digest = (node.labels, node.cost.round(15).tobytes())
            signature = f"{match.group(1) or ''}{match.group(3)}#{hash(digest)}"
            nodes[i] = replace(nodes[i], layer=(signature, int(match.group(2))))
    return replace(m.problem, nodes=tuple(nodes))
