"""``Roofline``: what a cluster's devices compute at, besides their matmul peak.

The compute keys of a cluster file (``docs/clusters.md``), as one frozen value:

- ``peak_flops_by_dtype``: the matmul units' peak per graph dtype name (``f32``,
  ``bf16``, ``f16``); a dtype not listed runs at the cluster's ``device_peak_flops``;
- ``vector_flops``: the rate of non-matmul work (elementwise ops, reductions, norms,
  softmax); None means the cluster's ``device_peak_flops``;
- ``memory_bandwidth_bytes_per_s``: device memory bandwidth, ``inf`` for unlimited;
- ``kernel_overhead_s``: a fixed time per op launched;
- ``step_overhead_s``: a fixed time per step, launching the step's program (once, whatever its ops);
- ``matmul_efficiency``: the fraction of its peak a matmul-family op reaches, by its
  FLOPs on one device: ``(flops, efficiency)`` points, flops strictly increasing and
  efficiency non-decreasing, each efficiency in ``(0, 1]``; interpolated linearly in
  ``log(flops)`` and clamped at both ends (:meth:`Roofline.efficiency`). A constant is
  given as a single number and stored as one point.

The defaults are the planner's first model, FLOPs at 100% of the peak and no
memory term: ``Roofline()`` changes no op's time. :mod:`costmodels.compute` turns
a roofline and an op's FLOPs and bytes into seconds.

>>> curve = Roofline(matmul_efficiency=[(1e6, 0.05), (1e9, 0.4), (1e12, 0.8)])
>>> curve.efficiency(1e3), curve.efficiency(1e9), round(curve.efficiency(10**10.5), 6), curve.efficiency(1e15)
(0.05, 0.4, 0.6, 0.8)
>>> str(curve)
'matmul efficiency 5% at 1MFLOP .. 80% at 1TFLOP'
>>> str(Roofline(vector_flops=134e12, memory_bandwidth_bytes_per_s=3.35e12, kernel_overhead_s=3e-6))
'vector 134TFLOP/s, memory 3.35TB/s, 3us per kernel'
>>> Roofline() == Roofline(matmul_efficiency=1.0), Roofline().is_default
(True, True)
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Mapping, Sequence, Union

from costmodels.units import format_quantity
from planner.errors import ClusterError, quote

__all__ = ["MATMUL_DTYPES", "Roofline", "curve_points"]

MATMUL_DTYPES = ("f32", "bf16", "f16")
"""The graph dtypes a matmul unit has a peak for: the floating types of :mod:`graphs.dtypes`
(this layer sits below the graphs; a test holds the two lists equal)."""

Curve = Union[float, Sequence[Sequence[float]]]


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


@dataclass(frozen=True, slots=True)
class Roofline:
    """The compute keys of a cluster (see the module docstring); canonical on construction.

    ``peak_flops_by_dtype`` may be a mapping or ``(dtype, FLOP/s)`` pairs (stored sorted
    by dtype); ``matmul_efficiency`` a number or ``(flops, efficiency)`` points.
    Invalid values raise :class:`~planner.errors.ClusterError` naming the key; the
    loader checks files first, to name their line too.
    """

    peak_flops_by_dtype: tuple[tuple[str, float], ...] = ()
    vector_flops: float | None = None
    memory_bandwidth_bytes_per_s: float = math.inf
    kernel_overhead_s: float = 0.0
    matmul_efficiency: tuple[tuple[float, float], ...] = ((1.0, 1.0),)
    step_overhead_s: float = 0.0

    def __post_init__(self):
        pairs = self.peak_flops_by_dtype
        pairs = pairs.items() if isinstance(pairs, Mapping) else pairs
        peaks: dict[str, float] = {}
        for dtype, rate in pairs:
            if dtype not in MATMUL_DTYPES:
                raise ClusterError(f"peak_flops_by_dtype: {quote(dtype)} is not a floating dtype; "
                                   f"give one of {', '.join(MATMUL_DTYPES)}")
            if dtype in peaks:
                raise ClusterError(f"peak_flops_by_dtype: {dtype} is given twice; give it once")
            _check_rate(f"peak_flops_by_dtype.{dtype}", rate)
            peaks[dtype] = float(rate)
        object.__setattr__(self, "peak_flops_by_dtype", tuple(sorted(peaks.items())))
        if self.vector_flops is not None:
            _check_rate("vector_flops", self.vector_flops)
        bandwidth = self.memory_bandwidth_bytes_per_s
        if not _number(bandwidth) or math.isnan(bandwidth) or bandwidth <= 0:
            raise ClusterError(f"memory_bandwidth_bytes_per_s is {quote(bandwidth)}; "
                               "it must be a number > 0 (inf for unlimited)")
        overhead = self.kernel_overhead_s
        if not _number(overhead) or not math.isfinite(overhead) or overhead < 0:
            raise ClusterError(f"kernel_overhead_s is {quote(overhead)}; it must be a finite number >= 0")
        step = self.step_overhead_s
        if not _number(step) or not math.isfinite(step) or step < 0:
            raise ClusterError(f"step_overhead_s is {quote(step)}; it must be a finite number >= 0")
        object.__setattr__(self, "matmul_efficiency", curve_points(self.matmul_efficiency))

    @property
    def is_default(self) -> bool:
        """Whether this is the first model's roofline (FLOPs at 100% of peak, nothing else)."""
        return self == Roofline()

    def peak_flops(self, dtype: str, device_peak_flops: float) -> float:
        """The matmul units' peak for ``dtype``: its own entry, else ``device_peak_flops``."""
        return dict(self.peak_flops_by_dtype).get(dtype, device_peak_flops)

    def efficiency(self, flops: float) -> float:
        """The matmul efficiency at ``flops`` on one device: linear in ``log(flops)`` between
        the points, the first point's below them and the last point's above."""
        points = self.matmul_efficiency
        if flops <= points[0][0]:
            return points[0][1]
        if flops >= points[-1][0]:
            return points[-1][1]
        i = bisect.bisect_right([f for f, _ in points], flops)
        (f0, e0), (f1, e1) = points[i - 1], points[i]
        t = (math.log(flops) - math.log(f0)) / (math.log(f1) - math.log(f0))
        return e0 + t * (e1 - e0)

    @property
    def best_efficiency(self) -> float:
        """The highest efficiency of the curve (its last point's: the curve never decreases)."""
        return self.matmul_efficiency[-1][1]

    def __str__(self) -> str:
        parts = [f"{dtype} {format_quantity(rate, 'FLOP/s')}" for dtype, rate in self.peak_flops_by_dtype]
        if self.vector_flops is not None:
            parts.append(f"vector {format_quantity(self.vector_flops, 'FLOP/s')}")
        if math.isfinite(self.memory_bandwidth_bytes_per_s):
            parts.append(f"memory {format_quantity(self.memory_bandwidth_bytes_per_s, 'bytes/s')}")
        if self.kernel_overhead_s:
            parts.append(f"{format_quantity(self.kernel_overhead_s, 's')} per kernel")
        if self.step_overhead_s:
            parts.append(f"{format_quantity(self.step_overhead_s, 's')} per step")
        points = self.matmul_efficiency
        if len(points) > 1:
            (f0, e0), (f1, e1) = points[0], points[-1]
            parts.append(f"matmul efficiency {e0:.0%} at {format_quantity(f0, 'FLOP')} .. {e1:.0%} at {format_quantity(f1, 'FLOP')}")
        elif points[0][1] != 1.0:
            parts.append(f"matmul efficiency {points[0][1]:.0%}")
        return ", ".join(parts)


