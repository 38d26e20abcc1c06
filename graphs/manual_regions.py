"""Manual computation regions (shard_map; seeds 001, 003, 004): a body on local blocks, flattened into the graph.

A region names its **manual axes** (mesh axes the body handles itself), its
**inputs** with one **in-sharding** each, its **outputs** with one
**out-sharding** each, and a **body**: ops on *local* shapes (one block per
device) that may use the collectives of :mod:`graphs.ops.collectives` over the
manual axes.

.. code-block:: yaml

    regions:
      - name: mlp
        manual_axes: [tp]
        inputs: [x, w1, w2]
        in_shardings: ['[{}, {}]', '[{}, {"tp"}]', '[{"tp"}, {}]']
        outputs: [y]
        out_shardings: ['[{}, {}]']
        ops:
          - {name: mm1, op: matmul, inputs: [x, w1], output: h}
          - {name: sum, op: psum, axes: [tp], inputs: [h], output: y}

**Flattening.** The graph keeps "every op has one result": a region becomes
ordinary graph ops and tensors whose names start with ``<region>/``:

- per input ``x``: op ``<region>/enter/x`` (``manual_enter``) reads the outer ``x``
  (global shape) and makes the body argument ``<region>/x`` (local shape: each
  dimension divided by the sizes of the in-sharding's manual axes in it);
- each body op ``mm1`` becomes ``<region>/mm1``, its result ``h`` becomes
  ``<region>/h``; the body refers to the region's inputs by their outer names;
- per output ``y``: op ``<region>/exit/y`` (``manual_exit``) reads the body's ``y``
  (``<region>/y``) and makes the outer ``y`` (global shape).

**Invariants** (Shardy's; each violation is a ModelError naming the region, the
line and the rule): manual axes are full axes of the mesh, named once; every
manual axis appears in every in/out sharding, sharded or replicated (one left
out is replicated, JAX's ``P()``; the stored sharding lists it as replicated);
within a dimension manual axes are major to free axes; no manual axis is
``unreduced``; one sharding per input and per output; the body reads only the
region's inputs and its own results; a collective's ``axes`` are manual axes of
its region (and a collective outside a region is an error); dimensions divide.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from graphs.ops.collectives import BOUNDARY_OPS, is_collective
from graphs.specs import OpSpec
from planner.errors import ModelError, ShardplanError
from planner.ir import Mesh, TensorSharding
from planner.ir.axis import AxisRef

#: Keys of one body op that are not op attributes.
BODY_OP_KEYS = ("name", "op", "inputs", "output", "strategy", "out_sharding", "line")


@dataclass(frozen=True)
class ManualRegion:
    """One flattened manual region (see the module docstring).

    ``inputs`` / ``outputs`` are outer tensor names; ``arguments`` / ``results`` the
    matching body tensors; ``in_shardings`` / ``out_shardings`` their boundary
    shardings with every manual axis explicit (sharded or replicated); ``ops`` the
    body ops (graph names); ``enter_ops`` / ``exit_ops`` the boundary ops, one per
    input / output; ``body_tensors`` every body tensor (arguments and body results).
    """

    name: str
    manual_axes: tuple[str, ...]
    inputs: tuple[str, ...]
    in_shardings: tuple[TensorSharding, ...]
    outputs: tuple[str, ...]
    out_shardings: tuple[TensorSharding, ...]
    arguments: tuple[str, ...]
    results: tuple[str, ...]
    ops: tuple[str, ...]
    enter_ops: tuple[str, ...]
    exit_ops: tuple[str, ...]
    body_tensors: tuple[str, ...]
    line: int | None = None

    def manual_sizes(self, mesh: Mesh) -> tuple[int, ...]:
        return tuple(mesh.axis_size(a) for a in self.manual_axes)

    def role(self, op: str) -> str | None:
        """``enter``, ``exit`` or ``body`` for an op of this region, None otherwise."""
        if op in self.enter_ops:
            return "enter"
        if op in self.exit_ops:
            return "exit"
        return "body" if op in self.ops else None

    def boundary_sharding(self, op: str) -> TensorSharding:
        """The in-sharding of an enter op's input or the out-sharding of an exit op's output."""
        if op in self.enter_ops:
            return self.in_shardings[self.enter_ops.index(op)]
        return self.out_shardings[self.exit_ops.index(op)]

    def manual_dims(self, sharding: TensorSharding) -> tuple[tuple[str, ...], ...]:
        """Per dimension of ``sharding``, its manual axes (major to minor)."""
        return tuple(tuple(a.name for a in d.axes if a.name in self.manual_axes) for d in sharding.dims)


@dataclass(frozen=True)
class RegionSpec:
    """A region as written (outer names, body ops as mappings), before flattening."""

    name: str
    manual_axes: tuple[str, ...]
    inputs: tuple[str, ...]
    in_shardings: tuple[Any, ...]
    outputs: tuple[str, ...]
    out_shardings: tuple[Any, ...]
    ops: tuple[Mapping[str, Any], ...]
    line: int | None = None


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(value or ())


def normalise_boundary(region: str, what: str, sharding: TensorSharding, manual: Sequence[str],
                       error: Callable[[str], ModelError]) -> TensorSharding:
    """Check Shardy's rules for one in/out sharding and list every unmentioned manual axis as replicated."""
    for ref in sharding.unreduced:
        if ref.name in manual:
            raise error(f"region {region!r}: {what} has manual axis {ref.name!r} in unreduced; a region's boundary "
                        f"value is whole or blocked over its manual axes, never a pending sum")
    seen: set[str] = set()
    for i, dim in enumerate(sharding.dims):
        free_before = None
        for ref in dim.axes:
            if ref.name in manual:
                if not ref.is_full:
                    raise error(f"region {region!r}: {what} uses manual axis {ref.name!r} as the sub-axis {ref} in "
                                f"dimension {i}; a manual axis is used whole")
                if free_before is not None:
                    raise error(f"region {region!r}: {what} has free axis {free_before} major to manual axis "
                                f"{ref.name!r} in dimension {i}; free axes must be minor to manual axes")
                seen.add(ref.name)
            elif free_before is None:
                free_before = str(ref)
    seen.update(r.name for r in sharding.replicated if r.name in manual)
    missing = [a for a in manual if a not in seen]
    if not missing:
        return sharding
    return TensorSharding(sharding.mesh, sharding.dims, tuple(sharding.replicated) + tuple(AxisRef(a) for a in missing),
                          sharding.unreduced)


