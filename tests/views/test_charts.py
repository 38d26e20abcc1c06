"""Bar charts: the plan page's time and memory charts, and compare --format svg|html."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from costmodels.units import format_bytes
from planner.api import plan
from planner.cli.main import main
from planner.compare import compare
from planner.views import html_page
from planner.views.html_page import plan_page
from planner.views.charts import (MIN_SEGMENT_W, PLOT_W, Series, compare_chart, memory_bars, memory_chart,
                                  stacked_chart, step_share_chart, time_share_series)
from tests.views.pictures import SVG, TINY_GPT, Elements, by_class, inline_svgs, texts

ROOT = Path(__file__).resolve().parents[2]


def segments(root):
    """(label, series) -> (width, value, share) of every segment of a stacked chart."""
    return {(b.get("data-label"), b.get("data-series")): (float(b.get("width")), float(b.get("data-value")),
                                                          float(b.get("data-share")))
            for b in by_class(root, "rect", "segment")}


def test_segments_are_shares_of_the_whole_on_one_scale():
    svg = stacked_chart("t", ["a", "b"], [Series("s1", "#000000", (0.25, 0.5), str),
                                          Series("s2", "#111111", (0.5, 0.0), str)], 1.0, "the whole", str, str)
    # the whole (1.0) spans the plot: a quarter of it is a quarter of PLOT_W; segments stack left to right
    assert segments(ET.fromstring(svg)) == {("a", "s1"): (PLOT_W / 4, 0.25, 0.25), ("a", "s2"): (PLOT_W / 2, 0.5, 0.5),
                                            ("b", "s1"): (PLOT_W / 2, 0.5, 0.5), ("b", "s2"): (0.0, 0.0, 0.0)}
    xs = {(b.get("data-label"), b.get("data-series")): float(b.get("x"))
          for b in by_class(ET.fromstring(svg), "rect", "segment")}
    assert xs[("a", "s2")] - xs[("a", "s1")] == pytest.approx(PLOT_W / 4)


def test_every_nonzero_segment_is_at_least_the_minimum_width():
    # a step of 1 s ruled by communication: 1% compute is PLOT_W / 100 = 4.2 px, one nanosecond would be
    # far under a pixel and is widened to MIN_SEGMENT_W; a zero stays zero
    svg = step_share_chart("t", ["op1", "op2", "op3"], time_share_series([0.01, 1e-9, 0.0], [0.99, 0.5, 0.2]),
                           1.0, "chart")
    got = segments(ET.fromstring(svg))
    assert got[("op1", "compute")][0] == pytest.approx(PLOT_W / 100) and PLOT_W / 100 > MIN_SEGMENT_W
    assert got[("op2", "compute")][0] == MIN_SEGMENT_W
    assert got[("op3", "compute")][0] == 0.0
    assert all(w >= MIN_SEGMENT_W for w, v, _ in got.values() if v > 0)
    texts_ = texts(ET.fromstring(svg))
    assert "1.00 s (100.0%)" in texts_ and "25%" in texts_  # the project's one style, ticks in quarters


def test_a_zoomed_chart_spans_its_longest_row_and_keeps_the_shares_of_the_step():
    # two ops of 2% and 1% of a 1 s step: zoomed, the 2% row spans the plot and the 1% row half of it
    svg = step_share_chart("t", ["a", "b"], time_share_series([0.015, 0.01], [0.005, 0.0]), 1.0, "chart", zoom=True)
    got = segments(ET.fromstring(svg))
    assert got[("a", "compute")][0] + got[("a", "communication")][0] == pytest.approx(PLOT_W)
    assert got[("b", "compute")] == (pytest.approx(PLOT_W / 2), 0.01, 0.01)
    assert "2%" in texts(ET.fromstring(svg))  # the last tick: the longest row's share of the step


def test_devices_holding_the_same_bytes_share_one_bar():
    parts = {d: [("params", 100), ("results", 20)] for d in range(4)}
    (bar,) = memory_bars(parts)
    assert (bar.label, bar.total) == ("devices 0-3", 120)
    root = ET.fromstring(memory_chart([bar]))
    assert root.find(SVG + "title").text == "memory per device: all 4 devices alike"
    # a device that holds more (as a pipeline stage would) gets a bar of its own
    parts[2] = [("params", 100), ("results", 40)]
    bars = memory_bars(parts)
    assert [(b.label, b.total) for b in bars] == [("devices 0-1,3", 120), ("device 2", 140)]
    root = ET.fromstring(memory_chart(bars))
    assert root.find(SVG + "title").text == "memory per device"
    assert {k: v for k, (_, v, _) in segments(root).items()} == {
        ("devices 0-1,3", "params"): 100, ("devices 0-1,3", "results"): 20,
        ("device 2", "params"): 100, ("device 2", "results"): 40}


@pytest.fixture(scope="module")
def comparison():
    return compare(str(ROOT / "configs/ffn.yaml"))


def test_compare_chart_has_a_bar_per_search_in_each_panel(comparison):
    root = ET.fromstring(compare_chart(comparison))
    bars = by_class(root, "rect", "bar")
    panels = {}
    for b in bars:
        panels.setdefault(b.get("data-series"), {})[b.get("data-label")] = b.get("data-value")
    entries = {e.search: e for e in comparison.entries}
    assert panels == {
        "communication bytes per device": {s: repr(e.comm_bytes_per_device) for s, e in entries.items()},
        "communication time": {s: repr(e.comm_time_s) for s, e in entries.items()},
        "objective (compute + communication)": {s: repr(e.objective) for s, e in entries.items()},
    }
    # one colour per search, the same in every panel
    fills = {(b.get("data-label"), b.get("fill")) for b in bars}
    assert len(fills) == len(entries) == len({f for _, f in fills})


def test_compare_chart_is_deterministic_though_planning_times_vary(comparison):
    again = compare(str(ROOT / "configs/ffn.yaml"))
    assert compare_chart(again) == compare_chart(comparison)


def test_compare_format_svg_and_html(tmp_path):
    svg, html = tmp_path / "c.svg", tmp_path / "c.html"
    assert main(["compare", str(ROOT / "configs/ffn.yaml"), "--format", "svg", "--out", str(svg)]) == 0
    assert len(by_class(ET.parse(svg).getroot(), "rect", "bar")) == 9  # 3 panels x 3 searches
    assert main(["compare", str(ROOT / "configs/ffn.yaml"), "--format", "html", "--out", str(html)]) == 0
    page = html.read_text()
    assert Elements(page).find("svg", "compare-chart") and "vs ilp" in page


# -- the plan page's charts and numbers -----------------------------------------------------------------


@pytest.fixture(scope="module")
def ffn_page():
    p = plan(str(ROOT / "configs/ffn.yaml"), search="bfs")  # the README's plan
    return p, plan_page(p)


@pytest.fixture(scope="module")
def training_page():
    p = plan(str(ROOT / "configs/megatron_mlp.yaml"), training=True)
    return p, plan_page(p)


def test_the_page_prints_bytes_as_the_text_report_does(training_page):
    p, page = training_page
    header = page[page.index("<header>"):page.index("</header>")]
    comm = p.totals.comm_bytes_per_device
    assert comm >= 10**6  # so that the exact count and the report's style differ
    assert f"<b>{format_bytes(comm)}</b> per device" in header and f"{comm:,} B" not in header
    assert f"memory <b>{format_bytes(p.totals.memory_bytes_per_device)}</b>" in header
    cells = Elements(page).cells
    for r in p.redistributions:  # the redistribution table, as the text report's
        assert format_bytes(r.bytes_per_device) in cells and f"{r.bytes_per_device:,} B" not in cells
    assert format_bytes(p.redistributions[0].bytes_per_device) in p.summary()


def test_the_step_share_chart_adds_up_to_the_step_time(training_page):
    p, page = training_page
    got = segments(inline_svgs(page)["chart per-phase"])
    t = p.totals
    assert {label for label, _ in got} == {"forward", "backward", "gradient"}
    # one compute stream: the step is the launch plus each phase's compute and exposed communication
    busy = sum(v for (_, s), (_, v, _) in got.items() if s in ("compute", "exposed communication", "launch"))
    assert busy == pytest.approx(t.step_time_s, rel=1e-9)
    assert sum(sh for (_, s), (_, _, sh) in got.items() if s != "hidden communication") == pytest.approx(1.0)
    assert got[("forward", "compute")][1] == dict(t.phases)["forward"].compute_time_s


@pytest.mark.parametrize("which", ["ffn_page", "training_page"])
def test_every_nonzero_segment_of_the_page_is_visible(which, request):
    _, page = request.getfixturevalue(which)
    svgs = inline_svgs(page)
    drawn = [b for cls in ("chart per-phase", "chart per-op", "chart memory") for b in by_class(svgs[cls], "rect",
                                                                                                "segment")]
    assert drawn and all(float(b.get("width")) >= MIN_SEGMENT_W for b in drawn if float(b.get("data-value")) > 0)
    # ffn's compute (10 us of a 27 us step) and megatron's are both there, beside the communication
    assert any(b.get("data-series") == "compute" and float(b.get("data-value")) > 0 for b in drawn)


def test_a_model_without_layers_gets_no_per_layer_chart(ffn_page):
    p, page = ffn_page
    # dense1.* and dense2.* are numbered prefixes of two ops each: grouped, 5 ops would make 3 rows
    assert [o.name for o in p.ops] == ["dense1.matmul", "dense1.add", "relu", "dense2.matmul", "dense2.add"]
    assert "chart per-layer" not in inline_svgs(page) and "chart per-op" in inline_svgs(page)
    assert html_page.layer_rows([o.name for o in p.ops]) is None


def test_a_model_with_layers_gets_one_row_per_layer(tmp_path):
    model = tmp_path / "tiny_gpt.yaml"
    model.write_text(TINY_GPT)
    p = plan(str(model))
    rows = [g.get("data-label") for g in by_class(inline_svgs(plan_page(p))["chart per-layer"], "g", "row")]
    # the builder names each block's ops layer{i}.*; the ops outside the blocks keep their first name part
    expected = list(dict.fromkeys(o.name.split(".")[0] for o in p.ops))
    assert [r for r in rows if r != "(not per op)"] == expected
    assert [r for r in expected if r.startswith("layer")] == ["layer0", "layer1", "layer2", "layer3"]


def test_the_memory_chart_is_one_bar_that_adds_up_to_the_plans_memory(ffn_page):
    p, page = ffn_page
    root = inline_svgs(page)["chart memory"]
    assert root.find(SVG + "title").text == "memory per device: all 8 devices alike"
    got = segments(root)
    assert {label for label, _ in got} == {"devices 0-7"}
    # op results: h1, h2, h3 and y are 64x64 f32 split 2 x 4 (32x16, 2,048 B each); h4 pends its sum over
    # "d":(2)4, split only 2 ways (32x64, 8,192 B): 16,384 B; the plan's total holds the sources as well
    assert got[("devices 0-7", "op results")][1] == 4 * 2048 + 8192
    assert sum(v for _, v, _ in got.values()) == p.totals.memory_bytes_per_device
