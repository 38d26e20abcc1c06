"""Microbatch schedules of a pipeline: GPipe, 1F1B and interleaved 1F1B.

A pipeline of ``p`` devices (device groups) runs ``S = p * v`` stages, ``v`` virtual
stages per device: stage ``k`` lives on device ``k % p`` (Megatron's interleaved
placement; with ``v = 1`` stage ``k`` is device ``k``). Each of ``m`` microbatches
runs forward through stages ``0 .. S-1`` and backward from ``S-1`` down to ``0``.

A schedule is, per device, the order in which it runs its :class:`Action`\\ s
(:func:`device_orders`):

* ``gpipe``: every forward, then every backward (GPipe: all ``m`` microbatches'
  activations are held at once);
* ``1f1b``: ``p - d - 1`` forwards to warm up device ``d``, then one forward and one
  backward in turn, then the remaining backwards (PipeDream-Flush: at most ``p - d``
  microbatches in flight on device ``d``);
* ``interleaved``: 1F1B over the device's ``v`` virtual stages, taking microbatches
  ``p`` at a time through one virtual stage after another (Megatron's interleaved
  schedule; needs ``m`` a multiple of ``p``): ``(p - d - 1) * 2 + (v - 1) * p``
  forwards of warm-up, which cuts the bubble by ``v``.

:func:`timeline` runs the orders: each device does one action at a time, in its
order; a forward of stage ``k > 0`` waits for the same microbatch's forward of stage
``k - 1`` and the send of its boundary activation, a backward of stage ``k < S - 1``
for the backward of stage ``k + 1`` and the send of the cotangent, and the last
stage's backward for its own forward. Sends are point-to-point transfers that run
beside compute (they delay the receiver, they do not occupy the sender). The
timeline's length is the pipeline's step time; its bubble is the time devices stand
idle. :func:`peak_in_flight` and :func:`peak_bytes` read the orders alone: which
microbatches' activations a device holds at the worst moment.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Sequence

from planner.errors import PlanningError

__all__ = ["SCHEDULES", "Action", "Timeline", "device_orders", "peak_bytes", "peak_in_flight", "timeline"]

SCHEDULES = ("gpipe", "1f1b", "interleaved")
"""The schedules, by the names the model's ``pipeline: schedule:`` and the JSON use."""


@dataclass(frozen=True, order=True)
class Action:
    """One unit of work: the forward (``"F"``) or backward (``"B"``) of ``microbatch`` through ``stage``."""

    kind: str
    microbatch: int
    stage: int

    def __str__(self) -> str:
        return f"{self.kind}{self.microbatch}@{self.stage}"


@dataclass(frozen=True)
class Timeline:
    """When each device runs each action of a schedule.

    ``runs[d]`` is device ``d``'s ``(action, start_s, end_s)`` in its order;
    ``step_time_s`` the time the last action ends; ``busy_s[d]`` device ``d``'s
    compute time; ``bubble_fraction`` the share of ``devices x step_time_s`` that
    devices stand idle.
    """

    runs: tuple[tuple[tuple[Action, float, float], ...], ...]
    step_time_s: float
    busy_s: tuple[float, ...]

    @property
    def bubble_fraction(self) -> float:
        total = self.step_time_s * len(self.busy_s)
        return 0.0 if total <= 0 else max(0.0, 1.0 - sum(self.busy_s) / total)


def _check(schedule: str, p: int, m: int, v: int) -> None:
    if schedule not in SCHEDULES:
        raise PlanningError(f"unknown pipeline schedule {schedule!r}; use one of {', '.join(SCHEDULES)}")
    if p < 1 or m < 1 or v < 1:
        raise PlanningError(f"a pipeline needs at least one device, microbatch and virtual stage; got {p} devices, "
                            f"{m} microbatches and {v} virtual stages")
    if schedule != "interleaved" and v != 1:
        raise PlanningError(f"{v} virtual stages per device need the interleaved schedule, not {schedule}")
    if schedule == "interleaved" and m % p:
        raise PlanningError(f"the interleaved schedule takes microbatches {p} at a time (one per pipeline device): "
                            f"{m} microbatches is not a multiple of {p}; use a multiple of {p}, or the 1f1b schedule")


