"""Other notations for the same sharding: JAX, MindSpore, PyTorch DTensor.

Every conversion goes both ways where the other notation can express the
sharding, and raises :class:`~planner.errors.NotExpressibleError` where it cannot.

The pictures are views too, imported by the commands that draw them (not here, so
that ``import planner`` stays light): :mod:`planner.views.html_page` (the plan page)
with :mod:`planner.views.layered_layout` (its graph drawing),
:mod:`planner.views.svg_grid` (a sharding's device grid) and
:mod:`planner.views.charts` (bar charts), on :mod:`planner.views.svg` (SVG helpers).
"""

from planner.views.dtensor import from_placements, to_placements
from planner.views.jax import from_jax_type, from_partition_spec, to_jax_type, to_partition_spec
from planner.views.mindspore import (
    axes_for_splits,
    from_strategy,
    from_tensor_layout,
    to_strategy,
    to_tensor_layout,
)
from planner.views.summary import describe

__all__ = [
    "axes_for_splits",
    "describe",
    "from_jax_type",
    "from_partition_spec",
    "from_placements",
    "from_strategy",
    "from_tensor_layout",
    "to_jax_type",
    "to_partition_spec",
    "to_placements",
    "to_strategy",
    "to_tensor_layout",
]
