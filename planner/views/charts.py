"""Horizontal bar charts as SVG: the plan page's time and memory charts, and ``compare``'s chart.

:func:`stacked_chart` draws one bar per row cut into segments (one per series),
each segment as a share of one ``whole`` (the plan page: the step time, or the
largest memory bar), with ticks at quarters of it. Every segment is a
``<rect class="bar segment">`` carrying ``data-series``, ``data-label``,
``data-value`` (the exact number, ``repr`` of the float or int it was given) and
``data-share``. The values are the caller's (read off a plan or a comparison):
nothing here computes a cost. A segment that is not zero is
at least :data:`MIN_SEGMENT_W` px wide, so a compute segment of 1% of a step ruled
by communication stays visible. :func:`memory_bars` groups devices that hold the
same bytes into one bar, which is how a chart per device stays one bar where every
device is alike (a chart per pipeline stage would hand it one group per stage).

:func:`compare_chart` draws a :class:`planner.compare.Comparison` as three charts
stacked: communication bytes per device, communication time, and the objective,
one bar per search, each a ``<rect class="bar">`` with the same data attributes.

Numbers are printed by the project's one style (:func:`costmodels.units.format_bytes`,
:func:`~costmodels.units.format_seconds`), in labels, ticks and tooltips alike.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from costmodels.units import format_bytes, format_seconds
from planner.views.svg import COMMUNICATION, COMPUTE, color, esc, num, svg_open, text, text_width
from planner.views.svg_grid import device_list

BAR_H, BAR_GAP, ROW_GAP = 12.0, 3.0, 8.0
PLOT_W = 420.0
FONT = 12.0
NOTE_CHARS = 110  # a chart's note is wrapped to lines of at most this many characters
MIN_SEGMENT_W = 3.0  # px: the narrowest a segment that is not zero is drawn
HIDDEN_COMMUNICATION = "#f3b0b1"  # communication behind compute: the communication colour, lighter
LAUNCH = "#9c9c9c"  # the step's fixed launch overhead
MEMORY_FILLS = (COMPUTE, "#f28e2b", "#59a14f", "#b07aa1")  # the memory chart's parts, in order


@dataclass(frozen=True)
class Series:
    """One kind of bar: its name (legend), fill, values (one per label) and how a value is printed."""

    name: str
    fill: str
    values: tuple[float, ...]
    fmt: Callable[[float], str]


def percent(share: float) -> str:
    """A share as the charts print it.

    >>> percent(0.0), percent(0.0004), percent(0.0123), percent(1.0)
    ('0%', '<0.1%', '1.2%', '100.0%')
    """
    if share <= 0:
        return "0%"
    return "<0.1%" if share < 0.001 else f"{100 * share:.1f}%"


def stacked_chart(title: str, labels: Sequence[str], series: Sequence[Series], whole: float, whole_name: str,
                  tick: Callable[[float], str], total: Callable[[float], str], cls: str = "chart",
                  note: str = "", zoom: bool = False) -> str:
    """The stacked chart of the module docstring, as an ``<svg>`` element.

    Segments' shares are of ``whole``, which ``whole_name`` names in tooltips. The
    scale spans ``whole`` (or the longest row, when longer), with ``zoom`` the
    longest row only: many small rows (an op each) then fill the plot, their shares
    unchanged. Ticks mark quarters of the span, ``tick(value)`` printing each;
    ``total(row sum)`` is the text beside a bar; ``note`` is wrapped under the title.
    Every segment is a ``<rect class="bar segment">`` with ``data-series``,
    ``data-label``, ``data-value`` and ``data-share`` (its value over ``whole``).
    """
    sums = [sum(s.values[i] for s in series) for i in range(len(labels))]
    span = max(sums, default=0.0) if zoom else max([whole, *sums])
    scale = 0.0 if span <= 0 else PLOT_W / span
    label_w = max((text_width(s, FONT) for s in labels), default=0.0) + 12
    totals = [total(v) for v in sums]
    plot_w = PLOT_W + MIN_SEGMENT_W * len(series)  # room for segments widened to the minimum
    value_w = max((text_width(t, 11) for t in totals), default=0.0) + 8
    notes = textwrap.wrap(note, NOTE_CHARS)
    head = 30.0 + 16.0 * len(notes)
    legend_h, axis_h, row_h = 20.0, 16.0, BAR_H + 2 * BAR_GAP + ROW_GAP
    ticks = [k / 4 for k in range(5)] if span > 0 else []
    width = max(12 + label_w + plot_w + value_w + 12, 12 + text_width(title, 13) + 12,
                max((12 + text_width(line, 11) + 12 for line in notes), default=0.0),
                12 + label_w + PLOT_W + text_width(tick(span), 10) / 2 + 12 if ticks else 0.0)
    top = head + legend_h + axis_h
    height = top + len(labels) * row_h + 12
    out = [svg_open(width, height, cls, title), text(12, 20, title, 13, weight="bold")]
    out.extend(text(12, 36 + 16 * k, line, 11, fill="#555555") for k, line in enumerate(notes))
    x = 12.0
    for s in series:  # legend
        out.append(f'<rect x="{num(x)}" y="{num(head - 2)}" width="12" height="12" fill="{s.fill}"/>')
        out.append(text(x + 16, head + 8, s.name, 11))
        x += 16 + text_width(s.name, 11) + 16
    x0 = 12 + label_w
    for f in ticks:  # the axis: quarters of the span, each with its grid line
        tx = x0 + f * PLOT_W
        out.append(f'<line class="tick" x1="{num(tx)}" y1="{num(top - 4)}" x2="{num(tx)}" y2="{num(height - 8)}" '
                   f'stroke="#dddddd"/>')
        out.append(text(tx, top - 6, tick(f * span), 10, "middle", fill="#555555"))
    out.append(f'<line x1="{num(x0)}" y1="{num(top - 4)}" x2="{num(x0)}" y2="{num(height - 8)}" stroke="#999999"/>')
    for i, label in enumerate(labels):
        y = top + i * row_h + BAR_GAP
        out.append(f'<g class="row" data-label="{esc(label)}">')
        out.append(text(x0 - 6, y + BAR_H - 2, label, FONT, "end"))
        bx = x0
        for s in series:
            v = s.values[i]
            w = v * scale
            if v > 0:
                w = max(w, MIN_SEGMENT_W)
            share = v / whole if whole > 0 else 0.0
            tip = f"{label}: {s.name} {s.fmt(v)}" + (f", {percent(share)} of {whole_name}" if whole > 0 else "")
            out.append(f'<rect class="bar segment" x="{num(bx)}" y="{num(y)}" width="{num(w)}" '
                       f'height="{num(BAR_H)}" fill="{s.fill}" data-series="{esc(s.name)}" data-label="{esc(label)}" '
                       f'data-value="{esc(repr(v))}" data-share="{esc(repr(share))}"><title>{esc(tip)}</title></rect>')
            bx += w
        out.append(text(bx + 4, y + BAR_H - 2, totals[i], 11, fill="#333333"))
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def phase_share_chart(phases: Sequence[tuple[str, object]], step_time_s: float, step_overhead_s: float,
                      cls: str, note: str = "") -> str:
    """The step per phase (:class:`~planner.partitioning.schedule.PhaseTimes` by name): compute, exposed and
    hidden communication as shares of the step time, and a row for the step's launch when it has one."""
    labels = [ph for ph, _ in phases] + (["launch"] if step_overhead_s else [])
    pad = (0.0,) if step_overhead_s else ()
    series = [Series("compute", COMPUTE, tuple(x.compute_time_s for _, x in phases) + pad, format_seconds),
              Series("exposed communication", COMMUNICATION,
                     tuple(x.exposed_comm_time_s for _, x in phases) + pad, format_seconds),
              Series("hidden communication", HIDDEN_COMMUNICATION,
                     tuple(x.hidden_comm_time_s for _, x in phases) + pad, format_seconds)]
    if step_overhead_s:
        series.append(Series("launch", LAUNCH, (0.0,) * len(phases) + (step_overhead_s,), format_seconds))
    return step_share_chart("share of the step time per phase", labels, series, step_time_s, cls, note)


