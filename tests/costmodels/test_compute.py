"""The roofline: an op's seconds from its FLOPs, bytes, dtype and kind on a cluster."""

from __future__ import annotations

import math

import pytest

from costmodels.cluster import Cluster, Link
from costmodels.compute import best_rate_flops, compute_time_s, matmul_rate_flops, op_time_s
from costmodels.loader import load_cluster
from costmodels.roofline import Roofline

LINK = Link(1e9, 0.0)


def toy(roofline: Roofline = Roofline(), peak: float = 100e12) -> Cluster:
    return Cluster("toy", peak, 2**30, 8, LINK, LINK, roofline=roofline)


# -- the first model: FLOPs at 100% of the peak --------------------------------------------------

@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("matmul", [True, False])
@pytest.mark.parametrize("flops, nbytes", [(2e9, 0), (2e9, 10**12), (1.0, 10**9), (5e14, 12)])
def test_default_roofline_is_flops_over_the_peak_whatever_the_bytes_dtype_or_kind(dtype, matmul, flops, nbytes):
    assert op_time_s(flops, nbytes, dtype, matmul, toy()) == flops / 100e12


def test_the_old_keys_written_out_give_the_cluster_without_compute_keys():
    base = {"device_peak_flops": "100TFLOP/s", "device_memory_bytes": "16GiB", "devices_per_node": 8,
            "intra_node": {"bandwidth_bytes_per_s": "100GB/s", "latency_s": "5us"},
            "inter_node": {"bandwidth_bytes_per_s": "100GB/s", "latency_s": "5us"}}
    old = load_cluster({**base, "matmul_efficiency": 1, "memory_bandwidth_bytes_per_s": "inf",
                        "kernel_overhead_s": 0})
    assert old == load_cluster(base)
    assert old.roofline.is_default
    assert op_time_s(3e12, 10**15, "bf16", True, old) == 3e12 / 100e12


# -- the formula ----------------------------------------------------------------------------------

ROOF = Roofline({"bf16": 80e12, "f32": 20e12}, vector_flops=10e12, memory_bandwidth_bytes_per_s=1e12,
                kernel_overhead_s=3e-6, matmul_efficiency=[(1e6, 0.2), (1e8, 0.6)])


def test_an_elementwise_op_is_memory_bound_at_the_bandwidth_plus_overhead():
    n = 2**20  # an f32 add of n elements: 1 FLOP and 3 x 4 bytes per element
    t = op_time_s(n, 12 * n, "f32", False, toy(ROOF))
    assert t == pytest.approx(12 * n / 1e12 + 3e-6)
    assert t > n / 10e12 + 3e-6  # the FLOPs alone, at the vector rate, would be faster


def test_a_vector_op_with_many_flops_per_byte_runs_at_the_vector_rate():
    assert op_time_s(1e9, 1000, "bf16", False, toy(ROOF)) == pytest.approx(1e9 / 10e12 + 3e-6)


def test_a_large_matmul_runs_at_its_dtypes_peak_times_the_last_efficiency():
    # 2e12 FLOPs is past the last point (1e8): efficiency 0.6 of bf16's 80 TFLOP/s, of f32's 20
    assert op_time_s(2e12, 10**9, "bf16", True, toy(ROOF)) == pytest.approx(2e12 / (0.6 * 80e12) + 3e-6)
    assert op_time_s(2e12, 10**9, "f32", True, toy(ROOF)) == pytest.approx(2e12 / (0.6 * 20e12) + 3e-6)


def test_a_dtype_without_its_own_peak_runs_at_the_device_peak():
    # f16 is not listed: the cluster's device_peak_flops (100 TFLOP/s) at the curve's efficiency
    assert matmul_rate_flops(1e12, "f16", toy(ROOF)) == pytest.approx(0.6 * 100e12)


def test_a_memory_bound_matmul_takes_its_bytes_time():
    # 1e9 FLOPs at 0.6 x 80 TFLOP/s is ~21 us; 1e8 bytes at 1 TB/s is 100 us
    assert op_time_s(1e9, 10**8, "bf16", True, toy(ROOF)) == pytest.approx(1e8 / 1e12 + 3e-6)


def test_an_op_with_no_flops_and_no_bytes_launches_no_kernel():
    assert op_time_s(0, 0, "f32", False, toy(ROOF)) == 0.0
    assert op_time_s(0, 4000, "f32", False, toy(ROOF)) == pytest.approx(4000 / 1e12 + 3e-6)


