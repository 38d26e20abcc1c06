"""The engine's search over the layouts of :mod:`planner.redistribution.state`.

The graph is the exhaustive Dijkstra's (one collective per edge,
:mod:`planner.redistribution.moves`), and so is the order of path costs (bytes,
collectives, time; or time, bytes, collectives). :func:`astar` finds the plan that
Dijkstra finds in two passes guided by an admissible bound from each state to the goal
(:func:`~planner.redistribution.lower_bound.state_bound`: the elements some device
still misses, and the devices some device must still hear from, which costs calls
and latencies on the cluster's fastest link, see :meth:`Graph.reach`):

1. an A* finds the cost of a cheapest plan, expanding only states whose cost plus
   bound is below it;
2. Dijkstra, skipping the states whose cost plus bound exceeds that cost, picks among
   the cheapest plans the one the exhaustive search picks (its tie-breaking depends
   on the order states are reached, which the skipped states do not change).

CollectivePermutes are priced lazily: a permute's bytes are the bound between its two
states (each receiver gets the one box it misses), known without matching senders to
receivers, so it enters the queue with those bytes and the fastest link's time and is
only checked (:func:`~planner.redistribution.moves.permute_move`) and priced exactly
when it reaches the front; the ``n! - 1`` reorderings of a long dimension enter as one
:class:`Family`.

States are interned as small ints per :class:`~planner.redistribution.state.Pieces`;
per pieces, cluster, item size and objective a :class:`Graph` keeps each state's
priced moves, the states' bounds towards each goal, and the checked permutes, so that
the planner's thousands of searches over the same pieces share them and no relaxation
hashes a move, a state or the cluster.

A :class:`Budget` caps the states a redistribution's searches expand (:data:`BUDGET`), the
permutes they check (:data:`PERMUTE_CHECKS` per state) and the bounds they compute
(:data:`BOUNDS` per state);
a search that runs out goes on greedier (:data:`WEIGHT`, :data:`GREEDY`) and its plan
is then not known to be the exhaustive search's.
"""

from __future__ import annotations

import heapq
import itertools
import math
from typing import Callable, TypeVar

import numpy as np

from costmodels import RING, Cluster, CollectiveCost
from planner.collectives import STEP_KINDS
from planner.errors import ReshardError
from planner.redistribution.lower_bound import LOOP_DEVICES, state_bound
from planner.redistribution.moves import Move, eager_moves, permute_move, permute_targets
from planner.redistribution.state import Pieces, State

#: The step kinds priced on the link of their group of pieces (the others by the graph's ``cost_of``).
_GROUPED = frozenset(k.name for k in STEP_KINDS.values() if k.grouped)

T = TypeVar("T")

#: Entries (states, edge lists, bounds) a :class:`Graph` keeps before it starts afresh.
GRAPH_SIZE = 200_000


