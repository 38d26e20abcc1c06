"""One self-contained HTML page of a plan (``shardplan plan MODEL --format html``).

Everything is inline (CSS, a few lines of JavaScript, SVG, the panels' data as
JSON): the page fetches nothing. It shows, from top to bottom:

* the plan's header: model, search, mesh, totals (as the table format prints them);
* **the graph**, laid out by layer (:mod:`planner.views.layered_layout`), centred on a
  canvas at least :data:`GRAPH_MIN_WIDTH` wide: ops are white boxes, tensors rounded
  boxes that show their type and local shape (``f32[64,64]→[32,16]``) in the look of
  their layout (:mod:`planner.views.sharding_styles`: a fill by dimension 0, a
  pattern by the other dimensions, hatching for a pending sum; the legend above; a
  graph output has a thick border). Every redistribution is drawn on its edge (red),
  labelled with its steps and its bytes per device (``bwd`` / ``grad`` before the
  backward ones and gradient reductions); a move that sends no byte (a local slice)
  is grey, and "hide free moves" hides those labels and table rows. A click on a
  legend entry fades every tensor of another layout; a click on a tensor or an op
  opens its panel beside the graph (:mod:`planner.views.panels`: the device grid,
  shapes, bytes and ``explain`` chain of a tensor; an op's candidates and
  redistributions);
* **compute vs communication time** as shares of the step time
  (:func:`~planner.views.charts.step_share_chart`): per phase, the compute,
  exposed and hidden communication of the plan's schedule; per layer (when the
  model has layers, :func:`layer_rows`) and per op, the plan's ``compute_time_s``
  and ``comm_time_s`` of every op (the forward redistributions of its result), and
  one more row for the communication not charged to an op (inputs, parameters,
  backward, gradient reductions), so the bars add up to the plan's totals;
* **memory per device**, one bar per distinct value (:func:`memory_parts`);
* **the plan table**: ops, redistributions, tensors.

Large graphs: with more than :data:`COLLAPSE_OPS` ops, each run of consecutive
identical layers (same op kinds, strategies and result shardings, same
redistributions by kind and bytes) is drawn as its first layer followed by one
box standing for the rest of the run ("layer2 - layer11: 10 layers as layer1"),
which carries their redistribution count and bytes; the tables below still list
every op, tensor and redistribution. Long sections scroll inside the page.

Every number is read off the :class:`~planner.report.Plan` (nothing is recomputed),
and the page is a function of the plan only: the same plan gives the same bytes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from costmodels.units import format_bytes, format_seconds
from graphs.dtypes import dtype_itemsize
from planner.views.charts import (memory_bars, memory_chart, percent, phase_share_chart, step_share_chart,
                                   time_share_series)
from planner.views.layered_layout import layered_layout, spread
from planner.views import panels
from planner.views.sharding_styles import (LayoutStyle, layout_styles, pattern_defs, style_rects, swatch,
                                          swatch_symbols, swatch_use)
from planner.views.svg import COMMUNICATION, esc, num, svg_open, text_width

COLLAPSE_OPS = 150  # above this many ops, runs of identical layers are collapsed in the graph
OPEN_DETAILS_ROWS = 200  # tables and charts with more rows than this start closed
LAYER = re.compile(r"^(?P<family>[A-Za-z_][A-Za-z_.]*?)(?P<index>\d+)(?:\.|$)")
FONT, TYPE_FONT = 12.0, 10.0
OP_H, TENSOR_H = 26.0, 34.0
NODE_GAP = 32.0  # px between two boxes of a row
GRAPH_MIN_WIDTH = 1000.0  # px: a narrower graph is centred on a canvas this wide
FREE = "#9a9a9a"  # a move that sends no byte (a local slice): grey, not the communication red


def _fmt_s(v: float) -> str:

    return format_seconds(v)


def _fmt_bytes(v: int) -> str:

    return format_bytes(v)  # as every report prints bytes


def layer_of(name: str) -> str | None:
    """The layer an op or tensor name belongs to (``layer3`` for ``layer3.mlp.fc1``), None when it has none.

    >>> layer_of("layer3.mlp.fc1"), layer_of("dense2.add"), layer_of("relu"), layer_of("embed.table")
    ('layer3', 'dense2', None, None)
    """
    m = LAYER.match(name)
    return None if m is None else name[: m.end("index")]


def group_of(name: str) -> str:
    """The per-layer chart's row of an op: its layer, else the part of its name before the first dot."""
    return layer_of(name) or name.split(".", 1)[0]


