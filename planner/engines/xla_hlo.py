"""The collectives of a compiled XLA program, read from its HLO text (``jitted.lower(...).compile().as_text()``).

:func:`collectives` finds every ``all-reduce``, ``all-gather``, ``reduce-scatter``, ``all-to-all`` and
``collective-permute`` (and their asynchronous ``-start`` halves; the ``-done`` halves move nothing new),
with its replica groups in any of the three forms XLA prints:

* explicit: ``replica_groups={{0,1},{2,3}}`` (``{}``: one group of every device);
* iota: ``replica_groups=[2,4]<=[8]`` is ``arange(8).reshape(2, 4)``, and ``[4,2]<=[2,4]T(1,0)`` is
  ``arange(8).reshape(2, 4).transpose(1, 0).reshape(4, 2)``: one group per row;
* mesh axes: ``replica_groups=mesh['x'=2,'y'=4] {'y'}``: the devices ``arange(8).reshape(2, 4)`` grouped
  along the listed axes (a sub-axis ``'x':(1)2`` as in seed 000); with ``, device_ids=([2,4]T(1,0))`` the
  mesh's devices are that iota, in mesh order (or an explicit list ``[...]``);

and for ``collective-permute`` its ``source_target_pairs`` (kept as two-device groups ``(source, target)``).

**Bytes per device** follow :mod:`costmodels.collectives`, the convention of the plan's
``comm_bytes_per_device`` and of the simulator: what one device *receives* under ring algorithms, for a
group of ``p`` devices and each array of ``n`` elements of ``b`` bytes in the instruction's result
(a combined, tuple-shaped collective adds its arrays):

==================  =============================================================
all-gather          ``(p-1) * n/p * b`` (the result is ``p`` shards; a device receives the others)
reduce-scatter      ``(p-1) * n * b`` (the result is the device's shard)
all-reduce          ``2 * (p-1) * ceil(n/p) * b`` (reduce-scatter then all-gather of ``p`` chunks)
all-to-all          ``(p-1) * ceil(n/p) * b`` (keeps one of its ``p`` chunks)
collective-permute  ``n * b`` when some device receives from another, else 0
==================  =============================================================

XLA's runtime may run other algorithms (on CPU it exchanges whole buffers in memory); these are the bytes
the same collectives cost in our model, so that XLA's choices and ours are compared on one measure.

>>> text = '''%ag = f32[8,16]{1,0} all-gather(f32[8,4]{1,0} %x), replica_groups=[2,4]<=[8], dimensions={1}'''
>>> [(c.kind, c.replica_groups, c.bytes_per_device) for c in collectives(text)]
[('all-gather', ((0, 1, 2, 3), (4, 5, 6, 7)), 384)]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from planner.collectives import HLO_KINDS, step_kind
from planner.errors import InternalError

#: XLA's collective kinds, and the names of the same collectives in our plans (the registry's,
#: :mod:`planner.collectives`).
KINDS = HLO_KINDS

#: Bytes per element of HLO's element types.
ELEMENT_BYTES = {"pred": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "s32": 4, "u32": 4, "s64": 8,
                 "u64": 8, "f8e4m3fn": 1, "f8e5m2": 1, "bf16": 2, "f16": 2, "f32": 4, "f64": 8, "c64": 8, "c128": 16}

_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>.+?)\s+"
    r"(?P<kind>" + "|".join(map(re.escape, KINDS)) + r")(?P<start>-start)?\("
)
_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([\d,]*)\]")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_PARTITIONS = re.compile(r"num_partitions=(\d+)")


@dataclass(frozen=True, slots=True)
class XlaCollective:
    """One collective of a compiled program (see the module docstring for the byte convention)."""

    kind: str                                   # all-gather, all-reduce, reduce-scatter, all-to-all, collective-permute
    name: str                                   # the HLO instruction's name
    arrays: tuple[str, ...]                     # its result arrays, e.g. ("f32[8,16]",)
    replica_groups: tuple[tuple[int, ...], ...]  # device ids per group; (source, target) pairs for a permute
    bytes_per_device: int
    op_name: str = ""                           # the JAX operation it came from (HLO metadata), if given
    sliced_after: bool = False                  # a reader dynamic-slices the result (see :func:`collectives`)

    @property
    def group_size(self) -> int:
        return max((len(g) for g in self.replica_groups), default=1)

    @property
    def our_kind(self) -> str:
        """The same collective's name in our plans (``AllGather`` ...)."""
        return KINDS[self.kind]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "replica_groups": [list(g) for g in self.replica_groups],
                "arrays": list(self.arrays), "bytes_per_device": self.bytes_per_device, "op_name": self.op_name,
                "sliced_after": self.sliced_after}


