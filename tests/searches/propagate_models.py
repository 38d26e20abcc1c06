"""Small models for the rule-based propagation tests (one builder per documented behaviour)."""

from __future__ import annotations

from graphs.graph_builder import GraphBuilder
from planner.searches.propagate import propagate


def shardings(graph, how: str) -> dict[str, str]:
    """Every tensor's propagated sharding as text (``[{"a", ?}, {?}]``)."""
    return {name: s.dims_text() for name, s in propagate(graph, graph.mesh, how).shardings.items()}


def dot(a: str | None, c: str | None, mesh=None, b: str | None = None):
    """``C = matmul(A, B)``, 8x8 each, with optional annotations on A, B and C."""
    g = GraphBuilder("dot", mesh or {"a": 2})
    g.tensor("A", [8, 8], sharding=a)
    g.param("B", [8, 8], sharding=b)
    g.op("matmul", ["A", "B"], output="C", name="dot", out_sharding=c)
    return g.build()