def flatten(spec: RegionSpec, mesh: Mesh | None, outer: set[str], parse: Callable[[Any, str], TensorSharding],
            where: Callable[[int | None], str | None]) -> tuple[list[OpSpec], ManualRegion]:
    """The graph ops of region ``spec`` and its :class:`ManualRegion`.

    ``outer``: every tensor name defined outside regions (declared or made by an
    outer op or another region); ``parse(text, what)`` parses a sharding.
    """
    line = spec.line

    def error(message: str, at: int | None = None) -> ModelError:
        return ModelError(message, where=where(line if at is None else at))

    r = spec.name
    if not isinstance(r, str) or not r or "/" in r:
        raise error(f"a manual region needs a name without '/', got {r!r}")
    if mesh is None:
        raise error(f"region {r!r} needs a mesh; add `mesh:`")
    manual = _names(spec.manual_axes)
    if not manual:
        raise error(f"region {r!r} names no manual_axes; give the mesh axes its body handles, e.g. manual_axes: [tp]")
    for a in manual:
        if not isinstance(a, str) or not mesh.has_axis(a):
            sub = isinstance(a, str) and ":" in a
            rule = "a manual axis is a whole mesh axis, not a sub-axis" if sub else \
                f"the mesh has axes {', '.join(mesh.axis_names)}"
            raise error(f"region {r!r}: manual axis {a!r} is not an axis of the mesh ({rule})")
        if manual.count(a) > 1:
            raise error(f"region {r!r} names manual axis {a!r} twice")
    sizes = tuple(mesh.axis_size(a) for a in manual)
    inputs, outputs = _names(spec.inputs), _names(spec.outputs)
    for key, names, shardings in (("in_shardings", inputs, spec.in_shardings), ("out_shardings", outputs,
                                                                              spec.out_shardings)):
        what = "inputs" if key == "in_shardings" else "outputs"
        if len(shardings) != len(names):
            raise error(f"region {r!r} has {len(names)} {what} ({', '.join(names) or 'none'}) but {len(shardings)} "
                        f"{key}; give one sharding per {what[:-1]}, in order")
        for t in names:
            if names.count(t) > 1:
                raise error(f"region {r!r} lists {what[:-1]} {t!r} twice")
    if not outputs:
        raise error(f"region {r!r} has no outputs; list the body results the model reads")

    def boundary(value: Any, t: str, side: str) -> TensorSharding:
        what = f"the {side} of {t!r}"
        try:
            s = parse(value, f"region {r!r}: {what}")
        except ModelError as e:
            raise error(e.message) from None
        return normalise_boundary(r, what, s, manual, error)

    in_sh = tuple(boundary(v, t, "in-sharding") for t, v in zip(inputs, spec.in_shardings))
    out_sh = tuple(boundary(v, t, "out-sharding") for t, v in zip(outputs, spec.out_shardings))
    for t in inputs:
        if t not in outer:
            raise error(f"region {r!r} takes input {t!r}, which is not a tensor outside the region "
                        "(declare it or produce it with an outer op)")

    local = lambda t: f"{r}/{t}"  # noqa: E731
    body_made: dict[str, int] = {}
    body_names: set[str] = set()
    for i, o in enumerate(spec.ops):
        name = o.get("name") or f"{o.get('op')}_{i}"
        out = o.get("output") or f"{name}.out"
        if name in body_names:
            raise error(f"region {r!r}: body op {name!r} is defined twice", o.get("line"))
        body_names.add(name)
        if out in body_made or out in inputs:
            raise error(f"region {r!r}: body tensor {out!r} is defined twice (a body result or an input)",
                        o.get("line"))
        body_made[out] = i
    for t in outputs:
        if t not in body_made:
            raise error(f"region {r!r} lists output {t!r}, which no body op makes; each output is a body result")

    ops: list[OpSpec] = []
    enter_ops, arguments = [], []
    for t, s in zip(inputs, in_sh):
        attrs = _boundary_attrs(r, t, "in-sharding", manual, sizes, s)
        ops.append(OpSpec(f"{r}/enter/{t}", "manual_enter", (t,), local(t), attrs, None, None, line))
        enter_ops.append(f"{r}/enter/{t}")
        arguments.append(local(t))
    body_ops, body_tensors = [], list(arguments)
    for i, o in enumerate(spec.ops):
        at = o.get("line", line)
        name = o.get("name") or f"{o.get('op')}_{i}"
        kind = o.get("op")
        if kind in BOUNDARY_OPS:
            raise error(f"region {r!r}: body op {name!r} is a {kind}, which regions make themselves", at)
        reads = []
        for t in _names(o.get("inputs")):
            if t in inputs or t in body_made:
                reads.append(local(t))
            elif t in outer:
                raise error(f"region {r!r}: body op {name!r} reads outer tensor {t!r}, which is not an input of the "
                            f"region ({', '.join(inputs) or 'none'}); add it to inputs with an in-sharding", at)
            else:
                raise error(f"region {r!r}: body op {name!r} reads tensor {t!r}, which is neither an input of the "
                            "region nor a body result", at)
        ann = o.get("out_sharding")
        if ann is not None and any(a.name in manual for a in ann.used_axes() + tuple(ann.replicated)):
            raise error(f"region {r!r}: body op {name!r} has out_sharding {ann.dims_text()}, which names a manual "
                        f"axis ({', '.join(manual)}); a body value is sharded over the free axes only (its manual "
                        "blocks are the in-shardings')", at)
        attrs = {k: v for k, v in o.items() if k not in BODY_OP_KEYS}
        if is_collective(kind):
            if "group_size" in attrs:
                raise error(f"region {r!r}: body op {name!r} gives group_size; the region fills it from the mesh", at)
            axes = _names(attrs.get("axes"))
            for a in axes:
                if a not in manual:
                    raise error(f"region {r!r}: collective {name!r} ({kind}) is over axis {a!r}, which is not a "
                                f"manual axis of the region ({', '.join(manual)}); collectives run over manual axes",
                                at)
                if axes.count(a) > 1:
                    raise error(f"region {r!r}: collective {name!r} names axis {a!r} twice", at)
            attrs["group_size"] = math.prod(mesh.axis_size(a) for a in axes)
        out = o.get("output") or f"{name}.out"
        try:
            ops.append(OpSpec(local(name), kind, tuple(reads), local(out), attrs, o.get("strategy"),
                              o.get("out_sharding"), at))
        except ShardplanError as e:
            raise error(f"region {r!r}: {e.message}", at) from None
        body_ops.append(local(name))
        body_tensors.append(local(out))
    exit_ops = []
    for t, s in zip(outputs, out_sh):
        attrs = _boundary_attrs(r, t, "out-sharding", manual, sizes, s)
        ops.append(OpSpec(f"{r}/exit/{t}", "manual_exit", (local(t),), t, attrs, None, None, line))
        exit_ops.append(f"{r}/exit/{t}")
    region = ManualRegion(r, manual, inputs, in_sh, outputs, out_sh, tuple(arguments),
                          tuple(local(t) for t in outputs), tuple(body_ops), tuple(enter_ops), tuple(exit_ops),
                          tuple(body_tensors), line)
    return ops, region