def collectives(hlo_text: str, num_devices: int | None = None) -> tuple[XlaCollective, ...]:
    """Every collective of ``hlo_text``, in program order.

    ``num_devices`` is what ``replica_groups={}`` means (all devices); by default the module's
    ``num_partitions``. An unreadable replica-group form raises InternalError quoting it.
    ``sliced_after`` marks a collective whose result some reader cuts with a ``dynamic-slice`` (itself, or
    inside the fusion it calls): an all-reduce so read is a reduce-scatter that XLA did not form.
    """
    if num_devices is None:
        m = _PARTITIONS.search(hlo_text)
        num_devices = int(m.group(1)) if m else 1
    found = []
    for line in hlo_text.splitlines():
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        kind, rest = m.group("kind"), line[m.end():]
        arrays = _result_arrays(kind, m.group("shape"), bool(m.group("start")))
        if kind == "collective-permute":
            groups = _pairs(rest, line)
        else:
            groups = replica_groups(_attribute(rest, "replica_groups", line), num_devices)
        op_name = _OP_NAME.search(rest)
        found.append(XlaCollective(kind, m.group("name"), tuple(f"{t}[{d}]" for t, d in arrays), groups,
                                   _bytes(kind, arrays, groups), op_name.group(1) if op_name else "",
                                   _sliced_after(m.group("name"), hlo_text)))
    return tuple(found)


def _sliced_after(name: str, hlo_text: str, depth: int = 0) -> bool:
    """Whether an instruction reading ``%name`` is a dynamic-slice or a fusion whose computation has one
    (through the ``get-tuple-element`` s of a combined, tuple-shaped collective)."""
    use = re.compile(r"%" + re.escape(name) + r"(?![\w.\-])")
    for line in hlo_text.splitlines():
        head, _, rest = line.partition("=")
        if not use.search(rest) or re.search(r"%" + re.escape(name) + r"\s*$", head.strip()):
            continue
        if re.search(r"\bdynamic-slice\(", rest):
            return True
        if depth == 0 and re.search(r"\bget-tuple-element\(", rest):
            reader = head.strip().split()[-1].lstrip("%")
            if _sliced_after(reader, hlo_text, 1):
                return True
            continue
        called = re.search(r"calls=%([\w.\-]+)", rest)
        if called and _computation_has(hlo_text, called.group(1), "dynamic-slice("):
            return True
    return False


def _computation_has(hlo_text: str, computation: str, what: str) -> bool:
    m = re.search(r"^%?" + re.escape(computation) + r"\b[^\n]*\{\n(.*?)^\}", hlo_text, re.M | re.S)
    return bool(m) and what in m.group(1)


