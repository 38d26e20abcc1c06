"""plan --format html: the self-contained plan page (planner/views/html_page.py).

Every expectation is read off the Plan the page was made from: the page must draw
every tensor in its layout's look, label every redistribution with the plan's
bytes, chart the plan's own compute and communication seconds, and embed for its
panels the plan's own shapes, explanations and candidates.
"""

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from costmodels.units import format_bytes
from planner.api import plan
from planner.views import html_page
from planner.views.html_page import plan_page
from planner.views.svg import REPLICATED
from tests.views.pictures import SVG, TINY_GPT, Elements, by_class, inline_svgs, texts

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ffn():
    p = plan(str(ROOT / "configs/ffn.yaml"), search="bfs")  # the README's plan
    return p, plan_page(p)


@pytest.fixture(scope="module")
def training():
    p = plan(str(ROOT / "configs/megatron_mlp.yaml"), training=True)
    return p, plan_page(p)


def graph_of(page):
    return inline_svgs(page)["graph"]


@pytest.mark.parametrize("which", ["ffn", "training"])
def test_every_tensor_is_drawn_in_its_layouts_style(which, request):
    p, page = request.getfixturevalue(which)
    nodes = {g.get("data-tensor"): g for g in by_class(graph_of(page), "g", "tensor")}
    assert set(nodes) == set(p.tensors)
    legend = {a["data-sharding"]: a["data-style"] for a in Elements(page).find("li", "legend-item")}
    assert set(legend) == {t.sharding.dims_text() for t in p.tensors.values()}
    assert len(set(legend.values())) == len(legend)  # distinct layouts, distinct looks
    for name, g in nodes.items():
        key = p.tensors[name].sharding.dims_text()
        assert g.get("data-sharding") == key and g.get("data-style") == legend[key]
        fill, pattern = legend[key].split("/")[:2]
        rects = {r.get("class"): r for r in g.iter(SVG + "rect")}
        assert rects["fill"].get("fill") == fill == g.get("data-color")
        assert ("pattern" in rects) == (pattern != "plain")
        assert ("pending" in rects) == bool(p.tensors[name].sharding.unreduced) == legend[key].endswith("/pending")


@pytest.mark.parametrize("config", ["ffn.yaml", "moe.yaml", pytest.param("gpt2_small.yaml", marks=pytest.mark.slow),
                                    pytest.param("transformer_block.yaml", marks=pytest.mark.slow)])
def test_the_looks_of_all_layouts_of_a_plan_are_pairwise_distinct(config):
    p = plan(str(ROOT / "configs" / config), training=True)  # gpt2_small's training plan has 14 layouts
    page = plan_page(p)
    looks = {a["data-sharding"]: a["data-style"] for a in Elements(page).find("li", "legend-item")}
    assert len(looks) == len({t.sharding.dims_text() for t in p.tensors.values()})
    assert len(set(looks.values())) == len(looks)
    # the look says what it encodes: grey exactly when dimension 0 is unsplit, a pending sum hatched
    for t in p.tensors.values():
        look = looks[t.sharding.dims_text()]
        assert (look.split("/")[0] == REPLICATED) == (not t.sharding.dim_axes or not t.sharding.dim_axes[0])
        assert look.endswith("/pending") == bool(t.sharding.unreduced)


