"""The text grammar of meshes and shardings: one small parser, one printer.

Printing is ``str()`` on the value types; this module only parses. Parsing then
printing gives the canonical form, and ``parse(str(s)) == s`` for every value.

    mesh      ::= '@' name '=' ( axes_list | '{' axes_list ',' 'device_ids=' '[' int (',' int)* ']' '}' )
    axes_list ::= '<' '[' axis (',' axis)* ']' '>'          axis ::= '"' name '"' '=' int
    sharding  ::= 'sharding<' '@' name ',' '[' dim (',' dim)* ']' (',' 'replicated=' axes)? (',' 'unreduced=' kind? axes)? '>'
    kind      ::= 'max' | 'min'            (a pending maximum or minimum; none: a pending sum)
    dim       ::= '{' (axisref (',' axisref)*)? (',' '?')? '}' ('p' int)?
    axisref   ::= '"' name '"' | '"' name '"' ':' '(' int ')' int
    axes      ::= '{' (axisref (',' axisref)*)? '}'

Two forms of seed 000 are also accepted and printed canonically: a mesh without
the brackets (``<"devices"=8>``), and a sharding without ``sharding<@name, ...>``
(``[{"x"}, {}]``), which binds to the default mesh.

>>> mesh = parse_mesh('@mesh_xyz = <["x"=2, "y"=8, "z"=2]>')
>>> s = parse_sharding('sharding<@mesh_xyz, [{"x"}, {"y":(2)2}], replicated={"y":(1)2}>', mesh)
>>> str(s)
'sharding<@mesh_xyz, [{"x"}, {"y":(2)2}], replicated={"y":(1)2}>'
>>> str(parse_sharding('[{"x", ?}p1, {?}]', mesh))
'sharding<@mesh_xyz, [{"x", ?}p1, {?}]>'
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

from planner.errors import QUOTE_CHARS, MeshError, ParseError, ShardingError, clip, quote
from planner.limits import read_int
from planner.ir.axis import AxisRef
from planner.ir.mesh import Mesh, MeshAxis
from planner.ir.sharding import PENDING_SUM, REDUCTIONS, DimSharding, TensorSharding

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<str>"[^"]*")
      | (?P<int>\d+)
      | (?P<kw>sharding<|(?:device_ids|replicated|unreduced)\b)
      | (?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)
      | (?P<punct>[@=<>\[\]{}(),:?])
    )""",
    re.VERBOSE,
)


