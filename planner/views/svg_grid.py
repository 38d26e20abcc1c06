"""The device grid of one sharding as SVG: which device holds which block (``describe --format svg``).

Two views of the same blocks, the first whenever it fits in :data:`MAX_SIDE` px either way:

**By block**, like ``jax.debug.visualize_sharding``: the tensor is drawn as a
rectangle cut into its blocks, one cell per block, each cell listing the devices
that hold it (a replicated block lists several) and, below, the index ranges it covers.

* rank 0 (a scalar): one cell;
* rank 1: one row of ``shard_counts[0]`` cells;
* rank 2: ``shard_counts[0]`` rows by ``shard_counts[1]`` columns (rows are dimension 0);
* rank 3 and more: one panel per block of the leading dimensions (``0 .. rank-3``),
  in row-major order of their shard indices, each panel drawing the last two
  dimensions as for rank 2; the panel's title gives the leading dimensions' ranges.

Cells are equal in size whatever the index ranges (a padded last block of a
non-divisible dimension is as wide as the others; its ranges say it).

**By device**, when the blocks would not fit (256 blocks of one dimension would be
a strip thousands of pixels long): one cell per device, filled with the colour of
the block it holds, laid out as the mesh (:func:`wrap_shape`): rows are the
product of the mesh's leading axes and columns the rest, cut where the rectangle
is closest to square; a mesh of one axis, or one whose best cut is still more than
:data:`MAX_ASPECT` times longer than wide, is wrapped row-major into a near-square
rectangle instead. Cells shrink (and drop their text) until the grid fits.

A pending sum (``unreduced``) is marked apart from replication: its cells are
hatched and carry a ``Σ``, and the legend says that the devices of such a cell hold
partial sums, not copies; replication (several devices holding one block, no
``Σ``) has its own legend line. Every cell is a ``<rect class="block">`` with
``data-devices`` and ``data-index`` (``[start, stop)`` per dimension), plus
``data-pending`` when it holds partial sums; blocks are coloured in row-major order.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from costmodels.units import format_bytes
from graphs.dtypes import dtype_itemsize
from planner.errors import NotExpressibleError
from planner.ir.axis import axes_size
from planner.ir.layout import device_index_ranges, shard_indices
from planner.ir.sharding import TensorSharding
from planner.views.svg import color, esc, num, svg_open, text, text_width

MAX_BLOCKS = 4096  # more cells than this are unreadable: describe --format json lists them
CELL_MAX, CELL_MIN = 150.0, 56.0  # px
GRID_WIDTH = 720.0  # px a panel aims at
MAX_SIDE = 2000.0  # px: the largest picture either way; a larger block view is drawn by device
MAX_ASPECT = 4  # a mesh cut into rows x columns longer than this either way is wrapped near-square instead
DEVICE_CELL_MIN_H = 36.0  # px: a device cell's height before the grid must shrink it to fit
MARGIN, PANEL_GAP = 12.0, 30.0
HATCH = "pending-hatch"  # the id of the hatching pattern of partial sums


def device_list(devices: Sequence[int]) -> str:
    """Device ids with runs written as ranges.

    >>> device_list([0, 1, 2, 3, 6, 8, 9])
    '0-3,6,8-9'
    """
    parts, run = [], []
    for d in sorted(devices):
        if run and d == run[-1] + 1:
            run.append(d)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [d]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


def blocks(sharding: TensorSharding, shape: Sequence[int]) -> dict[tuple[int, ...], tuple[list[int], list]]:
    """Every block by its shard index per dimension (row-major order): its devices and ``[start, stop)`` ranges."""
    idx = shard_indices(sharding)
    ranges = device_index_ranges(sharding, shape)
    out: dict[tuple[int, ...], tuple[list[int], list]] = {}
    for d in range(idx.shape[0]):
        key = tuple(int(i) for i in idx[d])
        if key not in out:
            out[key] = ([], [[int(a), int(b)] for a, b in ranges[d]])
        out[key][0].append(d)
    return dict(sorted(out.items()))


def wrap_shape(sizes: Sequence[int]) -> tuple[int, int]:
    """Rows and columns of the by-device view of a mesh of axis ``sizes`` (see the module docstring).

    Devices fill it row-major in mesh order, so a cut of the mesh's own shape puts
    each device at its mesh coordinates (row: the leading axes, column: the rest).

    >>> wrap_shape([16, 16]), wrap_shape([4, 4, 16]), wrap_shape([256]), wrap_shape([2, 128]), wrap_shape([8])
    ((16, 16), (16, 16), (16, 16), (16, 16), (3, 3))
    """
    n = math.prod(sizes)
    if len(sizes) >= 2:
        def skew(k: int) -> float:
            return abs(math.log(math.prod(sizes[:k]) / math.prod(sizes[k:])))
        cut = min(range(1, len(sizes)), key=lambda k: (skew(k), k))
        rows = math.prod(sizes[:cut])
        cols = n // rows
        if max(rows, cols) <= MAX_ASPECT * min(rows, cols):
            return rows, cols
    cols = math.isqrt(n - 1) + 1 if n > 1 else 1  # ceil(sqrt(n))
    return -(-n // cols), cols


class _Cell(NamedTuple):
    """One drawn cell: where, what it holds, and its text lines (label with size, then ranges if they fit)."""

    x: float
    y: float
    w: float
    h: float
    devices: tuple[int, ...]
    ranges: list
    fill: str
    label: str
    size: float
    panel: int = -1  # the by-block view's panel (rank 3 and more), else -1


def _cell_label(devices: Sequence[int], width: float) -> tuple[str, float]:
    """The device label of a cell and its font size, shrunk (then cut) to fit ``width``."""
    label = device_list(devices)
    head = "device " if len(devices) == 1 else "devices "
    for size in (14.0, 12.0, 10.0):
        if text_width(head + label, size) <= width - 8:
            return head + label, size
        if text_width(label, size) <= width - 8:
            return label, size
    fit = max(int((width - 8) / (10.0 * 0.62)) - 1, 1)
    return label[:fit] + "…", 10.0


def _by_block(found: dict, rank: int, y0: float) -> tuple[list[_Cell], list[tuple[tuple, float, str]], float,
                                                           float]:
    """The by-block view: its cells, panels (leading shard indices, title's y, title), width and height."""
    counts = [max(k[d] for k in found) + 1 for d in range(rank)]
    rows = counts[-2] if rank >= 2 else 1
    cols = counts[-1] if rank >= 1 else 1
    cell_w = max(min(GRID_WIDTH / cols, CELL_MAX), CELL_MIN)
    cell_h = max(min(cell_w * 0.6, 90.0), 44.0)
    lead_keys = sorted({k[:-2] for k in found}) if rank > 2 else [()]
    panel_title = 18.0 if rank > 2 else 0.0
    grid_h = rows * cell_h
    order = {k: n for n, k in enumerate(found)}
    cells, titles = [], []
    y = y0
    for lead in lead_keys:
        if rank > 2:
            some = next(v for k, v in found.items() if k[:-2] == lead)
            where = ", ".join(f"dim {d} [{some[1][d][0]},{some[1][d][1]})" for d in range(rank - 2))
            titles.append((lead, y + 13, where))
            y += panel_title
        for key, (devices, ranges) in found.items():
            if rank > 2 and key[:-2] != lead:
                continue
            r = key[-2] if rank >= 2 else 0
            c = key[-1] if rank >= 1 else 0
            label, size = _cell_label(devices, cell_w)
            cells.append(_Cell(MARGIN + c * cell_w, y + r * cell_h, cell_w, cell_h, tuple(devices), ranges,
                               color(order[key]), label, size, len(titles) - 1))
        y += grid_h + PANEL_GAP
    return cells, titles, cols * cell_w, y - PANEL_GAP - y0


def _by_device(sharding: TensorSharding, found: dict, y0: float) -> tuple[list[_Cell], float, float, int, int]:
    """The by-device view: its cells, width and height (below ``y0``), rows and columns."""
    mesh = sharding.mesh
    rows, cols = wrap_shape([a.size for a in mesh.axes])
    room = MAX_SIDE - 2 * MARGIN
    cell_w = min(max(min(GRID_WIDTH / cols, CELL_MAX), CELL_MIN), room / cols)
    cell_h = min(max(min(cell_w * 0.6, 90.0), DEVICE_CELL_MIN_H), (MAX_SIDE - MARGIN - y0) / rows)
    held = {}
    for n, (key, (devices, ranges)) in enumerate(found.items()):
        for d in devices:
            held[d] = (n, ranges)
    cells = []
    for p, d in enumerate(mesh.devices):
        n, ranges = held[d]
        label = f"{d}" if text_width(f"d{d}", 12) > cell_w - 4 else f"d{d}"
        size = 12.0 if cell_h >= 20 and text_width(label, 12) <= cell_w - 4 else 0.0  # 0: no text
        cells.append(_Cell(MARGIN + (p % cols) * cell_w, y0 + (p // cols) * cell_h, cell_w, cell_h, (d,), ranges,
                           color(n), label, size))
    return cells, cols * cell_w, rows * cell_h, rows, cols


def _hatch_defs() -> str:
    return (f'<defs><pattern id="{HATCH}" patternUnits="userSpaceOnUse" width="6" height="6" '
            'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#222222" '
            'stroke-width="1.5" stroke-opacity="0.5"/></pattern></defs>')


def device_grid_svg(sharding: TensorSharding, shape: Sequence[int], dtype: str = "f32") -> str:
    """The picture described in the module docstring, as a standalone SVG document."""
    sharding.check_rank(shape)
    rank = len(shape)
    mesh = sharding.mesh
    total = sharding.num_shards()
    if total > MAX_BLOCKS:
        raise NotExpressibleError(
            f"sharding {sharding} cuts the tensor into {total:,} blocks, more than the {MAX_BLOCKS:,} the device "
            "grid draws; use --format json (or table) for every device's index range")
    found = blocks(sharding, shape)
    pending = axes_size(sharding.unreduced, mesh)
    copies = mesh.size // (total * pending)
    dims = "x".join(map(str, shape)) or "scalar"
    title = f"{sharding} : {dtype}[{dims}]"
    local = sharding.local_shape(shape)
    local_bytes = format_bytes(math.prod(local) * dtype_itemsize(dtype))
    caption = [f"{dims} {dtype}, local {'x'.join(map(str, local)) or 'scalar'} ({local_bytes} per device), "
               f"{total} block{'s' if total != 1 else ''} on {mesh.size} devices"]
    legend = []
    if copies > 1:
        legend.append(("copy", f"a block on several devices, no Σ: {copies} identical copies (replicated)"))
    if pending > 1:
        axes = "{" + ", ".join(map(str, sharding.unreduced)) + "}"
        legend.append(("pending", f"hatched, Σ: pending sum over {axes}: {pending} devices hold partial sums "
                                  "that add up to the block, not copies"))
    lines = len(caption) + 1 + len(legend)  # the view's own line comes second
    head_h = 30.0 + 16.0 * lines
    y0 = MARGIN + head_h
    cells, titles, grid_w, grid_h = _by_block(found, rank, y0)
    if grid_w + 2 * MARGIN > MAX_SIDE or y0 + grid_h + MARGIN > MAX_SIDE:
        if mesh.size > MAX_BLOCKS:
            raise NotExpressibleError(
                f"sharding {sharding} draws {total:,} blocks over {MAX_SIDE:,.0f} px, and one cell per device would "
                f"be {mesh.size:,} cells, more than the {MAX_BLOCKS:,} the device grid draws; use --format json "
                "(or table) for every device's index range")
        cells, grid_w, grid_h, rows, cols = _by_device(sharding, found, y0)
        titles = []
        sizes = [a.size for a in mesh.axes]
        as_mesh = rows * cols == mesh.size and any(math.prod(sizes[:k]) == rows for k in range(1, len(sizes)))
        cut = "the mesh's shape: rows the leading axes" if as_mesh else f"devices in mesh order, {cols} per row"
        view = (f"one cell per device ({rows} x {cols}, {cut}), filled with the colour of its block; "
                "hover a cell for its index ranges")
    elif rank == 0:
        view = "one cell: the scalar"
    elif rank == 1:
        view = "one row: dimension 0 left to right"
    elif rank == 2:
        view = "rows: dimension 0, columns: dimension 1"
    else:
        lead = "dimension 0" if rank == 3 else f"dimensions 0-{rank - 3}"
        view = f"one panel per block of {lead}; in each, rows: dimension {rank - 2}, columns: dimension {rank - 1}"
    caption.append(view)
    width = max(2 * MARGIN + grid_w, 2 * MARGIN + max(text_width(t, 12) for t in [title, *caption]),
                2 * MARGIN + max((22 + text_width(t, 12) for _, t in legend), default=0.0))
    height = y0 + grid_h + MARGIN
    out = [svg_open(width, height, "device-grid", title), _hatch_defs()]
    out.append(f'<rect width="{num(width)}" height="{num(height)}" fill="#ffffff"/>')
    out.append(text(MARGIN, MARGIN + 14, title, 13, weight="bold"))
    for i, line in enumerate(caption):
        out.append(text(MARGIN, MARGIN + 32 + 16 * i, line, 12, fill="#444444"))
    for i, (kind, line) in enumerate(legend):
        y = MARGIN + 32 + 16 * (len(caption) + i)
        fill = f"url(#{HATCH})" if kind == "pending" else "#ffffff"
        out.append(f'<g class="legend-entry" data-kind="{kind}"><rect x="{num(MARGIN)}" y="{num(y - 10)}" '
                   f'width="16" height="12" fill="{fill}" stroke="#333333"/>'
                   + ("" if kind != "pending" else text(MARGIN + 3, y, "Σ", 10, weight="bold"))
                   + text(MARGIN + 22, y, line, 12, fill="#444444") + "</g>")
    for k, (lead, y, line) in enumerate(titles):
        out.append(f'<g class="panel" data-lead="{esc(list(lead))}">')
        out.append(text(MARGIN, y, line, 12, weight="bold"))
        out.extend(_cell_svg(c, pending > 1, rank) for c in cells if c.panel == k)
        out.append("</g>")
    out.extend(_cell_svg(c, pending > 1, rank) for c in cells if c.panel < 0)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _cell_svg(c: _Cell, pending: bool, rank: int) -> str:
    """One cell: its block rectangle, the hatching and Σ of a partial sum, its label and ranges."""
    where = " x ".join(f"[{a},{b})" for a, b in c.ranges) or "scalar"
    tip = f"device{'s' if len(c.devices) > 1 else ''} {device_list(c.devices)}: {where}"
    if pending:
        tip += " (partial sums)"
    mark = ' data-pending="true"' if pending else ""
    out = [f'<g class="cell"><title>{esc(tip)}</title>',
           f'<rect class="block" x="{num(c.x)}" y="{num(c.y)}" width="{num(c.w)}" height="{num(c.h)}" '
           f'fill="{c.fill}" stroke="#333333" stroke-width="1" data-devices="{esc(",".join(map(str, c.devices)))}" '
           f'data-index="{esc(c.ranges)}"{mark}/>']
    if pending:
        out.append(f'<rect class="pending" x="{num(c.x)}" y="{num(c.y)}" width="{num(c.w)}" height="{num(c.h)}" '
                   f'fill="url(#{HATCH})"/>')
        if c.w >= 16 and c.h >= 14:
            out.append(text(c.x + c.w - 3, c.y + 12, "Σ", 11, "end", cls="pending-mark", weight="bold"))
    if c.size:
        out.append(text(c.x + c.w / 2, c.y + c.h / 2 - 2, c.label, c.size, "middle"))
        span = " ".join(f"[{a},{b})" for a, b in c.ranges[-2:]) if rank else "scalar"
        if text_width(span, 10) <= c.w - 6 and c.h >= 30:
            out.append(text(c.x + c.w / 2, c.y + c.h / 2 + 13, span, 10, "middle", fill="#333333"))
    out.append("</g>")
    return "".join(out)
