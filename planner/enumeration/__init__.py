"""Strategy enumeration: the candidates each op may take on the mesh."""

from planner.enumeration.strategies import (
    Strategy,
    enumerate_extensions,
    enumerate_strategies,
    make_strategy,
    search_pieces,
)

__all__ = ["Strategy", "enumerate_extensions", "enumerate_strategies", "make_strategy", "search_pieces"]