def time_share_series(compute: Sequence[float], comm: Sequence[float]) -> tuple[Series, Series]:
    """Compute and communication seconds as stacked segments (the per-layer and per-op charts)."""
    return (Series("compute", COMPUTE, tuple(compute), format_seconds),
            Series("communication", COMMUNICATION, tuple(comm), format_seconds))


def step_share_chart(title: str, labels: Sequence[str], series: Sequence[Series], step_time_s: float,
                     cls: str, note: str = "", zoom: bool = False) -> str:
    """:func:`stacked_chart` in shares of the step time: ticks and totals in percent of it."""

    def tick(v: float) -> str:
        return f"{100 * v / step_time_s:.3g}%" if step_time_s > 0 else format_seconds(v)

    def total(v: float) -> str:
        return f"{format_seconds(v)} ({percent(v / step_time_s) if step_time_s > 0 else '-'})"

    return stacked_chart(title, labels, series, step_time_s, f"the step time {format_seconds(step_time_s)}", tick,
                         total, cls, note, zoom)


@dataclass(frozen=True)
class MemoryBar:
    """One bar of the memory chart: the devices it stands for and their bytes by part (all alike)."""

    devices: tuple[int, ...]
    parts: tuple[tuple[str, int], ...]  # (part name, bytes), in the chart's series order

    @property
    def label(self) -> str:
        return device_group(self.devices)

    @property
    def total(self) -> int:
        return sum(b for _, b in self.parts)