def replica_groups(text: str, num_devices: int) -> tuple[tuple[int, ...], ...]:
    """The device groups of a ``replica_groups=`` value (explicit, iota or mesh-axes form).

    >>> replica_groups("{{0,2},{1,3}}", 4), replica_groups("{}", 2)
    (((0, 2), (1, 3)), ((0, 1),))
    >>> replica_groups("[4,2]<=[2,4]T(1,0)", 8)
    ((0, 4), (1, 5), (2, 6), (3, 7))
    >>> replica_groups("mesh['x'=2,'y'=4] {'x'}", 8)
    ((0, 4), (1, 5), (2, 6), (3, 7))
    >>> replica_groups("mesh['d'=8] {'d':(2)4}", 8)
    ((0, 1, 2, 3), (4, 5, 6, 7))
    >>> replica_groups("mesh['a'=4,'b'=1,'c'=2], device_ids=([2,4]T(1,0)) {'a'}", 8)
    ((0, 1, 2, 3), (4, 5, 6, 7))
    """
    text = text.strip()
    if text.startswith("{"):
        inner = re.findall(r"\{([\d,\s]*)\}", text[1:-1])
        if not inner:
            return (tuple(range(num_devices)),)
        return tuple(tuple(int(v) for v in g.split(",") if v.strip()) for g in inner)
    m = re.fullmatch(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if m:
        shape, dims = _ints(m.group(1)), _ints(m.group(2))
        ids = np.arange(math.prod(dims)).reshape(dims)
        if m.group(3):
            ids = ids.transpose(_ints(m.group(3)))
        return tuple(tuple(int(v) for v in row) for row in ids.reshape(shape[0], -1))
    m = re.fullmatch(r"mesh\[(.*?)\]\s*(?:,\s*device_ids=(\(.*?\)|\[[\d,\s]*\]))?\s*\{(.*)\}", text)
    if m:
        return _mesh_groups(m.group(1), m.group(3), m.group(2))
    raise InternalError(f"cannot read XLA replica groups {text!r}: expected {{{{...}}}}, [g,s]<=[n] or mesh[...] {{...}}")


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def _device_order(text: str | None, n: int) -> np.ndarray:
    """The devices of a mesh, in mesh order: ``None`` is ``0..n-1``; ``([2,4]T(1,0))`` an iota reshaped and
    transposed; ``[0,2,1,3]`` explicit."""
    if text is None:
        return np.arange(n)
    m = re.fullmatch(r"\(\[([\d,]+)\](?:T\(([\d,]+)\))?\)", text.strip())
    if m:
        ids = np.arange(n).reshape(_ints(m.group(1)))
        return (ids.transpose(_ints(m.group(2))) if m.group(2) else ids).reshape(-1)
    return np.array(_ints(text.strip()[1:-1]))


def _mesh_groups(axes_text: str, listed_text: str, device_ids: str | None = None) -> tuple[tuple[int, ...], ...]:
    """Groups of the mesh-axes form: ``'x'=2,'y'=4``, optional ``device_ids`` (mesh order), and the listed
    (sub-)axes ``'y'`` or ``'x':(1)2``."""
    axes = [(n, int(s)) for n, s in re.findall(r"'([^']+)'\s*=\s*(\d+)", axes_text)]
    listed = [(n, int(pre) if pre else None, int(size) if size else None)
              for n, pre, size in re.findall(r"'([^']+)'(?::\((\d+)\)(\d+))?", listed_text)]
    sizes = dict(axes)
    # cut each axis at the boundaries of its listed sub-axes, as pieces (lo, hi) of pre-sizes
    pieces = []  # (axis, lo, hi) major to minor
    for name, n in axes:
        cuts = {1, n}
        for a, pre, size in listed:
            if a == name and pre is not None:
                cuts |= {pre, pre * size}
        bounds = sorted(cuts)
        pieces += [(name, lo, hi) for lo, hi in zip(bounds, bounds[1:])]
    chosen = []
    for a, pre, size in listed:
        lo, hi = (1, sizes[a]) if pre is None else (pre, pre * size)
        chosen += [k for k, (n, plo, phi) in enumerate(pieces) if n == a and lo <= plo and phi <= hi]
    ids = _device_order(device_ids, math.prod(sizes.values())).reshape([hi // lo for _, lo, hi in pieces] or [1])
    rest = [k for k in range(len(pieces)) if k not in chosen]
    grouped = ids.transpose(rest + chosen).reshape(-1, math.prod(pieces[k][2] // pieces[k][1] for k in chosen))
    return tuple(tuple(int(v) for v in row) for row in grouped)


def _attribute(rest: str, key: str, line: str) -> str:
    """The text of attribute ``key=`` up to its end (balanced braces; the mesh form's trailing set)."""
    at = rest.find(key + "=")
    if at < 0:
        return "{}"
    text = rest[at + len(key) + 1:]
    if text.startswith("mesh["):
        m = re.match(r"mesh\[.*?\]\s*(?:,\s*device_ids=(?:\(.*?\)|\[[\d,\s]*\]))?\s*\{[^}]*\}", text)
        if m:
            return m.group(0)
    if text.startswith("{"):
        depth = 0
        for i, ch in enumerate(text):
            depth += (ch == "{") - (ch == "}")
            if depth == 0:
                return text[:i + 1]
    m = re.match(r"\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?", text)
    if m:
        return m.group(0)
    raise InternalError(f"cannot read the {key} of XLA instruction {line.strip()[:200]!r}")


def _pairs(rest: str, line: str) -> tuple[tuple[int, ...], ...]:
    text = _attribute(rest, "source_target_pairs", line)
    return tuple(tuple(int(v) for v in g.split(",")) for g in re.findall(r"\{(\d+\s*,\s*\d+)\}", text))


def _result_arrays(kind: str, shape: str, start: bool) -> list[tuple[str, str]]:
    """The arrays the collective produces: an async ``-start`` returns (operands, results, ...) as a tuple."""
    arrays = _ARRAY.findall(shape)
    if start and shape.lstrip().startswith("("):
        if kind == "all-gather":
            arrays = arrays[len(arrays) // 2:]
        elif kind == "collective-permute":
            arrays = arrays[1:2]
    return [(t, d) for t, d in arrays if t in ELEMENT_BYTES]


def _bytes(kind: str, arrays, groups) -> int:
    """The registry's rounds and unit of ``kind`` (:mod:`planner.collectives`) for each result array."""
    p = max((len(g) for g in groups), default=1)
    step = step_kind(KINDS[kind])
    if kind == "collective-permute":
        moves = any(s != t for s, t in groups)
        return sum(step.received(p, _unit(step, _elements(d), p) * ELEMENT_BYTES[t]) for t, d in arrays) \
            if moves else 0
    if p <= 1:
        return 0
    if kind == "all-to-all":  # the tuple form has one array per chunk: the chunks of one buffer
        n, b = sum(_elements(d) for _, d in arrays), ELEMENT_BYTES[arrays[0][0]] if arrays else 0
        return step.received(p, _unit(step, n, p) * b)
    return sum(step.received(p, _unit(step, _elements(d), p) * ELEMENT_BYTES[t]) for t, d in arrays)


def _unit(step, n: int, p: int) -> int:
    """The elements a round of ``step`` moves, from a result array of ``n`` elements."""
    return step.unit(step.operand(n, p), n, p)


def _elements(dims: str) -> int:
    return math.prod(_ints(dims))
