"""Helpers for reading the pictures back: elements of an HTML page, the inline SVGs, a standalone SVG."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

SVG = "{http://www.w3.org/2000/svg}"

#: A small GPT (4 identical layers, long op names such as layer0.attn.q_transpose) that plans in about a second.
TINY_GPT = """name: tiny_gpt
mesh: {dp: 2, tp: 2}
model: {builder: gpt, layers: 4, hidden: 32, heads: 2, seq: 8, batch: 2, vocab: 64}
shardings:
  tokens: '[{"dp"}, {}]'
  labels: '[{"dp"}, {}]'
  "layer*.mlp.w1": '[{}, {"tp"}]'
  "layer*.mlp.w2": '[{"tp"}, {}]'
"""


class Elements(HTMLParser):
    """Every start tag of a page, in order, as ``(tag, attrs)``; the text of every ``<td>``."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.cells: list[str] = []
        self._in_td = False
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "td":
            self._in_td = True
            self.cells.append("")

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_td = False

    def handle_data(self, data):
        if self._in_td:
            self.cells[-1] += data

    def find(self, tag: str, cls: str | None = None) -> list[dict]:
        return [a for t, a in self.tags if t == tag and (cls is None or cls in a.get("class", "").split())]


def inline_svgs(page: str) -> dict[str, ET.Element]:
    """Each (unnested) ``<svg>`` of a page parsed as XML (each is a standalone SVG document), by its class."""
    out = {}
    for m in re.finditer(r"<svg\b.*?</svg>", page, flags=re.S):
        root = ET.fromstring(m.group(0))
        out[root.get("class", "")] = root
    return out


def by_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(SVG + tag) if cls in (e.get("class") or "").split()]


def texts(e: ET.Element) -> list[str]:
    return [t.text or "" for t in e.iter(SVG + "text")]