def _check_rate(name: str, rate: object) -> None:
    if not _number(rate) or not math.isfinite(rate) or rate <= 0:
        raise ClusterError(f"{name} is {quote(rate)}; it must be a finite number > 0")


def curve_points(curve: Curve) -> tuple[tuple[float, float], ...]:
    """``curve`` (a constant efficiency or ``(flops, efficiency)`` points) as checked points.

    >>> curve_points(0.5), curve_points([[1e6, 0.1], [1e9, 0.5]])
    (((1.0, 0.5),), ((1000000.0, 0.1), (1000000000.0, 0.5)))
    >>> curve_points([[1e9, 0.5], [1e6, 0.6]])
    Traceback (most recent call last):
    ...
    planner.errors.ClusterError: matmul_efficiency: point 2 has flops 1e+06, not more than the 1e+09 before it; flops must be strictly increasing
    """
    if _number(curve):
        _check_efficiency("matmul_efficiency", curve)
        return ((1.0, float(curve)),)
    if isinstance(curve, (str, bytes, Mapping)) or not isinstance(curve, Sequence) or not curve:
        raise ClusterError(f"matmul_efficiency is {quote(curve)}; give a number in (0, 1] or a list of "
                           "[flops, efficiency] points")
    points: list[tuple[float, float]] = []
    for n, point in enumerate(curve, 1):
        if (isinstance(point, (str, bytes)) or not isinstance(point, Sequence) or len(point) != 2
                or not all(_number(v) for v in point)):
            raise ClusterError(f"matmul_efficiency: point {n} is {quote(point)}; a point is [flops, efficiency]")
        flops, efficiency = float(point[0]), float(point[1])
        if not math.isfinite(flops) or flops <= 0:
            raise ClusterError(f"matmul_efficiency: point {n} has flops {quote(point[0])}; it must be a finite number > 0")
        _check_efficiency(f"matmul_efficiency: point {n}", efficiency)
        if points and flops <= points[-1][0]:
            raise ClusterError(f"matmul_efficiency: point {n} has flops {flops:g}, not more than the "
                               f"{points[-1][0]:g} before it; flops must be strictly increasing")
        if points and efficiency < points[-1][1]:
            raise ClusterError(f"matmul_efficiency: point {n} has efficiency {efficiency:g}, less than the "
                               f"{points[-1][1]:g} before it; the curve is non-monotone: a larger matmul "
                               "reaches at least the efficiency of a smaller one")
        points.append((flops, efficiency))
    return tuple(points)


def _check_efficiency(name: str, value: float) -> None:
    if not math.isfinite(value) or not 0 < value <= 1:
        raise ClusterError(f"{name} has efficiency {quote(value)}; an efficiency is a fraction of the peak, "
                           "in (0, 1]")
