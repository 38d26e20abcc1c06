"""The Roofline value: canonical on construction, checked, and its efficiency curve."""

from __future__ import annotations

import math

import pytest

from costmodels.cluster import Cluster, Link
from costmodels.roofline import MATMUL_DTYPES, Roofline
from graphs.dtypes import DTYPES, is_float
from planner.errors import ClusterError


def test_matmul_dtypes_are_the_graphs_floating_dtypes():
    assert MATMUL_DTYPES == tuple(d for d in DTYPES if is_float(d))


def test_peaks_given_in_any_order_compare_equal():
    assert Roofline({"f32": 1e12, "bf16": 2e12}) == Roofline((("bf16", 2e12), ("f32", 1e12)))
    assert hash(Roofline({"f32": 1e12, "bf16": 2e12})) == hash(Roofline({"bf16": 2e12, "f32": 1e12}))


def test_a_constant_efficiency_is_one_point():
    assert Roofline(matmul_efficiency=0.7).matmul_efficiency == ((1.0, 0.7),)
    assert Roofline(matmul_efficiency=0.7).efficiency(1e18) == 0.7


def test_a_cluster_prints_its_roofline_only_when_it_has_one():
    plain = Cluster("toy", 1e12, 2**30, 8, Link(1e9, 0.0), Link(1e9, 0.0))
    assert "memory" not in str(plain)
    fast = Cluster("toy", 1e12, 2**30, 8, Link(1e9, 0.0), Link(1e9, 0.0),
                   roofline=Roofline(memory_bandwidth_bytes_per_s=2e12, matmul_efficiency=0.5))
    assert str(fast).endswith("; memory 2TB/s, matmul efficiency 50%")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"peak_flops_by_dtype": {"i32": 1e12}}, "'i32' is not a floating dtype; give one of f32, bf16, f16"),
        ({"peak_flops_by_dtype": {"f32": 0}}, "peak_flops_by_dtype.f32 is 0; it must be a finite number > 0"),
        ({"vector_flops": -1.0}, "vector_flops is -1.0"),
        ({"memory_bandwidth_bytes_per_s": 0.0}, "memory_bandwidth_bytes_per_s is 0.0; it must be a number > 0"),
        ({"memory_bandwidth_bytes_per_s": math.nan}, "memory_bandwidth_bytes_per_s is nan"),
        ({"kernel_overhead_s": math.inf}, "kernel_overhead_s is inf"),
        ({"matmul_efficiency": [(1e6, 0.5), (1e9, 0.4)]}, "the curve is non-monotone"),
        ({"matmul_efficiency": [(1e6, 0.5), (1e3, 0.6)]}, "flops must be strictly increasing"),
        ({"matmul_efficiency": [(1e6, 0.5, 2)]}, "a point is [flops, efficiency]"),
        ({"matmul_efficiency": 0.0}, "an efficiency is a fraction of the peak, in (0, 1]"),
    ],
)
def test_invalid_values_are_refused_naming_the_key(kwargs, message):
    with pytest.raises(ClusterError) as info:
        Roofline(**kwargs)
    assert message in str(info.value)
