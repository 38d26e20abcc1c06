"""The plan page in a real headless browser (Chromium): its SVG renders, its script runs, labels fit, and a
click on a tensor or an op opens its panel.

Skipped when no Chromium is installed, unless ``SHARDPLAN_REQUIRE_BROWSER=1`` (set by
``.ci/run``, which installs Debian's ``chromium`` as README.md says): then a missing
browser fails the test instead. ``SHARDPLAN_BROWSER`` names another Chromium binary.
"""

import html
import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from planner.api import plan
from planner.views.html_page import plan_page
from tests.views.pictures import TINY_GPT, Elements, by_class, inline_svgs

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def browser() -> str:
    named = os.environ.get("SHARDPLAN_BROWSER")
    found = shutil.which(named) if named else next((shutil.which(c) for c in CANDIDATES if shutil.which(c)), None)
    if found is None:
        if os.environ.get("SHARDPLAN_REQUIRE_BROWSER", "") not in ("", "0"):
            pytest.fail("SHARDPLAN_REQUIRE_BROWSER is set but no Chromium was found: install it as README.md's "
                        "<!-- ci:browser --> command does, or set SHARDPLAN_BROWSER")
        pytest.skip("no headless Chromium installed (README.md, Pictures: apt-get install chromium)")
    return found


