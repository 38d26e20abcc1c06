"""Bar charts: the plan page's compute vs communication, and compare --format svg|html."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from planner.cli.main import main
from planner.compare import compare
from planner.views.charts import PLOT_W, Series, bar_chart, compare_chart
from tests.views.pictures import Elements, by_class

ROOT = Path(__file__).resolve().parents[2]


def test_bars_are_proportional_to_their_values_on_one_scale():
    svg = bar_chart("t", ["a", "b"], [Series("s1", "#000000", (1.0, 4.0), str),
                                      Series("s2", "#111111", (2.0, 0.0), str)])
    bars = by_class(ET.fromstring(svg), "rect", "bar")
    got = {(b.get("data-label"), b.get("data-series")): (float(b.get("width")), float(b.get("data-value")))
           for b in bars}
    # the largest value (4.0) spans the plot; the others in proportion
    assert got == {("a", "s1"): (PLOT_W / 4, 1.0), ("a", "s2"): (PLOT_W / 2, 2.0), ("b", "s1"): (PLOT_W, 4.0),
                   ("b", "s2"): (0.0, 0.0)}


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
