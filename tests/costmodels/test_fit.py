"""costmodels/fit.py: the fits recover the parameters that made synthetic measurements.

Each test makes its measurements from known parameters by the cost model's own formulas (the roofline, the
planner's collective cost functions) and checks that fitting them gives the parameters back."""

import itertools
import math

import numpy as np
import pytest

from costmodels.cluster import Link
from costmodels.collectives import RING
from costmodels.fit import (
    CollectiveSample,
    MatmulSample,
    RateSample,
    collective_coefficients,
    collective_shapes,
    collective_time_s,
    efficiency_at,
    fit_link,
    fit_matmul,
    fit_rate,
    fit_slope_rate,
    isotonic_increasing,
    matmul_time_s,
    per_op_overhead_s,
)

#: The step kinds a calibration measures (those that communicate).
KINDS = ("AllReduce", "ReduceScatter", "AllGather", "AllToAll", "CollectivePermute")


# -- isotonic regression ------------------------------------------------------------------------------------------

def _brute_isotonic(values, weights):
    """The weighted least-squares non-decreasing fit by exhaustion over block partitions: every non-decreasing
    least-squares fit is piecewise constant, each piece the weighted mean of its values."""
    n = len(values)
    best = None
    for cuts in itertools.product([False, True], repeat=n - 1):
        blocks, start = [], 0
        for i, cut in enumerate(cuts, 1):
            if cut:
                blocks.append((start, i))
                start = i
        blocks.append((start, n))
        fit = []
        for a, b in blocks:
            mean = np.average(values[a:b], weights=weights[a:b])
            fit += [mean] * (b - a)
        if any(x > y + 1e-12 for x, y in zip(fit, fit[1:])):
            continue
        cost = float(np.sum(weights * (np.array(fit) - values) ** 2))
        if best is None or cost < best[0] - 1e-12:
            best = (cost, fit)
    return np.array(best[1])


def test_isotonic_regression_is_the_least_squares_non_decreasing_fit():
    rng = np.random.default_rng(0)
    for _ in range(40):
        n = int(rng.integers(1, 8))
        values, weights = rng.normal(size=n), rng.integers(1, 4, size=n).astype(float)
        fit = isotonic_increasing(values, weights)
        assert np.all(np.diff(fit) >= 0)
        np.testing.assert_allclose(fit, _brute_isotonic(values, weights), atol=1e-12)


def test_isotonic_regression_keeps_a_sorted_sequence_and_flattens_a_falling_one():
    assert isotonic_increasing([0.1, 0.2, 0.2, 0.9]).tolist() == [0.1, 0.2, 0.2, 0.9]
    # a falling sequence has one block: its weighted mean (1*3 + 3*1) / 4
    assert isotonic_increasing([3.0, 1.0], [1.0, 3.0]).tolist() == [1.5, 1.5]


# -- matmul: peaks and the efficiency curve -----------------------------------------------------------------------

PEAKS = {"bf16": 2e12, "f32": 1e12}


def _true_efficiency(flops):
    """A known monotone curve: 5% at 1 MFLOP rising linearly in log10(flops) to 100% at 1 TFLOP."""
    return min(1.0, max(0.05, 0.05 + 0.95 * (math.log10(flops) - 6) / 6))


def _matmul_samples(overhead_s, noise=lambda i: 1.0):
    sizes = (64, 128, 256, 512, 1024, 2048, 4096, 5040)  # 5040: 2 * 5040**3 = 256 GFLOP
    samples = []
    for i, (dtype, n) in enumerate(itertools.product(sorted(PEAKS), sizes)):
        flops = 2 * n**3
        samples.append(MatmulSample(dtype, n, n, n, 2 if dtype == "bf16" else 4,
                                    flops / (PEAKS[dtype] * _true_efficiency(flops)) * noise(i) + overhead_s))
    return samples


def test_fit_matmul_recovers_each_dtypes_peak_and_the_efficiency_curve():
    overhead = 3e-6
    fit = fit_matmul(_matmul_samples(overhead), overhead)
    # each dtype's best rate is its peak times the curve's best efficiency, that of the largest shape
    best = _true_efficiency(2 * 5040**3)
    assert fit.peaks == pytest.approx({d: p * best for d, p in PEAKS.items()}, rel=1e-9)
    for flops, eff in fit.curve:
        assert eff == pytest.approx(_true_efficiency(flops) / best, rel=1e-9)
    assert [f for f, _ in fit.curve] == sorted({2.0 * n**3 for n in (64, 128, 256, 512, 1024, 2048, 4096, 5040)})


def test_the_fitted_curve_predicts_the_samples_it_came_from():
    overhead = 3e-6
    samples = _matmul_samples(overhead)
    fit = fit_matmul(samples, overhead)
    for s in samples:  # compute-bound at an infinite bandwidth: the roofline gives the sample's time back
        assert matmul_time_s(s, fit, math.inf, overhead) == pytest.approx(s.time_s, rel=1e-9)


