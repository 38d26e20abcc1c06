"""Other notations for the same sharding: JAX, MindSpore, PyTorch DTensor.

Every conversion goes both ways where the other notation can express the
sharding, and raises :class:`~planner.errors.NotExpressibleError` where it cannot.
They sit on the representation (:mod:`planner.ir`): the rules read MindSpore
strategies and explicit mode prints JAX types through them; the pictures and
exports (:mod:`planner.views`, :mod:`planner.export`) above.
"""

from planner.notations.dtensor import from_placements, to_placements
from planner.notations.jax import from_jax_type, from_partition_spec, to_jax_type, to_partition_spec
from planner.notations.mindspore import (
    axes_for_splits,
    from_strategy,
    from_tensor_layout,
    to_strategy,
    to_tensor_layout,
)

__all__ = [
    "axes_for_splits",
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
