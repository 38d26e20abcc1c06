"""Sharding propagation: algorithms that decide every tensor's sharding.

- :mod:`planner.propagation.explicit`: seed 001's explicit mode, forward consensus op by op.
"""

from planner.propagation.explicit import AllReduce, Decision, ExplicitResult, explicit_shardings

__all__ = ["AllReduce", "Decision", "ExplicitResult", "explicit_shardings"]
