"""A pipelined training plan as users read it: the chosen configuration, per stage, and why.

:func:`pipeline_plan` turns the search's answer (:class:`~planner.stages.search.Searched`)
into a :class:`PipelinePlan`: the degrees and mesh, the schedule, the stages with their
layers, recomputation, memory and times, the bubble, the step time, tokens per second and
MFU (the model's FLOPs of a training step, three times the forward's, over the step time
and the devices' peak at the model's dtype, as Megatron counts it: recomputation is not
useful work), per knob the best configuration that chose otherwise, and why each knob took its
value (:mod:`planner.stages.explain`, what ``shardplan explain`` prints).
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodels import Cluster
from costmodels.units import format_bytes, format_seconds
from graphs.dtypes import is_float
from graphs.graph import ComputationGraph
from planner.stages.cost import Config, Evaluation
from planner.stages.explain import KnobReason, configuration_text, knob_reasons, knob_value
from planner.stages.search import KNOBS, Searched
from planner.text_table import table

__all__ = ["PipelinePlan", "StagePlan", "pipeline_plan"]


@dataclass(frozen=True)
class StagePlan:
    """One stage: its layers (names), the device group (pipeline position) it runs on, and its numbers."""

    index: int
    device_group: int
    layers: tuple[str, ...]
    mesh: str
    recompute: str
    memory_bytes_per_device: int
    forward_time_s: float
    backward_time_s: float
    recompute_time_s: float = 0.0  # the part of the backward that recomputes the forward

    def to_dict(self) -> dict:
        return {"index": self.index, "device_group": self.device_group, "layers": list(self.layers),
                "mesh": self.mesh, "recompute": self.recompute,
                "memory_bytes_per_device": self.memory_bytes_per_device,
                "forward_time_s": self.forward_time_s, "backward_time_s": self.backward_time_s,
                "recompute_time_s": self.recompute_time_s}


@dataclass(frozen=True)
class PipelinePlan:
    """The pipeline level of a training plan (module docstring)."""

    model: str
    cluster: str
    devices: int
    mesh: str
    config: Config
    evaluation: Evaluation
    stages: tuple[StagePlan, ...]
    tokens_per_s: float
    mfu: float
    priced: int
    configurations: int
    runners_up: tuple[tuple[str, str, float], ...]  # (knob, the value it took there, that step time)
    exact: bool = True  # no partition search stopped at its budget
    reasons: tuple[KnobReason, ...] = ()  # per knob, why it took its value
    memory_budget_bytes: float | None = None  # what every configuration had to fit per device

    @property
    def step_time_s(self) -> float:
        return self.evaluation.step_time_s

    @property
    def bubble_fraction(self) -> float:
        """The share of the schedule's devices x length that devices stand idle."""
        return self.evaluation.timeline.bubble_fraction if self.evaluation.timeline else 0.0

    def explain_dict(self) -> dict:
        """Why this configuration (what ``shardplan explain --format json`` prints below its header)."""
        return {"model": self.model, "cluster": self.cluster, "devices": self.devices,
                "configuration": configuration_text(self.config), "step_time_s": self.step_time_s,
                "memory_bytes_per_device": max(self.evaluation.memory_bytes_per_device),
                "memory_budget_bytes": self.memory_budget_bytes, "configurations": self.configurations,
                "partitions_priced": self.priced, "choices": [r.to_dict() for r in self.reasons]}

    def explain(self) -> str:
        """Why this configuration, as a table: per knob the chosen value, then each alternative and why it lost."""
        budget = ("" if self.memory_budget_bytes is None or self.memory_budget_bytes == float("inf") else
                  f" of the {format_bytes(self.memory_budget_bytes)} budget")
        lines = [f"model {self.model}, pipeline plan on {self.devices} devices of {self.cluster}: "
                 f"{configuration_text(self.config)}",
                 f"step {format_seconds(self.step_time_s)}, memory "
                 f"{format_bytes(max(self.evaluation.memory_bytes_per_device))} per device{budget}; the least step "
                 f"time of {self.configurations} configurations searched", "",
                 "why each choice (the best configurations with another value, and why they lost):"]
        rows = []
        for r in self.reasons:
            if not r.alternatives:
                rows.append((r.knob, r.chosen, "-", "-", "-", r.fixed or ""))
            for i, a in enumerate(r.alternatives):
                t = (format_seconds(a.step_time_s) if a.step_time_s is not None else
                     f">= {format_seconds(a.step_time_bound_s)}" if a.outcome == "no_faster" else "-")
                memory = "-" if a.memory_bytes_per_device is None else format_bytes(a.memory_bytes_per_device)
                rows.append((r.knob if i == 0 else "", r.chosen if i == 0 else "", a.value, t, memory, a.reason))
        lines.append(table(rows, header=("choice", "chosen", "other", "its step", "its memory/device", "why not")))
        detailed = [(r.knob, a) for r in self.reasons for a in r.alternatives]
        if detailed:
            lines += ["", "the configurations compared:"]
            lines += [f"  {k} = {a.value}: {a.configuration}" for k, a in detailed]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict:
        c = self.config
        return {
            "model": self.model,
            "cluster": self.cluster,
            "devices": self.devices,
            "pipeline": {
                "degree": c.pp,
                "data_parallel": c.dp,
                "stage_mesh": dict(c.stage_axes),
                "mesh": self.mesh,
                "schedule": c.schedule,
                "microbatches": c.microbatches,
                "microbatch_size": c.microbatch,
                "virtual_stages": c.virtual_stages,
                "recompute": c.recompute,
                "zero_stage": c.zero,
                "stages": [s.to_dict() for s in self.stages],
                "memory_bytes_per_device": max(self.evaluation.memory_bytes_per_device),
                "bubble_fraction": self.evaluation.timeline.bubble_fraction if self.evaluation.timeline else None,
                "step_time_s": self.step_time_s,
                "tokens_per_s": self.tokens_per_s,
                "mfu": self.mfu,
                "configurations": self.configurations,
                "partitions_priced": self.priced,
                "partitions_exact": self.exact,
                "next_best": [{"knob": k, "value": v, "step_time_s": t} for k, v, t in self.runners_up],
            },
        }

    def summary(self) -> str:
        c = self.config
        ev = self.evaluation
        lines = [f"model {self.model}, pipeline plan on {self.devices} devices of {self.cluster}, mesh {self.mesh}",
                 f"  {c.pp} pipeline group{'s' if c.pp > 1 else ''} x {c.dp} data-parallel x stage mesh "
                 f"{_axes(c.stage_axes)}; schedule {c.schedule}"
                 + (f" with {c.virtual_stages} virtual stages" if c.virtual_stages > 1 else "")
                 + f", {c.microbatches} microbatches of {c.microbatch}, recompute {c.recompute}, ZeRO stage {c.zero}",
                 ""]
        rows = [(s.index, s.device_group, _span(s.layers), format_seconds(s.forward_time_s),
                 format_seconds(s.backward_time_s), format_bytes(s.memory_bytes_per_device)) for s in self.stages]
        lines.append(table(rows, header=("stage", "group", "layers", "forward", "backward", "memory/device")))
        bubble = ev.timeline.bubble_fraction if ev.timeline else 0.0
        lines += ["", f"step {format_seconds(ev.step_time_s)}, bubble {bubble:.1%}, "
                      f"{self.tokens_per_s:,.0f} tokens/s, MFU {self.mfu:.1%}, "
                      f"memory {format_bytes(max(ev.memory_bytes_per_device))} per device (the most of any stage)",
                  f"searched {self.configurations} configurations, priced {self.priced} stage partitions"
                  + ("" if self.exact else " (some partition searches stopped at their budget: the best partition "
                                           "they found is kept, not proven the best)")]
        if self.runners_up:
            lines.append("next best per choice:")
            lines += [f"  {k} = {v}: step {format_seconds(t)} ({t / ev.step_time_s - 1:+.1%})"
                      for k, v, t in self.runners_up]
        return "\n".join(lines) + "\n"


