"""Safe YAML loading that remembers the line of every mapping, key and list item.

The loader is :class:`planner.safe_yaml.BoundedLoader`: nesting depth and alias
expansion are bounded (a clear error located at ``file:line``, never a hang).

:func:`parse_yaml` returns plain data in which every mapping is a :class:`LineDict`
(``.line`` of the mapping, ``.key_lines[key]`` of each key) and every list a
:class:`LineList` (``.line``, ``.item_lines[i]``). Lines are 1-based. Syntax
errors and duplicate keys raise :class:`~planner.errors.ModelError` located at
``file:line``.

>>> doc = parse_yaml("a: 1\\nb:\\n  - x\\n  - {c: 2}\\n", "m.yaml")
>>> doc.key_lines["b"], doc["b"].item_lines, doc["b"][1].line
(2, [3, 4], 4)
"""

from __future__ import annotations

from typing import Any

import yaml

from planner.errors import ModelError, quote
from planner.safe_yaml import BoundedLoader


class LineDict(dict):
    """A dict that knows its line and the line of each key."""

    line: int = 0
    key_lines: dict

    def line_of(self, key: Any) -> int:
        return self.key_lines.get(key, self.line)


class LineList(list):
    """A list that knows its line and the line of each item."""

    line: int = 0
    item_lines: list

    def line_of(self, i: int) -> int:
        return self.item_lines[i] if i < len(self.item_lines) else self.line


class _LineLoader(BoundedLoader):
    """The bounded SafeLoader, whose mappings and sequences record their source lines."""


def _construct_map(loader: _LineLoader, node: yaml.MappingNode) -> LineDict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        try:
            if key in seen:
                raise ModelError(
                    f"key {quote(key)} appears twice in one mapping (first at line {seen[key]}); each name may be "
                    "defined once",
                    where=f"{loader.source}:{line}",
                )
        except TypeError:
            raise ModelError(f"a mapping key must be a plain value, got {quote(key)}", where=f"{loader.source}:{line}") from None
        seen[key] = line
    loader.flatten_mapping(node)
    out = LineDict()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


def _construct_seq(loader: _LineLoader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_LineLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)


def parse_yaml(text: str, source: str = "<string>") -> Any:
    """Parse one YAML document safely, recording lines (see the module docstring)."""
    try:
        loader = _LineLoader(text, source)  # PyYAML's reader refuses control characters here, before parsing
    except yaml.reader.ReaderError as e:
        line = text.count("\n", 0, e.position) + 1
        column = e.position - text.rfind("\n", 0, e.position)
        code = e.character if isinstance(e.character, int) else ord(e.character)
        raise ModelError(f"the file holds the control character U+{code:04X} at column {column}, which YAML does not "
                         f"allow; remove it, or write it as an escape in a double-quoted string "
                         f"(\"\\u{code:04x}\")", where=f"{source}:{line}") from None
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        detail = e.problem or "malformed YAML"
        if e.context:
            started = e.context_mark
            at = f" (started at line {started.line + 1})" if started is not None and started is not mark else ""
            detail = f"{e.context}{at}: {detail}"
        line = f":{mark.line + 1}" if mark is not None else ""
        kind = "YAML error" if isinstance(e, yaml.constructor.ConstructorError) else "YAML syntax error"
        raise ModelError(f"{kind}: {detail}", where=f"{source}{line}") from None
    except yaml.YAMLError as e:
        raise ModelError(f"YAML error: {e}", where=source) from None
    finally:
        loader.dispose()


def plain(value: Any) -> Any:
    """``value`` with LineDict / LineList turned back into dict / list (recursively)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
