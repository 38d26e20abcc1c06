"""The plan page in a real headless browser (Chromium): its SVG renders, its script runs, labels fit.

Skipped when no Chromium is installed, unless ``SHARDPLAN_REQUIRE_BROWSER=1`` (set by
``.ci/run``, which installs Debian's ``chromium`` as README.md says): then a missing
browser fails the test instead. ``SHARDPLAN_BROWSER`` names another Chromium binary.
"""

import os
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
