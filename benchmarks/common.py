"""Shared by the benchmark scripts: the gpt models they plan and clearing the planner's caches."""

from __future__ import annotations

GPT = """
name: gpt{layers}
mesh: {{dp: 2, tp: 4}}
model: {{builder: gpt, layers: {layers}, hidden: 768, heads: 12, seq: 1024, batch: 8, vocab: 50257}}
"""


def gpt(layers: int) -> str:
    """The gpt builder at GPT-2 small's sizes with ``layers`` layers on dp=2 x tp=4, unannotated."""
    return GPT.format(layers=layers)


def clear_caches() -> None:
    """Cold start: forget cached rules, strategies, redistributions and cost tables."""
    from planner.enumeration.strategies import _enumerate
    from planner.propagation import build
    from planner.redistribution.engine import _reshard
    from planner.redistribution.state import _pieces
    from planner.rules.registry import _cached_rule

    for cache in (_enumerate, _reshard, _pieces, _cached_rule):
        cache.cache_clear()
    build._TABLES.clear()
