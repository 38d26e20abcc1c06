"""Writing SVG by hand, deterministically: escaping, numbers, colours, text widths.

The pictures (:mod:`planner.views.svg_grid`, :mod:`planner.views.charts`,
:mod:`planner.views.html_page`) are plain strings built from these helpers, so
the same input gives byte-identical output: coordinates are printed with one
decimal, colours come from a fixed palette in first-seen order, and text widths
are estimated from a monospace font instead of measured by a browser.
"""

from __future__ import annotations

import colorsys
from html import escape as _escape
from typing import Hashable, Iterable

SVG_NS = "http://www.w3.org/2000/svg"  # the namespace name of SVG (an identifier, never fetched)

FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace"
CHAR_WIDTH = 0.62  # a monospace glyph's advance, in ems (DejaVu Sans Mono: 0.602; Menlo 0.602; margin kept)

#: Light, distinguishable fills for shardings, blocks and searches (Tableau 20's light half without
#: its grey, then ColorBrewer's Set3 without its grey); dark text stays readable on every one.
PALETTE = ("#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d",
           "#9edae5", "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69",
           "#fccde5", "#bc80bd", "#ccebc5", "#ffed6f")
REPLICATED = "#e6e6e6"  # a replicated tensor: grey, so that the sharded ones stand out
COMPUTE = "#4e79a7"
COMMUNICATION = "#e15759"


def esc(text: object) -> str:
    """``text`` escaped for an XML attribute or element."""
    return _escape(str(text), quote=True)


def num(x: float) -> str:
    """A coordinate: one decimal, no trailing ``.0``, never ``-0``."""
    text = f"{x:.1f}"
    if text.endswith(".0"):
        text = text[:-2]
    return "0" if text == "-0" else text


def text_width(text: str, size: float) -> float:
    """The width of ``text`` in a monospace font of ``size`` px (an upper estimate)."""
    return len(text) * size * CHAR_WIDTH


def color(i: int) -> str:
    """The ``i``-th fill: the palette, then hues spaced by the golden angle (light, as the palette)."""
    if i < len(PALETTE):
        return PALETTE[i]
    hue = ((i - len(PALETTE)) * 137.508 + 20.0) % 360.0 / 360.0
    r, g, b = colorsys.hls_to_rgb(hue, 0.78, 0.55)
    return "#{:02x}{:02x}{:02x}".format(round(r * 255), round(g * 255), round(b * 255))


def color_map(keys: Iterable[Hashable], grey: Hashable | None = None) -> dict:
    """A fill per distinct key, in first-seen order; ``grey`` (e.g. the replicated layout) gets :data:`REPLICATED`.

    >>> color_map(["a", "b", "a", "r"], grey="r")
    {'a': '#aec7e8', 'b': '#ffbb78', 'r': '#e6e6e6'}
    """
    out: dict = {}
    n = 0
    for k in keys:
        if k in out:
            continue
        if grey is not None and k == grey:
            out[k] = REPLICATED
        else:
            out[k] = color(n)
            n += 1
    return out


def svg_open(width: float, height: float, cls: str = "", title: str = "") -> str:
    """The opening ``<svg>`` tag (with its namespace, so the text is a standalone SVG file too)."""
    c = f' class="{esc(cls)}"' if cls else ""
    t = f"<title>{esc(title)}</title>" if title else ""
    return (f'<svg xmlns="{SVG_NS}"{c} width="{num(width)}" height="{num(height)}" '
            f'viewBox="0 0 {num(width)} {num(height)}" font-family="{esc(FONT)}">{t}')


def text(x: float, y: float, body: str, size: float = 12, anchor: str = "start", cls: str = "",
         weight: str = "", fill: str = "") -> str:
    extra = f' class="{cls}"' if cls else ""
    extra += f' font-weight="{weight}"' if weight else ""
    extra += f' fill="{fill}"' if fill else ""
    a = f' text-anchor="{anchor}"' if anchor != "start" else ""
    return f'<text x="{num(x)}" y="{num(y)}" font-size="{num(size)}"{a}{extra}>{esc(body)}</text>'
