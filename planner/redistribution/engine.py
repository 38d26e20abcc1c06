"""The redistribution engine: the cheapest sequence of collectives between two shardings.

Given a tensor's shape and dtype and a source and destination sharding (one mesh,
or two meshes over the same devices), :func:`reshard` returns a
:class:`~planner.redistribution.steps.ReshardPlan`: ordered steps (AllReduce,
ReduceScatter, AllGather, AllToAll, CollectivePermute, Slice), each with its
bytes per device and time, and the lower bound the plan is scored against.

How: both shardings are rewritten over the common refinement of the mesh axes
(:mod:`planner.redistribution.state`) and a search runs over layouts, one
collective per edge (:mod:`planner.redistribution.moves`), minimising bytes
received per device, then the number of collectives, then time (or, with
``objective="time"``, time first). The search (:mod:`planner.redistribution.search`)
is an A* guided by the lower bound from each layout to the destination, followed
by the Dijkstra restricted to the layouts that bound leaves on a cheapest path: it
returns the plan the exhaustive Dijkstra returns (kept as ``reshard(...,
_exhaustive=True)``), expanding far fewer layouts. Before any search the engine has a plan
in hand: the direct plan of :mod:`planner.redistribution.direct` (one collective per piece
out of place) or gathering everything then slicing, whichever is cheaper; the searches only
look for cheaper ones. With sub-axis pieces the search over whole axes runs next and its plan
bounds the finer search. Searches are budgeted
(:data:`planner.redistribution.search.BUDGET`, states times devices): one that runs out goes
on greedier and returns the best plan it found, or the plan in hand, marked
``plan.exact = False``. Because every move is
a whole collective, the search finds e.g. ReduceScatter instead of AllReduce +
Slice, AllToAll for an axis that changes dimension, slices before gathers, and a
CollectivePermute where one device's block simply moves to another — and never
gathers what a later step slices away. When the meshes differ, a first
CollectivePermute moves blocks to the devices that hold them in the destination
mesh's order (only where they differ).

Plans are cached by ``(shape, dtype, source, destination, cluster)`` (the
``redistribution plans`` cache of :mod:`planner.caches`); searches over whole axes once per
class of problems alike up to the order and size of even dimensions (the ``canonical
redistribution searches`` cache, :func:`_search`).

>>> from planner.ir import parse_mesh, parse_sharding
>>> m = parse_mesh('@m = <["x"=2, "y"=4]>')
>>> plan = reshard((64, 32), "f32", parse_sharding('[{"x"}, {}]', m), parse_sharding('[{}, {"x"}]', m))
>>> [str(s) for s in plan.steps], plan.lower_bound_bytes_per_device
(['AllToAll {"x"} dims [0, 1]: 2,048 B'], 2048)
"""

from __future__ import annotations

import heapq
import itertools
from typing import Sequence

import numpy as np

from costmodels import RING, Cluster, CollectiveCost, load_cluster
from graphs.dtypes import dtype_itemsize
from planner.caches import BoundedCache, hashed_key, memoize
from planner.errors import ReshardError, ShardingError  # ReshardError is re-exported here
from planner.ir.axis import AxisRef, axes_for_digit, axes_size, merge_adjacent
from planner.ir.layout import device_index_ranges, devices_to_positions
from planner.ir.sharding import PENDING_SUM, DimSharding, TensorSharding
from planner.redistribution.direct import direct_chain
from planner.redistribution.lower_bound import NOTE
from planner.redistribution.moves import Move, gather_then_slice, moves
from planner.redistribution.search import Budget, Graph, astar, chain_cost, search_budget
from planner.redistribution.state import MEMO_SIZE, Pieces, State
from planner.redistribution.steps import ReshardPlan, Step


