"""Compute time: FLOPs a device performs divided by the device's peak.

The peak is the cluster's ``device_peak_flops`` (dense, in the dtype the preset
documents). Real kernels reach a fraction of it; the planner compares plans on
the same cluster, so a constant efficiency would not change which plan wins and
is left out.

>>> from costmodels.loader import load_cluster
>>> compute_time_s(989e12, load_cluster("nvlink-node"))
1.0
"""

from __future__ import annotations

import math

from costmodels.cluster import Cluster
from planner.errors import CostModelError

__all__ = ["compute_time_s"]


def compute_time_s(flops_per_device: float, cluster: Cluster) -> float:
    """Seconds one device needs for ``flops_per_device`` FLOPs at the cluster's peak.

    >>> from costmodels.cluster import Cluster, Link
    >>> cluster = Cluster("toy", 1e12, 2**30, 8, Link(1e9, 0.0), Link(1e9, 0.0))
    >>> compute_time_s(2 * 1024 * 1024 * 1024, cluster)  # a 1024^3 matmul: 2·m·k·n FLOPs
    0.002147483648
    """
    if isinstance(flops_per_device, bool) or not math.isfinite(flops_per_device) or flops_per_device < 0:
        raise CostModelError(f"flops_per_device must be a finite number >= 0, got {flops_per_device!r}")
    return flops_per_device / cluster.device_peak_flops