def local_shape(shape, sharding):
    """Each dimension divided, rounded up, by the product of the sizes of the (sub-)axes that split it."""
    out = []
    for d, axes in zip(shape, sharding.dim_axes):
        ways = 1
        for a in axes:
            ways *= a.size if a.size is not None else sharding.mesh.axis_size(a.name)
        out.append(-(-d // ways))
    return out


def test_every_pill_shows_its_type_and_local_shape(ffn):
    p, page = ffn
    for g in by_class(graph_of(page), "g", "tensor"):
        t = p.tensors[g.get("data-tensor")]
        name, line = texts(g)
        local = local_shape(t.shape, t.sharding)
        assert name == g.get("data-tensor")
        assert line == f"{t.dtype}[{','.join(map(str, t.shape))}]→[{','.join(map(str, local))}]"
    # the README's plan: h1 is 64x64 with rows on "d":(1)2 (2 ways) and columns on "d":(2)4 (4 ways)
    (h1,) = [g for g in by_class(graph_of(page), "g", "tensor") if g.get("data-tensor") == "h1"]
    assert texts(h1)[1] == "f32[64,64]→[32,16]"


def test_free_local_slices_are_grey_and_can_be_hidden():
    p = plan(str(ROOT / "configs/moe.yaml"))  # the dispatch mask is sliced locally for both its readers (0 B)
    page = plan_page(p)
    free = [i for i, r in enumerate(p.redistributions) if r.bytes_per_device == 0]
    assert len(free) == 2, "moe's plan slices the dispatch mask locally for its two readers"
    labels = {int(g.get("data-index")): g for g in by_class(graph_of(page), "g", "reshard")}
    for i, g in labels.items():
        rect = g.find(SVG + "rect")
        assert ("free" in g.get("class").split()) == (i in free)
        assert (rect.get("stroke") == html_page.COMMUNICATION) == (i not in free)
    # an edge is red only when a move on it sends bytes; one that carries only free moves is grey
    red = {(e.get("data-from"), e.get("data-to")) for e in by_class(graph_of(page), "path", "redistributed")}
    grey = {(e.get("data-from"), e.get("data-to")) for e in by_class(graph_of(page), "path", "free")}
    assert grey == {("t:dispatch.mask", "op:combine.scale"), ("t:dispatch.mask", "op:dispatch.einsum")}
    assert red and not red & grey
    for e in by_class(graph_of(page), "path", "free"):
        assert e.get("stroke") == html_page.FREE
    # the table marks the same rows, and a checkbox hides them (the page's CSS hides .free under body.hide-free)
    rows = [a.get("class", "") for t, a in Elements(page).tags if t == "tr"]
    assert sum(1 for c in rows if c == "free") == len(free)
    assert Elements(page).find("input")[0]["id"] == "hide-free"
    assert "body.hide-free .free{display:none}" in page


def test_a_narrow_graph_is_centred_on_a_canvas_the_pages_width(ffn):
    _, page = ffn
    root = graph_of(page)
    assert float(root.get("width")) == html_page.GRAPH_MIN_WIDTH
    shift = float(re.match(r"translate\(([-\d.]+),0\)", root.find(SVG + "g").get("transform")).group(1))
    xs = []
    for g in by_class(root, "g", "node"):
        r = g.find(SVG + "rect")
        xs += [float(r.get("x")) + shift, float(r.get("x")) + float(r.get("width")) + shift]
    left, right = min(xs), html_page.GRAPH_MIN_WIDTH - max(xs)
    assert left > 300 and abs(left - right) < 40  # the drawing's margins on either side are about equal


def blob_of(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="plan-data">(.*?)</script>', page, flags=re.S)
    return json.loads(m.group(1))


def test_the_panels_data_is_the_plans_own(ffn):
    p, page = ffn
    data = blob_of(page)
    assert set(data["tensors"]) == set(p.tensors) and set(data["ops"]) == {o.name for o in p.ops}
    for name, t in p.tensors.items():
        d = data["tensors"][name]
        local = local_shape(t.shape, t.sharding)
        assert d["local_shape"] == local and d["shape"] == list(t.shape) and d["dtype"] == t.dtype
        assert d["bytes_per_device"] == 4 * local[0] * (local[1] if len(local) > 1 else 1)  # f32: 4 bytes
        assert [data["lines"][i] for i in d["explain"]] == p.explain(name)
        # the grid drawn for it is describe's picture of its sharding: a block per device group
        grid = ET.fromstring(data["grids"][d["grid"]])
        assert len(by_class(grid, "rect", "block")) == t.sharding.num_shards()
    matmul = data["ops"]["dense2.matmul"]
    candidates = p.candidates("dense2.matmul")
    assert [c[0] for c in data["candidates"][matmul["candidates"]]] == [c.text for c in candidates]
    assert matmul["chosen"] == next(c.index for c in candidates if c.chosen)
    assert matmul["strategy"] == p.op("dense2.matmul").strategy.text()
    # the README's one ReduceScatter of h4: dense2.matmul's result, made for dense2.add's operand
    (r,) = p.redistributions
    row = (r.tensor, r.phase, f"{r.bytes_per_device:,} B")
    assert [(m["tensor"], m["phase"], m["bytes"], m["role"]) for m in matmul["redistributions"]] == [(*row, "result")]
    assert [(m["tensor"], m["phase"], m["bytes"], m["role"]) for m in data["ops"]["dense2.add"]["redistributions"]] \
        == [(*row, "operand")]


def test_names_cannot_end_the_pages_script(tmp_path):
    model = tmp_path / "nasty.yaml"
    model.write_text(NASTY)
    p = plan(str(model))
    page = plan_page(p)
    # exactly one closing tag per script element: no name ends one early or opens a comment inside it
    assert page.count("</script") == page.count("<script")
    blob = re.search(r'id="plan-data">(.*?)</script>', page, flags=re.S).group(1)
    assert "<" not in blob and ">" not in blob and "&" not in blob
    data = json.loads(blob)
    assert set(data["tensors"]) == set(p.tensors) and "a</script><b>&" in data["tensors"]
    assert data["ops"]["m</script>"]["inputs"] == ["a</script><b>&", "w"]


NASTY = """name: "x</script><script>alert(1)</script>"
mesh: {x: 2}
tensors:
  "a</script><b>&": {shape: [4, 4], kind: input, sharding: '[{"x"}, {}]'}
  w: {shape: [4, 4], kind: param}
ops:
  - {name: "m</script>", op: matmul, inputs: ["a</script><b>&", w], output: "o<!--"}
outputs: ["o<!--"]
"""


@pytest.mark.parametrize("which", ["ffn", "training"])
def test_every_redistribution_is_labelled_with_the_plans_bytes(which, request):
    p, page = request.getfixturevalue(which)
    labels = by_class(graph_of(page), "g", "reshard")
    assert sorted(int(g.get("data-index")) for g in labels) == list(range(len(p.redistributions)))
    for g in labels:
        r = p.redistributions[int(g.get("data-index"))]
        assert (g.get("data-tensor"), g.get("data-phase"), int(g.get("data-bytes"))) == \
            (r.tensor, r.phase, r.bytes_per_device)
        assert format_bytes(r.bytes_per_device) in texts(g)[0]  # as the text report prints it
        assert all(s.kind in texts(g)[0] for s in r.steps)


def test_ffns_reduce_scatter_sits_on_the_edge_into_dense2_add(ffn):
    p, page = ffn
    # the README's ffn plan: one ReduceScatter of h4 (6,144 B) for dense2.add
    (r,) = p.redistributions
    edges = [e for e in by_class(graph_of(page), "path", "redistributed")]
    assert [(e.get("data-from"), e.get("data-to")) for e in edges] == [("t:h4", "op:dense2.add")]
    assert r.bytes_per_device == 6144 and texts(by_class(graph_of(page), "g", "reshard")[0]) == \
        ["ReduceScatter 6,144 B"]


def test_the_graph_is_laid_out_by_layer(ffn):
    _, page = ffn
    root = graph_of(page)
    y = {}
    for g in by_class(root, "g", "node"):
        key = ("op:" + g.get("data-op")) if g.get("data-op") else "t:" + g.get("data-tensor")
        rect = g.find("{http://www.w3.org/2000/svg}rect")
        y[key] = float(rect.get("y")) + float(rect.get("height")) / 2
    for e in by_class(root, "path", "edge"):
        assert y[e.get("data-from")] < y[e.get("data-to")]  # every edge points down
    # the chain x -> dense1.matmul -> h1 -> dense1.add -> h2 -> relu -> h3 -> dense2.matmul -> h4 -> dense2.add -> y
    chain = ["t:x", "op:dense1.matmul", "t:h1", "op:dense1.add", "t:h2", "op:relu", "t:h3", "op:dense2.matmul",
             "t:h4", "op:dense2.add", "t:y"]
    assert [y[n] for n in chain] == sorted(y[n] for n in chain) and len({y[n] for n in chain}) == len(chain)
    assert y["t:w1"] == y["t:x"]  # a weight sits beside its reader's other operand, not in a row of its own


def test_the_charts_show_the_plans_own_seconds(training):
    p, page = training
    svgs = inline_svgs(page)
    bars = by_class(svgs["chart per-op"], "rect", "bar")
    compute = {b.get("data-label"): float(b.get("data-value")) for b in bars if b.get("data-series") == "compute"}
    comm = {b.get("data-label"): float(b.get("data-value")) for b in bars if b.get("data-series") == "communication"}
    for o in p.ops:
        assert compute[o.name] == o.compute_time_s and comm[o.name] == o.comm_time_s
    # the row for what no op is charged with makes the bars add up to the plan's totals
    assert sum(comm.values()) == pytest.approx(p.totals.comm_time_s, rel=1e-12)
    assert sum(compute.values()) == pytest.approx(p.totals.compute_time_s, rel=1e-12)


def test_the_plan_table_lists_every_op_redistribution_and_tensor(training):
    p, page = training
    cells = Elements(page).cells
    for o in p.ops:
        assert o.name in cells and o.strategy.text() in cells
    for r in p.redistributions:
        assert format_bytes(r.bytes_per_device) in cells
    assert all(name in cells for name in p.tensors)


@pytest.mark.parametrize("which", ["ffn", "training"])
def test_the_page_fetches_nothing(which, request):
    _, page = request.getfixturevalue(which)
    tags = Elements(page)
    for tag, attrs in tags.tags:
        for key in ("src", "href", "xlink:href"):
            assert not attrs.get(key) or attrs[key].startswith("#"), (tag, attrs)
        assert tag not in ("link", "iframe", "img", "object", "embed")
    assert "@import" not in page
    assert not re.search(r"url\((?!#)", page)


def test_identical_layers_collapse_and_nothing_is_lost(tmp_path, monkeypatch):
    model = tmp_path / "tiny_gpt.yaml"
    model.write_text(TINY_GPT)
    p = plan(str(model))
    monkeypatch.setattr(html_page, "COLLAPSE_OPS", 10)
    page = plan_page(p)
    root = graph_of(page)
    boxes = by_class(root, "g", "collapsed")
    assert boxes, "the four layers of the tiny gpt share strategies: some must collapse"
    collapsed = [layer for b in boxes for layer in b.get("data-layers").split(",")]
    drawn_ops = {g.get("data-op") for g in by_class(root, "g", "op")}
    for layer in collapsed:  # a collapsed layer's ops are not drawn, the layer before a run is
        assert not any(op.startswith(layer + ".") for op in drawn_ops)
    first = int(collapsed[0].removeprefix("layer"))
    assert any(op.startswith(f"layer{first - 1}.") for op in drawn_ops)
    # every redistribution is either labelled on an edge or counted in a box, bytes included
    labelled = [int(g.get("data-index")) for g in by_class(root, "g", "reshard")]
    in_boxes = sum(int(b.get("data-reshards")) for b in boxes)
    assert len(labelled) + in_boxes == len(p.redistributions)
    rest = [r for i, r in enumerate(p.redistributions) if i not in set(labelled)]
    assert sum(int(b.get("data-bytes")) for b in boxes) == sum(r.bytes_per_device for r in rest)
    cells = Elements(page).cells
    assert all(name in cells for name in p.tensors)  # the tables still list everything
    assert len(by_class(inline_svgs(page)["chart per-layer"], "g", "row")) >= 4  # a row per layer


def test_the_page_is_byte_identical_across_processes(tmp_path):
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"ffn{seed}.html"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        run = subprocess.run([sys.executable, "-m", "planner", "plan", "configs/ffn.yaml", "--format", "html",
                              "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


@pytest.mark.parametrize("config", sorted(p.name for p in (ROOT / "configs").glob("*.yaml")))
def test_every_config_gets_a_page_that_accounts_for_every_tensor_and_redistribution(config):
    p = plan(str(ROOT / "configs" / config))
    page = plan_page(p)
    root = graph_of(page)
    boxes = by_class(root, "g", "collapsed")
    hidden = {layer for b in boxes for layer in b.get("data-layers").split(",")}
    drawn = {g.get("data-tensor") for g in by_class(root, "g", "tensor")}
    producer = {c.op.output: c.op.name for c in p.program.computes()}
    for name in p.tensors:  # drawn, or inside a collapsed layer (by its name or its producer's)
        owners = {html_page.layer_of(name), html_page.layer_of(producer.get(name, ""))}
        assert name in drawn or owners & hidden, name
    labelled = len(by_class(root, "g", "reshard"))
    assert labelled + sum(int(b.get("data-reshards")) for b in boxes) == len(p.redistributions)