def reshard(
    shape: Sequence[int],
    dtype: str,
    source: TensorSharding,
    destination: TensorSharding,
    cluster: Cluster | None = None,
    objective: str = "bytes",
    pieces: str = "primes",
    *,
    within: Sequence[AxisRef] | None = None,
    ties: str = "exhaustive",
    _exhaustive: bool = False,
) -> ReshardPlan:
    """The cheapest plan from ``source`` to ``destination`` (see the module docstring).

    ``objective`` is ``"bytes"`` (fewest bytes received per device, then time) or
    ``"time"`` (shortest time on ``cluster``, then bytes): for small tensors the
    latency of each collective dominates and the two can disagree.

    ``pieces`` is ``"primes"`` (mesh axes are also cut into prime factors, so a
    collective may run over part of an axis: the best plans, a larger search) or
    ``"axes"`` (only the cuts the two shardings make: much faster, what the
    planner's cost tables use, see :func:`reshard_for_planning`).

    ``within`` (mesh axes or pieces; None: all) restricts the search to those pieces and the
    ones the two shardings use: the problem as on a mesh without the other axes (the planner's
    axis phases, where the later axes are not in the problem yet). Such a plan may cost more
    than the unrestricted one, which can borrow a free axis for a while.

    ``ties`` is ``"exhaustive"`` (of equally cheap plans, the one the exhaustive search returns)
    or ``"any"`` (a cheapest plan the A* finds first, about a third faster; what the planner uses).
    ``plan.exact`` then says the plan is known to be a cheapest one.

    ``_exhaustive`` (private) runs the Dijkstra the engine used before its A*, which
    expands every state cheaper than the answer: benchmarks compare the two.
    """
    if objective not in ("bytes", "time"):
        raise ReshardError(f"unknown objective {objective!r}; use bytes or time")
    if pieces not in ("primes", "axes"):
        raise ReshardError(f"unknown pieces {pieces!r}; use primes or axes")
    if ties not in ("exhaustive", "any"):
        raise ReshardError(f"unknown ties {ties!r}; use exhaustive or any")
    shape = tuple(int(d) for d in shape)
    source.check_rank(shape, "source")
    destination.check_rank(shape, "destination")
    if source.mesh.size != destination.mesh.size:
        raise ReshardError(
            f"the source mesh @{source.mesh.name} has {source.mesh.size} devices and the destination mesh "
            f"@{destination.mesh.name} has {destination.mesh.size}; a redistribution stays on the same devices"
        )
    return _reshard(
        shape, dtype, source.layout_only(), destination.layout_only(), cluster or _default_cluster(), objective,
        pieces == "primes", bool(_exhaustive), None if within is None else tuple(within), ties == "exhaustive",
    )


def reshard_for_planning(shape, dtype, source, destination, cluster, within=None) -> ReshardPlan:
    """The redistributions plans are made of: shortest time, whole-axis pieces, any cheapest plan.

    The planner prices thousands of pairs per model, so its cost tables, its
    reported redistributions and the programs it lowers to all use this one
    faster setting (consistently: what is costed is what runs). ``within``: see :func:`reshard`.
    """
    return reshard(shape, dtype, source, destination, cluster, objective="time", pieces="axes", within=within,
                   ties="any")


def planning_seconds(shape, dtype, source: TensorSharding, destination: TensorSharding, cluster,
                     within=None) -> float:
    """``reshard_for_planning(...).time_s``, without building the plan: the times of the canonical search's chain
    summed in its order (renaming the steps back to the tensor's dimensions keeps each step's time). The planner's
    cost tables read thousands of these and need only the seconds, so each canonical problem's are kept under a key
    of the shardings' dimensions in canonical order: a problem alike to one priced before renames nothing."""
    source, destination = source.layout_only(), destination.layout_only()
    if (source.mesh is not destination.mesh and source.mesh != destination.mesh) or (
            source.unreduced and source.reduction != PENDING_SUM):
        return reshard_for_planning(shape, dtype, source, destination, cluster, within).time_s
    shape = tuple(int(d) for d in shape)
    itemsize = dtype_itemsize(dtype)
    within = None if within is None else tuple(within)
    order, canonical = _canonical(shape, source, destination)
    a, b = source.dims, destination.dims
    key = hashed_key((canonical, itemsize, source.mesh, tuple(a[i] for i in order), tuple(b[i] for i in order),
                      source.unreduced, source.reduction, destination.unreduced, destination.reduction, cluster,
                      within))
    seconds = _SECONDS.get(key)
    if seconds is None:
        if order != tuple(range(len(order))):
            source, destination = source.permuted(order), destination.permuted(order)
        seconds = _SECONDS.put(key, _canonical_seconds(canonical, itemsize, source, destination, cluster, within))
    return seconds


