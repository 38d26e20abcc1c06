"""Redistribution: turning one sharding of a tensor into another with collectives."""

from planner.collectives import KINDS
from planner.redistribution.engine import ReshardError, reshard, reshard_for_planning, step_link
from planner.redistribution.lower_bound import lower_bound_bytes
from planner.redistribution.steps import ReshardPlan, Step

__all__ = ["KINDS", "ReshardError", "ReshardPlan", "Step", "lower_bound_bytes", "reshard", "reshard_for_planning",
           "step_link"]
