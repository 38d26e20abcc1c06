"""What to plan for: :class:`Options`, the one value every search and the model read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from graphs.graph import OUTPUTS_LAYOUTS as OUTPUT_LAYOUTS
from planner.ir.axis import AxisRef

__all__ = ["OPTIMIZER", "OUTPUT_LAYOUTS", "Options"]

OPTIMIZER = "adam"
"""Training keeps Adam's two f32 moments per parameter element (:func:`costmodels.parameter_bytes`)."""


@dataclass(frozen=True)
class Options:
    """What to plan for.

    ``outputs_layout``: how graph outputs the user did not pin are delivered:
    ``free`` (any fully reduced layout: a pending sum may be reduce-scattered),
    ``replicated`` (every device holds the whole output) or ``even`` (``free`` kept to the
    whole mesh axes that divide each dimension: a JAX array's layout).
    ``insert_pbroadcast``: with training, track device-variance types so that the
    backward never sums what is already whole (seed 004); off, every cotangent is
    treated as varying (seed 004's wasteful "current" transposes), to compare.
    ``reshard_policy``: how a tensor is redistributed between layouts
    (:mod:`planner.redistribution.xla_policy`): ``cheapest`` (the engine's fastest plan) or ``xla``
    (the moves XLA's SPMD partitioner makes, which the propagate search plans with).
    ``overlap``: how the plan's step time is scheduled (:mod:`planner.partitioning.schedule`):
    ``async`` (collectives beside independent compute) or ``none`` (the serial sum). The searches
    optimise the serial sum either way; the report gives both.
    """

    training: bool = False
    memory_budget: float | None = None
    priority_level: int | None = None  # annotations with a larger priority are not yet active
    allowed_axes: frozenset[str] | None = None  # phase restriction (priorities): axes the search may use
    prefixes: Mapping[str, tuple] = field(default_factory=dict)  # op -> factor axes its strategy must extend
    outputs_layout: str = "free"
    fixed_strategies: Mapping[str, tuple] = field(default_factory=dict)  # op -> the only factor axes it may take
    insert_pbroadcast: bool = True
    overlap: str = "async"
    reshard_policy: str = "cheapest"
    # axis phases (planner.model.phases): the pieces this phase adds to the ``prefixes``
    # (anywhere among their axes) and every piece allowed so far; None: the whole problem
    phase_new: tuple[AxisRef, ...] | None = None
    phase_allowed: tuple[AxisRef, ...] | None = None
    # op -> its Explicit mesh axes (seed 001, planner.model.axis_types): the op's ``prefixes`` hold its
    # factor axes on them, and a candidate uses these axes exactly there (the search never moves them)
    fixed_axes: Mapping[str, frozenset[str]] = field(default_factory=dict)