def test_a_noisy_curve_is_made_non_decreasing_in_zero_one():
    noise = lambda i: (1.3, 0.8, 1.0, 1.2)[i % 4]  # noqa: E731  (slow and fast samples by turns)
    fit = fit_matmul(_matmul_samples(0.0, noise), 0.0)
    flops = [f for f, _ in fit.curve]
    effs = [e for _, e in fit.curve]
    assert all(a < b for a, b in zip(flops, flops[1:]))
    assert all(a <= b for a, b in zip(effs, effs[1:]))
    assert all(0 < e <= 1 for e in effs)
    rounded = fit.rounded()
    assert all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(rounded.curve, rounded.curve[1:]))


def test_efficiency_is_interpolated_in_log_flops_and_clamped():
    curve = ((1e3, 0.2), (1e5, 0.6), (1e9, 0.8))
    assert efficiency_at(curve, 1e4) == pytest.approx(0.4)  # half way from 1e3 to 1e5 in log
    assert efficiency_at(curve, 1e7) == pytest.approx(0.7)
    assert efficiency_at(curve, 1.0) == 0.2 and efficiency_at(curve, 1e15) == 0.8


# -- rates and overheads ----------------------------------------------------------------------------------------

def test_fit_rate_recovers_a_bandwidth_behind_a_fixed_overhead():
    bandwidth, overhead = 2.5e9, 4e-6
    samples = [RateSample(str(n), float(n), n / bandwidth + overhead) for n in (2**20, 2**24, 2**26)]
    assert fit_rate(samples, overhead) == pytest.approx(bandwidth, rel=1e-12)


def test_fit_slope_rate_leaves_out_what_the_samples_share():
    rate, shared = 5e9, 3e-3  # the chains' common memory traffic and overhead
    samples = [RateSample(str(k), 2.0 * k * 2**18, 2.0 * k * 2**18 / rate + shared) for k in (16, 80)]
    assert fit_slope_rate(samples) == pytest.approx(rate, rel=1e-9)


def test_per_op_overhead_is_the_time_one_more_op_adds():
    # 1 op: dispatch 200us + 1 op of 3us; 32 ops: dispatch + 32 x 3us
    assert per_op_overhead_s(203e-6, 296e-6, 32) == pytest.approx(3e-6)
    assert per_op_overhead_s(203e-6, 150e-6, 32) == 0.0


# -- collectives: the link ------------------------------------------------------------------------------------------

def _collective_samples(link, noise=lambda i: 1.0):
    out = []
    for i, (kind, p, size) in enumerate(itertools.product(KINDS, (2, 4, 8), (4096, 2**16, 2**20, 2**24))):
        operand, result = collective_shapes(kind, size // 4, p)
        s = CollectiveSample(kind, p, operand, result, 4, 0.0)
        out.append(CollectiveSample(kind, p, operand, result, 4, collective_time_s(s, link) * noise(i)))
    return out


def test_collective_coefficients_are_the_cost_functions_terms():
    link = Link(37e9, 4.5e-6, 11e-6)
    for s in _collective_samples(Link(1e9, 1e-6, 1e-6)):
        c_o, c_l, c_b = collective_coefficients(s)
        expected = RING.cost(s.kind, s.p, s.unit_bytes, link).time_s
        predicted = c_o * link.overhead_s + c_l * link.latency_s + c_b / link.bandwidth_bytes_per_s
        assert predicted == pytest.approx(expected)


def test_fit_link_recovers_latency_bandwidth_and_overhead():
    link = Link(12e9, 7e-6, 25e-6)
    fitted = fit_link(_collective_samples(link))
    assert fitted.bandwidth_bytes_per_s == pytest.approx(link.bandwidth_bytes_per_s, rel=1e-6)
    assert fitted.latency_s == pytest.approx(link.latency_s, rel=1e-6)
    assert fitted.overhead_s == pytest.approx(link.overhead_s, rel=1e-6)


def test_fit_link_under_noise_stays_close():
    link = Link(12e9, 7e-6, 25e-6)
    noise = lambda i: (1.05, 0.95, 1.0)[i % 3]  # noqa: E731  (+-5%)
    fitted = fit_link(_collective_samples(link, noise))
    assert fitted.bandwidth_bytes_per_s == pytest.approx(link.bandwidth_bytes_per_s, rel=0.1)
    # the fixed part of the smallest AllReduce over 8 (overhead + 14 latencies) within 10%
    fixed = lambda l: l.overhead_s + 14 * l.latency_s  # noqa: E731
    assert fixed(fitted) == pytest.approx(fixed(link), rel=0.1)


def test_collective_shapes_follow_the_primitive():
    # the larger buffer is the gathered result / the scattered operand, as the registry's primitives shape them
    assert collective_shapes("AllGather", 1024, 8) == (128, 1024)
    assert collective_shapes("ReduceScatter", 1024, 8) == (1024, 128)
    assert collective_shapes("AllToAll", 1024, 8) == (1024, 1024)