def device_orders(schedule: str, p: int, m: int, v: int = 1) -> tuple[tuple[Action, ...], ...]:
    """Per device ``0 .. p-1``, the actions it runs, in order (see the module docstring)."""
    _check(schedule, p, m, v)
    if schedule == "gpipe":
        return tuple(tuple([Action("F", j, d) for j in range(m)] + [Action("B", j, d) for j in range(m)])
                     for d in range(p))
    if schedule == "1f1b":
        return tuple(_one_f_one_b([Action("F", j, d) for j in range(m)], [Action("B", j, d) for j in range(m)],
                                  min(p - d - 1, m)) for d in range(p))
    orders = []
    for d in range(p):
        # the k-th forward of device d: microbatches p at a time through virtual stage 0, then 1, ...
        forwards, backwards = [], []
        for k in range(m * v):
            group = k // (p * v)
            local, j = divmod(k % (p * v), p)
            mb = group * p + j
            forwards.append(Action("F", mb, local * p + d))
            backwards.append(Action("B", mb, (v - 1 - local) * p + d))
        orders.append(_one_f_one_b(forwards, backwards, min((p - d - 1) * 2 + (v - 1) * p, m * v)))
    return tuple(orders)


def _one_f_one_b(forwards: list[Action], backwards: list[Action], warmup: int) -> tuple[Action, ...]:
    """``warmup`` forwards, then one forward and one backward in turn, then the backwards left."""
    out = list(forwards[:warmup])
    f, b = warmup, 0
    while f < len(forwards):
        out.append(forwards[f])
        out.append(backwards[b])
        f, b = f + 1, b + 1
    out.extend(backwards[b:])
    return tuple(out)


def timeline(orders: Sequence[Sequence[Action]], forward_s: Sequence[float], backward_s: Sequence[float],
             send_s: Sequence[float] | float = 0.0) -> Timeline:
    """Run ``orders`` (from :func:`device_orders`): ``forward_s[k]`` and ``backward_s[k]`` are stage ``k``'s time
    for one microbatch, ``send_s[k]`` the time to move stage ``k``'s boundary activation to stage ``k + 1`` (and
    its cotangent back); one number for every boundary. Linear in the number of actions."""
    p = len(orders)
    stages = len(forward_s)
    if len(backward_s) != stages:
        raise PlanningError(f"{stages} forward times but {len(backward_s)} backward times")
    sends = [float(send_s)] * max(stages - 1, 0) if isinstance(send_s, (int, float)) else [float(s) for s in send_s]
    if len(sends) != max(stages - 1, 0):
        raise PlanningError(f"{stages} stages have {stages - 1} boundaries, but {len(sends)} send times were given")
    done: dict[Action, float] = {}
    free = [0.0] * p
    runs: list[list[tuple[Action, float, float]]] = [[] for _ in range(p)]
    position = [0] * p
    total = sum(len(o) for o in orders)
    ready = deque(range(p))  # devices whose next action may have become runnable
    finished = 0
    while ready:
        d = ready.popleft()
        order = orders[d]
        while position[d] < len(order):
            a = order[position[d]]
            dep = _dependency(a, stages)
            if dep is not None and dep not in done:
                break
            at = free[d]
            if dep is not None:
                arrive = done[dep] + (0.0 if dep.stage == a.stage else sends[min(dep.stage, a.stage)])
                at = max(at, arrive)
            end = at + (forward_s[a.stage] if a.kind == "F" else backward_s[a.stage])
            done[a] = end
            free[d] = end
            runs[d].append((a, at, end))
            position[d] += 1
            finished += 1
            # the one action that may wait for this one runs on the device of the next (forward) or
            # previous (backward) stage
            nxt = a.stage + 1 if a.kind == "F" and a.stage + 1 < stages else a.stage - 1 if a.kind == "B" else None
            if nxt is not None and nxt >= 0 and nxt % p != d:
                ready.append(nxt % p)
    if finished != total:
        stuck = next(orders[d][position[d]] for d in range(p) if position[d] < len(orders[d]))
        raise PlanningError(f"the schedule deadlocks: {stuck} waits for an action no device runs first")
    busy = tuple(sum(end - start for _, start, end in r) for r in runs)
    return Timeline(tuple(tuple(r) for r in runs), max(free, default=0.0), busy)


