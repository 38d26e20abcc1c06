"""SPMD partitioning: a plan lowered to the program every device runs."""

from planner.partitioning.program import Backprop, Compute, Load, Program, Redistribute, lower, render

__all__ = ["Backprop", "Compute", "Load", "Program", "Redistribute", "lower", "render"]