class _Tokens:
    """A cursor over the tokens of one string, with errors that point at the column."""

    def __init__(self, text: str, what: str):
        self.text = text
        self.what = what
        self.toks: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                col = pos + len(text[pos:]) - len(text[pos:].lstrip())
                raise self._error(col, f"unexpected character {quote(text[col])}")
            kind = m.lastgroup
            value = m.group(kind)
            start = m.start(kind)
            # 'p' followed by digits right after '}' is a priority: the name regex
            # swallows "p1" as a name, which we reinterpret in _dim.
            self.toks.append((kind, value, start))
            pos = m.end()
        self.i = 0

    def _error(self, col: int, message: str) -> ParseError:
        """The error at column ``col`` (0-based), on one line: the text around the column is quoted,
        ``...`` where a long text is cut."""
        start = max(0, col - QUOTE_CHARS // 2)
        around = ("..." if start else "") + clip(self.text[start:], QUOTE_CHARS)
        return ParseError(f"cannot parse {self.what} at column {col + 1}: {message} (in {around})")

    def peek(self, offset: int = 0) -> tuple[str, str, int] | None:
        j = self.i + offset
        return self.toks[j] if j < len(self.toks) else None

    def at(self, value: str) -> bool:
        tok = self.peek()
        return tok is not None and tok[1] == value

    def col(self) -> int:
        tok = self.peek()
        return tok[2] if tok else len(self.text)

    def fail(self, message: str) -> ParseError:
        tok = self.peek()
        found = f"found {quote(tok[1])}" if tok else "found the end of the text"
        return self._error(self.col(), f"{message}, {found}")

    def expect(self, value: str) -> None:
        if not self.at(value):
            raise self.fail(f"expected {quote(value)}")
        self.i += 1

    def take(self, kind: str, what: str) -> str:
        tok = self.peek()
        if tok is None or tok[0] != kind:
            raise self.fail(f"expected {what}")
        self.i += 1
        return tok[1]

    def take_int(self, what: str) -> int:
        return read_int(self.take("int", what), what)

    def take_str(self, what: str) -> str:
        return self.take("str", what)[1:-1]

    def done(self) -> None:
        if self.peek() is not None:
            raise self.fail("expected the end of the text")


# -- meshes -------------------------------------------------------------------------

def _mesh_axes(t: _Tokens) -> tuple[MeshAxis, ...]:
    t.expect("<")
    bracket = t.at("[")
    if bracket:
        t.expect("[")
    axes = []
    while True:
        name = t.take_str('an axis name in quotes, like "x"')
        t.expect("=")
        col = t.col()
        size = t.take_int("an axis size")
        try:
            axes.append(MeshAxis(name, size))
        except MeshError as e:
            raise t._error(col, e.message) from None
        if t.at(","):
            t.expect(",")
            continue
        break
    if bracket:
        t.expect("]")
    t.expect(">")
    return tuple(axes)


def parse_mesh(text: str) -> Mesh:
    """Parse ``@name = <["x"=2, "y"=4]>`` or ``@name = {<[...]>, device_ids=[...]}``.

    >>> str(parse_mesh('@mesh_full = <"devices"=8>'))
    '@mesh_full = <["devices"=8]>'
    """
    t = _Tokens(text.strip(), "mesh")
    t.expect("@")
    name = t.take("name", "a mesh name after '@'")
    t.expect("=")
    device_ids = None
    if t.at("{"):
        t.expect("{")
        axes = _mesh_axes(t)
        t.expect(",")
        t.expect("device_ids")
        t.expect("=")
        t.expect("[")
        device_ids = [t.take_int("a device id")]
        while t.at(","):
            t.expect(",")
            device_ids.append(t.take_int("a device id"))
        t.expect("]")
        t.expect("}")
    else:
        axes = _mesh_axes(t)
    t.done()
    return Mesh(name, axes, None if device_ids is None else tuple(device_ids))


def parse_meshes(texts: Iterable[str]) -> dict[str, Mesh]:
    out: dict[str, Mesh] = {}
    for text in texts:
        mesh = parse_mesh(text)
        if mesh.name in out:
            raise MeshError(f"mesh @{mesh.name} is defined twice")
        out[mesh.name] = mesh
    return out


# -- shardings ----------------------------------------------------------------------

def _axisref(t: _Tokens) -> AxisRef:
    name = t.take_str('an axis name in quotes, like "x"')
    if t.at(":"):
        t.expect(":")
        t.expect("(")
        pre = t.take_int("the pre-size of a sub-axis")
        t.expect(")")
        col = t.col()
        size = t.take_int("the size of a sub-axis")
        try:
            return AxisRef(name, pre, size)
        except ShardingError as e:
            raise t._error(col, e.message) from None
    return AxisRef(name)


def _axes_set(t: _Tokens) -> tuple[AxisRef, ...]:
    t.expect("{")
    refs = []
    if not t.at("}"):
        refs.append(_axisref(t))
        while t.at(","):
            t.expect(",")
            refs.append(_axisref(t))
    t.expect("}")
    return tuple(refs)


def _dim(t: _Tokens) -> DimSharding:
    col = t.col()
    t.expect("{")
    refs: list[AxisRef] = []
    is_open = False
    if t.at("?"):
        t.expect("?")
        is_open = True
    elif not t.at("}"):
        refs.append(_axisref(t))
        while t.at(","):
            t.expect(",")
            if t.at("?"):
                t.expect("?")
                is_open = True
                break
            refs.append(_axisref(t))
    t.expect("}")
    priority = 0
    explicit = False
    tok = t.peek()
    if tok is not None and tok[0] == "name" and re.fullmatch(r"p\d+", tok[1]):
        t.i += 1
        priority = read_int(tok[1][1:], "a priority")
        explicit = True
    if explicit and not refs and not is_open:
        raise t._error(col, f"a closed empty dimension {{}} takes no priority (got p{priority}); remove it")
    return DimSharding(tuple(refs), is_open, priority)


def _resolve_mesh(name: str | None, meshes: Mesh | Mapping[str, Mesh] | Sequence[Mesh], t: _Tokens, col: int) -> Mesh:
    if isinstance(meshes, Mesh):
        table = {meshes.name: meshes}
        default = meshes
    elif isinstance(meshes, Mapping):
        table = dict(meshes)
        default = next(iter(table.values()), None)
    else:
        table = {m.name: m for m in meshes}
        default = meshes[0] if meshes else None
    if name is None:
        if default is None:
            raise t._error(col, "no mesh is defined to bind this sharding to")
        return default
    if name not in table:
        known = ", ".join("@" + n for n in table) or "none"
        raise t._error(col, f"unknown mesh @{name} (defined meshes: {known})")
    return table[name]


def parse_sharding(
    text: str, meshes: Mesh | Mapping[str, Mesh] | Sequence[Mesh], *, what: str = "sharding"
) -> TensorSharding:
    """Parse a sharding; ``meshes`` is one mesh or the meshes its ``@name`` may refer to.

    The short form without ``sharding<@name, ...>`` binds to the first (default) mesh.
    Invariant violations raise :class:`ShardingError` naming the dimension and axis.
    """
    t = _Tokens(text.strip(), what)
    name = None
    wrapped = t.at("sharding<")
    col = t.col()
    if wrapped:
        t.expect("sharding<")
        t.expect("@")
        col = t.col()
        name = t.take("name", "a mesh name after '@'")
        t.expect(",")
    mesh = _resolve_mesh(name, meshes, t, col)
    t.expect("[")
    dims: list[DimSharding] = []
    if not t.at("]"):
        dims.append(_dim(t))
        while t.at(","):
            t.expect(",")
            dims.append(_dim(t))
    t.expect("]")
    replicated: tuple[AxisRef, ...] = ()
    unreduced: tuple[AxisRef, ...] = ()
    reduction = PENDING_SUM
    seen = set()
    while t.at(","):
        t.expect(",")
        tok = t.peek()
        if tok is None or tok[1] not in ("replicated", "unreduced"):
            raise t.fail("expected replicated={...} or unreduced={...}")
        if tok[1] in seen:
            raise t.fail(f"{tok[1]}= is given twice")
        seen.add(tok[1])
        t.i += 1
        t.expect("=")
        if tok[1] == "replicated":
            replicated = _axes_set(t)
        else:
            kind = t.peek()
            if kind is not None and kind[0] == "name":
                if kind[1] not in REDUCTIONS or kind[1] == PENDING_SUM:
                    raise t.fail(f"unreduced={kind[1]}{{...}} names no pending reduction; write "
                                 "unreduced={...} for a pending sum, unreduced=max{...} or unreduced=min{...}")
                reduction = kind[1]
                t.i += 1
            unreduced = _axes_set(t)
    if wrapped:
        t.expect(">")
    t.done()
    try:
        return TensorSharding(mesh, tuple(dims), replicated, unreduced, reduction)
    except ShardingError as e:
        raise ShardingError(f"{what} {clip(text.strip())}: {e.message}") from None


def parse_axis_ref(text: str) -> AxisRef:
    """Parse one ``"x"`` or ``"x":(m)k`` (quotes optional)."""
    text = text.strip()
    if not text.startswith('"'):
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_.\-]*)(:\(\d+\)\d+)?", text)
        if m:
            text = f'"{m.group(1)}"' + (m.group(2) or "")
    t = _Tokens(text, "axis")
    ref = _axisref(t)
    t.done()
    return ref


