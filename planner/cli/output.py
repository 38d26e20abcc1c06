"""Rendering command results: aligned text tables, JSON, CSV, and atomic file writes."""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Iterable, Sequence

from planner.files import write_output, write_stdout


def table(rows: Iterable[Sequence[Any]], header: Sequence[str] | None = None) -> str:
    """Left-aligned columns separated by two spaces.

    >>> print(table([("a", 1), ("bbb", 22)], header=("name", "n")))
    name  n
    a     1
    bbb   22
    """
    body = [[str(c) for c in r] for r in rows]
    if header:
        body.insert(0, [str(h) for h in header])
    if not body:
        return ""
    widths = [max(len(r[i]) for r in body if i < len(r)) for i in range(max(len(r) for r in body))]
    lines = ["  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in body]
    return "\n".join(lines)


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def to_csv(rows: Iterable[Sequence[Any]], header: Sequence[str]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for r in rows:
        writer.writerow(r)
    return buf.getvalue()


def write_text(text: str, path: str | None, *, protect: Sequence[str] = ()) -> None:
    """Write to ``path`` safely (:func:`planner.files.write_output`: never one of ``protect``, never
    half a file), or to stdout when ``path`` is None or ``-``."""
    if path is None or path == "-":
        write_stdout(text)
        return
    write_output(path, text, protect=protect)
