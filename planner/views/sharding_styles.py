"""How the pictures tell layouts apart: a fill by dimension 0, a pattern by the other dimensions, hatching
for a pending sum.

A plan has up to a few dozen distinct layouts; a palette of that many light colours
has pairs that look alike. So a layout's look is three things, each readable on its own:

* **fill**, by the axes that split dimension 0: grey when none do, else one of
  :data:`HUES` (eight light colours spaced round the hue circle at equal lightness
  in CIELAB, so that any two are at least 27 units apart), in first-seen order;
* **pattern**, by the axes that split the other dimensions: none when none do, else
  one of an open-ended list of patterns (stripes, dots, lines, grids, then the same
  shapes wider), in first-seen order;
* **hatching** (red diagonal lines) when the value is a pending sum (``unreduced``).

Two different layouts never share all three: when the rule above would give a layout
the look of an earlier one (a ninth hue wraps round, or layouts that differ in what the
three do not show, such as rank or explicitly replicated axes), it takes the next
pattern not yet used with its fill. The looks are a function of the layouts in order only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from planner.ir.sharding import TensorSharding
from planner.views.svg import REPLICATED, num

#: Fills by dimension 0's axes: CIELAB lightness 75, chroma 36, hues 10 + 45k degrees, in sRGB.
HUES = ("#fa9faf", "#eea984", "#c4ba77", "#8cc792", "#51cbc3", "#51c6ee", "#9cb8fa", "#dda7df")
PATTERN_INK = "#333333"
PENDING_INK = "#c01818"
SHAPES = ("stripes", "backstripes", "dots", "rows", "columns", "grid", "checks")
PENDING_PATTERN = "layout-pending"


@dataclass(frozen=True, slots=True)
class LayoutStyle:
    """The look of one layout: its fill, its pattern (0: none) and whether it is hatched as a pending sum."""

    fill: str
    pattern: int
    pending: bool

    @property
    def pattern_id(self) -> str:
        """The id of its ``<pattern>`` element, empty when it has none."""
        return f"layout-pattern-{self.pattern}" if self.pattern else ""

    def encoding(self) -> str:
        """A short text of the look, e.g. ``#fa9faf/rows/pending`` (the pages' ``data-style``)."""
        parts = [self.fill, pattern_name(self.pattern) if self.pattern else "plain"]
        return "/".join(parts + (["pending"] if self.pending else []))


def pattern_name(index: int) -> str:
    """The shape of pattern ``index`` (1-based) and, past the first round of shapes, its spacing.

    >>> pattern_name(1), pattern_name(7), pattern_name(8)
    ('stripes', 'checks', 'stripes-9')
    """
    shape = SHAPES[(index - 1) % len(SHAPES)]
    round_ = (index - 1) // len(SHAPES)
    return shape if round_ == 0 else f"{shape}-{_spacing(index):g}"


