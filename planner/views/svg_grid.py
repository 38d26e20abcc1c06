"""The device grid of one sharding as SVG: which device holds which block (``describe --format svg``).

Like ``jax.debug.visualize_sharding``: the tensor is drawn as a rectangle cut into
its blocks, one cell per block, each cell listing the devices that hold it (a
replicated block lists several) and, below, the index ranges it covers.

* rank 0 (a scalar): one cell;
* rank 1: one row of ``shard_counts[0]`` cells;
* rank 2: ``shard_counts[0]`` rows by ``shard_counts[1]`` columns (rows are dimension 0);
* rank 3 and more: one panel per block of the leading dimensions (``0 .. rank-3``),
  in row-major order of their shard indices, each panel drawing the last two
  dimensions as for rank 2; the panel's title gives the leading dimensions' ranges.

Cells are equal in size whatever the index ranges (a padded last block of a
non-divisible dimension is as wide as the others; its ranges say it). A pending sum
(``unreduced``) is stated in the caption: the devices of a block then hold partial
sums of it. Every cell is a ``<rect class="block">`` with ``data-devices`` and
``data-index`` (``[start, stop)`` per dimension); blocks are coloured in row-major order.
"""

from __future__ import annotations

from typing import Sequence

from planner.errors import NotExpressibleError
from planner.ir.layout import device_index_ranges, shard_indices
from planner.ir.sharding import TensorSharding
from planner.views.svg import color, esc, num, svg_open, text, text_width

MAX_BLOCKS = 4096  # more cells than this are unreadable: describe --format json lists them
CELL_MAX, CELL_MIN = 150.0, 56.0  # px
GRID_WIDTH = 720.0  # px a panel aims at


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


def _cell_label(devices: list[int], width: float) -> tuple[str, float]:
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


def device_grid_svg(sharding: TensorSharding, shape: Sequence[int], dtype: str = "f32") -> str:
    """The picture described in the module docstring, as a standalone SVG document."""
    sharding.check_rank(shape)
    rank = len(shape)
    counts = sharding.shard_counts()
    total = sharding.num_shards()
    if total > MAX_BLOCKS:
        raise NotExpressibleError(
            f"sharding {sharding} cuts the tensor into {total:,} blocks, more than the {MAX_BLOCKS:,} the device "
            "grid draws; use --format json (or table) for every device's index range")
    found = blocks(sharding, shape)
    rows = counts[-2] if rank >= 2 else 1
    cols = counts[-1] if rank >= 1 else 1
    cell_w = max(min(GRID_WIDTH / cols, CELL_MAX), CELL_MIN)
    cell_h = max(min(cell_w * 0.6, 90.0), 44.0)
    lead_keys = sorted({k[:-2] for k in found}) if rank > 2 else [()]
    margin, panel_gap = 12.0, 30.0
    panel_title = 18.0 if rank > 2 else 0.0
    grid_w, grid_h = cols * cell_w, rows * cell_h
    dims = "x".join(map(str, shape)) or "scalar"
    title = f"{sharding} : {dtype}[{dims}]"
    caption = [f"{dims} {dtype}, local {'x'.join(map(str, sharding.local_shape(shape))) or 'scalar'}, "
               f"{total} block{'s' if total != 1 else ''} on {sharding.mesh.size} devices"]
    if rank == 1:
        caption.append("one row: dimension 0 left to right")
    elif rank == 2:
        caption.append("rows: dimension 0, columns: dimension 1")
    elif rank > 2:
        lead = "dimension 0" if rank == 3 else f"dimensions 0-{rank - 3}"
        caption.append(f"one panel per block of {lead}; in each, rows: dimension {rank - 2}, "
                       f"columns: dimension {rank - 1}")
    if sharding.unreduced:
        caption.append("pending sum over {" + ", ".join(map(str, sharding.unreduced)) +
                       "}: the devices of a block hold partial sums")
    head_h = 30.0 + 16.0 * len(caption)
    width = max(2 * margin + grid_w, 2 * margin + max(text_width(t, 12) for t in [title, *caption]))
    height = margin + head_h + len(lead_keys) * (panel_title + grid_h) + (len(lead_keys) - 1) * panel_gap + margin
    out = [svg_open(width, height, "device-grid", title)]
    out.append(f'<rect width="{num(width)}" height="{num(height)}" fill="#ffffff"/>')
    out.append(text(margin, margin + 14, title, 13, weight="bold"))
    for i, line in enumerate(caption):
        out.append(text(margin, margin + 32 + 16 * i, line, 12, fill="#444444"))
    y0 = margin + head_h
    order = {k: n for n, k in enumerate(found)}
    for lead in lead_keys:
        if rank > 2:
            some = next(v for k, v in found.items() if k[:-2] == lead)
            where = ", ".join(f"dim {d} [{some[1][d][0]},{some[1][d][1]})" for d in range(rank - 2))
            out.append(f'<g class="panel" data-lead="{esc(list(lead))}">')
            out.append(text(margin, y0 + 13, where, 12, weight="bold"))
            y0 += panel_title
        for key, (devices, ranges) in found.items():
            if key[:-2] != lead and rank > 2:
                continue
            r = key[-2] if rank >= 2 else 0
            c = key[-1] if rank >= 1 else 0
            x, y = margin + c * cell_w, y0 + r * cell_h
            label, size = _cell_label(devices, cell_w)
            span = " ".join(f"[{a},{b})" for a, b in ranges[-2:]) if rank else "scalar"
            where = " x ".join(f"[{a},{b})" for a, b in ranges) or "scalar"
            tip = f"device{'s' if len(devices) > 1 else ''} {device_list(devices)}: {where}"
            out.append(f'<g class="cell"><title>{esc(tip)}</title>')
            out.append(f'<rect class="block" x="{num(x)}" y="{num(y)}" width="{num(cell_w)}" height="{num(cell_h)}" '
                       f'fill="{color(order[key])}" stroke="#333333" stroke-width="1" '
                       f'data-devices="{esc(",".join(map(str, devices)))}" data-index="{esc(ranges)}"/>')
            out.append(text(x + cell_w / 2, y + cell_h / 2 - 2, label, size, "middle"))
            if text_width(span, 10) <= cell_w - 6:
                out.append(text(x + cell_w / 2, y + cell_h / 2 + 13, span, 10, "middle", fill="#333333"))
            out.append("</g>")
        y0 += grid_h + panel_gap
        if rank > 2:
            out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
