"""YAML read with bounds: a ``yaml.SafeLoader`` that refuses deep nesting and alias bombs.

PyYAML builds an alias as a reference to its anchor's object, so a 1 KB "billion
laughs" file loads quickly, but anything that walks the value afterwards (an error
message, a copy, a check of every item) walks 10^9 items. :class:`BoundedLoader`
measures every document once it is composed, before any Python object is built:
its nesting depth and its node count *with every alias expanded*, in one pass over
the node graph (each node visited once). Past :data:`~planner.limits.MAX_YAML_DEPTH`
or :data:`~planner.limits.MAX_YAML_NODES` it raises
:class:`~planner.errors.LimitError` located at ``file:line``. Nesting is also bounded
while scanning and composing, so 20,000 nested ``[`` end at once with that error, not a
RecursionError.

>>> load("a: [1, 2]")
{'a': [1, 2]}
>>> load("[" * 500, "deep.yaml")
Traceback (most recent call last):
...
planner.errors.LimitError: deep.yaml:1: the YAML is nested more than 100 levels deep (counting through aliases); a model or cluster file nests a few levels: check the brackets
"""

from __future__ import annotations

from typing import Any

import yaml

from planner.errors import LimitError, ShardplanError, quote
from planner.limits import MAX_YAML_DEPTH, MAX_YAML_NODES, check_int_digits

#: What a scalar of each YAML 1.1 type is, for the error when its text is not one.
_SCALAR_KINDS = {
    "tag:yaml.org,2002:int": "an integer",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:bool": "a boolean",
    "tag:yaml.org,2002:null": "null",
    "tag:yaml.org,2002:timestamp": "a date",
    "tag:yaml.org,2002:binary": "base64 data",
}


def _too_deep(source: str, line: int) -> LimitError:
    return LimitError(
        f"the YAML is nested more than {MAX_YAML_DEPTH} levels deep (counting through aliases); a model or cluster "
        "file nests a few levels: check the brackets",
        where=f"{source}:{line}",
    )


class BoundedLoader(yaml.SafeLoader):
    """A SafeLoader whose documents are at most :data:`MAX_YAML_DEPTH` deep and
    :data:`MAX_YAML_NODES` nodes large once aliases are expanded. ``source`` names the
    file in errors."""

    source = "<string>"

    def __init__(self, stream: Any, source: str | None = None):
        super().__init__(stream)
        if source is not None:
            self.source = source
        self._depth = 0

    def fetch_flow_collection_start(self, TokenClass):
        # the scanner keeps state per open bracket and rescans it per token: stop at once
        if self.flow_level >= MAX_YAML_DEPTH:
            raise _too_deep(self.source, self.get_mark().line + 1)
        super().fetch_flow_collection_start(TokenClass)

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _too_deep(self.source, self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node):
        # every YAML 1.1 spelling (0x1f, 0b101, 017, 1_000, 1:30) as PyYAML reads it, bounded before int() runs
        check_int_digits(node.value, f"{self.source}:{node.start_mark.line + 1}: a number")
        return super().construct_yaml_int(node)

    def construct_object(self, node, deep=False):
        # A scalar whose type YAML 1.1 infers from its spelling, or that a tag (!!int) names, but whose text is
        # not one (2020-13-45 read as a date, !!int abc): PyYAML's constructors raise a bare ValueError or KeyError.
        try:
            return super().construct_object(node, deep)
        except ShardplanError:
            raise
        except (ValueError, KeyError, IndexError, TypeError, OverflowError) as err:
            if not isinstance(node, yaml.ScalarNode):
                raise
            kind = _SCALAR_KINDS.get(node.tag, f"a {node.tag} value")
            detail = " ".join(str(err).split())
            raise yaml.constructor.ConstructorError(
                None, None,
                f"YAML reads {quote(node.value)} as {kind} (by its spelling or its tag), but it is not one ({detail}); "
                f"write {kind}, or quote the value to make it a string",
                node.start_mark,
            ) from None

    def compose_document(self):
        node = super().compose_document()
        if node is not None:
            check_expansion(node, self.source)
        return node


BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)


def check_expansion(root: yaml.Node, source: str) -> None:
    """Raise :class:`LimitError` when ``root`` with its aliases expanded is too deep or too large.

    One iterative post-order pass over the node graph: a node's expanded size and depth
    are computed once from its children's, so a shared (aliased) node costs one visit.
    A node that contains itself (``&a [*a]``) is refused too: it expands forever.
    """
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            depth[key] = 1 + max((depth[id(c)] for c in children), default=0)
            line = node.start_mark.line + 1
            if depth[key] > MAX_YAML_DEPTH:
                raise _too_deep(source, line)
            if size[key] > MAX_YAML_NODES:
                raise LimitError(
                    f"the YAML value here expands to more than {MAX_YAML_NODES:,} items once its aliases (*name) "
                    "are replaced by what they refer to; is it an alias bomb? Write the values out, or use fewer "
                    "nested aliases",
                    where=f"{source}:{line}",
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise LimitError("a YAML alias refers to a value that contains it, so it never ends; remove the alias",
                             where=f"{source}:{node.start_mark.line + 1}")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load(text: str, source: str = "<string>") -> Any:
    """One YAML document as plain data, read with :class:`BoundedLoader` (YAML errors propagate)."""
    loader = BoundedLoader(text, source)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def compose(text: str, source: str = "<string>") -> yaml.Node | None:
    """One YAML document's node graph, bounded as :func:`load` is."""
    loader = BoundedLoader(text, source)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()
