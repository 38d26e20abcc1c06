"""Tensor shardings: per dimension, the axes that split it, major to minor (seed 000).

A :class:`TensorSharding` is bound to one :class:`~planner.ir.mesh.Mesh`. Each
dimension has a :class:`DimSharding`: its axes, whether it is open (``?``:
propagation may add minor axes) and its priority. ``replicated`` lists axes that
may never shard the tensor; ``unreduced`` lists axes over which the value is a
pending partial sum (DTensor's ``Partial``), or, with ``reduction`` ``"max"`` or
``"min"``, a pending maximum or minimum (a local ``max`` over a sharded reduced
dimension: the AllReduce that completes it takes the maximum). Every other axis
replicates the tensor implicitly. The text form prints a pending sum as
``unreduced={"y"}`` and the others with their kind, ``unreduced=max{"y"}``.

The constructor canonicalises (full axes for ``"x":(1)n``, replicated and
unreduced axes in mesh order) and then checks every invariant of seed 000; a
violation raises :class:`~planner.errors.ShardingError` naming the dimension and
the axis. Shardings are values: change them with :func:`dataclasses.replace` or
the ``with_*`` helpers.

>>> from planner.ir.text import parse_mesh, parse_sharding
>>> mesh = parse_mesh('@mesh_xy = <["x"=2, "y"=4, "z"=2]>')
>>> s = parse_sharding('sharding<@mesh_xy, [{"x"}, {"z", "y"}]>', mesh)
>>> s.local_shape((4, 8))
(2, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from planner.errors import ShardingError, quote
from planner.ir.axis import AxisRef, axes_size, merge_adjacent, sort_axes
from planner.ir.mesh import Mesh


#: The kinds of pending reduction a value may carry: a partial sum, maximum or minimum (the names Shardy
#: and XLA give the reduction, not ops).
PENDING_SUM, PENDING_MAX, PENDING_MIN = "sum", "max", "min"
REDUCTIONS = (PENDING_SUM, PENDING_MAX, PENDING_MIN)


@dataclass(frozen=True, slots=True)
class DimSharding:
    """How one tensor dimension is split: axes major to minor, open or closed, priority."""

    axes: tuple[AxisRef, ...] = ()
    is_open: bool = False
    priority: int = 0
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:  # computed once: every sharding's hash hashes its dimensions
        return self._hash

    def __post_init__(self):
        object.__setattr__(self, "axes", tuple(self.axes))
        if isinstance(self.priority, bool) or not isinstance(self.priority, int) or self.priority < 0:
            raise ShardingError(f"priority {quote(self.priority)} is invalid; priorities are integers >= 0 (p0 is highest)")
        if not self.axes and not self.is_open and self.priority != 0:
            raise ShardingError(
                f"a closed empty dimension {{}} takes no priority (got p{self.priority}); "
                "remove the priority or open the dimension with {?}"
            )
        object.__setattr__(self, "_hash", hash((self.axes, self.is_open, self.priority)))

    @property
    def is_closed(self) -> bool:
        return not self.is_open

    def __str__(self) -> str:
        parts = [str(a) for a in self.axes]
        if self.is_open:
            parts.append("?")
        text = "{" + ", ".join(parts) + "}"
        if self.priority and (self.axes or self.is_open):
            text += f"p{self.priority}"
        return text


def _interned(dim: DimSharding) -> DimSharding:
    """The one :class:`DimSharding` equal to ``dim`` that shardings share: the planner's caches, keyed by
    shardings, then find their keys by identity instead of comparing dimensions field by field."""
    got = _DIMS.get(dim)
    if got is None:
        if len(_DIMS) >= INTERNED_DIMS:
            _DIMS.clear()
        got = _DIMS[dim] = dim
    return got


_DIMS: dict[DimSharding, DimSharding] = {}

#: How many distinct dimension shardings :func:`_interned` keeps before it starts afresh.
INTERNED_DIMS = 65536


def _check_no_overlap(where: list[tuple[AxisRef, str]]) -> None:
    """Each axis or sub-axis appears once; sub-axes of one axis do not overlap and fit together."""
    by_name: dict[str, list[tuple[AxisRef, str]]] = {}
    for ref, place in where:
        by_name.setdefault(ref.name, []).append((ref, place))
    for name, uses in by_name.items():
        for i in range(len(uses)):
            for j in range(i + 1, len(uses)):
                (a, pa), (b, pb) = uses[i], uses[j]
                if a == b:
                    same = pa if pa == pb else f"{pa} and by {pb}"
                    raise ShardingError(f"axis {a} is used twice: by {same}; an axis may appear only once")
                if a.overlaps(b):
                    raise ShardingError(
                        f"axes {a} ({pa}) and {b} ({pb}) overlap: they share part of axis \"{name}\""
                    )


def _check_sub_axes_fit(refs: list[tuple[AxisRef, str]], mesh: Mesh) -> None:
    """Sub-axes of one axis must be pieces of a single factorisation of that axis."""
    by_name: dict[str, list[tuple[AxisRef, str]]] = {}
    for ref, place in refs:
        if not ref.is_full:
            by_name.setdefault(ref.name, []).append((ref, place))
    for name, uses in by_name.items():
        uses.sort(key=lambda u: u[0].pre_size)
        for (a, pa), (b, pb) in zip(uses, uses[1:]):
            end = a.pre_size * a.size
            if b.pre_size % end:
                raise ShardingError(
                    f"sub-axes {a} ({pa}) and {b} ({pb}) cannot both be pieces of axis \"{name}\": "
                    f"the pre-size {b.pre_size} of the second must be a multiple of {end}"
                )


def _check_maximal(axes: Sequence[AxisRef], mesh: Mesh, place: str) -> None:
    merged = merge_adjacent(axes, mesh)
    if merged != tuple(axes):
        for a, b in zip(axes, axes[1:]):
            if a.name == b.name and a.interval(mesh)[1] == b.interval(mesh)[0]:
                m = merge_adjacent([a, b], mesh)[0]
                raise ShardingError(
                    f"sub-axes {a} and {b} in {place} are adjacent pieces of one axis; "
                    f"sub-axes must be maximal: write {m} instead"
                )


@dataclass(frozen=True, slots=True)
class TensorSharding:
    """The sharding of one tensor on one mesh (see the module docstring)."""

    mesh: Mesh
    dims: tuple[DimSharding, ...]
    replicated: tuple[AxisRef, ...] = ()
    unreduced: tuple[AxisRef, ...] = ()
    reduction: str = PENDING_SUM
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self):
        mesh = self.mesh
        dims = tuple(
            _interned(replace(d, axes=tuple(a.canonical(mesh) if _known(a, mesh) else a for a in d.axes)))
            for d in self.dims
        )
        object.__setattr__(self, "dims", dims)
        for name in ("replicated", "unreduced"):
            refs = tuple(getattr(self, name))
            for r in refs:
                r.validate(mesh)
            object.__setattr__(self, name, sort_axes((r.canonical(mesh) for r in refs), mesh))
        if self.reduction not in REDUCTIONS:
            raise ShardingError(f"unknown pending reduction {quote(self.reduction)}; "
                                f"a pending value is one of {', '.join(REDUCTIONS)}")
        if not self.unreduced:
            object.__setattr__(self, "reduction", PENDING_SUM)  # nothing pending: the kind is moot
        self._validate()
        object.__setattr__(self, "_hash", hash((self.mesh, self.dims, self.replicated, self.unreduced,
                                                self.reduction)))

    def __hash__(self) -> int:
        return self._hash

    def _validate(self) -> None:
        mesh = self.mesh
        refs: list[tuple[AxisRef, str]] = []
        for i, dim in enumerate(self.dims):
            for ref in dim.axes:
                try:
                    ref.validate(mesh)
                except ShardingError as e:
                    raise ShardingError(f"dimension {i}: {e.message}") from None
                except Exception as e:  # MeshError: unknown axis
                    raise ShardingError(f"dimension {i}: {e}") from None
                refs.append((ref, f"dimension {i}"))
            _check_maximal(dim.axes, mesh, f"dimension {i}")
        refs += [(r, "replicated") for r in self.replicated]
        refs += [(r, "unreduced") for r in self.unreduced]
        _check_no_overlap(refs)
        _check_sub_axes_fit(refs, mesh)
        _check_maximal(self.replicated, mesh, "replicated")
        _check_maximal(self.unreduced, mesh, "unreduced")

    # -- construction helpers -------------------------------------------------------
    @classmethod
    def build(
        cls,
        mesh: Mesh,
        dims: Iterable[Iterable[AxisRef | str]],
        *,
        replicated: Iterable[AxisRef | str] = (),
        unreduced: Iterable[AxisRef | str] = (),
        open_dims: Iterable[int] = (),
        reduction: str = PENDING_SUM,
    ) -> "TensorSharding":
        """Build from per-dimension axis lists, merging adjacent sub-axes (for code, not users).

        >>> from planner.ir.mesh import Mesh
        >>> m = Mesh.from_sizes("m", {"x": 2, "y": 4})
        >>> str(TensorSharding.build(m, [["x"], []], unreduced=["y"]))
        'sharding<@m, [{"x"}, {}], unreduced={"y"}>'
        """
        open_dims = set(open_dims)
        as_ref = lambda a: a if isinstance(a, AxisRef) else AxisRef(a)  # noqa: E731
        dim_list = [
            DimSharding(merge_adjacent([as_ref(a) for a in axes], mesh), is_open=i in open_dims)
            for i, axes in enumerate(dims)
        ]
        rep = merge_adjacent(sort_axes([as_ref(a) for a in replicated], mesh), mesh)
        unr = merge_adjacent(sort_axes([as_ref(a) for a in unreduced], mesh), mesh)
        return cls(mesh, tuple(dim_list), rep, unr, reduction)

    @classmethod
    def replicated_on(cls, mesh: Mesh, rank: int) -> "TensorSharding":
        """The fully replicated (closed) sharding of a rank-``rank`` tensor."""
        return cls(mesh, tuple(DimSharding() for _ in range(rank)))

    # -- queries -----------------------------------------------------------------
    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def dim_axes(self) -> tuple[tuple[AxisRef, ...], ...]:
        return tuple(d.axes for d in self.dims)

    def sharding_axes(self) -> tuple[AxisRef, ...]:
        """All axes that split some dimension (dimension order, then major to minor)."""
        return tuple(a for d in self.dims for a in d.axes)

    def used_axes(self) -> tuple[AxisRef, ...]:
        """Every axis reference mentioned anywhere (dims, replicated, unreduced)."""
        return self.sharding_axes() + self.replicated + self.unreduced

    def shard_counts(self) -> tuple[int, ...]:
        """Number of shards per dimension (MindSpore's split counts)."""
        return tuple(axes_size(d.axes, self.mesh) for d in self.dims)

    def num_shards(self) -> int:
        """Number of distinct pieces the tensor is cut into."""
        n = 1
        for c in self.shard_counts():
            n *= c
        return n

    def local_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """Per-device shape, padding included: ``ceil(d / shards)`` per dimension."""
        self.check_rank(shape)
        return tuple(-(-d // c) for d, c in zip(shape, self.shard_counts()))

    def check_rank(self, shape: Sequence[int], tensor: str | None = None) -> None:
        if len(shape) != len(self.dims):
            who = f"tensor {quote(tensor)}" if tensor else "the tensor"
            raise ShardingError(
                f"sharding {self} has {len(self.dims)} dimension shardings but {who} has rank "
                f"{len(shape)} (shape {'x'.join(map(str, shape)) or 'scalar'}); "
                "give one {...} per dimension"
            )

    @property
    def is_fully_replicated(self) -> bool:
        return not self.sharding_axes() and not self.unreduced

    # -- derived shardings -----------------------------------------------------
    def with_dims(self, dims: Iterable[Iterable[AxisRef]], keep_flags: bool = True) -> "TensorSharding":
        new = []
        for i, axes in enumerate(dims):
            old = self.dims[i] if keep_flags and i < len(self.dims) else DimSharding()
            new.append(replace(old, axes=merge_adjacent(tuple(axes), self.mesh)))
        return replace(self, dims=tuple(new))

    def permuted(self, order: Sequence[int]) -> "TensorSharding":
        """The same sharding with dimension ``j`` the old dimension ``order[j]`` (a permutation of ``range(rank)``).
        A valid sharding's dimensions in another order are valid, so nothing is checked again (the engine renames
        thousands of shardings per model this way).

        >>> from planner.ir.mesh import Mesh
        >>> m = Mesh.from_sizes("m", {"x": 2, "y": 4})
        >>> str(TensorSharding.build(m, [["x"], [], ["y"]]).permuted((2, 0, 1)))
        'sharding<@m, [{"y"}, {"x"}, {}]>'
        """
        n = len(self.dims)
        if len(order) != n or set(order) != set(range(n)):
            raise ShardingError(f"{list(order)} is not an order of the {n} dimensions of {self}")
        dims = tuple(self.dims[i] for i in order)
        out = object.__new__(TensorSharding)
        put = object.__setattr__
        put(out, "mesh", self.mesh)
        put(out, "dims", dims)
        put(out, "replicated", self.replicated)
        put(out, "unreduced", self.unreduced)
        put(out, "reduction", self.reduction)
        put(out, "_hash", hash((self.mesh, dims, self.replicated, self.unreduced, self.reduction)))
        return out

    def with_unreduced(self, axes: Iterable[AxisRef], reduction: str | None = None) -> "TensorSharding":
        """The same layout pending over ``axes``, reduced by ``reduction`` (default: the kind pending now;
        a pending sum when nothing is)."""
        return replace(self, unreduced=merge_adjacent(sort_axes(axes, self.mesh), self.mesh),
                       reduction=self.reduction if reduction is None else reduction)

    def whole_even(self, shape: Sequence[int]) -> "TensorSharding":
        """The layout a JAX array holds: per dimension, the longest prefix of whole axes whose product divides
        it (a sub-axis, an axis that would pad, and every axis after either dropped). Shardy gives a jitted
        function's results this layout and XLA gathers the rest."""
        self.check_rank(shape)
        dims = []
        for d, n in zip(self.dims, shape):
            kept, size = [], 1
            for a in d.axes:
                if not a.is_full or n % (size * a.size_in(self.mesh)):
                    break
                size *= a.size_in(self.mesh)
                kept.append(a)
            dims.append(kept)
        return self if [list(d.axes) for d in self.dims] == dims else self.with_dims(dims)

    def layout_only(self) -> "TensorSharding":
        """The same layout with every dimension closed, no priorities and no replicated axes."""
        if not self.replicated and all(d.is_closed and d.priority == 0 for d in self.dims):
            return self
        return TensorSharding(self.mesh, tuple(DimSharding(d.axes) for d in self.dims), (), self.unreduced,
                              self.reduction)

    # -- text ----------------------------------------------------------------------
    def dims_text(self) -> str:
        """The short form bound to the default mesh: ``[{"x"}, {}], replicated={"y"}``."""
        text = "[" + ", ".join(str(d) for d in self.dims) + "]"
        if self.replicated:
            text += ", replicated={" + ", ".join(map(str, self.replicated)) + "}"
        if self.unreduced:
            kind = "" if self.reduction == PENDING_SUM else self.reduction
            text += f", unreduced={kind}{{" + ", ".join(map(str, self.unreduced)) + "}"
        return text

    def __str__(self) -> str:
        return f"sharding<@{self.mesh.name}, {self.dims_text()}>"


def _known(ref: AxisRef, mesh: Mesh) -> bool:
    return mesh.has_axis(ref.name)
