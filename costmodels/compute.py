"""Compute time: the roofline of one op on one device.

An op's forward on one device takes

    time = max(flops / rate, bytes_accessed / memory_bandwidth) + kernel_overhead

where ``rate`` is, for a matmul-family op (matmul, einsum, conv2d: the ops that run on
the matmul units), the peak of its dtype times the cluster's matmul efficiency at
its FLOPs, and for every other op the cluster's vector rate
(:class:`~costmodels.roofline.Roofline`). An op that computes nothing and touches no
memory (a reshape read as a new view, an annotation) launches no kernel and costs 0.

The efficiency matters to which plan wins: the objective adds compute time to
communication time, so a lower rate makes splitting an op's work over more devices
worth more communication, and the efficiency of a small local matmul is lower than
that of a large one. The memory term prices the ops that move many bytes per FLOP
(elementwise ops, norms, softmax, gathers) by the bytes they move.

>>> from costmodels.cluster import Cluster, Link
>>> old = Cluster("first-model", 989e12, 2**30, 8, Link(1e9, 0.0), Link(1e9, 0.0))  # the default Roofline()
>>> op_time_s(989e12, 10**12, "bf16", True, old), op_time_s(989e12, 10**12, "f32", False, old)
(1.0, 1.0)
"""

from __future__ import annotations

import math

from costmodels.cluster import Cluster
from planner.errors import CostModelError

__all__ = ["best_rate_flops", "compute_time_s", "matmul_rate_flops", "op_time_s", "vector_rate_flops"]


def _check_count(name: str, value: float) -> None:
    if isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise CostModelError(f"{name} must be a finite number >= 0, got {value!r}")


def matmul_rate_flops(flops: float, dtype: str, cluster: Cluster) -> float:
    """FLOP/s a matmul-family op of ``flops`` FLOPs in ``dtype`` reaches on one device.

    >>> from costmodels.cluster import Cluster, Link
    >>> from costmodels.roofline import Roofline
    >>> roofline = Roofline({"f32": 50e12}, matmul_efficiency=[(1e6, 0.1), (1e12, 0.5)])
    >>> cluster = Cluster("toy", 100e12, 2**30, 8, Link(1e9, 0.0), Link(1e9, 0.0), roofline=roofline)
    >>> [round(matmul_rate_flops(f, dtype, cluster) / 1e12, 9) for f, dtype in ((1e9, "f32"), (1e15, "bf16"))]
    [15.0, 50.0]
    """
    roofline = cluster.roofline
    return roofline.peak_flops(dtype, cluster.device_peak_flops) * roofline.efficiency(flops)


def op_time_s(flops: float, bytes_accessed: float, dtype: str, matmul: bool, cluster: Cluster) -> float:
    """Seconds one device needs for one op: ``flops`` FLOPs reading and writing ``bytes_accessed``
    bytes of device memory, on the matmul units (``matmul``) in ``dtype`` or on the vector units.

    >>> from costmodels.cluster import Cluster, Link
    >>> from costmodels.roofline import Roofline
    >>> roofline = Roofline(vector_flops=10e12, memory_bandwidth_bytes_per_s=1e12, kernel_overhead_s=2e-6)
    >>> cluster = Cluster("toy", 100e12, 2**30, 8, Link(1e9, 0.0), Link(1e9, 0.0), roofline=roofline)
    >>> op_time_s(1e6, 12e6, "f32", False, cluster)   # an add of 1M f32 elements: memory-bound
    1.4e-05
    >>> op_time_s(2e12, 12e6, "f32", True, cluster)   # a large matmul: compute-bound, at 100 TFLOP/s
    0.020002
    >>> op_time_s(0, 0, "f32", False, cluster)        # nothing to do: no kernel
    0.0
    """
    _check_count("flops", flops)
    _check_count("bytes_accessed", bytes_accessed)
    if flops == 0 and bytes_accessed == 0:
        return 0.0
    roofline = cluster.roofline
    if flops == 0:
        compute = 0.0
    elif matmul:
        compute = flops / matmul_rate_flops(flops, dtype, cluster)
    else:
        compute = flops / vector_rate_flops(cluster)
    memory = bytes_accessed / roofline.memory_bandwidth_bytes_per_s
    return max(compute, memory) + roofline.kernel_overhead_s


def vector_rate_flops(cluster: Cluster) -> float:
    """FLOP/s of non-matmul work: the roofline's ``vector_flops``, else the device peak."""
    rate = cluster.roofline.vector_flops
    return cluster.device_peak_flops if rate is None else rate


def best_rate_flops(cluster: Cluster) -> float:
    """The highest FLOP/s any op reaches on the cluster: the best matmul peak at the curve's
    best efficiency, or the vector rate if that is higher. FLOPs at this rate bound any op's
    compute term from below."""
    roofline = cluster.roofline
    peaks = [cluster.device_peak_flops, *(rate for _, rate in roofline.peak_flops_by_dtype)]
    return max(max(peaks) * roofline.best_efficiency, vector_rate_flops(cluster))


def compute_time_s(flops_per_device: float, cluster: Cluster) -> float:
    """Seconds one device needs for ``flops_per_device`` FLOPs at the best rate it reaches
    (:func:`best_rate_flops`): a lower bound of the roofline's compute term, and the whole
    time under the first model (every rate the device peak).

    >>> from costmodels.cluster import Cluster, Link
    >>> cluster = Cluster("toy", 1e12, 2**30, 8, Link(1e9, 0.0), Link(1e9, 0.0))
    >>> compute_time_s(2 * 1024 * 1024 * 1024, cluster)  # a 1024^3 matmul: 2·m·k·n FLOPs
    0.002147483648
    """
    _check_count("flops_per_device", flops_per_device)
    return flops_per_device / best_rate_flops(cluster)
