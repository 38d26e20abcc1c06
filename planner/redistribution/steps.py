"""The engine's output as data: :class:`Step` and :class:`ReshardPlan`.

Step kinds and what they do (``p`` = the group size, the product of ``axes``):

==================  =============================================================
``AllReduce``       sum a pending reduction over ``axes`` (ring: reduce-scatter then
                    all-gather of ``p`` chunks of the local buffer)
``ReduceScatter``   sum over ``axes`` and keep one piece: ``axes`` join ``dims[0]`` as
                    its most minor splitters
``AllGather``       ``axes`` (the most minor splitters of ``dims[0]``) leave it
``AllToAll``        ``axes`` leave ``dims[0]`` (concatenated) and join ``dims[1]`` (split)
``CollectivePermute`` every device that lacks its new block receives it whole from
                    one other device (``pairs``: ``(source, destination)`` device ids)
``Slice``           local: keep a part of what the device holds (free axes join
                    ``dims[0]``), or keep a 1/p share of a value that becomes a
                    pending sum over ``axes``; no communication
==================  =============================================================

Bytes are per device (the largest number any device receives in the step), counted
on padded local buffers exactly as the simulator moves them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from costmodels.units import format_bytes
from planner.ir.axis import AxisRef
from planner.ir.sharding import TensorSharding
from planner.redistribution.lower_bound import cached_lower_bound

@dataclass(frozen=True, slots=True)
class Step:
    """One step of a redistribution (see the module docstring for the kinds)."""

    kind: str
    axes: tuple[AxisRef, ...]
    dims: tuple[int, ...]
    before: TensorSharding
    after: TensorSharding
    bytes_per_device: int
    time_s: float
    pairs: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "axes": [str(a) for a in self.axes],
            "dims": list(self.dims),
            "bytes_per_device": self.bytes_per_device,
            "time_s": self.time_s,
        }

    def __str__(self) -> str:
        axes = "{" + ", ".join(map(str, self.axes)) + "}" if self.axes else ""
        dims = f" dims {list(self.dims)}" if self.dims else ""
        return f"{self.kind}{(' ' + axes) if axes else ''}{dims}: {format_bytes(self.bytes_per_device)}"


@dataclass(frozen=True, slots=True)
class ReshardPlan:
    """The cheapest sequence of steps from ``source`` to ``destination`` found, and its bound."""

    shape: tuple[int, ...]
    dtype: str
    source: TensorSharding
    destination: TensorSharding
    steps: tuple[Step, ...]
    lower_bound_note: str = field(default="", compare=False)
    #: Whether the steps are those the engine's exhaustive search finds (False when a search
    #: ran out of its budget and the best plan found so far was kept: see the engine).
    exact: bool = field(default=True, compare=False)

    @property
    def lower_bound_bytes_per_device(self) -> int:
        """What any plan must move at least (computed on first use; see :mod:`.lower_bound`)."""
        return cached_lower_bound(self.source, self.destination, self.shape, self.dtype)

    @property
    def bytes_per_device(self) -> int:
        return sum(s.bytes_per_device for s in self.steps)

    @property
    def time_s(self) -> float:
        return sum(s.time_s for s in self.steps)

    @property
    def ratio(self) -> float:
        """Plan bytes over the lower bound (1.0 when both are zero)."""
        lb = self.lower_bound_bytes_per_device
        if lb == 0:
            return 1.0 if self.bytes_per_device == 0 else float("inf")
        return self.bytes_per_device / lb

    @property
    def communicates(self) -> bool:
        return any(s.kind != "Slice" for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "from": str(self.source),
            "to": str(self.destination),
            "steps": [s.to_dict() for s in self.steps],
            "bytes_per_device": self.bytes_per_device,
            "lower_bound_bytes_per_device": self.lower_bound_bytes_per_device,
            "time_s": self.time_s,
            "exact": self.exact,  # False: the search ran out of budget (the best plan it found)
        }
