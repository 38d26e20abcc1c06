"""Compute time from FLOPs and the device peak."""

from __future__ import annotations

import pytest

from costmodels.cluster import Cluster, Link
from costmodels.compute import compute_time_s
from costmodels.loader import load_cluster


def test_matmul_time_on_an_h100_is_flops_over_989_tflops():
    m = k = n = 8192
    assert compute_time_s(2 * m * k * n, load_cluster("nvlink-node")) == pytest.approx(2 * 8192**3 / 989e12)


def test_halving_the_flops_per_device_halves_the_time():
    cluster = Cluster("toy", 1e12, 2**30, 8, Link(1e9, 0.0), Link(1e9, 0.0))
    assert compute_time_s(5e11, cluster) == 0.5
    assert compute_time_s(0, cluster) == 0.0


@pytest.mark.parametrize("flops", [-1.0, float("nan"), float("inf")])
def test_negative_or_non_finite_flops_are_rejected(flops):
    with pytest.raises(ValueError, match="flops_per_device must be a finite number >= 0"):
        compute_time_s(flops, load_cluster())
