"""Rendering command results: JSON, CSV, atomic file writes (text tables: :mod:`planner.text_table`); progress and warnings on stderr."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
import warnings
from typing import Any, Callable, Iterable, Mapping, Sequence

from planner.files import write_output, write_stdout


#: The version of every command's ``--format json`` output (``docs/json.md`` documents each key): the major
#: number changes when a documented key is removed, renamed or changes type, unit or meaning; the minor
#: number when a key is added.
SCHEMA_VERSION = "1.2"


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False) + "\n"


def json_document(command: str, data: Mapping[str, Any]) -> str:
    """``data`` as the JSON ``shardplan COMMAND --format json`` prints: ``schema_version`` and ``command``
    first, then the command's own keys (``docs/json.md``).

    >>> list(json.loads(json_document("graph", {"model": "ffn"})))
    ['schema_version', 'command', 'model']
    """
    return to_json(_finite({"schema_version": SCHEMA_VERSION, "command": command, **data}))


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float (an unbounded ratio, an error of a result that is not finite)
    as None, so that the output is strict JSON (``json.dumps`` would write ``Infinity``, which no JSON
    parser is obliged to read)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:  # most of a document: nothing to look into
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if kind is dict or isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


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


def reported(run: Callable[[Any], int], args: Any, stream=None) -> int:
    """``run(args)`` with ``args.progress`` set and the library's warnings printed on ``stream`` (stderr).

    The progress bar is drawn only when ``stream`` is a terminal and ``--quiet`` is not
    given; ``--verbose`` adds a line per stage. Each :class:`~planner.errors.ShardplanWarning`
    is printed once, as it is issued (``shardplan plan: warning: ...``), unless ``--quiet``;
    a warning never changes the exit status.
    """
    from planner.cli.terminal import Terminal
    from planner.errors import ShardplanWarning, one_line

    stream = sys.stderr if stream is None else stream
    quiet, verbose = bool(getattr(args, "quiet", False)), bool(getattr(args, "verbose", False))
    prefix = f"shardplan {getattr(args, 'command', None) or ''}".rstrip()
    terminal = Terminal(stream, bar=not quiet and _isatty(stream), verbose=verbose and not quiet, prefix=prefix)
    args.progress = terminal
    shown: set[str] = set()
    default_show = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if not issubclass(category, ShardplanWarning):
            default_show(message, category, filename, lineno, file, line)
        elif not quiet and str(message) not in shown:
            shown.add(str(message))
            terminal.line(f"{prefix}: warning: {one_line(str(message))}")

    with warnings.catch_warnings():
        warnings.simplefilter("always", ShardplanWarning)
        warnings.showwarning = show
        try:
            return run(args)
        finally:
            terminal.close()


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
