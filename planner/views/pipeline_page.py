"""One self-contained HTML page of a pipelined plan (``shardplan plan MODEL --devices N --format html``).

Everything is inline (CSS and SVG; no script): the page fetches nothing. From top to bottom:

* the plan's summary, the facts the table format prints: model, cluster, devices and mesh, the
  schedule, microbatches, recomputation and ZeRO stage, the step time, bubble, tokens per second,
  MFU and memory per device, how many configurations were searched, and per knob the next best
  configuration's step time;
* **the timeline** of the schedule (:func:`~planner.views.pipeline_timeline.timeline_svg`): a
  row per device group, forward and backward boxes per microbatch, recomputation, the sends
  between stages, the bubble hatched;
* **the stage table**: per stage its device group, layers, mesh, recomputation, memory per
  device and forward, backward and recomputation time for one microbatch.

Every number is read off the :class:`~planner.stages.plan.PipelinePlan`; the same plan gives
the same bytes.
"""

from __future__ import annotations

from costmodels.units import format_bytes, format_seconds
from planner.views.html_page import CSS
from planner.views.pipeline_timeline import timeline_svg
from planner.views.svg import esc

__all__ = ["pipeline_page"]

EXTRA_CSS = """
svg.timeline .box:hover rect{stroke:#222;stroke-width:1.2}
td.layers{white-space:normal;max-width:40em}
"""


def _row(cells, classes=None) -> str:
    classes = classes or [""] * len(cells)
    return "<tr>" + "".join(f'<td class="{c}">{esc(v)}</td>' if c else f"<td>{esc(v)}</td>"
                            for v, c in zip(cells, classes)) + "</tr>"


def stage_table(plan) -> str:
    """The stages as an HTML table (module docstring)."""
    header = ("stage", "group", "layers", "mesh", "recompute", "memory/device", "forward", "backward",
              "of it recomputation")
    classes = ["num", "num", "layers", "", "", "num", "num", "num", "num"]
    rows = [_row((s.index, s.device_group, ", ".join(s.layers), s.mesh, s.recompute,
                  format_bytes(s.memory_bytes_per_device), format_seconds(s.forward_time_s),
                  format_seconds(s.backward_time_s), format_seconds(s.recompute_time_s)), classes)
            for s in plan.stages]
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    return f'<table class="stages"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def pipeline_page(plan) -> str:
    """The page described in the module docstring, for a :class:`~planner.stages.plan.PipelinePlan`."""
    c = plan.config
    ev = plan.evaluation
    facts = [f"cluster <b>{esc(plan.cluster)}</b>", f"{plan.devices} devices",
             f"mesh <code>{esc(plan.mesh)}</code>",
             f"schedule <b>{esc(c.schedule)}</b>" + (f" with {c.virtual_stages} virtual stages"
                                                     if c.virtual_stages > 1 else ""),
             f"{c.microbatches} microbatches of {c.microbatch}", f"recompute <b>{esc(c.recompute)}</b>",
             f"ZeRO stage <b>{c.zero}</b>"]
    totals = [f"step <b>{esc(format_seconds(plan.step_time_s))}</b>",
              f"bubble <b>{plan.bubble_fraction:.1%}</b>",
              f"{plan.tokens_per_s:,.0f} tokens/s", f"MFU {plan.mfu:.1%}",
              f"memory <b>{esc(format_bytes(max(ev.memory_bytes_per_device)))}</b> per device (the most of any "
              "stage)"]
    searched = (f"searched {plan.configurations} configurations, priced {plan.priced} stage partitions"
                + ("" if plan.exact else " (some partition searches stopped at their budget)"))
    next_best = "".join(f"<li><code>{esc(k)} = {esc(v)}</code>: step {esc(format_seconds(t))} "
                        f"({t / plan.step_time_s - 1:+.1%})</li>" for k, v, t in plan.runners_up)
    note = ("Each row is a device group (a pipeline position); each box one microbatch's forward (blue, F) or "
            "backward (orange, B) through a stage, at the start and end times of the plan's own timeline; the "
            "hatched band at the start of a backward is its recomputation; red arrows are the sends of activations "
            "and cotangents between stages; grey hatching is time a device stands idle (the bubble), grey boxes "
            "after the last backward the gradient reductions and the optimizer update. Hover a box for its stage, "
            "chunk, microbatch, start and end.")
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"/>',
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>',
        f"<title>shardplan: {esc(plan.model)} pipeline</title>",
        f"<style>{CSS}{EXTRA_CSS}</style></head>",
        "<body>",
        f"<header><h1>{esc(plan.model)} (pipelined training step)</h1>",
        f'<p class="facts">{" · ".join(facts)}</p>',
        f'<p class="facts">{" · ".join(totals)}</p>',
        f'<p class="facts">{esc(searched)}</p>',
        (f'<p class="facts">next best per choice:</p><ul class="facts next-best">{next_best}</ul>'
         if next_best else ""),
        '<nav><a href="#timeline">timeline</a><a href="#stages">stages</a></nav></header>',
        '<section id="timeline"><h2>Timeline of one step</h2>',
        f'<p class="note">{esc(note)}</p>',
        f'<div class="scroll">{timeline_svg(plan)}</div></section>',
        '<section id="stages"><h2>Stages</h2>',
        f'<div class="scroll">{stage_table(plan)}</div></section>',
        "</body></html>",
    ]) + "\n"