@pytest.mark.parametrize("flops, nbytes", [(-1.0, 0), (float("nan"), 0), (1.0, -4), (1.0, float("inf"))])
def test_negative_or_non_finite_counts_are_rejected(flops, nbytes):
    with pytest.raises(ValueError, match="must be a finite number >= 0"):
        op_time_s(flops, nbytes, "f32", True, toy(ROOF))


# -- the efficiency curve -------------------------------------------------------------------------

def test_efficiency_is_linear_in_log_flops_between_points():
    # 1e7 is halfway between 1e6 and 1e8 in log(flops): halfway between 0.2 and 0.6
    assert ROOF.efficiency(1e7) == pytest.approx(0.4)
    # 10**6.5 is a quarter of the way
    assert ROOF.efficiency(10**6.5) == pytest.approx(0.3)
    assert ROOF.efficiency(1e6) == 0.2 and ROOF.efficiency(1e8) == 0.6


def test_efficiency_is_clamped_at_both_ends():
    assert ROOF.efficiency(1.0) == ROOF.efficiency(0.0) == 0.2
    assert ROOF.efficiency(1e20) == 0.6


def test_a_constant_efficiency_scales_every_matmul():
    half = toy(Roofline(matmul_efficiency=0.5))
    for flops in (1.0, 1e6, 1e15):
        assert op_time_s(flops, 0, "f32", True, half) == pytest.approx(flops / 50e12)
    assert op_time_s(1e6, 0, "f32", False, half) == 1e6 / 100e12  # vector work: the device peak, no efficiency


def test_the_efficiency_changes_which_split_is_cheaper():
    # a matmul of 4e9 FLOPs split over 8 devices at 100% would take 1/8 of the time; with the
    # curve, each device's 5e8 FLOPs runs at a lower efficiency than the whole 4e9 would
    cluster = toy(Roofline(matmul_efficiency=[(1e8, 0.1), (1e10, 0.9)]))
    whole, eighth = op_time_s(4e9, 0, "f32", True, cluster), op_time_s(4e9 / 8, 0, "f32", True, cluster)
    assert eighth > whole / 8
    assert eighth == pytest.approx(5e8 / (100e12 * (0.1 + 0.8 * math.log(5) / math.log(100))))


# -- the preset ---------------------------------------------------------------------------------

def test_an_8192_cubed_bf16_matmul_on_nvlink_node_is_compute_bound_at_80_percent():
    cluster = load_cluster("nvlink-node")
    n = 8192
    flops, nbytes = 2 * n**3, 3 * n * n * 2  # 1.1 TFLOP: past the curve's last point (1 TFLOP, 0.80)
    assert op_time_s(flops, nbytes, "bf16", True, cluster) == pytest.approx(flops / (0.80 * 989e12) + 2e-6)


# -- the bound ----------------------------------------------------------------------------------

def test_compute_time_s_is_flops_at_the_best_rate_and_bounds_every_op():
    cluster = toy(ROOF)
    assert best_rate_flops(cluster) == pytest.approx(0.6 * 100e12)  # device peak 100 > bf16 80, at 0.6
    for flops in (1e3, 1e6, 1e7, 1e9, 1e13):
        for dtype in ("f32", "bf16", "f16"):
            for matmul in (True, False):
                assert compute_time_s(flops, cluster) <= op_time_s(flops, 0, dtype, matmul, cluster)


def test_compute_time_s_under_the_first_model_is_flops_over_the_peak():
    assert compute_time_s(5e11, Cluster("toy", 1e12, 2**30, 8, LINK, LINK)) == 0.5
    assert compute_time_s(0, toy()) == 0.0


@pytest.mark.parametrize("flops", [-1.0, float("nan"), float("inf")])
def test_compute_time_s_rejects_negative_or_non_finite_flops(flops):
    with pytest.raises(ValueError, match="flops_per_device must be a finite number >= 0"):
        compute_time_s(flops, load_cluster())


def test_the_documented_first_model_on_top_of_a_preset_prices_flops_at_its_peak():
    # docs/clusters.md: the keys that turn a preset's roofline back into FLOPs at 100% of device_peak_flops
    first = load_cluster({"preset": "nvlink-node", "matmul_efficiency": 1, "memory_bandwidth_bytes_per_s": "inf",
                          "kernel_overhead_s": 0, "vector_flops": "989TFLOP/s",
                          "peak_flops_by_dtype": {"bf16": "989TFLOP/s", "f16": "989TFLOP/s", "f32": "989TFLOP/s"}})
    for dtype in ("f32", "bf16", "f16"):
        for matmul in (True, False):
            assert op_time_s(2e9, 10**12, dtype, matmul, first) == 2e9 / 989e12