#: :func:`planning_seconds`' seconds per canonical problem.
_SECONDS = BoundedCache("canonical redistribution seconds", 65536)


@memoize("default cluster", maxsize=1)
def _default_cluster() -> Cluster:
    return load_cluster(None)


@memoize("redistribution plans", maxsize=65536)
def _reshard(shape, dtype, source, destination, cluster, objective, primes, exhaustive=False,
             within=None, ties=True) -> ReshardPlan:
    itemsize = dtype_itemsize(dtype)
    steps: list[Step] = []
    start = source
    if source.mesh != destination.mesh:
        start, step = _change_mesh(shape, itemsize, source, destination, cluster)
        if step is not None:
            steps.append(step)
    if start.unreduced and start.reduction != PENDING_SUM:
        start, step = _complete_extremum(shape, itemsize, start, destination, cluster)
        if step is not None:
            steps.append(step)
    found, exact = _search(shape, itemsize, start, destination, cluster, objective == "time", primes, exhaustive,
                           within, ties)
    return ReshardPlan(shape, dtype, source, destination, tuple(steps + found), NOTE, exact)


# -- a pending maximum or minimum ----------------------------------------------------------

def _complete_extremum(shape, itemsize, source: TensorSharding, destination: TensorSharding,
                       cluster) -> tuple[TensorSharding, Step | None]:
    """A value pending a maximum or minimum (a local ``max`` over sharded axes) is completed first, by one
    AllReduce over all its pending axes that takes the maximum (XLA's all-reduce with a max computation, JAX's
    ``pmax``), priced as the sum's ring. Only a sum may be reduce-scattered or left partly pending (the search's
    moves know sums only), so the destination may not keep any of it pending unless it is the same value."""
    if destination.unreduced:
        if destination.layout_only() == source.layout_only():
            return source, None
        raise ReshardError(
            f"{source} is pending a {source.reduction}imum over {{{', '.join(map(str, source.unreduced))}}}, which "
            f"only an AllReduce over all of them completes; {destination} keeps "
            f"{destination.reduction} pending over {{{', '.join(map(str, destination.unreduced))}}}: ask for a "
            "layout without unreduced axes")
    reduced = source.with_unreduced(())
    return reduced, all_reduce_step(shape, itemsize, source, reduced, source.unreduced, cluster)


