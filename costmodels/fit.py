"""Fitting a cluster's numbers to measured times: compute rates, the matmul efficiency curve, a link.

Pure numpy/scipy over measurements that :mod:`planner.engines.calibrate` takes on JAX devices. Every
fitted number is one the cost model reads from a cluster file (``docs/clusters.md``), and every fit
uses the cost model's own formulas, so that the fitted cluster predicts what the planner computes:

* **per-op overhead**: ``(t(chain of c tiny ops) - t(one tiny op)) / (c - 1)`` (:func:`per_op_overhead_s`);
* **rates** (memory bandwidth, ``vector_flops``): ``time - overhead = work / rate`` by least squares
  over relative errors (:func:`fit_rate`);
* **matmul**: each sample's rate ``flops / (time - overhead)``; ``peak_flops_by_dtype[d]`` is the best
  rate of dtype ``d``; each sample's efficiency (rate / its dtype's peak) against its FLOPs, made
  non-decreasing by isotonic regression (:func:`isotonic_increasing`, pool-adjacent-violators), is the
  ``matmul_efficiency`` curve (:func:`fit_matmul`), read back by :func:`efficiency_at`;
* **a link**: the collectives' ``overhead_s``, ``latency_s`` and ``1 / bandwidth_bytes_per_s`` by
  non-negative least squares over relative errors (:func:`fit_link`). A collective's time is linear in
  those three, with the coefficients the planner's own cost function gives (:func:`collective_coefficients`:
  :data:`costmodels.collectives.RING` evaluated on unit links), so nothing of the ring formulas is
  restated here.

>>> isotonic_increasing([1.0, 3.0, 2.0, 4.0]).tolist()
[1.0, 2.5, 2.5, 4.0]
>>> efficiency_at(((1e6, 0.1), (1e9, 0.4)), 10**7.5)  # half way in log(flops)
0.25
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from scipy.optimize import nnls

from costmodels.cluster import Link
from costmodels.collectives import RING
from costmodels.roofline import Roofline
from planner.collectives import primitive, step_kind
from planner.errors import CostModelError

__all__ = [
    "CollectiveSample",
    "MatmulFit",
    "MatmulSample",
    "RateSample",
    "collective_coefficients",
    "collective_shapes",
    "collective_time_s",
    "compute_rate",
    "efficiency_at",
    "fit_link",
    "fit_matmul",
    "fit_rate",
    "fit_slope_rate",
    "isotonic_increasing",
    "link_rounded",
    "matmul_time_s",
    "per_op_overhead_s",
    "relative_error",
    "roofline_time_s",
    "significant",
]

#: A sample's compute time is at least this share of its measured time, however large the per-op overhead
#: fitted elsewhere: a noisy overhead larger than a small op's time would otherwise give it an infinite rate.
MIN_COMPUTE_SHARE = 0.1


def significant(value: float, digits: int = 4) -> float:
    """``value`` rounded to ``digits`` significant digits (what a cluster file holds).

    >>> significant(123456.0), significant(0.000123456), significant(0.0)
    (123500.0, 0.0001235, 0.0)
    """
    if value == 0 or not math.isfinite(value):
        return value
    return float(f"{value:.{digits - 1}e}")


def relative_error(measured: float, fitted: float) -> float:
    """``(fitted - measured) / measured``: positive when the fit predicts too long a time."""
    return (fitted - measured) / measured


# -- per-op overhead and rates ---------------------------------------------------------------------------------

def per_op_overhead_s(one_s: float, chain_s: float, count: int) -> float:
    """The time one more op adds: a program of ``count`` tiny ops took ``chain_s``, one of one took ``one_s``;
    never negative (on a fast launcher the difference is within the noise).

    >>> per_op_overhead_s(10e-6, 41e-6, 32)
    1e-06
    >>> per_op_overhead_s(10e-6, 9e-6, 32)
    0.0
    """
    if count < 2:
        raise CostModelError(f"a chain of {count} ops tells nothing of the per-op overhead; give at least 2")
    return max(0.0, (chain_s - one_s) / (count - 1))


@dataclass(frozen=True, slots=True)
class RateSample:
    """One timed op doing ``work`` (bytes moved, or FLOPs) in ``time_s``; ``label`` names it in tables."""

    label: str
    work: float
    time_s: float


def fit_rate(samples: Sequence[RateSample], overhead_s: float = 0.0) -> float:
    """The rate ``r`` of ``time - overhead_s = work / r`` that minimises the squared relative errors.

    >>> fit_rate([RateSample("a", 100.0, 2.0), RateSample("b", 300.0, 4.0)], overhead_s=1.0)
    100.0
    """
    if not samples:
        raise CostModelError("fitting a rate needs at least one sample")
    work = np.array([s.work for s in samples], dtype=float)
    time = np.array([s.time_s for s in samples], dtype=float)
    compute = np.maximum(time - overhead_s, MIN_COMPUTE_SHARE * time)
    # minimise sum ((work * x - compute) / time)^2 over x = 1 / rate
    a, b = work / time, compute / time
    x = float(a @ b) / float(a @ a)
    return 1.0 / x


def fit_slope_rate(samples: Sequence[RateSample], overhead_s: float = 0.0) -> float:
    """The rate of the extra work over the extra time: the slope of ``time = c + work / rate`` by least
    squares, which leaves out whatever the samples share (the bytes of a fused chain of multiply-adds of
    two lengths on one buffer). Falls back on :func:`fit_rate` with fewer than two distinct amounts of
    work or a slope that is not positive (noise).

    >>> round(fit_slope_rate([RateSample("a", 100.0, 7.0), RateSample("b", 300.0, 9.0)]), 9)
    100.0
    """
    work = np.array([s.work for s in samples], dtype=float)
    time = np.array([s.time_s for s in samples], dtype=float)
    if len(set(work.tolist())) >= 2:
        slope = float(np.polyfit(work, time, 1)[0])
        if slope > 0:
            return 1.0 / slope
    return fit_rate(samples, overhead_s)


# -- matmul: peaks and the efficiency curve ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class MatmulSample:
    """One local matmul ``[m, k] @ [k, n]`` in ``dtype`` (a graph dtype name) that took ``time_s``."""

    dtype: str
    m: int
    k: int
    n: int
    itemsize: int
    time_s: float

    @property
    def flops(self) -> int:
        return 2 * self.m * self.k * self.n

    @property
    def bytes(self) -> int:
        """Bytes read and written: both operands and the result."""
        return (self.m * self.k + self.k * self.n + self.m * self.n) * self.itemsize

    @property
    def label(self) -> str:
        return f"{self.dtype} {self.m}x{self.k}x{self.n}"


@dataclass(frozen=True, slots=True)
class MatmulFit:
    """``peak_flops_by_dtype`` (dtype, FLOP/s) pairs sorted by dtype, and the efficiency ``curve``:
    ``(flops, efficiency)`` points, flops strictly increasing, efficiency non-decreasing in ``(0, 1]``."""

    peak_flops_by_dtype: tuple[tuple[str, float], ...]
    curve: tuple[tuple[float, float], ...]

    @property
    def peaks(self) -> dict[str, float]:
        return dict(self.peak_flops_by_dtype)

    def rounded(self, digits: int = 4) -> "MatmulFit":
        """The fit as a file holds it: every number to ``digits`` significant digits, the curve still valid
        (points whose rounded FLOPs meet the previous one's are dropped; rounding keeps the order)."""
        curve: list[tuple[float, float]] = []
        for flops, eff in self.curve:
            point = (significant(flops, digits), min(1.0, significant(eff, digits)))
            if curve and point[0] <= curve[-1][0]:
                continue
            curve.append(point)
        peaks = tuple((d, significant(p, digits)) for d, p in self.peak_flops_by_dtype)
        return MatmulFit(peaks, no_faster_when_larger(curve, digits))


def no_faster_when_larger(curve: Sequence[tuple[float, float]], digits: int | None = None) -> tuple:
    """``curve`` with efficiencies raised where needed so that a larger matmul never takes less time.

    Between two points the efficiency is linear in ``log(flops)`` with slope ``s``, and a matmul's time
    ``flops / (peak * e)`` grows with its FLOPs exactly while ``s <= e``; ``e`` is smallest at the left
    point, so point ``i`` needs ``e_i >= e_{i+1} / (1 + log(f_{i+1} / f_i))``. A measured curve that
    rises faster (small kernels' fixed cost folded into their efficiency) is raised there, from the
    largest point down: the large matmuls, which dominate a step, keep their measured efficiency, and a
    small one is priced a little faster than measured. ``digits`` rounds a raised value up to that many
    significant digits, so the file keeps the property.

    >>> no_faster_when_larger([(1e6, 0.01), (1e9, 0.5)])  # 0.5 / (1 + log(1000))
    ((1000000.0, 0.06322906847268528), (1000000000.0, 0.5))
    """
    out = list(curve)
    for i in range(len(out) - 2, -1, -1):
        (flops, eff), (next_flops, next_eff) = out[i], out[i + 1]
        floor = next_eff / (1.0 + math.log(next_flops / flops))
        if eff < floor:
            out[i] = (flops, min(next_eff, _round_up(floor, digits) if digits else floor))
    return tuple(out)


def _round_up(value: float, digits: int) -> float:
    scale = 10 ** (digits - 1 - math.floor(math.log10(value)))
    return math.ceil(value * scale) / scale


def isotonic_increasing(values: Iterable[float], weights: Iterable[float] | None = None) -> np.ndarray:
    """The non-decreasing sequence closest to ``values`` in weighted least squares (pool adjacent violators).

    Each block of adjacent values that decreases is replaced by its weighted mean, until none does.

    >>> isotonic_increasing([3.0, 1.0, 2.0], [1.0, 1.0, 1.0]).tolist()
    [2.0, 2.0, 2.0]
    >>> isotonic_increasing([1.0, 0.0], [3.0, 1.0]).tolist()
    [0.75, 0.75]
    """
    y = np.asarray(list(values), dtype=float)
    w = np.ones_like(y) if weights is None else np.asarray(list(weights), dtype=float)
    if y.shape != w.shape or np.any(w <= 0):
        raise CostModelError("isotonic regression needs one positive weight per value")
    means: list[float] = []
    totals: list[float] = []
    counts: list[int] = []
    for value, weight in zip(y, w):
        means.append(float(value)), totals.append(float(weight)), counts.append(1)
        while len(means) > 1 and means[-2] > means[-1]:  # a violation: pool the last two blocks
            weight = totals[-2] + totals[-1]
            mean = (means[-2] * totals[-2] + means[-1] * totals[-1]) / weight
            count = counts[-2] + counts[-1]
            del means[-1], totals[-1], counts[-1]
            means[-1], totals[-1], counts[-1] = mean, weight, count
    return np.repeat(means, counts)


def compute_rate(sample: MatmulSample | RateSample, overhead_s: float) -> float:
    """FLOP/s of a matmul sample (work/s of a rate sample) once the per-op overhead is taken off its time."""
    work = sample.flops if isinstance(sample, MatmulSample) else sample.work
    return work / max(sample.time_s - overhead_s, MIN_COMPUTE_SHARE * sample.time_s)


def fit_matmul(samples: Sequence[MatmulSample], overhead_s: float = 0.0) -> MatmulFit:
    """Each dtype's peak (its best rate) and one efficiency curve over FLOPs for every dtype.

    Samples of equal FLOPs (several shapes or dtypes) pool into one point, the mean of their efficiencies;
    the points are made non-decreasing (:func:`isotonic_increasing`, weighted by how many samples each
    holds), and the inner points of a flat stretch are dropped (interpolation between its ends gives them).

    >>> s = [MatmulSample("f32", n, n, n, 4, 2 * n**3 / r) for n, r in ((8, 1e6), (64, 4e6), (512, 1e7))]
    >>> fit = fit_matmul(s)
    >>> fit.peak_flops_by_dtype, fit.curve
    ((('f32', 10000000.0),), ((1024.0, 0.1), (524288.0, 0.4), (268435456.0, 1.0)))
    """
    if not samples:
        raise CostModelError("fitting matmul throughput needs at least one sample")
    rates = [compute_rate(s, overhead_s) for s in samples]
    peaks: dict[str, float] = {}
    for s, rate in zip(samples, rates):
        peaks[s.dtype] = max(peaks.get(s.dtype, 0.0), rate)
    pooled: dict[int, list[float]] = {}
    for s, rate in zip(samples, rates):
        pooled.setdefault(s.flops, []).append(rate / peaks[s.dtype])
    flops = sorted(pooled)
    fitted = isotonic_increasing([float(np.mean(pooled[f])) for f in flops], [len(pooled[f]) for f in flops])
    points = [(float(f), min(1.0, float(e))) for f, e in zip(flops, fitted)]
    kept = [p for i, p in enumerate(points)
            if i in (0, len(points) - 1) or not (points[i - 1][1] == p[1] == points[i + 1][1])]
    return MatmulFit(tuple(sorted(peaks.items())), no_faster_when_larger(kept))


def efficiency_at(curve: Sequence[tuple[float, float]], flops: float) -> float:
    """The curve's efficiency at ``flops``: linear in ``log(flops)`` between points, clamped at both ends
    (the cluster format's ``matmul_efficiency``).

    >>> curve = ((1e6, 0.1), (1e9, 0.4))
    >>> efficiency_at(curve, 10.0), efficiency_at(curve, 1e12), efficiency_at(curve, 1e6)
    (0.1, 0.4, 0.1)
    """
    return Roofline(matmul_efficiency=curve).efficiency(flops)


def roofline_time_s(flops: float, bytes_: float, rate: float, bandwidth: float, overhead_s: float) -> float:
    """One op's time in the roofline: the larger of its FLOPs at ``rate`` and its bytes at ``bandwidth``,
    plus the per-op overhead.

    >>> roofline_time_s(100.0, 10.0, 10.0, 2.0, 1.0)
    11.0
    """
    return max(flops / rate, bytes_ / bandwidth) + overhead_s


def matmul_time_s(sample: MatmulSample, fit: MatmulFit, bandwidth: float, overhead_s: float) -> float:
    """What the fitted cluster predicts for ``sample``: the roofline at its dtype's peak times the curve's
    efficiency at its FLOPs."""
    rate = fit.peaks[sample.dtype] * efficiency_at(fit.curve, sample.flops)
    return roofline_time_s(sample.flops, sample.bytes, rate, bandwidth, overhead_s)


# -- collectives: a link ------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CollectiveSample:
    """One collective step of ``kind`` (a step kind: ``AllGather`` ...) over a group of ``p`` devices, local
    operand and result of ``operand_elements`` / ``result_elements`` items of ``itemsize`` bytes, that took
    ``time_s``; ``label`` says where it ran (the mesh axis) for the tables."""

    kind: str
    p: int
    operand_elements: int
    result_elements: int
    itemsize: int
    time_s: float
    label: str = ""

    @property
    def unit_bytes(self) -> int:
        """The unit a round moves, by the registry's rule for the kind (the planner's convention)."""
        return step_kind(self.kind).unit_bytes(self.operand_elements, self.result_elements, self.p, self.itemsize)

    @property
    def buffer_bytes(self) -> int:
        """The larger of the local operand and result: the message size the tables show."""
        return max(self.operand_elements, self.result_elements) * self.itemsize


def collective_shapes(kind: str, buffer_elements: int, p: int) -> tuple[int, int]:
    """``(operand, result)`` local element counts of a ``kind`` step whose larger buffer holds
    ``buffer_elements`` (a multiple of ``p``), by how the kind's primitive shapes its result.

    >>> collective_shapes("AllGather", 16, 4), collective_shapes("ReduceScatter", 16, 4)
    ((4, 16), (16, 4))
    >>> collective_shapes("AllReduce", 16, 4), collective_shapes("CollectivePermute", 16, 4)
    ((16, 16), (16, 16))
    """
    if buffer_elements % p:
        raise CostModelError(f"a buffer of {buffer_elements} elements does not split into {p} equal pieces")
    k = step_kind(kind)
    result = buffer_elements // p if primitive(k.primitive).shape == "scatters" else buffer_elements
    return k.operand(result, p), result


def collective_coefficients(sample: CollectiveSample) -> tuple[float, float, float]:
    """``(c_o, c_l, c_b)``: the planner prices ``sample`` on a link at ``c_o·overhead_s + c_l·latency_s +
    c_b / bandwidth_bytes_per_s``. The cost function is linear in the three, so they are read off it on unit
    links.

    >>> collective_coefficients(CollectiveSample("AllReduce", 4, 16, 16, 4, 1.0))
    (1.0, 6.0, 96.0)
    """
    def time(bandwidth: float, latency: float, overhead: float) -> float:
        return RING.cost(sample.kind, sample.p, sample.unit_bytes, Link(bandwidth, latency, overhead)).time_s

    base = time(1.0, 0.0, 0.0)
    return time(1.0, 0.0, 1.0) - base, time(1.0, 1.0, 0.0) - base, base


def collective_time_s(sample: CollectiveSample, link: Link) -> float:
    """The planner's time for ``sample`` on ``link``."""
    return RING.cost(sample.kind, sample.p, sample.unit_bytes, link).time_s


def fit_link(samples: Sequence[CollectiveSample]) -> Link:
    """The link whose cost function best predicts ``samples``: non-negative least squares of the relative
    errors over ``(overhead_s, latency_s, 1 / bandwidth_bytes_per_s)``.

    A fit that leaves no time for the bytes (every message so small that latency explains it) would say
    the bandwidth is infinite, which a link cannot be: the bandwidth is then the highest one measured,
    ``max(bytes / time)``.
    """
    rows = [(collective_coefficients(s), s.time_s) for s in samples if s.time_s > 0]
    if not rows:
        raise CostModelError("fitting a link needs at least one collective sample with a positive time")
    a = np.array([[c / t for c in coefficients] for coefficients, t in rows])
    scale = np.where(a.max(axis=0) > 0, a.max(axis=0), 1.0)  # columns of bytes and of counts: alike for nnls
    solution, _ = nnls(a / scale, np.ones(len(rows)))
    overhead, latency, inverse_bandwidth = solution / scale
    if inverse_bandwidth <= 0:
        inverse_bandwidth = min(t / c[2] for c, t in rows if c[2] > 0)
    return Link(1.0 / float(inverse_bandwidth), float(latency), float(overhead))


def link_rounded(link: Link, digits: int = 4) -> Link:
    """``link`` as a file holds it: each number to ``digits`` significant digits."""
    return Link(significant(link.bandwidth_bytes_per_s, digits), significant(link.latency_s, digits),
                significant(link.overhead_s, digits))