def _boundary_attrs(region: str, tensor: str, side: str, manual, sizes, sharding: TensorSharding) -> dict:
    dims = tuple(tuple(a.name for a in d.axes if a.name in manual) for d in sharding.dims)
    return {"region": region, "tensor": tensor, "side": side, "manual_axes": tuple(manual),
            "manual_sizes": tuple(sizes), "dims": dims}


def check_placement(regions: Sequence[ManualRegion], ops, error) -> None:
    """The graph's invariants for regions: collectives and boundary ops only in regions, body tensors read only
    inside their region (the outside reads a region's outputs). ``error(message, line)`` makes the ModelError."""
    role: dict[str, ManualRegion] = {}
    tensor_region: dict[str, ManualRegion] = {}
    names = set()
    for reg in regions:
        if reg.name in names:
            raise error(f"manual region {reg.name!r} is defined twice", reg.line)
        names.add(reg.name)
        for o in reg.ops + reg.enter_ops + reg.exit_ops:
            role[o] = reg
        for t in reg.body_tensors:
            tensor_region[t] = reg
    for op in ops:
        reg = role.get(op.name)
        kind = op.op
        if reg is None and (is_collective(kind) or kind in BOUNDARY_OPS):
            what = "a collective" if is_collective(kind) else "a region boundary op"
            raise error(f"op {op.name!r} is {kind}, {what}: it is valid only inside a manual region (regions:)",
                        op.line)
        inside = reg if reg is not None and reg.role(op.name) != "enter" else None
        for t in op.inputs:
            owner = tensor_region.get(t)
            if owner is not inside:
                where = f"region {owner.name!r}" if owner else "outside regions"
                raise error(f"op {op.name!r} reads {t!r}, a tensor of {where}; a region's body and the outside "
                            "meet only through the region's inputs and outputs", op.line)




