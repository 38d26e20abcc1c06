"""``shardplan calibrate``: the fits recover known parameters, the file it writes, its errors, and one quick run.

The fits (costmodels/fit.py) are checked on synthetic measurements made from known parameters by the cost
model's own formulas; the one end-to-end run on JAX host devices is a subprocess (JAX starts with 8 host
devices there) marked slow.
"""

import itertools
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from costmodels import load_cluster
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
    significant,
)
from costmodels.units import parse_quantity
from costmodels.writer import ClusterFile, format_number
from planner.cli.main import main
from planner.engines.calibrate import MATMUL, MEASURED_KINDS, Calibration, meshes

ROOT = Path(__file__).resolve().parents[2]


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
    for i, (kind, p, size) in enumerate(itertools.product(MEASURED_KINDS, (2, 4, 8), (4096, 2**16, 2**20, 2**24))):
        operand, result = collective_shapes(kind, size // 4, p)
        s = CollectiveSample(kind, p, operand, result, 4, 0.0)
        out.append(CollectiveSample(kind, p, operand, result, 4, collective_time_s(s, link) * noise(i)))
    return out


def test_collective_coefficients_are_the_cost_functions_terms():
    link = Link(37e9, 4.5e-6, 11e-6)
    for s in _collective_samples(Link(1e9, 1e-6, 1e-6)):
        c_o, c_l, c_b = collective_coefficients(s)
        expected = RING.cost(s.kind, s.p, s.unit_bytes, link).time_s
        assert c_o * link.overhead_s + c_l * link.latency_s + c_b / link.bandwidth_bytes_per_s == pytest.approx(expected)


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


def test_meshes_give_every_axis_size():
    assert meshes(8) == ((8,), (2, 4))
    assert meshes(2) == ((2,),)


# -- the file -------------------------------------------------------------------------------------------------------

def _calibration(**over):
    """A Calibration whose samples are exactly what its fitted numbers predict."""
    overhead, bandwidth, vector = 2e-6, 1e9, 5e9
    mm = _matmul_samples(overhead)
    fit = fit_matmul(mm, overhead).rounded()
    link = Link(1.5e9, 3e-6, 40e-6)
    coll = _collective_samples(link)
    values = dict(jax_version="0.10.2", platform="cpu", device_kind="cpu", devices=8,
                  measured_at="2026-01-01 00:00 UTC", quick=False, only=None, device_memory_bytes=2_931_534_567,
                  memory_source="the host's memory / 8 devices", dispatch_s=2e-4, kernel_overhead_s=overhead,
                  meshes=((8,), (2, 4)),
                  matmul=tuple(MatmulSample(s.dtype, s.m, s.k, s.n, s.itemsize,
                                            matmul_time_s(s, fit, bandwidth, overhead)) for s in mm),
                  bandwidth=(RateSample("y", 2.0 * 2**25, 2.0 * 2**25 / bandwidth + overhead),),
                  vector=((RateSample("v", 2.0 * 64 * 2**18, 2.0 * 64 * 2**18 / vector + overhead), 8 * 2**18),),
                  collectives=tuple(coll), matmul_fit=fit, memory_bandwidth_bytes_per_s=bandwidth,
                  vector_flops=vector, link=link)
    values.update(over)
    return Calibration(**values)


def test_residuals_of_samples_made_from_the_fit_are_zero():
    c = _calibration()
    families = {r.family for r in c.residuals()}
    assert families == {MATMUL, "memory", "vector", *MEASURED_KINDS}
    assert max(abs(r.relative_error) for r in c.residuals()) < 1e-9


def test_the_file_has_a_fixed_layout_and_numbers_with_units():
    text = _calibration().cluster_file("host").text()
    assert text == _calibration().cluster_file("host").text()
    keys = [line.split(":")[0] for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    assert keys == ["name", "device_peak_flops", "peak_flops_by_dtype", "vector_flops",
                    "memory_bandwidth_bytes_per_s", "kernel_overhead_s", "matmul_efficiency", "device_memory_bytes",
                    "devices_per_node", "intra_node", "inter_node"]
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert "jax 0.10.2, platform cpu, device kind cpu, 8 devices" in header[1]
    raw = yaml.safe_load(text)
    assert raw["intra_node"] == raw["inter_node"] and raw["devices_per_node"] == 8
    assert raw["device_memory_bytes"] == "2932MB"  # 2,931,534,567 to 4 significant digits, whole MB
    assert parse_quantity(raw["memory_bandwidth_bytes_per_s"], "bytes/s") == pytest.approx(1e9)
    assert parse_quantity(raw["intra_node"]["overhead_s"], "s") == pytest.approx(40e-6)


@pytest.mark.parametrize("value,unit,base", [(13.75e9, "FLOP/s", "FLOP/s"), (1.234e-6, "s", "s"),
                                             (987.6e6, "B/s", "bytes/s"), (3.2e-10, "s", "s"), (0.0, "s", "s")])
def test_numbers_read_back_to_four_significant_digits(value, unit, base):
    assert parse_quantity(format_number(value, unit), base) == pytest.approx(significant(value), rel=1e-12)


def test_a_links_only_file_loads_over_its_preset(tmp_path):
    c = _calibration(only="links", matmul=(), bandwidth=(), vector=(), matmul_fit=None,
                     memory_bandwidth_bytes_per_s=None, vector_flops=None)
    path = tmp_path / "links.yaml"
    path.write_text(c.cluster_file("links", "nvlink-node").text())
    cluster = load_cluster(path)
    assert cluster.intra_node == cluster.inter_node == Link(1.5e9, 3e-6, 40e-6)
    assert cluster.devices_per_node == 8 and cluster.device_memory_bytes == 2_932_000_000
    assert cluster.device_peak_flops == load_cluster("nvlink-node").device_peak_flops


def test_the_full_file_loads(tmp_path):
    """Needs the loader's compute keys (peak_flops_by_dtype, vector_flops, memory_bandwidth_bytes_per_s,
    kernel_overhead_s, matmul_efficiency: docs/clusters.md)."""
    c = _calibration()
    path = tmp_path / "host.yaml"
    path.write_text(c.cluster_file("host").text())
    cluster = load_cluster(path)
    assert cluster.name == "host" and cluster.intra_node == c.link
    assert cluster.device_peak_flops == pytest.approx(max(p for _, p in c.matmul_fit.peak_flops_by_dtype))


def test_the_report_lists_each_family_and_the_median_error():
    from planner.cli.calibrate import render

    c = _calibration()
    text = render(c, "host.yaml")
    for family in (MATMUL, "memory", "vector", *MEASURED_KINDS):
        assert f"\n{family} " in text
    # 16 matmuls, 1 bandwidth, 1 vector chain, 5 kinds x 3 group sizes x 4 message sizes
    assert len(c.residuals()) == 16 + 1 + 1 + 60
    assert text.rstrip().endswith("median |relative error| over 78 measurements: 0.0%")


# -- the command's errors (nothing measured, nothing written) ---------------------------------------------------------

def _calibrate(capsys, *argv):
    code = main(["calibrate", *argv])
    return code, capsys.readouterr().err


def test_fewer_than_one_device_is_refused(tmp_path, capsys):
    code, err = _calibrate(capsys, "--devices", "0", "--out", str(tmp_path / "c.yaml"))
    assert code == 2 and "--devices 0: give a number of devices >= 1" in err
    assert not (tmp_path / "c.yaml").exists()


def test_one_device_needs_only_compute(tmp_path, capsys):
    code, err = _calibrate(capsys, "--devices", "1", "--out", str(tmp_path / "c.yaml"))
    assert code == 2 and "collectives need >= 2 devices" in err and "--only compute" in err
    assert "Traceback" not in err and not (tmp_path / "c.yaml").exists()


def test_an_output_in_a_missing_folder_is_refused(tmp_path, capsys):
    out = tmp_path / "no-such-folder" / "c.yaml"
    code, err = _calibrate(capsys, "--out", str(out))
    assert code == 2 and f"{out}: the folder {os.path.realpath(out.parent)} does not exist" in err
    assert not out.parent.exists()


def test_an_output_that_is_a_folder_is_refused(tmp_path, capsys):
    code, err = _calibrate(capsys, "--out", str(tmp_path))
    assert code == 2 and "this is a folder" in err


def test_an_unknown_preset_is_refused(tmp_path, capsys):
    code, err = _calibrate(capsys, "--only", "compute", "--preset", "no-such", "--out", str(tmp_path / "c.yaml"))
    assert code == 2 and "no-such" in err and "nvlink-node" in err


def test_without_jax_calibrate_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "jax", None)  # what an environment without jax looks like to import
    code, err = _calibrate(capsys, "--out", str(tmp_path / "c.yaml"))
    assert code == 2 and 'pip install "shardplan[jax]"' in err and "Traceback" not in err
    assert not (tmp_path / "c.yaml").exists()


def test_more_devices_than_jax_holds_is_refused(tmp_path, capsys):
    jax = pytest.importorskip("jax")
    n = len(jax.devices())  # this process's JAX is already initialised: its host devices cannot change
    code, err = _calibrate(capsys, "--devices", str(n + 1), "--out", str(tmp_path / "c.yaml"))
    assert code == 2 and f"--devices {n + 1} is more than the devices present: JAX sees {n}" in err
    assert "start a fresh one" in err or f"--devices {n} or fewer" in err
    assert not (tmp_path / "c.yaml").exists()


# -- one quick run on host devices ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_quick_calibration_on_host_devices_writes_a_cluster_file(tmp_path):
    pytest.importorskip("jax")
    out = tmp_path / "host.yaml"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    run = subprocess.run([sys.executable, "-m", "planner", "calibrate", "--quick", "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, env=dict(env, JAX_PLATFORMS="cpu"), timeout=300)
    assert run.returncode == 0, run.stderr
    assert "median |relative error|" in run.stdout and "AllToAll" in run.stdout
    raw = yaml.safe_load(out.read_text())
    assert list(raw) == ["name", "device_peak_flops", "peak_flops_by_dtype", "vector_flops",
                         "memory_bandwidth_bytes_per_s", "kernel_overhead_s", "matmul_efficiency",
                         "device_memory_bytes", "devices_per_node", "intra_node", "inter_node"]
    assert raw["name"] == "host" and raw["devices_per_node"] == 8 and sorted(raw["peak_flops_by_dtype"]) == ["bf16", "f32"]
    assert raw["intra_node"] == raw["inter_node"]
    flops = [parse_quantity(f[:-len("FLOP")] + "FLOP/s", "FLOP/s") for f, _ in raw["matmul_efficiency"]]
    effs = [e for _, e in raw["matmul_efficiency"]]
    assert all(a < b for a, b in zip(flops, flops[1:])) and all(a <= b for a, b in zip(effs, effs[1:]))
    assert all(0 < e <= 1 for e in effs)
    # the links part loads as the planner reads it
    links = {k: raw[k] for k in ("name", "device_memory_bytes", "devices_per_node", "intra_node", "inter_node")}
    cluster = load_cluster({**links, "preset": "default"})
    assert cluster.intra_node.bandwidth_bytes_per_s > 0
    assert out.read_text().startswith("# Measured by shardplan calibrate --quick on ")