@dataclass(frozen=True)
class _Reshard:
    """A redistribution as the page draws it: its edge, label line and details."""

    index: int  # in plan.redistributions
    edge: tuple[str, str]
    line: str
    tip: str
    tensor: str
    phase: str
    bytes_per_device: int
    free: bool  # no byte moves (local slices only)


def _steps(steps) -> str:
    return " + ".join(s.kind for s in steps)


def _steps_full(steps) -> str:
    return ", ".join(f"{s.kind}{'{' + ','.join(map(str, s.axes)) + '}' if s.axes else ''}" for s in steps)


def _reshards(p) -> list[_Reshard]:
    """Every redistribution of the plan on the edge it is drawn on (see the module docstring)."""
    out = []
    prefix = {"forward": "", "backward": "bwd ", "gradient": "grad "}
    for i, r in enumerate(p.redistributions):
        if r.readers:
            edge = (f"t:{r.tensor}", f"op:{r.readers[0]}")
        elif r.producer is not None:
            edge = (f"op:{r.producer}", f"t:{r.tensor}")
        else:
            edge = (f"t:{r.tensor}", f"t:{r.tensor}")
        where = f"{r.producer or r.tensor} -> {', '.join(r.readers) or 'graph output'}"
        tip = (f"{r.phase} redistribution of {r.tensor} ({where}): {_steps_full(r.steps)}; "
               f"{_fmt_bytes(r.bytes_per_device)} per device in {_fmt_s(r.time_s)}; "
               f"from {r.source.dims_text()} to {r.destination.dims_text()}")
        out.append(_Reshard(i, edge, f"{prefix.get(r.phase, r.phase + ' ')}{_steps(r.steps)} "
                            f"{_fmt_bytes(r.bytes_per_device)}", tip, r.tensor, r.phase, r.bytes_per_device,
                            r.bytes_per_device == 0))
    return out


def _collapsed_layers(p, reshards: list[_Reshard]) -> dict[str, str]:
    """Layer -> the box that stands for it, for the layers collapsed (see the module docstring)."""
    if len(p.ops) <= COLLAPSE_OPS:
        return {}
    sig: dict[str, list] = {}
    for o in p.ops:
        layer = layer_of(o.name)
        if layer is not None:
            sig.setdefault(layer, []).append((o.name[len(layer):], o.kind, o.strategy.text(),
                                              o.result_sharding.dims_text()))
    for r in reshards:  # each redistribution counts in the layer of the op it is for
        layer = layer_of(_name(r.edge[1])) or layer_of(_name(r.edge[0]))
        if layer in sig:
            steps = p.redistributions[r.index].steps
            sig[layer].append(("reshard", r.phase, _steps_full(steps), r.bytes_per_device))
    out: dict[str, str] = {}
    layers = list(sig)
    i = 0
    while i < len(layers):
        fam, idx = _family(layers[i])
        j = i + 1
        while j < len(layers) and _family(layers[j]) == (fam, idx + (j - i)) and sig[layers[j]] == sig[layers[i]]:
            j += 1
        if j - i >= 3:  # keep the first of the run, collapse the rest
            box = f"c:{layers[i + 1]}-{layers[j - 1]}"
            for k in range(i + 1, j):
                out[layers[k]] = box
        i = j
    return out


def _name(node: str) -> str:
    """The op or tensor name of a node key (``op:NAME``, ``t:NAME``)."""
    return node.split(":", 1)[1]


def _family(layer: str) -> tuple[str, int]:
    m = LAYER.match(layer)
    return m.group("family"), int(m.group("index"))


def _node_of(p, collapsed: dict[str, str]):
    """The graph node each op and tensor is drawn as (its own, or its collapsed run's box)."""
    producer = {c.op.output: c.op.name for c in p.program.computes()}

    def op(name: str) -> str:
        return collapsed.get(layer_of(name) or "", f"op:{name}")

    def tensor(name: str) -> str:
        layer = layer_of(name) or (layer_of(producer[name]) if name in producer else None)
        return collapsed.get(layer or "", f"t:{name}")

    return op, tensor


def _type_line(t) -> str:
    """A pill's second line: dtype, global shape, arrow, local shape (``f32[64,64]→[32,16]``)."""
    local = t.sharding.local_shape(t.shape)
    return f"{t.dtype}[{','.join(map(str, t.shape))}]→[{','.join(map(str, local))}]"