_SHORT_MESH = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_.\-]*\s*[=:]\s*\d+\s*(,\s*[A-Za-z_][A-Za-z0-9_.\-]*\s*[=:]\s*\d+\s*)*$")


def parse_mesh_spec(text: str, default_name: str = "mesh") -> Mesh:
    """A mesh as users type it on a command line.

    Accepts the full text (``@m = <["x"=2]>``), the bare axes list (``<["x"=2, "y"=4]>``)
    or the short ``x=2,y=4``; the latter two are named ``default_name``.

    >>> str(parse_mesh_spec("x=2,y=4"))
    '@mesh = <["x"=2, "y"=4]>'
    """
    src = text.strip()
    if src.startswith("@"):
        return parse_mesh(src)
    if src.startswith("<") or src.startswith("{"):
        return parse_mesh(f"@{default_name} = {src}")
    if _SHORT_MESH.match(src):
        sizes = []
        for part in src.split(","):
            name, _, size = part.replace(":", "=").partition("=")
            sizes.append((name.strip(), read_int(size, f"the size of mesh axis {quote(name.strip())}")))
        names = [n for n, _ in sizes]
        if len(set(names)) != len(names):
            raise MeshError(f"mesh {quote(text)} names an axis twice")
        return Mesh.from_sizes(default_name, sizes)
    raise ParseError(
        f"cannot parse mesh {quote(text)}: write it as x=2,y=4 or as '@name = <[\"x\"=2, \"y\"=4]>'"
    )
