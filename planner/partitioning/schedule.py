"""The step's schedule: how long one device takes to run its :class:`~planner.partitioning.program.Program`.

Every device runs the same SPMD program, so one device is simulated. It has one
compute stream and one communication stream per link (the
:class:`~costmodels.Link` the cost model priced a collective on:
:func:`planner.redistribution.step_link` for a redistribution's steps,
:meth:`Cluster.link_for <costmodels.Cluster.link_for>` of its manual axes for a
manual region's collective). Each stream runs its work in program order:

* a ``Compute`` starts when the compute stream is free and each operand has
  arrived in the layout it reads (its producer done, then its redistribution);
  it runs the forward part of its compute time (``Compute.forward_time_s``);
* a collective step starts when its input is ready (the producer's compute, the
  previous step of its redistribution, or the cotangents it carries) and its
  link's stream is free;
* a ``Backprop`` starts when the compute stream is free and its result's
  cotangent is home (every reader's Backprop done, and the transposes bringing
  their cotangents home arrived); it runs ``Compute.backward_time_s``;
* a gradient reduction (phase ``gradient``) starts when its parameter's readers'
  Backprops are done; nothing waits for it, so it overlaps the rest of the backward;
* an op's own collectives (``Compute.collectives``, ``Backprop.collectives``)
  runs on its link's stream once its operand is ready, and its op waits for it.

The step ends when the last compute and the last collective finish; the step time adds the
cluster's ``step_overhead_s`` (launching the step's program, once per step). With
``overlap="none"`` nothing overlaps: the step time is the program's compute plus
communication time (plus that launch), the sum every search optimises (a linear upper bound of the
``async`` schedule: each instruction of the schedule finishes no later than the
prefix sum of the program up to it).

Communication is *hidden* where it runs while the compute stream is busy and
*exposed* otherwise; with collectives on two links at once both can be exposed,
so exposed communication may exceed the step's idle compute time. The walk is one
pass over the program, and the overlap accounting one merge of each stream's
intervals with the compute stream's: linear in the program's size.

>>> from planner.api import plan
>>> p = plan("configs/ffn.yaml", training=True)
>>> s = schedule(p.program, p.cluster)
>>> s.step_time_s <= schedule(p.program, p.cluster, "none").step_time_s
True
>>> [ph for ph, _ in s.phases]
['forward', 'backward', 'gradient']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from costmodels.units import format_seconds
from planner.errors import PlanningError, quote
from planner.partitioning.program import (Backprop, Compute, Program, Redistribute, completed_key,
                                         transposed_key)
from planner.redistribution import step_link

__all__ = ["MODES", "PHASES", "PhaseTimes", "Schedule", "schedule"]

MODES = ("none", "async")
"""``none``: every collective adds its full time (the searches' objective); ``async``: the schedule."""

PHASES = ("forward", "backward", "gradient")
"""The phases of a program's communication (a Redistribute's ``phase``; manual regions' collectives are
forward in a Compute and backward in a Backprop)."""


@dataclass(frozen=True, slots=True)
class PhaseTimes:
    """One phase's seconds on one device: communication (all of it, then the parts exposed and hidden
    behind compute) and compute."""

    comm_time_s: float
    exposed_comm_time_s: float
    hidden_comm_time_s: float
    compute_time_s: float

    def to_dict(self) -> dict:
        return {"comm_time_s": self.comm_time_s, "exposed_comm_time_s": self.exposed_comm_time_s,
                "hidden_comm_time_s": self.hidden_comm_time_s, "compute_time_s": self.compute_time_s}


@dataclass(frozen=True, slots=True)
class Schedule:
    """A program's step under ``overlap``: its length and, per phase, its :class:`PhaseTimes`."""

    overlap: str
    step_time_s: float
    phases: tuple[tuple[str, PhaseTimes], ...]  # in PHASES order
    step_overhead_s: float = 0.0  # the cluster's fixed launch of the step's program, included in step_time_s

    def phase(self, name: str) -> PhaseTimes:
        for ph, times in self.phases:
            if ph == name:
                return times
        raise PlanningError(f"a schedule has no phase {quote(name)}; its phases are {', '.join(PHASES)}")

    @property
    def exposed_comm_time_s(self) -> float:
        return sum(t.exposed_comm_time_s for _, t in self.phases)

    @property
    def hidden_comm_time_s(self) -> float:
        return sum(t.hidden_comm_time_s for _, t in self.phases)

    def __str__(self) -> str:
        return (f"step {format_seconds(self.step_time_s)} (overlap {self.overlap}), communication exposed "
                f"{format_seconds(self.exposed_comm_time_s)}, hidden {format_seconds(self.hidden_comm_time_s)}")


def schedule(program: Program, cluster, overlap: str = "async") -> Schedule:
    """The schedule of ``program`` on ``cluster``'s links under ``overlap`` (see the module docstring)."""
    if overlap not in MODES:
        raise PlanningError(f"unknown overlap mode {quote(overlap)}; use one of {', '.join(MODES)}")
    result = _serial(program) if overlap == "none" else _async(program, cluster)
    launch = cluster.roofline.step_overhead_s
    if not launch:
        return result
    return Schedule(result.overlap, launch + result.step_time_s, result.phases, launch)


def _serial(program: Program) -> Schedule:
    """Nothing overlaps: the program's compute time plus its communication time."""
    forward_s = backward_s = 0.0
    for c in program.computes():
        forward_s += c.forward_time_s
        backward_s += c.backward_time_s
    compute = {"forward": forward_s, "backward": backward_s, "gradient": 0.0}
    phases = []
    for ph in PHASES:
        comm = program.comm_time_s(ph)
        phases.append((ph, PhaseTimes(comm, comm, 0.0, compute[ph])))
    return Schedule("none", program.compute_time_s() + program.comm_time_s(), tuple(phases))


class _Device:
    """One device's streams while the program is walked: when each is free, and what each ran."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.compute_free = 0.0
        self.compute_busy: list[tuple[float, float]] = []  # disjoint, in time order
        self.stream_free: dict = {}  # link -> when its stream is free
        self.comm: dict = {}  # link -> [(start, end, phase)] in time order
        self.end = 0.0

    def communicate(self, link, ready: float, seconds: float, phase: str) -> float:
        """Run ``seconds`` of communication on ``link``'s stream once ``ready``; when it is done."""
        start = max(ready, self.stream_free.get(link, 0.0))
        done = start + seconds
        self.stream_free[link] = done
        if seconds > 0:
            self.comm.setdefault(link, []).append((start, done, phase))
        self.end = max(self.end, done)
        return done

    def compute(self, ready: float, seconds: float) -> float:
        """Run ``seconds`` of compute once ``ready`` and the compute stream is free; when it is done."""
        start = max(ready, self.compute_free)
        done = start + seconds
        self.compute_free = done
        if seconds > 0:
            self.compute_busy.append((start, done))
        self.end = max(self.end, done)
        return done

    def redistribute(self, r: Redistribute, ready: float) -> float:
        """Run ``r``'s steps one after the other from ``ready``; when the last is done."""
        for step in r.steps:
            link = step_link(step, self.cluster)
            if link is None:  # a Slice: local, no time
                ready += step.time_s
            else:
                ready = self.communicate(link, ready, step.time_s, r.phase)
        return ready

    def op_collectives(self, cs, mesh, ready: float, phase: str) -> float:
        """An op's own collectives, one after another (each waits for the one before)."""
        for c in cs:
            ready = self.communicate(self.cluster.link_for(mesh, list(c.axes)), ready, c.time_s, phase)
        return ready


def _async(program: Program, cluster) -> Schedule:
    dev = _Device(cluster)
    made: dict[str, float] = {}  # tensor -> when its producer's result is ready (sources: absent, 0)
    arrived: dict[tuple, float] = {}  # (tensor, layout) -> when a forward redistribution delivered it
    backward_s: dict[str, float] = {}  # op -> its Backprop's compute time
    back_done: dict[str, float] = {}  # op -> when its Backprop is done
    cotangent: dict[str, float] = {}  # tensor -> when its cotangent is home (so far)
    completed: dict[tuple, float] = {}  # where readers' completed cotangents are added -> when the last is done
    compute = {"forward": 0.0, "backward": 0.0, "gradient": 0.0}
    for ins in program.instructions:
        if isinstance(ins, Compute):
            op, s = ins.op, ins.strategy
            ready = max((arrived.get((t, lay), made.get(t, 0.0)) for t, lay in zip(op.inputs, s.operands)),
                        default=0.0)
            ready = dev.op_collectives(ins.collectives, s.result.mesh, ready, "forward")
            made[op.output] = dev.compute(ready, ins.forward_time_s)
            backward_s[op.name] = ins.backward_time_s
            compute["forward"] += ins.forward_time_s
        elif isinstance(ins, Backprop):
            op = ins.op
            ready = dev.op_collectives(ins.collectives, ins.strategy.result.mesh,
                                       cotangent.get(op.output, made.get(op.output, 0.0)), "backward")
            seconds = backward_s.get(op.name, 0.0)
            done = back_done[op.name] = dev.compute(ready, seconds)
            compute["backward"] += seconds
            for k in ins.wrt:
                t = op.inputs[k]
                cotangent[t] = max(cotangent.get(t, 0.0), done)
        elif isinstance(ins, Redistribute):
            if ins.phase == "forward":
                arrived[(ins.tensor, ins.destination)] = dev.redistribute(ins, made.get(ins.tensor, 0.0))
                continue
            # the cotangents it carries: its readers' Backprops (and their completions by themselves), or a graph
            # output's seed once the output is made
            ready = max((back_done.get(r, 0.0) for r in ins.readers), default=made.get(ins.tensor, 0.0))
            ready = max(ready, completed.get(transposed_key(ins), 0.0))
            done = dev.redistribute(ins, ready)
            if ins.route:
                completed[completed_key(ins)] = max(completed.get(completed_key(ins), 0.0), done)
            elif ins.phase == "backward":
                cotangent[ins.tensor] = max(cotangent.get(ins.tensor, 0.0), done)
    hidden = {ph: 0.0 for ph in PHASES}
    comm = {ph: 0.0 for ph in PHASES}
    for intervals in dev.comm.values():
        for (start, end, phase), overlap_s in zip(intervals, _overlaps(intervals, dev.compute_busy)):
            comm[phase] += end - start
            hidden[phase] += overlap_s
    phases = tuple((ph, PhaseTimes(comm[ph], max(0.0, comm[ph] - hidden[ph]), hidden[ph], compute[ph]))
                   for ph in PHASES)
    # each instruction finishes no later than the serial prefix sum up to it (module docstring); the min drops
    # what summing in another order rounds differently
    return Schedule("async", min(dev.end, program.compute_time_s() + program.comm_time_s()), phases)


def _overlaps(intervals: list[tuple[float, float, str]], busy: list[tuple[float, float]]) -> Iterable[float]:
    """Per interval of one stream (in time order), the seconds the compute stream is ``busy`` (disjoint, in time
    order) during it: one merge of the two lists."""
    k = 0
    for start, end, _ in intervals:
        while k < len(busy) and busy[k][1] <= start:
            k += 1
        total = 0.0
        j = k
        while j < len(busy) and busy[j][0] < end:
            total += max(0.0, min(end, busy[j][1]) - max(start, busy[j][0]))
            j += 1
        yield min(total, end - start)