def graph_svg(p, styles: dict[str, LayoutStyle]) -> tuple[str, dict]:
    """The graph picture and what it drew: ``{"collapsed": {box: (layers, reshards, bytes)}}``."""
    reshards = _reshards(p)
    collapsed = _collapsed_layers(p, reshards)
    op_node, tensor_node = _node_of(p, collapsed)
    nodes: list[str] = []
    label: dict[str, str] = {}
    edges: list[tuple[str, str]] = []
    outputs = set(p.program.outputs)
    computes = p.program.computes()
    tensors = p.tensors

    def add(n: str, text_: str) -> None:
        if n not in label:
            nodes.append(n)
            label[n] = text_

    boxes: dict[str, list[str]] = {}
    for layer, box in collapsed.items():
        boxes.setdefault(box, []).append(layer)
    for c in computes:  # program order: inputs of an op, the op, its result
        for t in c.op.inputs:
            add(tensor_node(t), t)
        add(op_node(c.op.name), c.op.name)
        add(tensor_node(c.op.output), c.op.output)
        for t in c.op.inputs:
            edges.append((tensor_node(t), op_node(c.op.name)))
        edges.append((op_node(c.op.name), tensor_node(c.op.output)))
    for box, layers in boxes.items():
        first = _family(layers[0])
        label[box] = f"{layers[0]} - {layers[-1]}: {len(layers)} layers as {first[0]}{first[1] - 1}"
    type_line = {n: _type_line(tensors[_name(n)]) for n in nodes if n.startswith("t:")}
    widths = {n: max(text_width(label[n], FONT), text_width(type_line.get(n, ""), TYPE_FONT)) + 16 for n in nodes}
    heights = {n: (44.0 if n.startswith("c:") else OP_H if n.startswith("op:") else TENSOR_H) for n in nodes}

    # where each redistribution is drawn: its edge when both ends are drawn apart, else in a collapsed box
    drawn: dict[tuple[str, str], list[_Reshard]] = {}
    in_box: dict[str, list[_Reshard]] = {}
    for r in reshards:
        a, b = r.edge
        u = tensor_node(_name(a)) if a.startswith("t:") else op_node(_name(a))
        v = tensor_node(_name(b)) if b.startswith("t:") else op_node(_name(b))
        if u != v:
            drawn.setdefault((u, v), []).append(r)
        elif u.startswith("c:"):
            in_box.setdefault(u, []).append(r)
        else:  # a source delivered as it is read (no edge): drawn under its box
            drawn.setdefault((u, u), []).append(r)
    line_h = 13.0
    gaps = {}
    for (u, v), rs in drawn.items():  # room for the labels between the rows
        gaps[(u, v)] = len(rs) * line_h
    layout = layered_layout(nodes, edges, widths, heights, row_gap=44.0 + max(gaps.values(), default=0.0) / 2,
                            node_gap=NODE_GAP)

    # the labels: a block of lines per edge, at the middle of its first segment; blocks at the same
    # height pushed apart (least squares, as the nodes); the canvas widened to hold them all
    blocks = []
    for (u, v), rs in drawn.items():
        if u == v:
            x, y = layout.positions[u]
            y += heights[u] / 2 + 4
        else:
            (x1, y1), (x2, y2) = layout.routes[(u, v)][:2]
            x, y = (x1 + x2) / 2, (y1 + y2) / 2 - len(rs) * line_h / 2
        blocks.append([round(y, 1), x, max(text_width(r.line, 11) + 8 for r in rs), rs])
    by_y: dict[float, list] = {}
    for b in blocks:
        by_y.setdefault(b[0], []).append(b)
    for row in by_y.values():
        row.sort(key=lambda b: b[1])
        for b, x in zip(row, spread([b[1] for b in row], [b[2] for b in row], 6.0)):
            b[1] = x
    left = min([0.0] + [b[1] - b[2] / 2 - 8 for b in blocks])
    dx = -left
    width = max([layout.width + dx] + [b[1] + b[2] / 2 + 8 + dx for b in blocks])
    if width < GRAPH_MIN_WIDTH:  # a narrow graph is drawn in the middle of a canvas the page's width
        dx += (GRAPH_MIN_WIDTH - width) / 2
        width = GRAPH_MIN_WIDTH

    out = []
    out.append(svg_open(width, layout.height + 20, "graph", f"the graph of {p.model}"))
    out.append('<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
               'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#888888"/></marker>'
               '<marker id="arrow-r" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
               f'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="{COMMUNICATION}"/></marker>'
               f'{pattern_defs(styles.values())}{swatch_symbols(styles.values())}</defs>')
    moved: dict[tuple[str, str], bool] = {}  # edge -> whether a redistribution on it moves bytes
    for e, rs in drawn.items():
        if e[0] != e[1]:
            moved[e] = moved.get(e, False) or any(not r.free for r in rs)
    for r in reshards:  # the other readers of a shared layout: their edges marked too
        for reader in p.redistributions[r.index].readers[1:]:
            e = (tensor_node(r.tensor), op_node(reader))
            moved[e] = moved.get(e, False) or not r.free
    out.append(f'<g transform="translate({num(dx)},0)">' if dx else "<g>")
    out.append('<g class="edges">')
    for e in dict.fromkeys(edges):
        if e[0] == e[1]:
            continue
        pts = layout.routes[e]
        d = f"M{num(pts[0][0])},{num(pts[0][1])}"
        for (x1, y1), (x2, y2) in zip(pts, pts[1:]):
            my = (y1 + y2) / 2
            d += f" C{num(x1)},{num(my)} {num(x2)},{num(my)} {num(x2)},{num(y2)}"
        if e not in moved:
            cls, look = "edge", 'stroke="#888888" stroke-width="1" marker-end="url(#arrow)"'
        elif moved[e]:
            cls, look = "edge redistributed", f'stroke="{COMMUNICATION}" stroke-width="2" marker-end="url(#arrow-r)"'
        else:  # only local slices: no byte moves, so no communication colour
            cls = "edge free"
            look = f'stroke="{FREE}" stroke-width="1.5" stroke-dasharray="5,3" marker-end="url(#arrow)"'
        out.append(f'<path class="{cls}" d="{d}" fill="none" {look} data-from="{esc(e[0])}" data-to="{esc(e[1])}"/>')
    out.append("</g>")

    out.append('<g class="nodes">')
    for n in nodes:
        x, y = layout.positions[n]
        w, h = widths[n], heights[n]
        if n.startswith("c:"):
            rs = in_box.get(n, [])
            total = sum(r.bytes_per_device for r in rs)
            layers = boxes[n]
            out.append(f'<g class="collapsed" data-layers="{esc(",".join(layers))}" data-reshards="{len(rs)}" '
                       f'data-bytes="{total}"><title>{esc(label[n])}: same op kinds, strategies, result shardings '
                       f'and redistributions; {len(rs)} redistributions, {_fmt_bytes(total)} per device in all'
                       '</title>')
            w = max(w, text_width(f"{len(rs)} redistributions, {_fmt_bytes(total)} per device", 11) + 16)
            out.append(f'<rect x="{num(x - w / 2)}" y="{num(y - h / 2)}" width="{num(w)}" height="{num(h)}" rx="6" '
                       'fill="#fafafa" stroke="#555555" stroke-dasharray="5,3"/>')
            out.append(f'<text x="{num(x)}" y="{num(y - 4)}" font-size="{num(FONT)}" text-anchor="middle">'
                       f'{esc(label[n])}</text>')
            out.append(f'<text x="{num(x)}" y="{num(y + 12)}" font-size="11" text-anchor="middle" fill="#555555">'
                       f'{len(rs)} redistributions, {esc(_fmt_bytes(total))} per device</text></g>')
            continue
        name = _name(n)
        if n.startswith("op:"):
            o = p.op(name)
            tip = (f"op {name} ({o.kind}), strategy {o.strategy.text()}, result {o.result_sharding.dims_text()}; "
                   f"compute {_fmt_s(o.compute_time_s)}, communication {_fmt_s(o.comm_time_s)}; {o.source}; "
                   "click for its candidates and redistributions")
            out.append(f'<g class="node op" data-op="{esc(name)}" tabindex="0"><title>{esc(tip)}</title>')
            out.append(f'<rect x="{num(x - w / 2)}" y="{num(y - h / 2)}" width="{num(w)}" height="{num(h)}" '
                       'fill="#ffffff" stroke="#333333"/>')
            out.append(f'<text x="{num(x)}" y="{num(y + 4)}" font-size="{num(FONT)}" text-anchor="middle">'
                       f'{esc(label[n])}</text></g>')
            continue
        t = tensors[name]
        key = t.sharding.dims_text()
        style = styles[key]
        tip = (f"tensor {name} {t.dtype}[{'x'.join(map(str, t.shape))}] ({t.kind}): {key}; {t.source}; "
               "click for its device grid and why")
        out.append(f'<g class="node tensor" data-tensor="{esc(name)}" data-sharding="{esc(key)}" '
                   f'data-color="{style.fill}" data-style="{style.encoding()}" data-type="{esc(type_line[n])}" '
                   'tabindex="0">'
                   f'<title>{esc(tip)}</title>')
        dash = ' stroke-dasharray="4,2"' if t.sharding.unreduced else ""
        border = f' stroke="#555555" stroke-width="{"3" if name in outputs else "1"}"{dash}'
        out.append(style_rects(style, x - w / 2, y - h / 2, w, h, 9, border))
        halo = ' paint-order="stroke" stroke="#ffffff" stroke-width="3" stroke-opacity="0.8"' \
            if style.pattern or style.pending else ""  # the text stays readable over a pattern
        out.append(f'<text x="{num(x)}" y="{num(y - 2)}" font-size="{num(FONT)}" text-anchor="middle"{halo}>'
                   f'{esc(label[n])}</text>')
        out.append(f'<text class="type" x="{num(x)}" y="{num(y + 11)}" font-size="{num(TYPE_FONT)}" '
                   f'text-anchor="middle" fill="#333333"{halo}>{esc(type_line[n])}</text></g>')
    out.append("</g>")

    out.append('<g class="labels">')
    for y, x, _, rs in blocks:
        for k, r in enumerate(rs):
            w = text_width(r.line, 11) + 8
            ly = y + k * line_h
            fill, ink, stroke = ("#f2f2f2", "#666666", FREE) if r.free else ("#fff4f4", "#a01010", COMMUNICATION)
            out.append(f'<g class="reshard{" free" if r.free else ""}" data-tensor="{esc(r.tensor)}" '
                       f'data-phase="{r.phase}" data-bytes="{r.bytes_per_device}" data-index="{r.index}">'
                       f'<title>{esc(r.tip)}</title>')
            out.append(f'<rect x="{num(x - w / 2)}" y="{num(ly)}" width="{num(w)}" height="{num(line_h)}" '
                       f'fill="{fill}" stroke="{stroke}" stroke-width="0.5" rx="2"/>')
            out.append(f'<text x="{num(x)}" y="{num(ly + 10)}" font-size="11" text-anchor="middle" '
                       f'fill="{ink}">{esc(r.line)}</text></g>')
    out.append("</g></g></svg>")
    info = {"collapsed": {box: (boxes[box], len(in_box.get(box, [])),
                                sum(r.bytes_per_device for r in in_box.get(box, []))) for box in boxes}}
    return "\n".join(out), info


