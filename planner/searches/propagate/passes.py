"""The rule-based passes by name, and :func:`propagate`, which runs one of them."""

from __future__ import annotations

from types import MappingProxyType
from typing import Callable, Mapping

from planner.errors import PlanningError
from planner.ir.mesh import Mesh
from planner.ir.sharding import TensorSharding
from planner.model.decision import Propagation
from planner.searches.propagate.aggressive import AggressivePropagation
from planner.searches.propagate.basic import BasicPropagation
from planner.searches.propagate.engine import user_strategies
from planner.searches.propagate.op_priority import OpPriorityPropagation
from planner.searches.propagate.user_priority import UserPriorityPropagation

__all__ = ["PASSES", "propagate"]

PASSES: Mapping[str, type] = MappingProxyType({
    p.how: p for p in (BasicPropagation, AggressivePropagation, OpPriorityPropagation, UserPriorityPropagation)})
"""Name -> pass, each building on the previous."""


def propagate(graph, mesh: Mesh, how: str = "user-priority", *, annotation: Callable | None = None,
              defaults: Mapping[str, TensorSharding] | None = None,
              typed_axes: Mapping[str, frozenset[str]] | None = None,
              boundaries: Mapping[str, TensorSharding] | None = None) -> Propagation:
    """Propagate ``graph``'s annotations on ``mesh`` with pass ``how`` (:data:`PASSES`; the engine: :mod:`planner.searches.propagate.engine`).

    ``annotation(name)`` gives a tensor's annotation on ``mesh`` (default: the
    tensor's own sharding, which must be on ``mesh``). Ops the user gave a
    strategy (:func:`user_strategies`) seed their operands and result with it.
    ``defaults`` are annotations the model did not write (a model with none gets
    its inputs batch-sharded, as BFS does); their axes' origin says so.
    ``typed_axes``: per tensor, mesh axes propagation never places on it (the
    Explicit axes where it is made, typed instead: :mod:`planner.model.axis_types`).
    ``boundaries``: annotations of tensors the user left unannotated that a manual region's
    in/out shardings give (:func:`planner.model.manual.region_boundaries`), as user ones.
    """
    if how not in PASSES:
        raise PlanningError(f"unknown propagation pass {how!r}; use one of {', '.join(PASSES)}")
    typed_axes = {t: axes for t, axes in (typed_axes or {}).items() if axes}
    strategies = {} if typed_axes else user_strategies(graph, mesh)
    return PASSES[how](graph, mesh, annotation, strategies, defaults or {}, typed_axes, boundaries or {}).run()


