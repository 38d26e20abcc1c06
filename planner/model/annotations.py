"""User annotations as constraints on candidate layouts (seeds 000 and 003).

A tensor annotation such as ``[{"x", ?}p1, {}], replicated={"y"}`` constrains the
layouts the tensor may take:

* a **closed** dimension keeps exactly its axes; an **open** one keeps them as its
  most major axes and may gain more (minor) ones;
* an explicitly **replicated** axis may not split the tensor anywhere;
* **priorities** order propagation (:func:`priorities`): annotations of priority
  ``< i`` are propagated through the whole program before those of priority ``i``.

Axes are compared as pieces of the search refinement, so ``"d"`` satisfies an open
``{"d":(1)2, ?}`` (its major piece is ``"d":(1)2``).

>>> from planner.ir import parse_mesh, parse_sharding
>>> m = parse_mesh('@m = <["x"=2, "y"=4]>')
>>> ann = parse_sharding('[{"x", ?}, {}], replicated={"y"}', m)
>>> [satisfies(parse_sharding(t, m), ann) for t in ('[{"x"}, {}]', '[{"x", "y"}, {}]', '[{}, {}]')]
[True, False, False]
"""

from __future__ import annotations

from typing import Iterable, Sequence

from planner.caches import memoize
from planner.errors import PlanningError, ShardingError
from planner.ir.axis import AxisRef, axes_for_digit
from planner.ir.equivalence import equivalent_sharding
from planner.ir.mesh import Mesh
from planner.ir.sharding import DimSharding, TensorSharding


def _expand(axes: Sequence[AxisRef], mesh: Mesh, cuts: dict[str, set[int]]) -> list[tuple[str, int, int]]:
    out = []
    for ref in axes:
        lo, hi = ref.interval(mesh)
        points = sorted(p for p in cuts.get(ref.name, ()) if lo < p < hi)
        bounds = [lo, *points, hi]
        out += [(ref.name, a, b) for a, b in zip(bounds, bounds[1:])]
    return out


def _cuts(mesh: Mesh, *shardings: TensorSharding) -> dict[str, set[int]]:
    cuts: dict[str, set[int]] = {}
    for s in shardings:
        for ref in s.used_axes():
            lo, hi = ref.interval(mesh)
            cuts.setdefault(ref.name, set()).update((lo, hi))
    return cuts


@memoize("annotation checks", maxsize=65536)  # a model's alike layers ask the same questions
def satisfies(candidate: TensorSharding, annotation: TensorSharding) -> bool:
    """Whether a layout honours an annotation's closed/open dims and replicated axes.

    Pending sums (``unreduced``) of the candidate are resolved by the
    redistribution that follows, except under an annotation whose every dimension
    is closed: that layout holds as written, so the candidate may carry only the
    pending sums the annotation names (``unreduced=``).
    """
    mesh = candidate.mesh
    if annotation.mesh != mesh:
        annotation = translate(annotation, mesh)
    cuts = _cuts(mesh, candidate, annotation)
    for have, want in zip(candidate.dims, annotation.dims):
        h = _expand(have.axes, mesh, cuts)
        w = _expand(want.axes, mesh, cuts)
        if want.is_closed and h != w:
            return False
        if want.is_open and h[: len(w)] != w:
            return False
    if annotation.replicated:
        used = [a for d in candidate.dims for a in d.axes]
        if any(a.overlaps(r) for a in used for r in annotation.replicated):
            return False
    if candidate.unreduced and all(d.is_closed for d in annotation.dims):
        # a closed annotation holds as written: no pending sums but those it names
        if _expand(candidate.unreduced, mesh, cuts) != _expand(annotation.unreduced, mesh, cuts):
            return False
    return True


def translate(sharding: TensorSharding, mesh: Mesh, shape: Sequence[int] | None = None) -> TensorSharding:
    """The same sharding named with ``mesh``'s axes (meshes over the same devices).

    On a mesh with the same device order the axes are renamed digit by digit. On a
    mesh with another device order the result is
    :func:`~planner.ir.equivalence.equivalent_sharding`: every device keeps the same
    index ranges of a tensor of ``shape``. Without ``shape`` the translation must hold
    for every shape (it is computed for the shape whose dimensions equal the shard
    counts, where ranges match exactly when the shard indices do). A sharding with no
    equivalent raises :class:`PlanningError`.
    """
    if sharding.mesh == mesh:
        return sharding
    if sharding.mesh.devices != mesh.devices:
        return _translate_reordered(sharding, mesh, shape)

    def conv(refs):
        out = []
        for r in refs:
            try:
                out += list(axes_for_digit(mesh, *r.digit(sharding.mesh)))
            except ShardingError:
                raise PlanningError(
                    f"axis {r} of @{sharding.mesh.name} has no counterpart on mesh @{mesh.name} "
                    f"({mesh.short()}); annotate on the planning mesh"
                ) from None
        return out

    dims = tuple(
        DimSharding(tuple(conv(d.axes)), d.is_open, d.priority) for d in sharding.dims
    )
    built = TensorSharding.build(mesh, [d.axes for d in dims], replicated=conv(sharding.replicated),
                                 unreduced=conv(sharding.unreduced))
    return TensorSharding(mesh, tuple(DimSharding(b.axes, d.is_open, d.priority) for b, d in zip(built.dims, dims)),
                          built.replicated, built.unreduced)


