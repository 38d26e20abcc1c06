"""Horizontal bar charts as SVG: the plan page's compute vs communication, and ``compare``'s chart.

:func:`bar_chart` draws one row per label and one bar per series in each row, on
one linear scale starting at zero; every bar is a ``<rect class="bar">`` carrying
``data-series``, ``data-label`` and ``data-value`` (the exact number, ``repr`` of
the float or int it was given), and its value printed beside it. The values are
the caller's (read off a plan or a comparison): nothing here computes a cost.

:func:`compare_chart` draws a :class:`planner.compare.Comparison` as three charts
stacked: communication bytes per device, communication time, and the objective,
one bar per search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from costmodels.units import format_bytes, format_seconds
from planner.views.svg import COMMUNICATION, COMPUTE, color, esc, num, svg_open, text, text_width

BAR_H, BAR_GAP, ROW_GAP = 12.0, 3.0, 8.0
PLOT_W = 420.0
FONT = 12.0


@dataclass(frozen=True)
class Series:
    """One kind of bar: its name (legend), fill, values (one per label) and how a value is printed."""

    name: str
    fill: str
    values: tuple[float, ...]
    fmt: Callable[[float], str]


def bar_chart(title: str, labels: Sequence[str], series: Sequence[Series], cls: str = "chart",
              note: str = "") -> str:
    """The chart described in the module docstring, as an ``<svg>`` element."""
    label_w = max((text_width(s, FONT) for s in labels), default=0.0) + 12
    vmax = max((v for s in series for v in s.values), default=0.0)
    texts = [s.fmt(v) for s in series for v in s.values]
    value_w = max((text_width(t, 11) for t in texts), default=0.0) + 8
    row_h = len(series) * (BAR_H + BAR_GAP) - BAR_GAP + ROW_GAP
    head = 46.0 if note else 30.0
    legend_h = 20.0
    width = max(12 + label_w + PLOT_W + value_w + 12, 12 + text_width(title, 13) + 12,
                12 + text_width(note, 11) + 12)
    height = head + legend_h + len(labels) * row_h + 12
    out = [svg_open(width, height, cls, title)]
    out.append(text(12, 20, title, 13, weight="bold"))
    if note:
        out.append(text(12, 36, note, 11, fill="#555555"))
    x = 12.0
    for s in series:  # legend
        out.append(f'<rect x="{num(x)}" y="{num(head - 2)}" width="12" height="12" fill="{s.fill}"/>')
        out.append(text(x + 16, head + 8, s.name, 11))
        x += 16 + text_width(s.name, 11) + 16
    x0 = 12 + label_w
    out.append(f'<line x1="{num(x0)}" y1="{num(head + legend_h - 4)}" x2="{num(x0)}" '
               f'y2="{num(height - 8)}" stroke="#999999"/>')
    for i, label in enumerate(labels):
        y = head + legend_h + i * row_h
        out.append(f'<g class="row" data-label="{esc(label)}">')
        out.append(text(x0 - 6, y + (row_h - ROW_GAP) / 2 + 4, label, FONT, "end"))
        for k, s in enumerate(series):
            v = s.values[i]
            w = 0.0 if vmax <= 0 else PLOT_W * v / vmax
            if 0 < w < 1:
                w = 1.0  # a non-zero value stays visible
            by = y + k * (BAR_H + BAR_GAP)
            out.append(f'<rect class="bar" x="{num(x0)}" y="{num(by)}" width="{num(w)}" height="{num(BAR_H)}" '
                       f'fill="{s.fill}" data-series="{esc(s.name)}" data-label="{esc(label)}" '
                       f'data-value="{esc(repr(v))}"><title>{esc(f"{label}: {s.name} {s.fmt(v)}")}</title></rect>')
            out.append(text(x0 + w + 4, by + BAR_H - 2, s.fmt(v), 11, fill="#333333"))
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def time_series(compute: Sequence[float], comm: Sequence[float]) -> tuple[Series, Series]:
    """The plan page's two series: compute and communication seconds."""

    fmt = format_seconds
    return (Series("compute", COMPUTE, tuple(compute), fmt), Series("communication", COMMUNICATION, tuple(comm), fmt))


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
