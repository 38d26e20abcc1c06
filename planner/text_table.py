"""The plain-text table every report prints: left-aligned columns separated by two spaces.

It sits below both the library (:meth:`planner.report.Plan.summary`) and the CLI
(:mod:`planner.cli.output` re-exports it), and imports nothing, so printing help stays light.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence


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