class Graph:
    """The search graph over one :class:`Pieces`, priced on one cluster for one item size and objective."""

    __slots__ = ("pc", "cluster", "itemsize", "by_time", "ids", "states", "edges", "goal_edges",
                 "bounds", "permutes", "same", "fast_step", "slow_bw", "cost_of", "entries", "call_s", "latency_s",
                 "_rounds", "_least_memo", "links")

    def __init__(self, pc: Pieces, cluster: Cluster, itemsize: int, by_time: bool,
                 cost_of: Callable[[Pieces, Move, Cluster], CollectiveCost]):
        self.pc, self.cluster, self.itemsize, self.by_time, self.cost_of = pc, cluster, itemsize, by_time, cost_of
        links = [cluster.intra_node, cluster.inter_node] + [link for _, link in cluster.axis_links]
        self.fast_step = min(link.overhead_s + link.latency_s for link in links)  # one collective's least time
        self.call_s = min(link.overhead_s for link in links)
        self.latency_s = min(link.latency_s for link in links)
        self._rounds: dict[int, float] = {}
        self._least_memo: dict[int, float] = {}
        self.slow_bw = max(link.bandwidth_bytes_per_s for link in links)  # 1 / the least time per byte
        self.clear()

    def clear(self) -> None:
        self.ids: dict[State, int] = {}
        self.states: list[State] = []
        self.edges: dict[int, list] = {}  # sid -> [(after sid, cost key, move, cost)] of goal-free moves
        self.goal_edges: dict[tuple[int, int], tuple] = {}  # (sid, goal sid) -> what expand returns
        self.bounds: dict[int, dict[int, tuple]] = {}  # goal sid -> {sid: heuristic key}
        self.permutes: dict[tuple[int, int], tuple | None] = {}  # (sid, target sid) -> (cost key, move, cost)
        self.same: dict[tuple[int, int], bool] = {}
        self.links: dict[tuple[int, ...], object] = {}
        self.entries = 0

    def sid(self, state: State) -> int:
        i = self.ids.get(state)
        if i is None:
            i = self.ids[state] = len(self.states)
            self.states.append(state)
        return i

    def key(self, b: int, t: float, n: int) -> tuple:
        """A cost in the order the objective compares: (bytes, collectives, time) or (time, bytes, collectives)."""
        return (t, b, n) if self.by_time else (b, n, t)

    def _priced(self, moves: list[Move]) -> list:
        out = []
        for m in moves:
            if m.kind not in _GROUPED:
                cost = self.cost_of(self.pc, m, self.cluster)
            else:  # the link of a group of pieces, looked up once
                group = tuple(sorted(m.group))
                link = self.links.get(group)
                if link is None:
                    link = self.links[group] = self.cluster.link_for(self.pc.mesh, self.pc.axes_of(group))
                cost = RING.cost(m.kind, m.p, m.unit_bytes, link)
            out.append((self.sid(m.after), self.key(cost.bytes_per_device, cost.time_s, m.kind != "Slice"), m, cost))
        self.entries += len(out)
        return out

    def expand(self, sid: int, gid: int) -> tuple[list, list, list, list]:
        """The moves from ``sid`` towards ``gid`` in the exhaustive search's order: the priced
        goal-free moves, the reorderings (permute targets with their optimistic keys, or a
        :class:`Family`), the priced goal-directed moves, and the permute straight to the goal."""
        key = (sid, gid)
        out = self.goal_edges.get(key)
        if out is None:
            state, goal = self.states[sid], self.states[gid]
            if sid not in self.edges:
                self.edges[sid] = self._priced(eager_moves(self.pc, state, None, self.itemsize))
            goal_edges = self._priced(eager_moves(self.pc, state, goal, self.itemsize))
            targets = []
            listed = permute_targets(state, goal, LISTED)
            straight = not state.unreduced and not goal.unreduced and goal != state  # listed last
            for target in listed:
                if isinstance(target, int):  # the many reorderings of a long dimension
                    if not family_fits(self.pc, len(state.dims[target])):
                        continue
                    family = Family(self, sid, target, gid)
                    if family.size:
                        targets.append((family, None))
                    continue
                t = self.sid(target)
                b = self._bound(sid, t) * self.itemsize
                targets.append((t, self.key(b, self.fast_step + b / self.slow_bw, 1) if b else None))
            if straight:
                last = targets.pop()
                goal_targets = [last] if last[1] is not None else []
            else:
                goal_targets = []
            targets = [t for t in targets if t[1] is not None or isinstance(t[0], Family)]
            out = self.goal_edges[key] = (self.edges[sid], targets, goal_edges, goal_targets)
            self.entries += len(targets) + len(goal_edges) + 1
        return out

    def _bound(self, sid: int, gid: int) -> int:
        return state_bound(self.pc, self.states[sid], self.states[gid])[0]

    def heuristic(self, gid: int) -> dict[int, tuple]:
        h = self.bounds.get(gid)
        if h is None:
            h = self.bounds[gid] = {}
        return h

    def bound_key(self, sid: int, gid: int, h: dict[int, tuple]) -> tuple:
        k = h.get(sid)
        if k is None:
            b, sources = state_bound(self.pc, self.states[sid], self.states[gid])
            b *= self.itemsize
            # a plan that moves b > 0 bytes runs at least one collective, which takes at least one
            # call and one latency, moves its bytes at most at the fastest bandwidth, and must
            # reach every source of some device (see reach)
            t = self.reach(max(sources, 1)) + b / self.slow_bw if b else 0.0
            k = h[sid] = self.key(b, t, 1 if b else 0)
            self.entries += 1
        return k

    def reach(self, sources: int) -> float:
        """The time of calls and latencies the bound charges a device that must hear from ``sources`` others.

        With the time objective, :meth:`rounds`. With the bytes objective costs compare as
        (bytes, collectives, time) and the bound's collectives are one: a plan that ties with the
        bound on bytes and collectives runs one collective (and free slices), which must reach all
        the ``sources`` at once (``s >= sources`` latencies, see :meth:`rounds`), and every other
        plan compares above the bound whatever its time; so the bound takes the least time of one
        such collective (:meth:`rounds`' cheaper split into several collectives never ties with it).
        """
        if self.by_time:
            return self.rounds(sources)
        return self.call_s + sources * self.latency_s

    def rounds(self, sources: int) -> float:
        """The least time of calls and latencies in which one device can hear from ``sources`` others.

        A collective of ``s`` latencies (AllGather, ReduceScatter, AllToAll over ``s + 1``
        devices, AllReduce over ``s / 2 + 1``, CollectivePermute ``s = 1``) takes at least one
        call and ``s`` latencies, and what a device holds after it derives from at most ``s + 1``
        devices' holdings before it; so hearing from ``k`` devices takes collectives whose
        ``s + 1`` multiply to at least ``k + 1``: the cheapest such split, on the cheapest link.
        """
        r = self._rounds.get(sources)
        if r is None:
            r = self._rounds[sources] = self._least(sources + 1)
        return r

    def _least(self, m: int) -> float:
        best = self._least_memo.get(m)
        if best is None:
            if m <= 1:
                return 0.0
            best = min(self.call_s + s * self.latency_s + self._least(-(-m // (s + 1))) for s in range(1, m))
            self._least_memo[m] = best
        return best

    def permute(self, sid: int, tid: int):
        key = (sid, tid)
        if key not in self.permutes:
            m = permute_move(self.pc, self.states[sid], self.states[tid], self.itemsize)
            if m is None:
                self.permutes[key] = None
            else:
                cost = self.cost_of(self.pc, m, self.cluster)
                self.permutes[key] = (self.key(cost.bytes_per_device, cost.time_s, 1), m, cost)
            self.entries += 1
        return self.permutes[key]

    def same_layout(self, sid: int, gid: int, same: Callable[[Pieces, State, State], bool]) -> bool:
        if sid == gid:
            return True
        key = (sid, gid)
        r = self.same.get(key)
        if r is None:
            r = self.same[key] = same(self.pc, self.states[sid], self.states[gid])
        return r


#: Reorderings of a dimension of at most this many pieces are queued one by one; those of a
#: longer one (``n! - 1`` of them) as a :class:`Family`.
LISTED = 3


#: A dimension's reorderings are searched (as a :class:`Family`) only when their number times
#: the rows (devices, or representatives) is at most this: pricing them takes arrays of that
#: many cells, and there are ``n! - 1`` (one of 9 pieces on 4,096 devices would need 100 GB).
#: 720 orders on 64 devices fit, 120 on 512; a longer dimension is still permuted straight to the
#: goal, and reordered by other moves.
FAMILY_CELLS = 1 << 16


def family_fits(pc: Pieces, pieces: int) -> bool:
    """Whether the reorderings of a dimension of ``pieces`` pieces are searched (:data:`FAMILY_CELLS`)."""
    return math.factorial(pieces) * pc.n <= FAMILY_CELLS


class Family:
    """The CollectivePermutes from one state to every reordering of one of its dimensions.

    Their bytes and the targets' bounds towards the goal are computed at once on the device
    index map (a reordering changes one dimension's spans only), and the family enters the
    queue once, at its cheapest member; popping a member queues the next, and only popped
    members become states.
    """

    __slots__ = ("graph", "sid", "dim", "orders", "rank", "moves", "bounds", "size")

    def __init__(self, graph: Graph, sid: int, dim: int, gid: int):
        pc, state, goal = graph.pc, graph.states[sid], graph.states[gid]
        self.graph, self.sid, self.dim = graph, sid, dim
        ps = state.dims[dim]
        orders, lo, hi = pc.memo(("reorders", dim, tuple(sorted(ps))), _reorders, pc, dim, tuple(sorted(ps)))

        def spans(k, pieces):
            a, b, _ = pc.spans(k, pieces)
            return np.array(a, dtype=np.int64)[:, None], np.array(b, dtype=np.int64)[:, None]

        def overlap(a0, a1, b0, b1):
            return np.maximum(np.minimum(a1, b1) - np.maximum(a0, b0), 0)

        rest = np.ones((pc.n, 1), dtype=np.int64)  # other dimensions: the state's block
        shared = np.ones((pc.n, 1), dtype=np.int64)  # other dimensions: its overlap with the goal's
        goal_vol = np.ones((pc.n, 1), dtype=np.int64)
        most = 1
        for k, pieces in enumerate(state.dims):
            s0, s1 = spans(k, pieces)
            g0, g1 = spans(k, goal.dims[k])
            goal_vol = goal_vol * (g1 - g0)
            most *= pc.spans(k, pieces)[2]
            if k != dim:
                rest = rest * (s1 - s0)
                shared = shared * overlap(s0, s1, g0, g1)
        s0, s1 = spans(dim, ps)
        g0, g1 = spans(dim, goal.dims[dim])
        moved = ((hi - lo - overlap(lo, hi, s0, s1)) * rest).max(axis=0)  # the permute's elements
        needed = (goal_vol - overlap(lo, hi, g0, g1) * shared).max(axis=0)  # the target's bound
        keep = np.flatnonzero(moved > 0)
        item = graph.itemsize
        self.orders = [orders[j] for j in keep.tolist()]
        moved, needed = moved[keep] * item, needed[keep]
        sources = -(-needed // most) if most else np.zeros_like(needed)
        hb = needed * item
        reach = np.array([graph.reach(max(int(k), 1)) for k in range(int(sources.max(initial=0)) + 1)])
        t_move = graph.fast_step + moved / graph.slow_bw
        t_bound = np.where(hb > 0, reach[sources] + hb / graph.slow_bw, 0.0)
        n_bound = (hb > 0).astype(np.int64)
        self.moves = (moved.tolist(), t_move.tolist())
        self.bounds = (hb.tolist(), t_bound.tolist(), n_bound.tolist())
        b, n, t = moved + hb, 1 + n_bound, t_move + t_bound
        # members cheapest first (lexsort's last key is its primary one)
        self.rank = np.lexsort((n, b, t) if graph.by_time else (t, n, b)).tolist()
        self.size = len(self.rank)

    def position(self, j: int) -> tuple[int, ...]:
        """Where the ``j``-th cheapest member comes in ``itertools.permutations`` of the dimension
        (the exhaustive search's order)."""
        ps = self.graph.states[self.sid].dims[self.dim]
        return tuple(ps.index(p) for p in self.orders[self.rank[j]])

    def move_key(self, r: int) -> tuple:
        b, t = self.moves
        return self.graph.key(b[r], t[r], 1)

    def bound_key(self, r: int) -> tuple:
        b, t, n = self.bounds
        return self.graph.key(b[r], t[r], n[r])

    def entry(self, j: int, g: tuple) -> tuple:
        """The queue key of the ``j``-th cheapest member after a path of cost ``g``."""
        r = self.rank[j]
        return _add(_add(g, self.move_key(r)), self.bound_key(r))

    def member(self, j: int, h: dict[int, tuple]) -> int:
        """The ``j``-th cheapest member's target state (its bound recorded in ``h``)."""
        r = self.rank[j]
        state = self.graph.states[self.sid]
        target = State(tuple(self.orders[r] if k == self.dim else d for k, d in enumerate(state.dims)), state.unreduced)
        t = self.graph.sid(target)
        h.setdefault(t, self.bound_key(r))
        return t


def _reorders(pc: Pieces, dim: int, ps: tuple[int, ...]) -> tuple[list, np.ndarray, np.ndarray]:
    """Every order of the pieces ``ps`` of dimension ``dim``, and each device's
    ``(devices, orders)`` clipped start and stop along it under each (the current order
    moves nothing: its family leaves it out)."""
    orders = list(itertools.permutations(ps))
    index = np.array(orders, dtype=np.int64)  # (orders, n) pieces
    weights = np.ones(index.shape, dtype=np.int64)
    for j in range(index.shape[1] - 2, -1, -1):
        weights[:, j] = weights[:, j + 1] * pc.sizes[index[:, j + 1]]
    idx = (pc.digits()[:, index] * weights[None]).sum(axis=-1)
    extent = pc.shape[dim]
    local = -(-extent // pc.size(ps))
    return orders, np.minimum(idx * local, extent), np.minimum((idx + 1) * local, extent)


def _add(a: tuple, b: tuple) -> tuple:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


#: What a pass returns when it expanded as many states as it was allowed.
OVER_BUDGET = "over budget"


class Budget:
    """The work searches may still do (shared by the passes of one redistribution): states to
    expand, CollectivePermutes to check (:data:`PERMUTE_CHECKS` per state), and state bounds to
    compute (:data:`BOUNDS` per state)."""

    __slots__ = ("left", "checks", "bounds")

    def __init__(self, left: float | None, checks: float | None = None, bounds: float | None = None):
        self.left = left
        if checks is None and left is not None:
            checks = left * PERMUTE_CHECKS
        if bounds is None and left is not None:
            bounds = left * BOUNDS
        self.checks = checks
        self.bounds = bounds

    def spend(self, fraction: float, search: Callable[["Budget"], T]) -> T:
        """``search(part)`` with that fraction of what is left, spent from this budget."""
        if self.left is None:
            return search(self)
        part = Budget(self.left * fraction, self.checks * fraction, self.bounds * fraction)
        left, checks, bounds = part.left, part.checks, part.bounds
        try:
            return search(part)
        finally:
            self.left -= left - part.left
            self.checks -= checks - part.checks
            self.bounds -= bounds - part.bounds

    def expand(self) -> bool:
        """Spend one expansion if any is left (else False; always True without a limit)."""
        return self._take("left")

    def check(self) -> bool:
        """Spend one permute check if any is left (else False; always True without a limit)."""
        return self._take("checks")

    def bound(self) -> bool:
        """Spend one state bound if any is left (else False; always True without a limit)."""
        return self._take("bounds")

    def _take(self, what: str) -> bool:
        left = getattr(self, what)
        if left is None:
            return True
        if left < 1:
            return False
        setattr(self, what, left - 1)
        return True


#: CollectivePermutes a search may check per state it may expand. Checking one (matching its
#: senders to receivers) costs a fraction of an expansion, and a search checks about two per
#: expansion; but a long dimension's family of reorderings has ``n! - 1`` members, which without
#: this cap a search could check for seconds within its state budget.
PERMUTE_CHECKS = 4

#: States whose bound a search may compute per state it may expand. A state enters the queue with
#: what its predecessor's bound leaves and its own bound is computed when it reaches the front;
#: where an expansion has many moves (pending sums over several pieces) most of them do, and the
#: bounds would cost more than the expansions. The cap leaves the plans of
#: ``benchmarks/reshard.py``'s random pairs as they are without it.
BOUNDS = 16


#: What one redistribution's searches may expand, counted in states times devices (an
#: expansion's work grows with the devices, or with their representatives when the search runs
#: within some of the mesh's axes, see :class:`~planner.redistribution.state.Pieces`; at least
#: :data:`ARRAY_ROWS` of them beyond 16): 640 states on 8 devices, 128 on 32, 80 on 64, and at
#: least those of :data:`FLOOR`. A sub-axis search starts from a plan in hand (the engine's
#: direct plan) and only looks for cheaper ones. ``python benchmarks/reshard.py --only timing``
#: prints the plans' bytes over their lower bounds and the slowest pairs' times this budget gives.
#: None: no limit (the searches are then exact whatever it takes).
BUDGET: int | None = 5120

#: The fewest states a redistribution's searches may expand, counted in states times pieces
#: (an expansion's moves grow with the pieces): ``FLOOR // pieces`` states, at most 16 and at
#: least 8: a mesh of many prime pieces (8x8x8x8) gets 8, the planner's whole-axis searches on
#: three axes keep 16 (``python benchmarks/plan.py --meshes`` prints the plans they give).
FLOOR = 96


def search_budget(pc: Pieces) -> Budget:
    """What the searches of one redistribution over ``pc`` may do (see :data:`BUDGET`): states to
    expand, permutes to check, :data:`PERMUTE_CHECKS` per state up to :data:`CHECKS_ROWS` rows,
    fewer beyond in proportion, and :data:`BOUNDS` state bounds per state."""
    if BUDGET is None:
        return Budget(None)
    states = max(min(16, max(8, FLOOR // len(pc.refs))), BUDGET // _expansion_rows(pc.n))
    return Budget(states, states * PERMUTE_CHECKS * min(1.0, CHECKS_ROWS / pc.n))


def _expansion_rows(n: int) -> int:
    """An expansion's work in rows of the budget: its rows ``n``, but at least :data:`ARRAY_ROWS`
    once the bound and the permute checks work on numpy arrays (beyond
    :data:`~planner.redistribution.lower_bound.LOOP_DEVICES` rows)."""
    return n if n <= LOOP_DEVICES else max(n, ARRAY_ROWS)


#: The least work an expansion on numpy arrays is counted as, in rows: their calls cost a fixed
#: time however few the rows, so a mesh just past :data:`~planner.redistribution.lower_bound.LOOP_DEVICES`
#: (32 devices) is budgeted as if it had this many. Meshes of 16 devices or fewer, or 40 or more,
#: keep their budgets (``benchmarks/reshard.py --only timing``).
ARRAY_ROWS = 40


#: Beyond this many rows a search may check fewer permutes per state, in proportion: a check's
#: arrays and matching grow with the devices faster than an expansion's work.
CHECKS_ROWS = 256


def astar(graph: Graph, start: State, goal: State, same: Callable[[Pieces, State, State], bool],
          describe: Callable[[], str], budget: Budget | None = None,
          known: tuple | None = None, ties: bool = True) -> tuple[list[tuple[State, Move, CollectiveCost, State]] | None, bool]:
    """The chain of moves the exhaustive Dijkstra finds from ``start`` to a state with ``goal``'s
    layout, ``[(before, move, cost, after)]``, found in two passes:

    1. an A* towards the goal gives the cost of a chain (the cheapest, unless a bound computed
       lazily misled it, see :func:`_cheap_chain`);
    2. the Dijkstra, skipping every state whose cost plus bound exceeds that cost: such states
       lie on no cheapest chain, and the states that do are pushed and popped in the same
       relative order as in the full search, so it finds the chain the full search finds.

    With ``ties`` False the second pass is skipped: the first pass's chain is a cheapest one,
    not necessarily the one the exhaustive search picks among equally cheap chains (about a
    third less work). Returns the chain and whether it is that one (with ``ties`` False: whether
    it is known to be a cheapest one). ``known`` is the cost of a plan the caller
    has: chains dearer are not searched, and the chain is None when none cheaper was found
    (with True if the search proved none exists). The passes expand at most ``budget.left``
    states, check at most ``budget.checks`` permutes and the first pass computes at most
    ``budget.bounds`` bounds of states it pops (and spend them): the first two thirds of any of
    them for the first pass, which then goes
    on greedier (and the chain it finds is not known to be the cheapest); ``(None, False)``
    when the budget runs out before any chain is found. When the second pass runs out (or
    would expand far more states than the first), the first pass's chain is returned.
    """
    if graph.entries > GRAPH_SIZE:
        graph.clear()
    s0, gid = graph.sid(start), graph.sid(goal)
    h = graph.heuristic(gid)
    budget = budget or Budget(None)
    found = _cheap_chain(graph, s0, gid, h, same, budget, known)
    if found is OVER_BUDGET:
        return None, False
    if found is None:
        if known is None:
            raise ReshardError(describe())
        found = (known, None, None, True, budget.left or 0)  # the caller's plan may be the cheapest
    cost, end, back, cheapest, expanded = found
    fallback = None if end is None else _chain(graph, back, s0, end)
    if not cheapest:
        return fallback, False
    if not ties:  # a cheapest chain: the first pass's, or none cheaper than the caller's plan
        return fallback, True
    # the second pass expands about as many states as the first: give up when it is far beyond
    chain = _first_cheapest(graph, s0, gid, h, same, cost, budget, 2 * expanded + 16)
    if chain is OVER_BUDGET:  # as cheap, maybe another of the cheapest chains than the exhaustive search's
        return fallback, False
    if chain is None and end is not None:  # only if a bound overestimated a cost: keep the first pass's
        return fallback, False  # pragma: no cover
    return chain, True


def chain_cost(graph: Graph, chain: list) -> tuple:
    """A chain's cost in the order its search compares costs."""
    total = (0, 0, 0)
    for _, move, cost, _ in chain:
        total = _add(total, graph.key(cost.bytes_per_device, cost.time_s, move.kind != "Slice"))
    return total


def _less(a: tuple, b: tuple) -> tuple:
    """``a - b`` per component, at least 0: what is left of a bound after a move of cost ``b``."""
    return (a[0] - b[0] if a[0] > b[0] else 0, a[1] - b[1] if a[1] > b[1] else 0, a[2] - b[2] if a[2] > b[2] else 0)


#: How much a search that ran out of its budget trusts the bounds when it goes on: the bound
#: weighs this much more than the cost so far (a weighted A*, greedier, so quicker to the goal).
WEIGHT = 3

#: The weight of the last part of the budget: the search dives towards the goal.
GREEDY = 1000


def _cheap_chain(graph: Graph, s0: int, gid: int, h: dict, same, budget: Budget,
                 known: tuple | None = None) -> tuple | None:
    """A chain from ``s0`` to the goal's layout (A*): its cost, last state, back pointers, and
    whether it is known to be a cheapest one; None if there is none (none cheaper than ``known``).

    A state enters the queue with what is left of its predecessor's bound after the move
    (its own bound is computed when it reaches the front, and it is queued again if that is
    larger): most states never reach the front. The bounds are admissible; should one not be
    consistent, the chain found may not be the cheapest, which only makes the second pass
    search more. After two thirds of the budget the search goes on from where it is with bounds
    weighted by :data:`WEIGHT` (no longer a cheapest chain, but soon one), after five sixths by
    :data:`GREEDY`, until it is spent, then returns :data:`OVER_BUDGET`. Also returns the number
    of states it expanded.
    """
    zero = (0, 0, 0)
    best: dict[int, tuple] = {s0: zero}
    back: dict[int, tuple] = {}
    counter = 0
    bound = graph.bound_key(s0, gid, h)
    # (estimate, bound, order, state, cost, via, bound exact); on equal estimates the nearer
    # to the goal first, so that a cheap chain is completed before the states that tie with it
    heap = [(bound, bound, 0, s0, zero, None, True)]
    push, pop = heapq.heappush, heapq.heappop
    expanded = 0
    est = _add  # the estimate of a chain through a state: its cost plus its bound
    weighted = 0  # how many times the bounds were weighted up
    # the share of the budget left when the bounds are weighted up (after two thirds of any of
    # its expansions, checks or bounds, then five sixths)
    stages = [] if budget.left is None else [1 / 3, 1 / 6]
    given = None if budget.left is None else (max(budget.left, 1e-9), max(budget.checks, 1e-9), max(budget.bounds, 1e-9))
    if known is not None:
        best[gid] = known  # a chain as dear as the caller's is not wanted
    while heap:
        estimate, _, _, sid, g, via, exact = pop(heap)
        if known is not None and not weighted and estimate > known:
            return None  # nothing left is cheaper than the caller's plan
        if via is not None:  # a CollectivePermute priced lazily: check and price it now
            if type(via) is tuple:  # the next member of a family of reorderings
                family, j = via
                prev = sid
                if best.get(prev) != g:
                    continue
                if j + 1 < family.size:
                    r = family.rank[j + 1]
                    counter += 1
                    push(heap, (est(_add(g, family.move_key(r)), family.bound_key(r)), family.bound_key(r), counter,
                                prev, g, (family, j + 1), True))
                sid = family.member(j, h)
            else:
                prev = via
                if best.get(prev) != g:
                    continue
            if not budget.check():
                return OVER_BUDGET
            priced = graph.permute(prev, sid)
            if priced is None:
                continue
            new = _add(g, priced[0])
            old = best.get(sid)
            if old is None or new < old:
                best[sid] = new
                back[sid] = (prev, priced[1], priced[2])
                counter += 1
                bound = graph.bound_key(sid, gid, h)
                push(heap, (est(new, bound), bound, counter, sid, new, None, True))
            continue
        if best[sid] != g:  # a cheaper way here was found after this entry
            continue
        if not exact:
            if sid not in h and not budget.bound():
                return OVER_BUDGET
            bound = graph.bound_key(sid, gid, h)
            f = est(g, bound)
            if f > estimate:
                counter += 1
                push(heap, (f, bound, counter, sid, g, None, True))
                continue
        if graph.same_layout(sid, gid, same):
            return g, sid, back, not weighted, expanded
        if not budget.expand():
            return OVER_BUDGET
        expanded += 1
        if weighted < len(stages) and min(budget.left / given[0], budget.checks / given[1], budget.bounds / given[2]) < stages[weighted]:
            # on from here with heavier bounds: first WEIGHT, then greedy (the bound alone, nearly)
            weight, more = (WEIGHT, WEIGHT - 1) if not weighted else (GREEDY, GREEDY - WEIGHT)
            weighted += 1
            est = _weighted if weight == WEIGHT else _greedy
            # e[0] = cost + e[1] * weight; entries a cheaper way has made stale are dropped (popped,
            # they would be skipped)
            heap = [(_add(e[0], _scale(e[1], more)),) + e[1:] for e in heap
                    if best.get(e[3] if e[5] is None or type(e[5]) is tuple else e[5]) == e[4]]
            heapq.heapify(heap)
            counter += 1
            push(heap, (est(g, h[sid]), h[sid], counter, sid, g, None, True))  # this state, again
            continue
        bound = h[sid]
        base, reorders, towards, straight = graph.expand(sid, gid)
        incumbent = best.get(gid)  # the cheapest way to the goal found so far: nothing dearer can win
        for edges in (base, towards):
            for after, cost_key, move, cost in edges:
                new = _add(g, cost_key)
                old = best.get(after)
                if (old is None or new < old) and (incumbent is None or new <= incumbent):
                    best[after] = new
                    back[after] = (sid, move, cost)
                    counter += 1
                    left = h.get(after)
                    if left is None:
                        left = _less(bound, cost_key)
                        push(heap, (est(new, left), left, counter, after, new, None, False))
                    else:
                        push(heap, (est(new, left), left, counter, after, new, None, True))
        for targets in (reorders, straight):
            for target, lower in targets:
                if lower is None:  # a family: queued at its cheapest member
                    r = target.rank[0]
                    counter += 1
                    push(heap, (est(_add(g, target.move_key(r)), target.bound_key(r)), target.bound_key(r), counter,
                                sid, g, (target, 0), True))
                    continue
                optimistic = _add(g, lower)
                old = best.get(target)
                if (old is None or optimistic < old) and (incumbent is None or optimistic <= incumbent):
                    counter += 1
                    left = h.get(target) or _less(bound, lower)
                    push(heap, (est(optimistic, left), left, counter, target, g, sid, True))
    return None


def _scale(a: tuple, w: float) -> tuple:
    return (a[0] * w, a[1] * w, a[2] * w)


def _weighted(g: tuple, bound: tuple) -> tuple:
    return (g[0] + WEIGHT * bound[0], g[1] + WEIGHT * bound[1], g[2] + WEIGHT * bound[2])


def _greedy(g: tuple, bound: tuple) -> tuple:
    return (g[0] + GREEDY * bound[0], g[1] + GREEDY * bound[1], g[2] + GREEDY * bound[2])


def _first_cheapest(graph: Graph, s0: int, gid: int, h: dict, same, cheapest: tuple,
                    budget: Budget | None = None, most: int | None = None) -> list | None:
    """The exhaustive Dijkstra, skipping every state whose cost plus bound exceeds ``cheapest``
    (checked when it reaches the front) and every move that cannot be on a chain that cheap."""
    zero = (0, 0, 0)
    best: dict[int, tuple] = {s0: zero}
    back: dict[int, tuple] = {}
    counter = 0
    heap = [(zero, 0, s0)]
    push, pop = heapq.heappush, heapq.heappop
    # Times are sums of floats: a bound and a cost summed in another order may differ in the last
    # bits, so a key is only beyond ``cheapest`` if its time is beyond it by more than that (in
    # the time order, times within it are kept whatever their bytes).
    slack = abs(cheapest[0 if graph.by_time else 2]) * 1e-9 + 1e-15
    if graph.by_time:
        limit = cheapest[0] + slack

        def beyond(key):
            return key[0] > limit
    else:
        first, limit = cheapest[:2], cheapest[2] + slack

        def beyond(key):
            return key[:2] > first or (key[:2] == first and key[2] > limit)

    def relax(after, new, sid, move, cost):
        nonlocal counter
        old = best.get(after)
        if (old is None or new < old) and not beyond(new):
            best[after] = new
            back[after] = (sid, move, cost)
            counter += 1
            push(heap, (new, counter, after))

    budget = budget or Budget(None)

    def permutes(sid, g, targets) -> bool:
        """Check and relax the permutes to ``targets``; False once the budget is spent."""
        for target, lower in targets:
            if lower is None:  # a family: its members that may lie on a cheapest chain, in their order
                members = [j for j in range(target.size) if not beyond(target.entry(j, g))]
                for j in sorted(members, key=target.position):
                    if not permute(sid, g, target.member(j, h)):
                        return False
            elif not beyond(_add(g, lower)) and not permute(sid, g, target):
                return False
        return True

    def permute(sid, g, target) -> bool:
        if not budget.check():
            return False
        priced = graph.permute(sid, target)
        if priced is not None:
            relax(target, _add(g, priced[0]), sid, priced[1], priced[2])
        return True

    expanded = 0
    while heap:
        g, _, sid = pop(heap)
        if best[sid] != g or beyond(_add(g, graph.bound_key(sid, gid, h))):
            continue
        if graph.same_layout(sid, gid, same):
            return _chain(graph, back, s0, sid)
        expanded += 1
        if most is not None and expanded > most or not budget.expand():
            return OVER_BUDGET
        base, reorders, towards, straight = graph.expand(sid, gid)
        for after, cost_key, move, cost in base:
            relax(after, _add(g, cost_key), sid, move, cost)
        if not permutes(sid, g, reorders):
            return OVER_BUDGET
        for after, cost_key, move, cost in towards:
            relax(after, _add(g, cost_key), sid, move, cost)
        if not permutes(sid, g, straight):
            return OVER_BUDGET
    return None


def _chain(graph: Graph, back: dict, s0: int, end: int) -> list:
    chain = []
    sid = end
    while sid != s0:
        prev, move, cost = back[sid]
        chain.append((graph.states[prev], move, cost, graph.states[sid]))
        sid = prev
    chain.reverse()
    return chain