def _translate_reordered(sharding: TensorSharding, mesh: Mesh, shape: Sequence[int] | None) -> TensorSharding:
    """``translate`` between meshes whose device orders differ."""
    src = sharding.mesh
    if src.size != mesh.size:
        raise PlanningError(
            f"{sharding} is on mesh {src} ({src.size} devices) but the planning mesh {mesh} has "
            f"{mesh.size}; annotate on @{mesh.name}"
        )
    if shape is None:
        shape = sharding.shard_counts()
        for_shape = "for every shape"
    else:
        sharding.check_rank(shape)
        for_shape = f"for shape {'x'.join(map(str, shape)) or 'scalar'}"
    try:
        found = equivalent_sharding(sharding, mesh, tuple(shape))
    except ShardingError as e:
        raise PlanningError(f"cannot translate {sharding} to mesh @{mesh.name}: {e.message}") from None
    if found is None:
        raise PlanningError(
            f"{sharding} has no equivalent on mesh @{mesh.name} {for_shape}: the meshes {src} and {mesh} "
            f"order the devices differently and no sharding of @{mesh.name} gives every device the same "
            f"indices{' and pending-sum groups' if sharding.unreduced else ''}. Annotate it on @{mesh.name} "
            f"instead; data that must stay on @{src.name} has to be moved to @{mesh.name} with a "
            f"CollectivePermute first (`shardplan reshard` plans that move)"
        )
    return found


def restrict_to_priority(annotation: TensorSharding, level: int) -> TensorSharding | None:
    """The part of an annotation that applies once priorities ``<= level`` are active.

    Dimensions of a higher priority become open and empty; ``None`` if nothing applies.
    Replicated axes carry no priority and always apply.
    """
    dims = []
    active = False
    for d in annotation.dims:
        if d.priority <= level and (d.axes or d.is_closed):
            dims.append(d)
            active = active or bool(d.axes) or d.is_closed
        else:
            dims.append(DimSharding((), is_open=True))
    if not active and not annotation.replicated:
        return None
    return TensorSharding(annotation.mesh, tuple(dims), annotation.replicated, annotation.unreduced)


def priorities(annotations: Iterable[TensorSharding]) -> list[int]:
    """Distinct priorities of the annotations' non-empty dimensions, ascending."""
    found = {d.priority for a in annotations for d in a.dims if d.axes}
    return sorted(found) or [0]


def axes_of(annotations: Iterable[TensorSharding]) -> set[str]:
    """Mesh axis names any of the annotations uses to split a dimension."""
    return {a.name for s in annotations for d in s.dims for a in d.axes}


# -- the model's annotations -------------------------------------------------------------------

def user_annotation(graph, name: str, mesh: Mesh) -> TensorSharding:
    """Tensor ``name``'s sharding on ``mesh``, translated from the mesh it was given on.

    A sharding with no equivalent on ``mesh`` is a :class:`PlanningError` naming the
    tensor (and its line in the model file).
    """
    t = graph.tensor(name)
    try:
        return translate(t.sharding, mesh, t.shape)
    except PlanningError as e:
        raise PlanningError(f"tensor {name!r}: {e.message}", where=where(graph, t.line)) from None


def annotations_at(graph, mesh: Mesh, level: int | None) -> dict[str, TensorSharding]:
    out = {}
    for name, t in graph.tensors.items():
        if t.sharding is None:
            continue
        ann = user_annotation(graph, name, mesh)
        if level is not None:
            ann = restrict_to_priority(ann, level)
        if ann is not None:
            out[name] = ann
    return out


def default_annotations(graph, mesh: Mesh) -> dict[str, TensorSharding]:
    """With no annotation at all, graph inputs are batch-sharded on the first mesh axis."""
    axis = mesh.axes[0]
    out = {}
    for name, t in graph.tensors.items():
        if t.kind == "input" and t.rank and t.shape[0] >= axis.size and axis.size > 1:
            dims = (DimSharding((AxisRef(axis.name),), is_open=True),) + tuple(
                DimSharding((), is_open=True) for _ in t.shape[1:])
            out[name] = TensorSharding(mesh, dims)
    return out


def has_user_annotations(graph) -> bool:
    return any(t.sharding is not None for t in graph.tensors.values()) or any(
        op.strategy is not None or op.out_sharding is not None for op in graph.ops)


def where(graph, line) -> str | None:
    if graph.source and line:
        return f"{graph.source}:{line}"
    return graph.source