def _legend(styles: dict[str, LayoutStyle], counts: dict[str, int]) -> str:
    items = []
    for key, style in styles.items():
        items.append(f'<li class="legend-item" data-color="{style.fill}" data-style="{style.encoding()}" '
                     f'data-sharding="{esc(key)}" tabindex="0">{swatch(style)}<code>{esc(key)}</code> '
                     f'<span class="count">{counts[key]} tensor{"s" if counts[key] != 1 else ""}</span></li>')
    return '<ul class="legend">' + "".join(items) + "</ul>"


def _table(header, rows, cls: str, row_classes=None) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    row_classes = row_classes or [""] * len(rows)
    body = "".join((f'<tr class="{c}">' if c else "<tr>") +
                   "".join(c if isinstance(c, _Raw) else f"<td>{esc(c)}</td>" for c in r) + "</tr>"
                   for r, c in zip(rows, row_classes))
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


class _Raw(str):
    """A table cell already written as HTML (``<td>...</td>``)."""


def _details(summary: str, body: str, rows: int, cls: str) -> str:
    open_ = " open" if rows <= OPEN_DETAILS_ROWS else ""
    return f'<details class="{cls}"{open_}><summary>{esc(summary)}</summary><div class="scroll">{body}</div></details>'


def layer_rows(names: list[str]) -> dict[str, list[str]] | None:
    """The per-layer chart's rows (:func:`group_of` each name), or None when the model has no layers.

    A model has layers when at least two numbered prefixes of one family
    (``layer0.``, ``layer1.``) are each shared by several ops; and the chart is
    drawn only when it has at most half as many rows as there are ops, since a
    shorter one would repeat the per-op chart (ffn's ``dense1``, ``dense2``, two ops each).

    >>> layer_rows(["layer0.a", "layer0.b", "layer1.a", "layer1.b", "head"])  # 3 rows for 5 ops: None
    >>> sorted(layer_rows([f"layer{i}.{op}" for i in range(3) for op in "abc"] + ["head"]))
    ['head', 'layer0', 'layer1', 'layer2']
    >>> layer_rows(["fc1", "fc2", "fc3", "relu"])  # numbered, but one op each: no layers
    """
    rows: dict[str, list[str]] = {}
    for n in names:
        rows.setdefault(group_of(n), []).append(n)
    families: dict[str, int] = {}
    for row, members in rows.items():
        if layer_of(row) == row and len(members) >= 2:
            fam = _family(row)[0]
            families[fam] = families.get(fam, 0) + 1
    if max(families.values(), default=0) < 2 or 2 * len(rows) > len(names):
        return None
    return rows