def device_group(devices: Sequence[int]) -> str:
    """A bar's label: its devices with runs as ranges.

    >>> device_group([3]), device_group([0, 1, 2, 3]), device_group([0, 2, 4, 5])
    ('device 3', 'devices 0-3', 'devices 0,2,4-5')
    """
    return ("device " if len(devices) == 1 else "devices ") + device_list(devices)


def memory_bars(per_device: Mapping[int, Sequence[tuple[str, int]]]) -> list[MemoryBar]:
    """One bar per distinct breakdown of bytes, its devices in order; bars by their first device.

    >>> [(b.label, b.total) for b in memory_bars({0: [("a", 4)], 1: [("a", 6)], 2: [("a", 4)]})]
    [('devices 0,2', 4), ('device 1', 6)]
    """
    groups: dict[tuple, list[int]] = {}
    for d in sorted(per_device):
        groups.setdefault(tuple(per_device[d]), []).append(d)
    return [MemoryBar(tuple(devs), parts) for parts, devs in groups.items()]


def memory_chart(bars: Sequence[MemoryBar], cls: str = "chart memory", note: str = "") -> str:
    """Bytes per device as :func:`stacked_chart` bars, one per :class:`MemoryBar`; ticks in bytes.

    Parts are filled in first-seen order from :data:`MEMORY_FILLS`. When one bar
    stands for every device the title says so.
    """
    names = list(dict.fromkeys(n for b in bars for n, _ in b.parts))
    values = [dict(b.parts) for b in bars]
    series = [Series(n, MEMORY_FILLS[k % len(MEMORY_FILLS)], tuple(v.get(n, 0) for v in values), format_bytes)
              for k, n in enumerate(names)]
    whole = max((b.total for b in bars), default=0)
    devices = sum(len(b.devices) for b in bars)
    title = "memory per device"
    if len(bars) == 1 and devices > 1:
        title += f": all {devices} devices alike"
    return stacked_chart(title, [b.label for b in bars], series, whole, f"the largest bar {format_bytes(whole)}",
                         lambda v: format_bytes(round(v)), format_bytes, cls, note)


