"""Why a pipelined plan chose what it chose: per knob, the chosen value and the best configurations with another.

For each knob of :data:`~planner.stages.search.KNOBS` (the pipeline degree, the stage mesh, the
microbatch count, the schedule, the virtual stages, the recomputation and the ZeRO stage),
:func:`knob_reasons` reads what the search saw (:class:`~planner.stages.search.Searched`) and
gives the configurations with another value that come nearest, each with why it lost:

* ``slower``: a configuration priced that fits, with its step time and memory (the search's
  runner-up for the knob): the winner is faster by ``slower_by``;
* ``does_not_fit``: a configuration whose partitions priced all need more memory than the budget
  (the least of them is its memory), or none of whose partitions was priced because in each some
  stage's parameters, gradients, optimizer state and stashed activations alone exceed the budget
  (no memory then): shown when it could have been faster than the winner (its lower bound is below
  the winner's step), or when no configuration with another value fits;
* ``no_faster``: a configuration no partition of which that fits can beat the winner, shown when
  no other value was priced: its step time is at least ``step_time_bound_s`` (a lower bound the
  search proved: the bound it skipped the configuration by, or the best step it had found when
  none of the configuration's partitions beat it).

A knob with no other value possible (pinned by the model's ``pipeline:`` mapping or its mesh, or
the only value the devices, the batch and the layers allow) has no alternatives and says so.
Nothing is priced here: every number is one the search computed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from costmodels.units import format_bytes, format_seconds
from planner.stages.cost import Config
from planner.stages.search import KNOBS, Searched

__all__ = ["Alternative", "KnobReason", "configuration_text", "knob_reasons", "knob_value"]

#: The ``pipeline:`` key that pins each knob (the stage mesh is pinned by the model's mesh only).
PINNED_BY = {"pp": "stages", "tp": None, "microbatches": "microbatches", "schedule": "schedule",
             "virtual_stages": "virtual_stages", "recompute": "recompute", "zero": "zero"}


@dataclass(frozen=True)
class Alternative:
    """A configuration with another value of one knob, and why it lost (module docstring)."""

    value: str
    configuration: str
    outcome: str  # "slower", "does_not_fit" or "no_faster"
    step_time_s: float | None  # its step time, where priced and fitting
    step_time_bound_s: float | None  # a lower bound of its step time (no_faster, does_not_fit)
    memory_bytes_per_device: int | None  # its memory (slower); the least of its partitions priced (does_not_fit)
    over_budget_bytes: int | None  # does_not_fit: memory less the budget
    slower_by: float | None  # its step time (or bound) over the winner's, less 1
    reason: str

    def to_dict(self) -> dict:
        return {"value": self.value, "configuration": self.configuration, "outcome": self.outcome,
                "step_time_s": self.step_time_s, "step_time_bound_s": self.step_time_bound_s,
                "memory_bytes_per_device": self.memory_bytes_per_device,
                "over_budget_bytes": self.over_budget_bytes, "slower_by": self.slower_by, "reason": self.reason}


@dataclass(frozen=True)
class KnobReason:
    """One knob: the value chosen, the alternatives (nearest first), or why there was none (``fixed``)."""

    knob: str
    chosen: str
    alternatives: tuple[Alternative, ...]
    fixed: str | None

    def to_dict(self) -> dict:
        return {"knob": self.knob, "chosen": self.chosen, "alternatives": [a.to_dict() for a in self.alternatives],
                "fixed": self.fixed}


def knob_value(config: Config, knob: str) -> str:
    """A knob's value in ``config`` as the reports print it (the stage mesh as ``tp=2``)."""
    if knob == "tp":
        return " x ".join(f"{n}={s}" for n, s in config.stage_axes)
    if knob == "microbatches":
        return str(config.microbatches)
    return str(getattr(config, knob))


def configuration_text(config: Config) -> str:
    """A configuration's outer choices in one line: ``pp=2 x dp=1 x tp=2, 1f1b, 4 microbatches of 1, ...``."""
    virtual = f" x {config.virtual_stages} virtual stages" if config.virtual_stages > 1 else ""
    return (f"pp={config.pp} x dp={config.dp} x {knob_value(config, 'tp')}, {config.schedule}{virtual}, "
            f"{config.microbatches} microbatches of {config.microbatch}, recompute {config.recompute}, "
            f"ZeRO {config.zero}")


def knob_reasons(searched: Searched, pinned: frozenset[str] = frozenset()) -> tuple[KnobReason, ...]:
    """Per knob, the chosen value and its alternatives (module docstring); ``pinned``: the ``pipeline:`` keys the
    request pinned."""
    won = searched.config
    step = searched.evaluation.step_time_s
    budget = searched.budget_bytes
    out = []
    for k in KNOBS:
        chosen = knob_value(won, k)
        alternatives = []
        slower = searched.runners_up.get(k)
        if slower is not None:
            config, ev = slower
            t = ev.step_time_s
            alternatives.append(Alternative(
                knob_value(config, k), configuration_text(config), "slower", t, None, ev.peak_memory_bytes, None,
                _ratio(t, step), f"slower by {_share(_ratio(t, step))} ({format_seconds(t)} against "
                                 f"{format_seconds(step)})"))
        unfit = next(((c, lb, need) for c, lb, need, best in searched.lost
                      if knob_value(c, k) != chosen and _unfit(need, budget, best)), None)
        if unfit is not None and (unfit[1] < step or slower is None):
            config, lb, need = unfit
            memory = None if need == math.inf else int(need)
            over = None if memory is None else int(math.ceil(need - budget))
            why = (f"does not fit: needs {format_bytes(memory)} per device, {format_bytes(over)} over the budget of "
                   f"{format_bytes(budget)}" if memory is not None else
                   f"does not fit: in every partition some stage surely needs more than the budget of "
                   f"{format_bytes(budget)} per device (its parameters, gradients and optimizer state after ZeRO, "
                   f"and the activations of its microbatches in flight)")
            alternatives.append(Alternative(knob_value(config, k), configuration_text(config), "does_not_fit", None,
                                            lb, memory, over, None, why))
        if slower is None:
            bounds = [(max(lb, lb if best is None else best), c) for c, lb, need, best in searched.lost
                      if knob_value(c, k) != chosen and not _unfit(need, budget, best)]
            if k in searched.unsearched:
                c, lb = searched.unsearched[k]
                bounds.append((lb, c))
            if bounds:
                bound, config = min(bounds, key=lambda bc: bc[0])
                alternatives.append(Alternative(
                    knob_value(config, k), configuration_text(config), "no_faster", None, bound, None, None,
                    _ratio(bound, step), f"no faster: every partition of it that fits takes at least "
                                         f"{format_seconds(bound)} ({_share(_ratio(bound, step))} more)"))
        fixed = None
        if not alternatives:
            key = PINNED_BY[k]
            fixed = (f"pinned by pipeline.{key}" if key in pinned else
                     "pinned by the model's mesh" if k in ("pp", "tp") and "mesh" in pinned else
                     "the only value possible: the devices, the batch, the layers and the pins allow no other")
        out.append(KnobReason(k, chosen, tuple(alternatives), fixed))
    return tuple(out)


def _unfit(need: float, budget: float, best: float | None) -> bool:
    """Whether a configuration searched without a result lost on memory: its partitions priced all needed more
    than the budget, or none was priced before any configuration had a step to beat (every one cut for memory)."""
    return need > budget and (need != math.inf or best is None)


def _ratio(t: float, step: float) -> float:
    return t / step - 1 if step > 0 else 0.0


def _share(x: float) -> str:
    return f"{x:.1%}" if x >= 0.001 else "<0.1%"
