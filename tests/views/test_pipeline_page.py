"""The pipelined plan's page: the summary, the timeline and the stage table, self-contained, the same bytes for the
same plan; in a real browser every box label fits its box."""

import json
import re
from pathlib import Path

from planner.api import plan_pipeline
from planner.views.pipeline_page import pipeline_page
from tests.views.pictures import Elements, by_class, inline_svgs
from tests.views.test_page_in_browser import browser, headless

TINY = Path(__file__).resolve().parents[1] / "stages" / "tiny_gpt.yaml"


def test_the_page_has_the_summary_the_timeline_and_the_stage_table():
    plan = plan_pipeline(str(TINY), devices=4, pipeline={"stages": 2, "microbatches": 2})
    page = pipeline_page(plan)
    assert page == pipeline_page(plan)
    svgs = inline_svgs(page)
    assert set(svgs) == {"timeline"}
    cells = Elements(page).cells
    # the stage table: one row per stage, its layers and its times as the table format prints them
    table = page[page.index('<table class="stages">'):]
    assert table.count("<tr>") == 1 + len(plan.stages)
    for s in plan.stages:
        assert ", ".join(s.layers) in cells
    assert f"bubble <b>{plan.bubble_fraction:.1%}</b>" in page
    assert "fetch" not in page and "<script" not in page  # self-contained


#: Run after load: every label drawn in a timeline box, measured in the browser's font against its box.
PROBE = """
window.addEventListener('load',function(){
  var boxes=document.querySelectorAll('svg.timeline g.box'),over=[],labelled=0;
  boxes.forEach(function(g){
    var r=g.querySelector('rect'),t=g.querySelector('text');
    if(t){labelled++;if(t.getComputedTextLength()>r.width.baseVal.value){over.push(t.textContent);}}
  });
  var pre=document.createElement('pre');pre.id='probe';
  pre.textContent=JSON.stringify({boxes:boxes.length,labelled:labelled,over:over});
  document.body.appendChild(pre);
});
"""


def test_every_box_label_fits_its_box_in_the_browser(tmp_path):
    exe = browser()
    plan = plan_pipeline(str(TINY), devices=4, pipeline={"stages": 2, "microbatches": 4, "schedule": "1f1b"})
    page = pipeline_page(plan)
    path = tmp_path / "pipeline.html"
    path.write_text(page.replace("</body>", f"<script>{PROBE}</script></body>"))
    run = headless(exe, tmp_path, "--virtual-time-budget=5000", "--dump-dom", path.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', run.stdout, flags=re.S).group(1))
    drawn = by_class(inline_svgs(page)["timeline"], "g", "box")
    assert found["boxes"] == len(drawn) == 2 * 2 * 4  # the browser laid out every box as SVG
    assert found["labelled"] > 0 and found["over"] == []