def _time_charts(p) -> list[str]:
    """The time charts, each in its ``<details>``: the step's share per phase, then per layer and per op."""
    t = p.totals
    phases = [(ph, times) for ph, times in t.phases if p.training or ph == "forward"]
    rows = len(phases) + (1 if t.step_overhead_s else 0)
    note = (f"compute and exposed communication add up to the step time ({_fmt_s(t.step_time_s)}, overlap "
            f"{t.overlap}); hidden communication runs behind compute")
    charts = [_details(f"per phase ({rows} row{'s' if rows != 1 else ''})",
                       phase_share_chart(phases, t.step_time_s, t.step_overhead_s, "chart per-phase", note), rows,
                       "chart-box")]

    # compute vs communication per layer and per op, and what no op is charged with
    ops = p.ops
    unattributed = max(t.comm_time_s - sum(o.comm_time_s for o in ops), 0.0)
    rest = "(not per op)"
    note = ("shares of the step time, the longest row spanning the plot; an op's communication: the forward "
            f"redistributions of its result (the plan's comm_time_s); {rest}: inputs, parameters, backward, "
            f"gradients; totals: compute {_fmt_s(t.compute_time_s)}, communication {_fmt_s(t.comm_time_s)}")
    rows = layer_rows([o.name for o in ops])
    if rows is not None:
        by_op = {o.name: o for o in ops}
        labels = [*rows, rest] if unattributed else list(rows)
        comp = [sum(by_op[n].compute_time_s for n in names) for names in rows.values()]
        comm = [sum(by_op[n].comm_time_s for n in names) for names in rows.values()]
        comp += [0.0] if unattributed else []
        comm += [unattributed] if unattributed else []
        charts.append(_details(f"per layer ({len(rows)} rows)",
                               step_share_chart("compute and communication per layer", labels,
                                                time_share_series(comp, comm), t.step_time_s, "chart per-layer",
                                                note, zoom=True), len(labels), "chart-box"))
    labels = [o.name for o in ops] + ([rest] if unattributed else [])
    comp = [o.compute_time_s for o in ops] + ([0.0] if unattributed else [])
    comm = [o.comm_time_s for o in ops] + ([unattributed] if unattributed else [])
    charts.append(_details(f"per op ({len(ops)} ops)",
                           step_share_chart("compute and communication per op", labels,
                                            time_share_series(comp, comm), t.step_time_s, "chart per-op", note,
                                            zoom=True),
                           len(labels), "chart-box"))
    return charts


