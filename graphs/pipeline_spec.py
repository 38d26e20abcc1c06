"""A model's ``pipeline:`` mapping: which pipeline choices the user pins and which the planner makes.

Every key is optional and ``auto`` (the planner chooses) by default::

    pipeline: {axis: pp, stages: 4, microbatches: 16, schedule: 1f1b, virtual_stages: 2,
               recompute: selective, zero: 1}

- ``axis``: the mesh axis that carries the stages (default: an axis named ``pp`` when the
  mesh has one; otherwise the planner builds the mesh itself);
- ``stages``: the pipeline degree (device groups the layers are spread over);
- ``microbatches``: how many microbatches one step's batch is cut into;
- ``schedule``: ``gpipe``, ``1f1b`` or ``interleaved``;
- ``virtual_stages``: stages per device group (more than 1 needs ``interleaved``);
- ``recompute``: ``none``, ``selective`` (the attention scores and softmax) or ``full``
  (keep only each layer's input);
- ``zero``: the optimizer-state sharding over the data-parallel axis, 0 to 3.

>>> read_pipeline({"stages": 4, "schedule": "1f1b"}).stages
4
>>> read_pipeline({}).zero
'auto'
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable

from planner.errors import ModelError, did_you_mean, quote

__all__ = ["AUTO", "PIPELINE_KEYS", "RECOMPUTE", "SCHEDULE_NAMES", "ZERO_STAGES", "PipelineSpec", "read_pipeline"]

AUTO = "auto"
SCHEDULE_NAMES = ("gpipe", "1f1b", "interleaved")
RECOMPUTE = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)
PIPELINE_KEYS = ("axis", "stages", "microbatches", "schedule", "virtual_stages", "recompute", "zero")
#: The largest stage, microbatch or virtual-stage count accepted (bounded before anything is built).
MAX_COUNT = 1 << 20


@dataclass(frozen=True)
class PipelineSpec:
    """The user's pins (see the module docstring); ``"auto"`` where the planner chooses."""

    axis: str | None = None
    stages: int | str = AUTO
    microbatches: int | str = AUTO
    schedule: str = AUTO
    virtual_stages: int | str = AUTO
    recompute: str = AUTO
    zero: int | str = AUTO

    def pinned(self) -> dict[str, Any]:
        """The keys the user pinned, with their values, in the format's order."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) not in (AUTO, None)}

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


def read_pipeline(value: Any, where: Callable[[str | None], str | None] = lambda key: None) -> PipelineSpec:
    """The :class:`PipelineSpec` of a ``pipeline:`` mapping; ``where(key)`` locates a key (``None``: the mapping)
    in errors."""
    if value is None or value == AUTO:
        return PipelineSpec()
    if not isinstance(value, dict):
        raise ModelError(f"`pipeline` must be a mapping like {{stages: 4, schedule: 1f1b}} or `auto`, got "
                         f"{quote(value)}", where=where(None))
    for key in value:
        if key not in PIPELINE_KEYS:
            raise ModelError(f"`pipeline` has unknown key {quote(key)}{did_you_mean(str(key), PIPELINE_KEYS)} "
                             f"(keys: {', '.join(PIPELINE_KEYS)})", where=where(str(key)))
    out: dict[str, Any] = {}
    axis = value.get("axis")
    if axis is not None and axis != AUTO:
        if not isinstance(axis, str) or not axis:
            raise ModelError(f"`pipeline.axis` must name a mesh axis, got {quote(axis)}", where=where("axis"))
        out["axis"] = axis
    for key in ("stages", "microbatches", "virtual_stages"):
        if key in value:
            out[key] = _count(value[key], key, where)
    for key, allowed in (("schedule", SCHEDULE_NAMES), ("recompute", RECOMPUTE)):
        if key in value and value[key] != AUTO:
            v = value[key]
            if v not in allowed:
                raise ModelError(f"`pipeline.{key}` must be one of {', '.join(allowed)} or auto, got {quote(v)}"
                                 f"{did_you_mean(str(v), allowed)}", where=where(key))
            out[key] = v
    if "zero" in value and value["zero"] != AUTO:
        z = value["zero"]
        if isinstance(z, bool) or z not in ZERO_STAGES:
            raise ModelError(f"`pipeline.zero` must be 0, 1, 2 or 3 (ZeRO's stages) or auto, got {quote(z)}",
                             where=where("zero"))
        out["zero"] = int(z)
    spec = PipelineSpec(**out)
    if spec.virtual_stages not in (AUTO, 1) and spec.schedule not in (AUTO, "interleaved"):
        raise ModelError(f"`pipeline.virtual_stages: {spec.virtual_stages}` needs `schedule: interleaved` (the other "
                         f"schedules run one stage per device group), not {spec.schedule}", where=where("schedule"))
    return spec


def _count(v: Any, key: str, where) -> int | str:
    if v == AUTO:
        return AUTO
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_COUNT:
        raise ModelError(f"`pipeline.{key}` must be a whole number from 1 to {MAX_COUNT} or auto, got {quote(v)}",
                         where=where(key))
    return int(v)