def _dependency(a: Action, stages: int) -> Action | None:
    if a.kind == "F":
        return None if a.stage == 0 else Action("F", a.microbatch, a.stage - 1)
    if a.stage == stages - 1:
        return Action("F", a.microbatch, a.stage)
    return Action("B", a.microbatch, a.stage + 1)


def peak_in_flight(order: Sequence[Action]) -> int:
    """The most microbatches (counted per virtual stage) whose forward a device has run and backward not yet."""
    held = peak = 0
    for a in order:
        held += 1 if a.kind == "F" else -1
        peak = max(peak, held)
    return peak


def peak_bytes(order: Sequence[Action], stash: Sequence[int], forward_work: Sequence[int],
               backward_work: Sequence[int]) -> int:
    """The most bytes a device's activations take while it runs ``order``: before each action it holds the
    ``stash[k]`` of every microbatch in flight through its stage ``k``; during a forward of stage ``k`` it needs
    ``forward_work[k]`` more (the stash it is making and its temporaries), during a backward ``backward_work[k]``
    more (what the backward makes beside the stash it reads); a backward then frees its stash."""
    held = peak = 0
    for a in order:
        work = forward_work[a.stage] if a.kind == "F" else backward_work[a.stage]
        peak = max(peak, held + work)
        held += stash[a.stage] if a.kind == "F" else -stash[a.stage]
    return peak


@dataclass(frozen=True)
class Compiled:
    """A schedule's actions as integers, in one order that respects every device's order and every dependency
    (:func:`compiled`): what :func:`ends` runs many times for one schedule and many stage times."""

    devices: int
    stages: int
    kind: tuple[int, ...]  # per action in ``order``: 0 forward, 1 backward
    stage: tuple[int, ...]
    device: tuple[int, ...]
    previous: tuple[int, ...]  # the action before it on its device (-1: none), as a position in ``order``
    dependency: tuple[int, ...]  # the action it waits for (-1: none), as a position in ``order``
    boundary: tuple[int, ...]  # the send it waits for: the boundary after stage ``boundary`` (-1: none)
    orders: tuple[tuple[Action, ...], ...]
    slot: tuple[int, ...] = ()  # per action: its time's index in the forward times followed by the backward times
    last: tuple[int, ...] = ()  # per device: the position of its last action in ``order`` (-1: none)
    in_flight: tuple[int, ...] = ()  # per device: :func:`peak_in_flight` of its order
    moments: tuple = ()  # per device: :func:`held_moments` of its order