def headless(exe: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
           "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    exe = browser()
    folder = tmp_path_factory.mktemp("page")
    (folder / "tiny_gpt.yaml").write_text(TINY_GPT)  # long op names (layer0.attn.q_transpose), forward and backward
    p = plan(str(folder / "tiny_gpt.yaml"), training=True)
    path = folder / "plan.html"
    path.write_text(plan_page(p))
    return exe, path, p


def test_the_browser_renders_the_svg_and_runs_the_script(page, tmp_path):
    exe, path, p = page
    run = headless(exe, tmp_path, "--dump-dom", path.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    body = next(a for t, a in Elements(run.stdout).tags if t == "body")
    # the script ran (it sets these), and found every node as an SVG element whose text it could measure:
    # getComputedTextLength exists only on SVG text the browser laid out
    drawn = len(by_class(inline_svgs(path.read_text())["graph"], "g", "node"))
    assert body.get("data-svg-nodes") == str(drawn) and drawn == len(p.tensors) + len(p.ops)
    # the widths the page estimated for its labels hold in a real font: no op or tensor name overflows its box
    assert body.get("data-label-overflow") == "0"
    assert body.get("data-fetched") == "0"  # the browser loaded no resource besides the page itself


def test_the_browser_takes_a_screenshot_of_the_page(page, tmp_path):
    exe, path, _ = page
    shot = tmp_path / "plan.png"
    run = headless(exe, tmp_path, f"--screenshot={shot}", "--window-size=1280,1600", path.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == (1280, 1600)  # IHDR: width, height


#: Run after the page's own scripts: click a tensor, read its panel, click an op, read its panel, and write what
#: was found (and the names of the labels the page measured as overflowing their boxes) into <pre id="probe">.
PROBE = """
window.addEventListener('load',function(){
  function click(kind,name){
    var hit=null;
    document.querySelectorAll('svg.graph g.node.'+kind).forEach(function(g){
      if(g.getAttribute('data-'+kind)===name){hit=g;}});
    if(!hit){return false;}
    hit.dispatchEvent(new MouseEvent('click',{bubbles:true,cancelable:true,view:window}));
    return true;
  }
  function read(){
    var p=document.getElementById('panel');
    function q(s){var e=p.querySelector(s);return e?e.textContent:null;}
    return {kind:p.getAttribute('data-kind'),name:p.getAttribute('data-name'),
      blocks:p.querySelectorAll('.panel-grid svg.device-grid rect.block').length,
      global:q('td.panel-global'),local:q('td.panel-local'),bytes:q('td.panel-bytes'),explain:q('pre.panel-explain'),
      strategy:q('td.panel-strategy'),
      candidates:p.querySelectorAll('table.panel-candidates tr:not(:first-child)').length,
      chosen:q('table.panel-candidates tr.chosen td'),
      reshards:p.querySelectorAll('table.panel-reshards tr:not(:first-child)').length};
  }
  var out={};
  out.tensor=click('tensor',TENSOR)?read():null;
  out.op=click('op',OP)?read():null;
  out.overflow=document.body.getAttribute('data-label-overflow-names');
  var pre=document.createElement('pre');pre.id='probe';pre.textContent=JSON.stringify(out);
  document.body.appendChild(pre);
});
"""


def clicked(exe: str, tmp_path: Path, page: str, tensor: str, op: str) -> dict:
    """Open ``page`` in the browser, click ``tensor`` and then ``op``, and return what the probe found."""
    script = f"var TENSOR={json.dumps(tensor)},OP={json.dumps(op)};" + PROBE
    path = tmp_path / "clicked.html"
    path.write_text(page.replace("</body>", f"<script>{script}</script></body>"))
    run = headless(exe, tmp_path, "--virtual-time-budget=5000", "--dump-dom", path.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'<pre id="probe">(.*?)</pre>', run.stdout, flags=re.S)
    assert found, "the probe did not run: " + run.stdout[-500:]
    return json.loads(html.unescape(found.group(1)))


def check_panels(found: dict, p, tensor: str, op: str) -> None:
    """What the panels show, against the plan: the grid's blocks, shapes, bytes, explanation, candidates."""
    t = p.tensor(tensor)
    local = t.sharding.local_shape(t.shape)
    elements = 1
    for d in local:
        elements *= d
    assert found["tensor"]["kind"] == "tensor" and found["tensor"]["name"] == tensor
    assert found["tensor"]["blocks"] == t.sharding.num_shards()  # describe's grid: one block per group of devices
    assert found["tensor"]["global"] == f"{t.dtype}[{','.join(map(str, t.shape))}]"
    assert found["tensor"]["local"] == f"{t.dtype}[{','.join(map(str, local))}]"
    assert found["tensor"]["bytes"] == f"{elements * {'f32': 4, 'i32': 4}[t.dtype]:,} B"
    assert found["tensor"]["explain"] == "\n".join(p.explain(tensor))
    candidates = p.candidates(op)
    assert found["op"]["kind"] == "op" and found["op"]["name"] == op
    assert found["op"]["strategy"] == p.op(op).strategy.text()
    assert found["op"]["candidates"] == len(candidates)
    assert found["op"]["chosen"] == next(c.text for c in candidates if c.chosen)
    moves = [r for r in p.redistributions if op in r.readers or (r.producer == op and op not in r.readers)]
    assert found["op"]["reshards"] == len(moves)
    assert found["overflow"] == ""  # every label of the graph fits its box in the browser's own font


def test_clicking_a_tensor_and_an_op_of_the_ffn_page_opens_their_panels(tmp_path):
    exe = browser()
    p = plan(str(ROOT / "configs/ffn.yaml"))
    found = clicked(exe, tmp_path, plan_page(p), "h1", "dense2.matmul")
    check_panels(found, p, "h1", "dense2.matmul")
    assert found["tensor"]["local"] == "f32[32,16]"  # the README's h1: 64x64, rows split 2 ways, columns 4


@pytest.mark.slow  # about 9 s: planning GPT-2 small and a browser run
def test_clicking_a_tensor_and_an_op_of_the_12_layer_gpt_page_opens_their_panels(tmp_path):
    exe = browser()
    p = plan(str(ROOT / "configs/gpt2_small.yaml"))  # 12 layers; all but the first and last collapse
    found = clicked(exe, tmp_path, plan_page(p), "layer0.attn.q", "layer0.attn.q_proj")
    check_panels(found, p, "layer0.attn.q", "layer0.attn.q_proj")
