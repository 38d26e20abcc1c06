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
    """Cold start: forget every cache of the planner (rules, strategies, redistributions, cost tables)."""
    import planner

    planner.clear_caches()