def compiled(orders: Sequence[Sequence[Action]]) -> Compiled:
    """``orders`` (from :func:`device_orders`) compiled for :func:`ends` (PlanningError if they deadlock): the
    actions in the order a run of the schedule starts them (each after the one before it on its device and the one
    it waits for), which is all :func:`ends` needs."""
    stages = 1 + max((a.stage for o in orders for a in o), default=0)
    p = len(orders)
    ident = {a: (d, i) for d, order in enumerate(orders) for i, a in enumerate(order)}
    waits: list[list[tuple[int, int] | None]] = []  # per device and position: where the action it waits for is
    for order in orders:
        waits.append([])
        for a in order:
            dep = _dependency(a, stages)
            if dep is not None and dep not in ident:
                raise PlanningError(f"the schedule deadlocks: {a} waits for {dep}, which no device runs")
            waits[-1].append(None if dep is None else ident[dep])
    placed: list[list[int]] = [[-1] * len(o) for o in orders]  # position in the compiled order, once placed
    position = [0] * p
    ready = deque(range(p))
    kind, stage, device, previous, dependency, boundary = [], [], [], [], [], []
    while ready:
        d = ready.popleft()
        order = orders[d]
        while position[d] < len(order):
            i = position[d]
            w = waits[d][i]
            if w is not None and placed[w[0]][w[1]] < 0:
                break
            a = order[i]
            n = len(kind)
            placed[d][i] = n
            kind.append(0 if a.kind == "F" else 1)
            stage.append(a.stage)
            device.append(d)
            previous.append(placed[d][i - 1] if i else -1)
            if w is None:
                dependency.append(-1)
                boundary.append(-1)
            else:
                dep_stage = orders[w[0]][w[1]].stage
                dependency.append(placed[w[0]][w[1]])
                boundary.append(-1 if dep_stage == a.stage else min(dep_stage, a.stage))
            position[d] += 1
            # the one action that may wait for this one runs on the device of the next (forward) or previous
            # (backward) stage
            nxt = a.stage + 1 if a.kind == "F" and a.stage + 1 < stages else a.stage - 1 if a.kind == "B" else None
            if nxt is not None and nxt >= 0 and nxt % p != d:
                ready.append(nxt % p)
    if len(kind) != sum(len(o) for o in orders):
        stuck = next(orders[d][position[d]] for d in range(p) if position[d] < len(orders[d]))
        raise PlanningError(f"the schedule deadlocks: {stuck} waits for an action no device runs first")
    last = [-1] * p
    for n, d in enumerate(device):
        last[d] = n
    return Compiled(p, stages, tuple(kind), tuple(stage), tuple(device), tuple(previous), tuple(dependency),
                    tuple(boundary), tuple(tuple(o) for o in orders),
                    tuple(k * stages + st for k, st in zip(kind, stage)), tuple(last),
                    tuple(peak_in_flight(o) for o in orders), tuple(held_moments(o) for o in orders))


def held_moments(order: Sequence[Action]) -> tuple[tuple[int, int, tuple[tuple[int, int], ...]], ...]:
    """The moments of ``order`` at which :func:`peak_bytes` may peak, whatever the bytes: per action, its kind (0
    forward, 1 backward), its stage and the microbatches in flight per stage before it (``((stage, count), ...)``),
    keeping of the actions alike in kind and stage only those that no other holds at least as many of, stage by stage
    (with bytes never negative, those reach every peak)."""
    held: dict[int, int] = {}
    seen: dict[tuple[int, int], list[dict[int, int]]] = {}
    for a in order:
        kind = 0 if a.kind == "F" else 1
        now = dict(held)
        alike = seen.setdefault((kind, a.stage), [])
        if not any(all(other.get(st, 0) >= c for st, c in now.items()) for other in alike):
            alike[:] = [other for other in alike if not all(now.get(st, 0) >= c for st, c in other.items())]
            alike.append(now)
        held[a.stage] = held.get(a.stage, 0) + (1 if kind == 0 else -1)
    return tuple((kind, stage, tuple(sorted((st, c) for st, c in h.items() if c)))
                 for (kind, stage), hs in seen.items() for h in hs)


def peak_bytes_at(moments, stash: Sequence[int], forward_work: Sequence[int], backward_work: Sequence[int]) -> int:
    """:func:`peak_bytes` of the order whose :func:`held_moments` are ``moments``."""
    peak = 0
    for kind, stage, held in moments:
        at = sum(c * stash[st] for st, c in held) + (forward_work[stage] if kind == 0 else backward_work[stage])
        if at > peak:
            peak = at
    return peak


def ends(c: Compiled, forward_s: Sequence[float], backward_s: Sequence[float], send_s: Sequence[float]) -> list[float]:
    """Per device, when its last action ends: :func:`timeline`'s answer, in one pass over the compiled order."""
    n = len(c.kind)
    end = [0.0] * (n + 1)  # end[-1]: the start of time, what an action without a predecessor follows
    times = list(forward_s) + list(backward_s)
    sends = list(send_s) + [0.0]  # sends[-1]: no send
    for i, p, q, b, t in zip(range(n), c.previous, c.dependency, c.boundary, c.slot):
        at = end[p]
        arrive = end[q] + sends[b]
        end[i] = (arrive if arrive > at else at) + times[t]
    return [end[j] if j >= 0 else 0.0 for j in c.last]
