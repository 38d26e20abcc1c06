"""``auto_axes`` / ``explicit_axes`` regions (seed 001): a set of ops in which mesh axes switch type.

Seed 001's ``auto_axes`` lets a function run with some Explicit axes made Auto (the
compiler decides them inside); the caller gets results back with the ``out_sharding``
it names, so their types on those axes are known again. ``explicit_axes`` does the
opposite: inside, Auto axes become Explicit, and the inputs enter with the
``in_shardings`` the call names (their types on those axes). In a model a region is
a name, its axes, its ops, and those boundary shardings:

.. code-block:: yaml

    auto_axes:
      - {name: g, axes: [X], ops: [fc2, act2], out_shardings: {y: '[{"X"}, {}]'}}
    explicit_axes:
      - {name: e, axes: [Y], ops: [fc3], in_shardings: {y: '[{}, {"Y"}]'}}

An ``auto_axes`` region needs an out-sharding for every *output* (a tensor one of its
ops makes that an op outside reads, or a graph output) and an ``explicit_axes`` region
an in-sharding for every *input* (a tensor its ops read that none of them makes); the
boundary shardings name only those tensors. An op is in at most one region.
"""

from __future__ import annotations

from planner.errors import quote

from dataclasses import dataclass

from planner.ir.sharding import TensorSharding

KINDS = ("auto", "explicit")


@dataclass(frozen=True)
class AxisRegion:
    """One region: ``kind`` (``auto`` or ``explicit``), the mesh ``axes`` that switch type, its ``ops``,
    and its boundary ``shardings`` (out-shardings of an auto region, in-shardings of an explicit one)."""

    name: str
    kind: str
    axes: tuple[str, ...]
    ops: tuple[str, ...]
    shardings: tuple[tuple[str, TensorSharding], ...] = ()
    line: int | None = None

    @property
    def boundary_key(self) -> str:
        return "out_shardings" if self.kind == "auto" else "in_shardings"

    def sharding(self, tensor: str) -> TensorSharding | None:
        return dict(self.shardings).get(tensor)


def boundary(region: AxisRegion, ops, consumers, outputs) -> tuple[str, ...]:
    """The region's outputs (auto) or inputs (explicit), in op order.

    ``ops``: the graph's ops by name; ``consumers(t)``: the ops reading ``t``;
    ``outputs``: the graph's outputs.
    """
    inside = set(region.ops)
    made = {ops[name].output for name in region.ops}
    out: dict[str, None] = {}
    for name in region.ops:
        op = ops[name]
        if region.kind == "auto":
            t = op.output
            if t in outputs or any(reader not in inside for reader in consumers(t)):
                out[t] = None
        else:
            for t in op.inputs:
                if t not in made:
                    out[t] = None
    return tuple(out)


def check_regions(regions, ops, mesh_axes, consumers, outputs, error) -> tuple[AxisRegion, ...]:
    """Validate ``regions`` against the graph; ``error(message, line)`` makes the located ModelError."""
    seen_names: set[str] = set()
    owner: dict[str, str] = {}
    for r in regions:
        where = f"{r.kind}_axes region {quote(r.name)}"
        if r.kind not in KINDS:
            raise error(f"region {quote(r.name)}: kind must be auto or explicit, got {quote(r.kind)}", r.line)
        if r.name in seen_names:
            raise error(f"{where} is defined twice", r.line)
        seen_names.add(r.name)
        if not r.axes:
            raise error(f"{where} names no axes; give the mesh axes that switch type, e.g. axes: [X]", r.line)
        for a in r.axes:
            if a not in mesh_axes:
                raise error(f"{where} names axis {quote(a)}, which the mesh does not have "
                            f"(axes: {', '.join(mesh_axes)})", r.line)
        if not r.ops:
            raise error(f"{where} has no ops", r.line)
        for name in r.ops:
            if name not in ops:
                raise error(f"{where} names op {quote(name)}, which is not an op of the model", r.line)
            if name in owner:
                raise error(f"op {quote(name)} is in two regions ({quote(owner[name])} and {quote(r.name)}); an op is in at most one",
                            r.line)
            owner[name] = r.name
        edge = boundary(r, ops, consumers, outputs)
        given = dict(r.shardings)
        for t in given:
            if t not in edge:
                what = "outputs" if r.kind == "auto" else "inputs"
                raise error(f"{where}: {r.boundary_key} names {quote(t)}, which is not one of the region's {what} "
                            f"({', '.join(edge) or 'none'})", r.line)
        missing = [t for t in edge if t not in given]
        if missing:
            what = ("its results go back to the caller with the type they name (seed 001's out_sharding)"
                    if r.kind == "auto" else "its inputs enter with the type they name (seed 001's in_shardings)")
            raise error(f"{where} needs {r.boundary_key} for {', '.join(missing)}: {what}", r.line)
    return tuple(regions)


def region_of(regions, op_name: str) -> AxisRegion | None:
    return next((r for r in regions if op_name in r.ops), None)


__all__ = ["AxisRegion", "KINDS", "boundary", "check_regions", "region_of"]
