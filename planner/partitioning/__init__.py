"""SPMD partitioning: a plan lowered to the program every device runs."""

from planner.partitioning.program import (Backprop, Compute, Load, Program, Redistribute, completed_key,
                                         cotangent_key, lower, render, transposed_key)

__all__ = ["Backprop", "Compute", "Load", "Program", "Redistribute", "completed_key", "cotangent_key", "lower",
           "render", "transposed_key"]
