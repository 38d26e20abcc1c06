"""The timeline of a pipelined plan's schedule as SVG: who computes what, when, and who waits.

One row per device group (pipeline position ``d``, top to bottom), on one time axis in
milliseconds that spans the plan's step time. Every action of the plan's own timeline
(:attr:`PipelinePlan.evaluation.timeline <planner.stages.plan.PipelinePlan>`, the run of the
schedule that gives the plan its step time; nothing is recomputed here) is a box from its start
to its end:

* a forward is blue, labelled ``F`` and its microbatch (``F3``), a backward orange, ``B3``; with
  virtual stages (interleaved) the label adds the chunk, the virtual stage on the device
  (``F3 c1``);
* where the stage recomputes, the part of the backward that recomputes the forward is a hatched
  band at the start of the backward box;
* the stage-to-stage sends are arrows from the end of the box that sends (the forward of stage
  ``k``, the backward of stage ``k + 1``) to the start of the box that waits for it on the next
  row (the forward of stage ``k + 1``, the backward of stage ``k``); past :data:`MAX_SENDS`
  actions they are left out, and the picture says so;
* the time a device stands idle inside the schedule (the bubble) is grey hatching, so the
  hatched share of the rows is the plan's ``bubble_fraction``;
* after its last backward each device's once-a-step work (gradient reductions and the optimizer
  update, the plan's ``sync_s``) is a grey box; the step ends at the plan's ``step_time_s``,
  the launch overhead after the last device is done.

Every box carries ``data-kind``, ``data-stage``, ``data-chunk``, ``data-microbatch``,
``data-start`` and ``data-end`` (the exact floats) and a hover title. Deterministic: the same
plan gives the same bytes.
"""

from __future__ import annotations

import math

from costmodels.units import format_seconds
from planner.stages.schedules import Action
from planner.views.svg import COMMUNICATION, COMPUTE, esc, num, svg_open, text, text_width

__all__ = ["MAX_SENDS", "timeline_svg"]

FORWARD = COMPUTE
BACKWARD = "#f28e2b"
RECOMPUTE = "#fbd3ad"
SYNC = "#9c9c9c"
IDLE = "#eeeeee"
LEFT, RIGHT = 84.0, 24.0
ROW_H, ROW_GAP = 26.0, 20.0
PLOT_MIN_W, PLOT_MAX_W = 900.0, 3600.0
BOX_PX = 22.0  # px the plot gives each action of the busiest row, between the widths above
MAX_SENDS = 4000  # above this many actions the send arrows are not drawn
FONT = 10.0


def _ms(seconds: float, decimals: int) -> str:
    return f"{seconds * 1e3:.{decimals}f} ms"


def _ticks(span_s: float) -> tuple[list[float], int]:
    """Tick times (seconds) at 1, 2 or 5 x 10^k ms, five to ten over ``span_s``, and the decimals they print with."""
    if span_s <= 0:
        return [0.0], 0
    ms = span_s * 1e3
    step = 10.0 ** math.floor(math.log10(ms / 5))
    for f in (1.0, 2.0, 5.0, 10.0):
        if ms / (step * f) <= 10:
            step *= f
            break
    decimals = max(0, -math.floor(math.log10(step)))
    n = int(math.floor(ms / step + 1e-9))
    return [k * step / 1e3 for k in range(n + 1)], decimals