RESULTS = "op results"


def memory_parts(p) -> list[tuple[str, int]]:
    """One device's bytes under the plan's memory model, by part: what its sources hold, then its op results.

    Every device holds a block of every tensor padded to the same local shape, so the
    parts are alike on every device. Op results are each op's local result; the
    sources' part is the rest of the plan's ``memory_bytes_per_device`` (parameters
    and inputs, with training their gradients and optimizer state).
    """
    results = 0
    for c in p.program.computes():
        spec = p.graph.tensor(c.op.output)
        results += math.prod(c.strategy.result.local_shape(spec.shape)) * dtype_itemsize(spec.dtype)
    results = min(results, p.totals.memory_bytes_per_device)  # the parts add up to the plan's figure
    sources = "parameters, gradients, optimizer state, inputs" if p.training else "parameters and inputs"
    return [(sources, p.totals.memory_bytes_per_device - results), (RESULTS, results)]


def _memory_chart(p) -> str:
    """Bytes per device (:func:`memory_parts`), one bar per distinct value, in its ``<details>``."""
    parts = memory_parts(p)
    bars = memory_bars({d: parts for d in p.mesh.devices})
    capacity = p.cluster.device_memory_bytes
    total = p.totals.memory_bytes_per_device
    note = (f"the plan's memory model pads every block to its local shape, so every device holds the same; "
            f"{format_bytes(total)} is {percent(total / capacity)} of a device's {format_bytes(capacity)}")
    return _details(f"memory per device ({len(bars)} bar{'s' if len(bars) != 1 else ''})",
                    memory_chart(bars, "chart memory", note), len(bars), "chart-box")


CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;padding:0 20px 40px;color:#222;
background:#fff}
header{padding:14px 0 4px;border-bottom:1px solid #ddd}
h1{font-size:20px;margin:0 0 6px}h2{font-size:16px;margin:22px 0 8px}
.facts{margin:0;font-size:13px;color:#444}.facts b{color:#222}
nav a{margin-right:14px;font-size:13px}
code,td,.legend{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,'DejaVu Sans Mono',monospace;font-size:12px}
.legend{list-style:none;padding:0;margin:6px 0;display:flex;flex-wrap:wrap;gap:6px 16px}
.legend-item{cursor:pointer;padding:2px 4px;border-radius:4px}.legend-item.active{outline:2px solid #333}
svg.swatch{vertical-align:middle;margin-right:4px}
.count{color:#777}
.scroll{overflow:auto;max-height:80vh;border:1px solid #e4e4e4;background:#fff}
.graph-box{max-height:85vh}
svg.graph .tensor.faded{opacity:.18}
table{border-collapse:collapse}th,td{border-bottom:1px solid #eee;padding:2px 10px 2px 0;text-align:left;
vertical-align:top;white-space:nowrap}th{position:sticky;top:0;background:#f6f6f6;font-size:12px}
td.num{text-align:right}
details{margin:8px 0}summary{cursor:pointer;font-size:14px;font-weight:600}
.note{font-size:12px;color:#555;max-width:70em}
"""

JS = """
(function(){
  var items=document.querySelectorAll('.legend-item');
  function focus(key){
    var on=document.body.getAttribute('data-focus')!==key;
    document.body.setAttribute('data-focus',on?key:'');
    items.forEach(function(it){it.classList.toggle('active',on&&it.getAttribute('data-sharding')===key);});
    document.querySelectorAll('svg.graph g.tensor').forEach(function(g){
      g.classList.toggle('faded',on&&g.getAttribute('data-sharding')!==key);});
  }
  items.forEach(function(it){
    it.addEventListener('click',function(){focus(it.getAttribute('data-sharding'));});
    it.addEventListener('keydown',function(e){if(e.key==='Enter'){focus(it.getAttribute('data-sharding'));}});
  });
  // every label measured in the browser's own font against its box: the names of those that overflow
  var over=[];
  document.querySelectorAll('svg.graph g.node, svg.graph g.collapsed, svg.graph g.reshard').forEach(function(g){
    var r=g.querySelector('rect'),w=r.width.baseVal.value;
    g.querySelectorAll('text').forEach(function(t){
      if(t.getComputedTextLength()>w){over.push(t.textContent);}});
  });
  document.body.setAttribute('data-label-overflow',String(over.length));
  document.body.setAttribute('data-label-overflow-names',over.join('\\n'));
  document.body.setAttribute('data-svg-nodes',String(document.querySelectorAll('svg g.node').length));
  document.body.setAttribute('data-fetched',String(performance.getEntriesByType('resource').length));
})();
"""


def plan_page(p) -> str:
    """The page described in the module docstring, for a :class:`~planner.report.Plan`."""

    keys = [t.sharding.dims_text() for t in p.tensors.values()]
    styles = layout_styles(t.sharding for t in p.tensors.values())
    counts: dict[str, int] = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    graph, info = graph_svg(p, styles)
    t = p.totals

    ops = p.ops
    charts = _time_charts(p)
    memory = _memory_chart(p)

    swatch_index = {key: i for i, key in enumerate(styles)}

    def swatched(key: str) -> _Raw:
        return _Raw(f'<td>{swatch_use(swatch_index[key])}'
                    f"{esc(key)}</td>")

    op_rows = [(o.name, o.kind, o.strategy.text(), swatched(o.result_sharding.dims_text())
                if o.result_sharding.dims_text() in styles else o.result_sharding.dims_text(), o.source,
                _Raw(f'<td class="num">{esc(_fmt_s(o.compute_time_s))}</td>'),
                _Raw(f'<td class="num">{esc(_fmt_s(o.comm_time_s))}</td>')) for o in ops]
    rs_rows = [(r.tensor, f"{r.producer or 'input'} -> {', '.join(r.readers) or 'output'}", r.phase,
                _steps_full(r.steps), _Raw(f'<td class="num">{esc(_fmt_bytes(r.bytes_per_device))}</td>'),
                _Raw(f'<td class="num">{esc(_fmt_s(r.time_s))}</td>')) for r in p.redistributions]
    free = sum(1 for r in p.redistributions if r.bytes_per_device == 0)
    t_rows = [(name, f"{d.dtype}[{'x'.join(map(str, d.shape))}]", d.kind, swatched(d.sharding.dims_text()), d.source)
              for name, d in p.tensors.items()]
    tables = [
        _details(f"ops ({len(op_rows)})", _table(("op", "kind", "strategy", "result sharding", "source", "compute",
                                                  "communication"), op_rows, "ops"), len(op_rows), "table-box"),
        _details(f"redistributions ({len(rs_rows)})", _table(("tensor", "edge", "phase", "steps", "bytes/device",
                                                              "time"), rs_rows, "reshards",
                                                       ["free" if r.bytes_per_device == 0 else ""
                                                        for r in p.redistributions]), len(rs_rows),
                 "table-box"),
        _details(f"tensors ({len(t_rows)})", _table(("tensor", "type", "kind", "sharding", "source"), t_rows,
                                                    "tensors"), len(t_rows), "table-box"),
    ]
    collapsed = info["collapsed"]
    graph_note = ("Ops are white boxes; tensors show their type and local shape (f32[64,64]→[32,16]) and are drawn "
                  "in their layout's look: the fill says which axes split dimension 0 (grey: none), the pattern which "
                  "split the others, red hatching and a dashed border a pending sum (click a legend entry to pick its "
                  "tensors out); a thick border marks a graph output. Red edges carry a redistribution, labelled with "
                  "its steps and bytes per device; grey dashed ones only a local slice, which sends nothing. Click a "
                  "tensor or an op for its panel.")
    if collapsed:
        n = sum(len(v[0]) for v in collapsed.values())
        graph_note += (f" {n} layers identical to the one drawn before them are collapsed into "
                       f"{len(collapsed)} dashed box{'es' if len(collapsed) > 1 else ''}; the tables list everything.")
    facts = [f"search <b>{esc(p.search)}</b>", f"mesh <code>{esc(p.mesh)}</code>",
             f"{len(ops)} ops, {len(p.tensors)} tensors, {len(p.redistributions)} redistributions"]
    totals = [f"communication <b>{esc(_fmt_bytes(t.comm_bytes_per_device))}</b> per device in "
              f"<b>{esc(_fmt_s(t.comm_time_s))}</b>", f"compute <b>{esc(_fmt_s(t.compute_time_s))}</b>",
              f"memory <b>{esc(format_bytes(t.memory_bytes_per_device))}</b> per device",
              f"objective <b>{esc(_fmt_s(t.objective))}</b>",
              f"step time <b>{esc(_fmt_s(t.step_time_s))}</b> (overlap {esc(t.overlap)}; communication exposed "
              f"{esc(_fmt_s(t.exposed_comm_time_s))}, hidden {esc(_fmt_s(t.hidden_comm_time_s))})"]
    warn = "".join(f'<p class="note">warning: {esc(w)}</p>' for w in p.warnings)
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"/>',
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>',
        f"<title>shardplan: {esc(p.model)}</title>",
        f"<style>{CSS}{panels.CSS}</style></head>",
        "<body>",
        f"<header><h1>{esc(p.model)}{' (training)' if p.training else ''}</h1>",
        f'<p class="facts">{" · ".join(facts)}</p>',
        f'<p class="facts">{" · ".join(totals)}</p>{warn}',
        '<nav><a href="#graph">graph</a><a href="#time">compute vs communication</a><a href="#plan">plan table</a>'
        "</nav></header>",
        '<section id="graph"><h2>Graph, by layer, coloured by sharding</h2>',
        f'<p class="note">{esc(graph_note)}</p>',
        _legend(styles, counts),
        f'<p class="filters"><label><input type="checkbox" id="hide-free"{"" if free else " disabled"}/> '
        f'hide free moves ({free} local '
        f'slice{"s" if free != 1 else ""} that send no byte: grey, not red)</label></p>',
        f'<div class="graph-area"><div class="scroll graph-box">{graph}</div>',
        f'<aside id="panel" class="panel" data-kind=""><p class="panel-hint">{esc(panels.PANEL_HINT)}</p></aside>'
        "</div></section>",
        '<section id="time"><h2>Compute vs communication time</h2>',
        *charts,
        '<h2 id="memory">Memory per device</h2>',
        memory,
        "</section>",
        '<section id="plan"><h2>Plan table</h2>',
        *tables,
        "</section>",
        panels.panel_script(panels.panel_data(p, styles)),
        f"<script>{JS}</script>",
        f"<script>{panels.JS}</script>",
        "</body></html>",
    ]) + "\n"