def _axes(stage_axes) -> str:
    return " x ".join(f"{n}={s}" for n, s in stage_axes)


def _span(layers: tuple[str, ...]) -> str:
    return layers[0] if len(layers) == 1 else f"{layers[0]} .. {layers[-1]} ({len(layers)})"


def pipeline_plan(searched: Searched, graph: ComputationGraph, cluster: Cluster, devices: int,
                  pinned: frozenset[str] = frozenset()) -> PipelinePlan:
    """The :class:`PipelinePlan` of ``searched`` (module docstring); ``pinned``: the ``pipeline:`` keys the request
    pinned (``"mesh"`` where the model's mesh fixed the degrees), which the reasons name."""
    c, ev = searched.config, searched.evaluation
    names = searched.layer_names
    stages = []
    for k in range(c.stages):
        redo = sum(searched.costs[i].recompute(c.recompute) for i in c.stage_layers(k))
        stages.append(StagePlan(k, k % c.pp, tuple(names[i] for i in c.stage_layers(k)), _axes(c.stage_axes),
                                c.recompute, ev.memory_bytes_per_device[k % c.pp], ev.forward_s[k], ev.backward_s[k],
                                redo))
    inputs = [t for t in graph.tensors.values() if t.kind == "input"]
    tokens = max((t.numel for t in inputs), default=0)
    flops = 3 * graph.total_flops()
    dtype = next((t.dtype for t in graph.tensors.values() if t.kind == "param" and is_float(t.dtype)), "f32")
    peak = dict(cluster.roofline.peak_flops_by_dtype).get(dtype, cluster.device_peak_flops)
    mfu = flops / (ev.step_time_s * devices * peak) if ev.step_time_s > 0 else 0.0
    runners = tuple((k, knob_value(searched.runners_up[k][0], k), searched.runners_up[k][1].step_time_s)
                    for k in KNOBS if k in searched.runners_up)
    mesh = f"pp={c.pp} x dp={c.dp} x " + _axes(c.stage_axes)
    budget = searched.budget_bytes if searched.budget_bytes != float("inf") else None
    return PipelinePlan(graph.name, cluster.name, devices, mesh, c, ev, tuple(stages),
                        tokens / ev.step_time_s if ev.step_time_s > 0 else 0.0, mfu, searched.priced,
                        searched.outer, runners, searched.exact, knob_reasons(searched, pinned), budget)