def compare_chart(c) -> str:
    """A :class:`planner.compare.Comparison` as three stacked charts (see the module docstring)."""

    searches = [e.search for e in c.entries]
    panels = [
        ("communication bytes per device", [e.comm_bytes_per_device for e in c.entries], format_bytes),
        ("communication time", [e.comm_time_s for e in c.entries], format_seconds),
        ("objective (compute + communication)", [e.objective for e in c.entries], format_seconds),
    ]
    fills = [color(k) for k in range(len(searches))]
    charts = [_single_bars(title, searches, values, fmt, fills) for title, values, fmt in panels]
    return _stack(charts, f"compare {c.model} on {c.mesh}{', training' if c.training else ''}")


def _single_bars(title: str, labels: Sequence[str], values: Sequence[float], fmt,
                 fills: Sequence[str]) -> tuple[str, float, float]:
    """One bar per label, each in its own fill (a search's colour); the ``<svg>``, its width and height."""
    label_w = max((text_width(s, FONT) for s in labels), default=0.0) + 12
    vmax = max(values, default=0)
    value_w = max((text_width(fmt(v), 11) for v in values), default=0.0) + 8
    row_h = 2 * BAR_H + ROW_GAP
    width = max(12 + label_w + PLOT_W + value_w + 12, 12 + text_width(title, 13) + 12)
    height = 30 + len(labels) * row_h + 8
    out = [svg_open(width, height, "chart", title), text(12, 20, title, 13, weight="bold")]
    x0 = 12 + label_w
    out.append(f'<line x1="{num(x0)}" y1="26" x2="{num(x0)}" y2="{num(height - 6)}" stroke="#999999"/>')
    for i, (label, v) in enumerate(zip(labels, values)):
        y = 30 + i * row_h
        w = 0.0 if vmax <= 0 else PLOT_W * v / vmax
        if 0 < w < 1:
            w = 1.0
        out.append(f'<g class="row" data-label="{esc(label)}">')
        out.append(text(x0 - 6, y + BAR_H + 4, label, FONT, "end"))
        out.append(f'<rect class="bar" x="{num(x0)}" y="{num(y)}" width="{num(w)}" height="{num(2 * BAR_H)}" '
                   f'fill="{fills[i]}" data-series="{esc(title)}" data-label="{esc(label)}" '
                   f'data-value="{esc(repr(v))}"><title>{esc(f"{label}: {fmt(v)}")}</title></rect>')
        out.append(text(x0 + w + 4, y + BAR_H + 4, fmt(v), 11, fill="#333333"))
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out), width, height


def _stack(charts: Sequence[tuple[str, float, float]], title: str) -> str:
    """Charts (each an ``<svg>`` with its size) one below the other in one standalone SVG, under ``title``."""
    width = max([w for _, w, _ in charts] + [24 + text_width(title, 14)])
    height = 34 + sum(h for _, _, h in charts) + 10 * (len(charts) - 1)
    out = [svg_open(width, height, "compare-chart", title),
           f'<rect width="{num(width)}" height="{num(height)}" fill="#ffffff"/>',
           text(12, 22, title, 14, weight="bold")]
    y = 34.0
    for chart, _, h in charts:
        out.append(f'<g transform="translate(0,{num(y)})">' + chart + "</g>")
        y += h + 10
    out.append("</svg>")
    return "\n".join(out) + "\n"


def compare_page(c, table_text: str) -> str:
    """A self-contained HTML page: :func:`compare_chart` above ``compare``'s table (``table_text``)."""
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"/>',
        f"<title>shardplan compare: {esc(c.model)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:20px}pre{font-size:12px}</style></head><body>",
        compare_chart(c),
        f"<pre>{esc(table_text)}</pre>",
        "</body></html>",
    ]) + "\n"