# -- the reference semantics: body values stacked over manual coordinates -------------------------

def per_coordinate(fn: Callable[[list], Any], arrays: Sequence[Any], sizes: Sequence[int]) -> list:
    """Run ``fn`` on the blocks of every manual coordinate (arrays stacked ``[*sizes, *local]``); returns one
    result per coordinate, row-major over ``sizes``."""
    import itertools

    return [fn([a[c] for a in arrays]) for c in itertools.product(*(range(s) for s in sizes))]


def grouped(fn: Callable[[Any], Any], stacked: Any, manual_axes: Sequence[str], sizes: Sequence[int],
            axes: Sequence[str]) -> Any:
    """Apply a collective's group function ``fn`` (``[G, *local] -> [G, *out]``) to every group of ``stacked``
    (``[*sizes, *local]``, one leading dimension per manual axis): a group is the coordinates that differ only
    in ``axes``, its linear index row-major over ``axes`` as listed."""
    k = len(sizes)
    positions = [list(manual_axes).index(a) for a in axes]
    x = np.moveaxis(np.asarray(stacked), positions, list(range(len(positions))))
    group = [sizes[p] for p in positions]
    others = list(x.shape[len(positions):k])
    x = x.reshape((math.prod(group), *others, *x.shape[k:]))
    results = {}
    for o in np.ndindex(*others):
        results[o] = np.asarray(fn(x[(slice(None),) + o]))
    first = next(iter(results.values()))
    out = np.empty((first.shape[0], *others, *first.shape[1:]), dtype=first.dtype)
    for o, r in results.items():
        out[(slice(None),) + o] = r
    out = out.reshape((*group, *others, *first.shape[1:]))
    return np.moveaxis(out, list(range(len(positions))), positions)


__all__ = ["BODY_OP_KEYS", "ManualRegion", "RegionSpec", "check_placement", "flatten", "grouped", "normalise_boundary",
           "per_coordinate"]