def all_reduce_step(shape, itemsize: int, before: TensorSharding, after: TensorSharding, axes, cluster) -> Step:
    """One AllReduce over ``axes`` of ``before``'s local block (a value pending over them), priced as a ring of
    ``p`` chunks: XLA's all-reduce of a partial value, and JAX's psum / pmax."""
    p = axes_size(axes, before.mesh)
    local = int(np.prod(before.local_shape(shape), dtype=np.int64))
    cost = RING.cost("AllReduce", p, -(-local // p) * itemsize, cluster.link_for(before.mesh, axes))
    return Step("AllReduce", tuple(axes), (), before, after, cost.bytes_per_device, cost.time_s)


# -- mesh change -------------------------------------------------------------------------

def _translate(sharding: TensorSharding, mesh) -> TensorSharding:
    """The same digits of the flat device position, named with ``mesh``'s axes."""
    src = sharding.mesh
    dims = [[a for ref in d.axes for a in axes_for_digit(mesh, *ref.digit(src))] for d in sharding.dims]
    unreduced = [a for ref in sharding.unreduced for a in axes_for_digit(mesh, *ref.digit(src))]
    return TensorSharding.build(mesh, dims, unreduced=unreduced, reduction=sharding.reduction)


def _change_mesh(shape, itemsize, source, destination, cluster) -> tuple[TensorSharding, Step | None]:
    """Re-express ``source`` on the destination mesh; move blocks whose device changes."""
    mesh = destination.mesh
    try:
        moved = _translate(source, mesh)
    except ShardingError:
        raise ReshardError(
            f"the axes of @{source.mesh.name} ({source.mesh.short()}) do not line up with those of "
            f"@{mesh.name} ({mesh.short()}); use meshes whose axis sizes divide each other"
        ) from None
    # the device at flat position q of the destination mesh takes what the source
    # gives the device at flat position q of the source mesh
    giver = np.empty(mesh.size, dtype=np.int64)
    giver[np.asarray(mesh.devices)] = np.asarray(source.mesh.devices)
    if source.unreduced:
        moves_ = giver != np.arange(mesh.size)  # partial sums travel with their device slot
    else:
        old = device_index_ranges(source, shape)
        new = device_index_ranges(moved, shape)
        moves_ = ~np.all(old == new, axis=(1, 2))
    if not moves_.any():
        return moved, None
    pairs = tuple(sorted((int(giver[r]), int(r)) for r in np.flatnonzero(moves_)))
    local = int(np.prod(moved.local_shape(shape), dtype=np.int64)) * itemsize
    cost = RING.collective_permute(local, cluster.link_for(mesh, permute_axes(mesh, pairs)))
    return moved, Step("CollectivePermute", (), (), source, moved, cost.bytes_per_device, cost.time_s, pairs)


def step_link(step: Step, cluster: Cluster):
    """The link ``step`` runs on, the one the engine priced it on: a permute's is that of the mesh axes its
    pairs differ along, every other collective's that of its axes (:meth:`Cluster.link_for`); None for a
    ``Slice``, which is local."""
    if step.kind == "Slice":
        return None
    mesh = step.after.mesh
    if step.kind == "CollectivePermute":
        return cluster.link_for(mesh, permute_axes(mesh, step.pairs))
    return cluster.link_for(mesh, step.axes)


def permute_axes(mesh, pairs) -> tuple[AxisRef, ...]:
    """Mesh axes along which some pair of devices differs (the link a permute uses)."""
    pos = devices_to_positions(mesh)
    src = pos[[a for a, _ in pairs]]
    dst = pos[[b for _, b in pairs]]
    out = []
    for axis in mesh.axes:
        stride = mesh.axis_stride(axis.name)
        if np.any((src // stride) % axis.size != (dst // stride) % axis.size):
            out.append(AxisRef(axis.name))
    return tuple(out)


# -- search --------------------------------------------------------------------------------

def _permute_link(pc: Pieces, spans: tuple[int, ...], cluster: Cluster):
    return cluster.link_for(pc.mesh, tuple(AxisRef(pc.mesh.axes[i].name) for i in spans))


def _move_cost(pc: Pieces, move: Move, cluster: Cluster) -> CollectiveCost:
    if move.kind == "Slice":
        return CollectiveCost(0, 0.0)
    if move.kind == "CollectivePermute":  # on the link of the mesh axes its pairs differ along
        link = pc.per_dimension(("permute link", move.spans, cluster), _permute_link, pc, move.spans, cluster)
        return RING.collective_permute(move.unit_bytes, link)
    link = cluster.link_for(pc.mesh, pc.axes_of(move.group))
    return RING.cost(move.kind, move.p, move.unit_bytes, link)


def _search(shape, itemsize, source: TensorSharding, destination: TensorSharding, cluster, by_time: bool,
            primes: bool = True, exhaustive: bool = False, within=None,
            ties: bool = True) -> tuple[list[Step], bool]:
    """The steps from ``source`` to ``destination``, and whether they are the exhaustive search's.

    Searches over whole axes (the planner's) run once per class of alike problems: a dimension's
    size only matters through the pieces that split it evenly, so dimensions every split of the mesh divides
    (or of one size) and split alike by both shardings are interchangeable, and a model's many tensors of one
    size and rank (attention's heads, queries and keys) pose the same problem in other dimension orders. It is
    solved in a canonical order (:func:`_canonical`) and its steps renamed back."""
    if primes or source.mesh != destination.mesh:
        return _search_here(shape, itemsize, source, destination, cluster, by_time, primes, exhaustive, within, ties)
    order, steps, exact = _in_canonical_order(shape, itemsize, source, destination, cluster, by_time, exhaustive,
                                              within, ties)
    if order == tuple(range(len(order))):
        return list(steps), exact
    back = [0] * len(order)
    for j, i in enumerate(order):
        back[i] = j
    return [Step(s.kind, s.axes, tuple(order[d] for d in s.dims), s.before.permuted(back),
                 s.after.permuted(back), s.bytes_per_device, s.time_s, s.pairs) for s in steps], exact


def _in_canonical_order(shape, itemsize, source: TensorSharding, destination: TensorSharding, cluster, by_time,
                        exhaustive, within, ties) -> tuple[tuple[int, ...], tuple, bool]:
    """The problem's canonical dimension order (:func:`_canonical`), and its search's steps in that order (once
    per class of alike problems, :func:`_canonical_search`) and whether they are exact."""
    order, canonical = _canonical(shape, source, destination)
    if order != tuple(range(len(order))):
        source, destination = source.permuted(order), destination.permuted(order)
    steps, exact = _canonical_search(canonical, itemsize, source, destination, cluster, by_time, exhaustive, within,
                                     ties)
    return order, steps, exact


def _canonical(shape, source: TensorSharding, destination: TensorSharding) -> tuple[tuple[int, ...], tuple]:
    """The dimension order and shape the problem is solved in: dimensions that the mesh's size divides first,
    then the others by size, each group ordered by how the source and then the destination split them; the
    divided dimensions' sizes become the mesh's size but the first, which keeps the tensor's size (every local
    block, and so every step's bytes, is as large as before)."""
    devices = destination.mesh.size
    keys = []
    for i, (size, a, b) in enumerate(zip(shape, source.dims, destination.dims)):
        even = size > 0 and size % devices == 0
        keys.append((not even, 0 if even else size, _split_key(a), _split_key(b), i))
    keys.sort()
    order = tuple(k[-1] for k in keys)
    sizes = [shape[i] for i in order]
    even = sum(1 for k in keys if not k[0])
    if even:
        total = 1
        for i in order[:even]:
            total *= shape[i]
        sizes[:even] = [total // devices ** (even - 1)] + [devices] * (even - 1)
    return order, tuple(sizes)


def _split_key(dim: DimSharding) -> tuple:
    """How ``dim`` is split, as :func:`_canonical` orders dimensions: its axes' names and sizes, major first
    (kept per dimension sharding: the planner's shardings share a few hundred of them)."""
    key = _SPLIT_KEYS.get(dim)
    if key is None:
        if len(_SPLIT_KEYS) >= SPLIT_KEYS:
            _SPLIT_KEYS.clear()
        key = _SPLIT_KEYS[dim] = tuple((r.name, r.pre_size, r.size or 0) for r in dim.axes)
    return key


_SPLIT_KEYS: dict[DimSharding, tuple] = {}

#: How many dimension shardings' keys :func:`_split_key` keeps before it starts afresh.
SPLIT_KEYS = 4096


@memoize("canonical redistribution searches", maxsize=65536)
def _canonical_search(shape, itemsize, source, destination, cluster, by_time, exhaustive, within,
                      ties) -> tuple[tuple, bool]:
    steps, exact = _search_here(shape, itemsize, source, destination, cluster, by_time, False, exhaustive, within,
                                ties)
    return tuple(steps), exact


def _search_here(shape, itemsize, source: TensorSharding, destination: TensorSharding, cluster, by_time: bool,
                 primes: bool, exhaustive: bool, within, ties: bool) -> tuple[list[Step], bool]:
    """:func:`_search` in the dimension order given."""
    pc = Pieces.refine(destination.mesh, shape, [source, destination], primes, within)
    start, goal = pc.state_of(source), pc.state_of(destination)
    if start == goal:
        return [], True
    if exhaustive:
        return _dijkstra(pc, start, goal, itemsize, source, destination, cluster, by_time), True
    budget = search_budget(pc)
    describe = lambda: _unreachable(source, destination, shape)  # noqa: E731
    graph = _graph(pc, cluster, itemsize, by_time)
    if not primes:
        chain, exact = _whole_axes_chain(pc, graph, start, goal, itemsize, cluster, budget, describe, ties)
        return _chain_steps(pc, chain, goal), exact
    # a plan in hand before any search, (cost, pieces, chain): the cheaper of the direct plan and
    # gathering everything; every search below only looks for cheaper ones
    first = _first_chain(pc, graph, start, goal, itemsize, cluster, budget)
    known = (chain_cost(graph, first), pc, first)
    # first the same search over whole axes (fewer pieces, far fewer states): its plan is one of
    # the sub-axis search's, whose search then only looks for cheaper ones
    coarse = Pieces.refine(destination.mesh, shape, [source, destination], False, within)
    if len(coarse.refs) < len(pc.refs):
        rough = _graph(coarse, cluster, itemsize, by_time)
        chain, _ = budget.spend(0.4, lambda part: astar(
            rough, coarse.state_of(source), coarse.state_of(destination), _same_layout, describe, part,
            known[0], ties=ties))
        if chain is not None:
            known = (chain_cost(rough, chain), coarse, chain)
    chain, exact = astar(graph, start, goal, _same_layout, describe, budget, known[0], ties)
    if chain is not None:
        return _chain_steps(pc, chain, goal), exact
    # none cheaper found: the plan in hand, a cheapest one if the search proved it (with ties
    # "any"; with "exhaustive" the search returns the exhaustive search's chain when it can)
    _, over, chain = known
    return _chain_steps(over, chain, over.state_of(destination)), exact and not ties


def _whole_axes_chain(pc: Pieces, graph: Graph, start: State, goal: State, itemsize: int, cluster, budget: Budget,
                      describe, ties: bool) -> tuple[list, bool]:
    """The search over whole axes (the planner's thousands of small searches, nearly all exact within their
    budget): its chain and whether it is exact; the plan in hand is only made when the search runs out."""
    chain, exact = astar(graph, start, goal, _same_layout, describe, budget, None, ties)
    if chain is not None and exact:
        return chain, True
    first = _first_chain(pc, graph, start, goal, itemsize, cluster, budget)
    if chain is not None and chain_cost(graph, chain) <= chain_cost(graph, first):
        first = chain
    return first, False


def _canonical_seconds(shape, itemsize, source: TensorSharding, destination: TensorSharding, cluster,
                       within) -> float:
    """The seconds of :func:`_canonical_search`'s steps for the planner (time first, any cheapest chain), summed
    from the chain its search finds without making the steps."""
    pc = Pieces.refine(destination.mesh, shape, [source, destination], False, within)
    start, goal = pc.state_of(source), pc.state_of(destination)
    if start == goal:
        return 0
    describe = lambda: _unreachable(source, destination, shape)  # noqa: E731
    chain, _ = _whole_axes_chain(pc, _graph(pc, cluster, itemsize, True), start, goal, itemsize, cluster,
                                 search_budget(pc), describe, False)
    return sum(cost.time_s for _, _, cost, _ in chain)


def _first_chain(pc: Pieces, graph: Graph, start: State, goal: State, itemsize: int, cluster, budget: Budget) -> list:
    """The engine's first incumbent, ``[(before, move, cost, after)]``: the direct plan
    (:func:`~planner.redistribution.direct.direct_chain`, at most one expansion per piece out
    of place) or gathering everything then slicing, whichever is cheaper (the direct plan on a
    tie); the latter always exists."""
    chain, state = [], start
    for move in gather_then_slice(pc, start, goal, itemsize):
        chain.append((state, move, _move_cost(pc, move, cluster), move.after))
        state = move.after
    direct = direct_chain(graph, start, goal, budget)
    if direct is not None and chain_cost(graph, direct) <= chain_cost(graph, chain):
        return direct
    return chain


def _graph(pc: Pieces, cluster, itemsize: int, by_time: bool) -> Graph:
    return pc.memo(("graph", cluster, itemsize, by_time), Graph, pc, cluster, itemsize, by_time, _move_cost)


def _unreachable(source, destination, shape) -> str:
    return f"no sequence of collectives turns {source} into {destination} for shape {'x'.join(map(str, shape))}"


def _dijkstra(pc: Pieces, start: State, goal: State, itemsize, source, destination, cluster,
              by_time) -> list[Step]:
    """The exhaustive search the engine ran before its A* (kept to measure the A* against it)."""
    shape = pc.shape
    # a path's cost is (bytes, time, collectives); the objective orders them
    rank = (lambda c: (c[1], c[0], c[2])) if by_time else (lambda c: (c[0], c[2], c[1]))
    counter = itertools.count()
    priced = pc.memo(("priced", cluster), _priced_memo)  # looked up once: hashing a Cluster is slow
    best: dict[State, tuple] = {start: (0, 0.0, 0)}
    back: dict[State, tuple[State, Move, CollectiveCost]] = {}
    heap = [(rank(best[start]), next(counter), start)]
    while heap:
        key, _, state = heapq.heappop(heap)
        if key != rank(best[state]):  # a cheaper way here was found after this entry
            continue
        b, t, n = best[state]
        if state == goal or _same_layout(pc, state, goal):
            return _steps(pc, back, start, state, goal, cluster)
        for move, cost in priced.get_or_compute(("moves", state, goal, itemsize), _priced, pc, state, goal,
                                                itemsize, cluster, priced):
            new = (b + cost.bytes_per_device, t + cost.time_s, n + (move.kind != "Slice"))
            old = best.get(move.after)
            if old is None or rank(new) < rank(old):
                best[move.after] = new
                back[move.after] = (state, move, cost)
                heapq.heappush(heap, (rank(new), next(counter), move.after))
    raise ReshardError(_unreachable(source, destination, shape))


def _priced_memo() -> BoundedCache:
    """What the searches over one :class:`Pieces` on one cluster share: each move's cost, and
    the moves from a state towards a goal with their costs (bounded like the pieces' own memo)."""
    return BoundedCache("pieces memo: costs on one cluster", MEMO_SIZE, register=False)


def _priced(pc: Pieces, state: State, goal: State, itemsize: int, cluster: Cluster,
            memo: BoundedCache) -> list[tuple[Move, CollectiveCost]]:
    """The moves from ``state`` with their cost on ``cluster``: one lookup per state the search pops,
    not one per edge it relaxes (a move's cost is shared by every goal it is a move towards)."""
    return [(m, memo.get_or_compute(m, _move_cost, pc, m, cluster)) for m in moves(pc, state, goal, itemsize)]


def _same_layout(pc: Pieces, a: State, b: State) -> bool:
    """Whether every device holds the same block under ``a`` as under ``b`` (and the same pending
    sums): decided per dimension, since a device's block is its span along each."""
    if a.unreduced != b.unreduced:
        return False
    return all(pc.per_dimension(("same spans", k, ps, qs), _same_spans, pc, k, ps, qs)
               for k, (ps, qs) in enumerate(zip(a.dims, b.dims)))


def _same_spans(pc: Pieces, k: int, ps: tuple[int, ...], qs: tuple[int, ...]) -> bool:
    return ps == qs or pc.spans(k, ps)[:2] == pc.spans(k, qs)[:2]


def _steps(pc: Pieces, back, start: State, end: State, goal: State, cluster) -> list[Step]:
    chain = []
    state = end
    while state != start:
        prev, move, cost = back[state]
        chain.append((prev, move, cost, state))
        state = prev
    chain.reverse()
    return _chain_steps(pc, chain, goal)


def _chain_steps(pc: Pieces, chain, goal: State) -> list[Step]:
    """Steps of ``[(before, move, cost, after)]``; the last one ends in ``goal``'s sharding."""
    steps = []
    end = chain[-1][3] if chain else goal
    for prev, move, cost, _ in chain:
        after = pc.sharding_of(goal if move.after == end else move.after)
        axes = pc.axes_of(move.group) if move.kind == "AllReduce" else _ordered_axes(pc, move.group)
        steps.append(
            Step(move.kind, axes, move.dims, pc.sharding_of(prev), after, cost.bytes_per_device, cost.time_s, move.pairs)
        )
    return steps


def _ordered_axes(pc: Pieces, group) -> tuple:
    """The group's pieces as axis references in member order (adjacent pieces merged)."""
    return merge_adjacent([pc.refs[p] for p in group], pc.mesh)