def _spacing(index: int) -> float:
    return 6.0 + 3.0 * ((index - 1) // len(SHAPES))


def layout_styles(shardings: Iterable[TensorSharding]) -> dict[str, LayoutStyle]:
    """The look of every distinct layout (by ``dims_text()``), in first-seen order (see the module docstring).

    >>> from planner.ir.mesh import Mesh
    >>> m = Mesh.from_sizes("mesh", {"x": 2, "y": 2})
    >>> s = layout_styles([TensorSharding.build(m, d) for d in ([["x"], []], [[], ["y"]], [["x"], ["y"]], [[], []])])
    >>> [v.encoding() for v in s.values()]
    ['#fa9faf/plain', '#e6e6e6/stripes', '#fa9faf/stripes', '#e6e6e6/plain']
    """
    out: dict[str, LayoutStyle] = {}
    hue: dict[tuple, int] = {}
    pattern: dict[tuple, int] = {}
    used: set[LayoutStyle] = set()
    for s in shardings:
        key = s.dims_text()
        if key in out:
            continue
        axes = s.dim_axes
        first = axes[0] if axes else ()
        rest = tuple(axes[1:])
        fill = REPLICATED if not first else HUES[hue.setdefault(first, len(hue)) % len(HUES)]
        p = 0 if not any(rest) else pattern.setdefault(rest, len(pattern) + 1)
        style = LayoutStyle(fill, p, bool(s.unreduced))
        while style in used:  # the rule gave an earlier layout's look: the next pattern free with this fill
            style = LayoutStyle(fill, style.pattern + 1, style.pending)
        used.add(style)
        out[key] = style
    return out


def pattern_defs(styles: Iterable[LayoutStyle]) -> str:
    """The ``<pattern>`` elements the styles use (for an SVG's ``<defs>``), in pattern order."""
    out = []
    styles = list(styles)
    for index in sorted({s.pattern for s in styles if s.pattern}):
        out.append(_pattern(index))
    if any(s.pending for s in styles):
        out.append(f'<pattern id="{PENDING_PATTERN}" width="5" height="5" patternUnits="userSpaceOnUse" '
                   f'patternTransform="rotate(-45)"><line x1="0" y1="0" x2="0" y2="5" stroke="{PENDING_INK}" '
                   'stroke-opacity="0.55" stroke-width="1.2"/></pattern>')
    return "".join(out)


def _pattern(index: int) -> str:
    shape = SHAPES[(index - 1) % len(SHAPES)]
    w = _spacing(index)
    ink = f'stroke="{PATTERN_INK}" stroke-opacity="0.35" stroke-width="1.2"'
    rotate = {"stripes": ' patternTransform="rotate(45)"', "backstripes": ' patternTransform="rotate(-45)"'}
    body = {
        "stripes": f'<line x1="0" y1="0" x2="0" y2="{num(w)}" {ink}/>',
        "backstripes": f'<line x1="0" y1="0" x2="0" y2="{num(w)}" {ink}/>',
        "dots": f'<circle cx="{num(w / 2)}" cy="{num(w / 2)}" r="1.3" fill="{PATTERN_INK}" fill-opacity="0.4"/>',
        "rows": f'<line x1="0" y1="{num(w / 2)}" x2="{num(w)}" y2="{num(w / 2)}" {ink}/>',
        "columns": f'<line x1="{num(w / 2)}" y1="0" x2="{num(w / 2)}" y2="{num(w)}" {ink}/>',
        "grid": (f'<line x1="{num(w / 2)}" y1="0" x2="{num(w / 2)}" y2="{num(w)}" {ink}/>'
                 f'<line x1="0" y1="{num(w / 2)}" x2="{num(w)}" y2="{num(w / 2)}" {ink}/>'),
        "checks": (f'<rect x="0" y="0" width="{num(w / 2)}" height="{num(w / 2)}" fill="{PATTERN_INK}" '
                   f'fill-opacity="0.25"/><rect x="{num(w / 2)}" y="{num(w / 2)}" width="{num(w / 2)}" '
                   f'height="{num(w / 2)}" fill="{PATTERN_INK}" fill-opacity="0.25"/>'),
    }[shape]
    return (f'<pattern id="layout-pattern-{index}" width="{num(w)}" height="{num(w)}" patternUnits="userSpaceOnUse"'
            f'{rotate.get(shape, "")}>{body}</pattern>')


def style_rects(style: LayoutStyle, x: float, y: float, w: float, h: float, rx: float, extra: str = "") -> str:
    """The rectangles that draw ``style`` over a box: the fill (with ``extra`` attributes), then the pattern and
    the pending sum's hatching, which let clicks through to the fill."""
    box = f'x="{num(x)}" y="{num(y)}" width="{num(w)}" height="{num(h)}" rx="{num(rx)}"'
    out = [f'<rect class="fill" {box} fill="{style.fill}"{extra}/>']
    if style.pattern:
        out.append(f'<rect class="pattern" {box} fill="url(#{style.pattern_id})" pointer-events="none"/>')
    if style.pending:
        out.append(f'<rect class="pending" {box} fill="url(#{PENDING_PATTERN})" pointer-events="none"/>')
    return "".join(out)


def swatch_symbols(styles: Iterable[LayoutStyle], size: float = 14.0) -> str:
    """One ``<symbol id="layout-swatch-I">`` per style, in order (for an SVG's ``<defs>``): what
    :func:`swatch_use` draws."""
    return "".join(f'<symbol id="layout-swatch-{i}" viewBox="0 0 {num(size)} {num(size)}">'
                   + style_rects(s, 0.5, 0.5, size - 1, size - 1, 0, ' stroke="#777777"') + "</symbol>"
                   for i, s in enumerate(styles))


def swatch_use(index: int, size: float = 14.0) -> str:
    """A small inline SVG showing the ``index``-th of :func:`swatch_symbols` (long tables: a few bytes a row)."""
    return (f'<svg class="swatch" width="{num(size)}" height="{num(size)}"><use href="#layout-swatch-{index}" '
            f'width="{num(size)}" height="{num(size)}"/></svg>')


def swatch(style: LayoutStyle, size: float = 14.0) -> str:
    """A small inline SVG square in ``style`` (legend and tables; the patterns are the page's graph's)."""
    return (f'<svg class="swatch" width="{num(size)}" height="{num(size)}" viewBox="0 0 {num(size)} {num(size)}" '
            f'data-style="{style.encoding()}">'
            + style_rects(style, 0.5, 0.5, size - 1, size - 1, 0, ' stroke="#777777"') + "</svg>")