def timeline_svg(plan) -> str:
    """The timeline of ``plan`` (a :class:`~planner.stages.plan.PipelinePlan`), as described in the module docstring."""
    tl = plan.evaluation.timeline
    c = plan.config
    p, v = c.pp, c.virtual_stages
    ev = plan.evaluation
    stages = {s.index: s for s in plan.stages}
    schedule_s = tl.step_time_s
    span = max(plan.step_time_s, schedule_s)
    busiest = max((len(r) for r in tl.runs), default=0)
    plot_w = min(PLOT_MAX_W, max(PLOT_MIN_W, BOX_PX * busiest))
    scale = plot_w / span if span > 0 else 0.0
    notes = [f"schedule {c.schedule}" + (f" with {v} virtual stages" if v > 1 else "")
             + f", {c.microbatches} microbatches of {c.microbatch} per step, {c.stages} stages on {p} device "
             f"group{'s' if p > 1 else ''}; bubble {tl.bubble_fraction:.1%} of the schedule's "
             f"{format_seconds(schedule_s)}; step {format_seconds(plan.step_time_s)}"]
    total = sum(len(r) for r in tl.runs)
    draw_sends = total <= MAX_SENDS
    if not draw_sends:
        notes.append(f"{total} actions: the sends between stages are not drawn (more than {MAX_SENDS})")
    head = 24.0 + 15.0 * len(notes)
    legend_y = head + 4
    top = legend_y + 34.0
    width = LEFT + plot_w + RIGHT
    width = max(width, 12 + max(text_width(n, 11) for n in notes) + 12)
    height = top + p * (ROW_H + ROW_GAP) + 8

    def x(t: float) -> float:
        return LEFT + t * scale

    def row_y(d: int) -> float:
        return top + d * (ROW_H + ROW_GAP)

    out = [svg_open(width, height, "timeline", f"the schedule of {plan.model}: {c.schedule}, "
                                                f"{c.microbatches} microbatches, {p} device groups")]
    out.append('<defs>'
               '<pattern id="tl-idle" patternUnits="userSpaceOnUse" width="6" height="6" '
               'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f7f7f7"/>'
               '<line x1="0" y1="0" x2="0" y2="6" stroke="#c4c4c4" stroke-width="2"/></pattern>'
               '<pattern id="tl-recompute" patternUnits="userSpaceOnUse" width="5" height="5" '
               f'patternTransform="rotate(-45)"><rect width="5" height="5" fill="{RECOMPUTE}"/>'
               f'<line x1="0" y1="0" x2="0" y2="5" stroke="{BACKWARD}" stroke-width="1.5"/></pattern>'
               '<marker id="tl-arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="6" markerHeight="6" '
               f'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="{COMMUNICATION}"/></marker></defs>')
    out.append(text(12, 18, f"pipeline schedule of {plan.model}", 13, weight="bold"))
    out.extend(text(12, 34 + 15 * k, n, 11, fill="#555555") for k, n in enumerate(notes))
    lx = 12.0
    for name, fill in (("forward", FORWARD), ("backward", BACKWARD), ("recomputation", "url(#tl-recompute)"),
                       ("idle (bubble)", "url(#tl-idle)"), ("gradient sync and update", SYNC)):
        out.append(f'<rect x="{num(lx)}" y="{num(legend_y)}" width="12" height="12" fill="{fill}" '
                   'stroke="#777777" stroke-width="0.5"/>')
        out.append(text(lx + 16, legend_y + 10, name, 11))
        lx += 16 + text_width(name, 11) + 16
    out.append(f'<line x1="{num(lx)}" y1="{num(legend_y + 6)}" x2="{num(lx + 22)}" y2="{num(legend_y + 6)}" '
               f'stroke="{COMMUNICATION}" stroke-width="1.2" marker-end="url(#tl-arrow)"/>')
    out.append(text(lx + 28, legend_y + 10, "send between stages", 11))

    ticks, decimals = _ticks(span)
    out.append('<g class="axis">')
    for t in ticks:
        out.append(f'<line class="tick" x1="{num(x(t))}" y1="{num(top - 6)}" x2="{num(x(t))}" '
                   f'y2="{num(height - 8)}" stroke="#e2e2e2" data-time="{t!r}"/>')
        out.append(text(x(t), top - 9, _ms(t, decimals), FONT, "middle", fill="#555555"))
    for cls, t, label in (("schedule-end", schedule_s, "schedule ends"), ("step-end", plan.step_time_s, "step")):
        out.append(f'<line class="{cls}" x1="{num(x(t))}" y1="{num(top - 4)}" x2="{num(x(t))}" '
                   f'y2="{num(height - 8)}" stroke="#555555" stroke-dasharray="3,3" data-time="{t!r}">'
                   f'<title>{esc(label)} at {esc(format_seconds(t))}</title></line>')
    out.append("</g>")

    where: dict = {}  # action -> (device, start, end)
    for d, run in enumerate(tl.runs):
        for a, start, end in run:
            where[a] = (d, start, end)
    out.append('<g class="rows">')
    for d, run in enumerate(tl.runs):
        y = row_y(d)
        out.append(f'<g class="row" data-group="{d}">')
        out.append(text(LEFT - 8, y + ROW_H / 2 + 4, f"group {d}", 11, "end"))
        # the bubble: every gap of the row inside the schedule
        t = 0.0
        gaps = []
        for _, start, end in run:
            if start > t:
                gaps.append((t, start))
            t = max(t, end)
        if schedule_s > t:
            gaps.append((t, schedule_s))
        for a_, b_ in gaps:
            out.append(f'<rect class="idle" x="{num(x(a_))}" y="{num(y)}" width="{num(max((b_ - a_) * scale, 0.0))}" '
                       f'height="{num(ROW_H)}" fill="url(#tl-idle)" data-start="{a_!r}" data-end="{b_!r}">'
                       f'<title>group {d} idle from {esc(format_seconds(a_))} to {esc(format_seconds(b_))}</title>'
                       "</rect>")
        for a, start, end in run:
            chunk = a.stage // p
            forward = a.kind == "F"
            s = stages[a.stage]
            bx, bw = x(start), max((end - start) * scale, 1.0)
            what = "forward" if forward else "backward"
            redo = 0.0 if forward else s.recompute_time_s
            tip = (f"stage {a.stage} (chunk {chunk}) on group {d}: {what} of microbatch "
                   f"{a.microbatch}, {format_seconds(start)} to {format_seconds(end)}"
                   + (f", recomputation {format_seconds(redo)} of it ({s.recompute})" if redo > 0 else ""))
            out.append(f'<g class="box {what}" data-kind="{a.kind}" data-stage="{a.stage}" data-chunk="{chunk}" '
                       f'data-microbatch="{a.microbatch}" data-group="{d}" data-start="{start!r}" '
                       f'data-end="{end!r}"><title>{esc(tip)}</title>')
            out.append(f'<rect x="{num(bx)}" y="{num(y)}" width="{num(bw)}" height="{num(ROW_H)}" '
                       f'fill="{FORWARD if forward else BACKWARD}" stroke="#ffffff" stroke-width="0.6"/>')
            if redo > 0 and end > start:
                rw = bw * min(redo / (end - start), 1.0)
                out.append(f'<rect class="recompute" x="{num(bx)}" y="{num(y + 3)}" width="{num(rw)}" '
                           f'height="{num(ROW_H - 6)}" fill="url(#tl-recompute)" data-time="{redo!r}"/>')
            label = f"{a.kind}{a.microbatch}" + (f" c{chunk}" if v > 1 else "")
            if text_width(label, FONT) + 4 <= bw:
                out.append(text(bx + bw / 2, y + ROW_H / 2 + 3.5, label, FONT, "middle",
                                fill="#ffffff" if forward else "#222222"))
            out.append("</g>")
        if run:
            finish = run[-1][2]
            sync = ev.sync_s[d]
            out.append(f'<rect class="sync" x="{num(x(finish))}" y="{num(y + 4)}" '
                       f'width="{num(max(sync * scale, 1.0))}" height="{num(ROW_H - 8)}" fill="{SYNC}" '
                       f'data-start="{finish!r}" data-end="{finish + sync!r}"><title>group {d}: gradient '
                       f'reductions and the optimizer update, {esc(format_seconds(finish))} to '
                       f'{esc(format_seconds(finish + sync))}</title></rect>')
        out.append("</g>")
    out.append("</g>")

    if draw_sends:
        out.append('<g class="sends">')
        for d, run in enumerate(tl.runs):
            for a, start, _ in run:
                dep = _sender(a, c.stages)
                if dep is None:
                    continue
                sd, _, send_end = where[dep]
                down = sd < d
                y1 = row_y(sd) + (ROW_H if down else 0.0)
                y2 = row_y(d) + (0.0 if down else ROW_H)
                out.append(f'<line class="send" x1="{num(x(send_end))}" y1="{num(y1)}" x2="{num(x(start))}" '
                           f'y2="{num(y2)}" stroke="{COMMUNICATION}" stroke-width="1" marker-end="url(#tl-arrow)" '
                           f'data-from="{dep}" data-to="{a}"><title>{esc(_send_title(dep, a, send_end, start))}'
                           "</title></line>")
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def _sender(a, stages: int):
    """The action on another stage whose send ``a`` waits for: the previous stage's forward, the next's backward."""
    if a.kind == "F":
        return None if a.stage == 0 else Action("F", a.microbatch, a.stage - 1)
    return None if a.stage == stages - 1 else Action("B", a.microbatch, a.stage + 1)


def _send_title(dep, a, sent: float, start: float) -> str:
    what = "activation" if a.kind == "F" else "cotangent"
    return (f"the {what} of microbatch {a.microbatch} from stage {dep.stage} to stage {a.stage}: sent at "
            f"{format_seconds(sent)}, used at {format_seconds(start)}")
