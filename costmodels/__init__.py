"""Cost models: clusters and their links, collective, compute and memory costs.

>>> from costmodels import all_gather_cost, load_cluster
>>> from planner.ir.axis import AxisRef
>>> from planner.ir.mesh import Mesh
>>> cluster = load_cluster("ib-cluster")
>>> mesh = Mesh.from_sizes("mesh", {"dp": 4, "tp": 8})
>>> link = cluster.link_for(mesh, [AxisRef("dp")])   # the outer axis crosses nodes
>>> str(link)
'50GB/s, 10us, 2us per call'
>>> all_gather_cost(4, 2**20, link)
CollectiveCost(bytes_per_device=3145728, time_s=9.491456e-05)
"""

from costmodels.cluster import Cluster, Link, group_spans_nodes, slowest_link
from costmodels.collectives import (
    NO_COST,
    RING,
    CollectiveCost,
    CollectiveModel,
    all_gather_cost,
    all_reduce_cost,
    all_to_all_cost,
    chunk_bytes,
    collective_permute_cost,
    reduce_scatter_cost,
)
from costmodels.compute import best_rate_flops, compute_time_s, op_time_s
from costmodels.loader import ClusterSpec, load_cluster
from costmodels.memory import OPTIMIZER_STATE_BYTES_PER_ELEMENT, activation_bytes, fits_in_memory, parameter_bytes
from costmodels.roofline import Roofline
from costmodels.presets import DEFAULT_PRESET, preset_names, preset_path
from costmodels.units import format_bytes, format_quantity, format_seconds, parse_quantity

__all__ = [
    "DEFAULT_PRESET",
    "NO_COST",
    "OPTIMIZER_STATE_BYTES_PER_ELEMENT",
    "RING",
    "Roofline",
    "Cluster",
    "ClusterSpec",
    "CollectiveCost",
    "CollectiveModel",
    "Link",
    "activation_bytes",
    "all_gather_cost",
    "all_reduce_cost",
    "all_to_all_cost",
    "best_rate_flops",
    "chunk_bytes",
    "collective_permute_cost",
    "compute_time_s",
    "fits_in_memory",
    "format_bytes",
    "format_quantity",
    "format_seconds",
    "group_spans_nodes",
    "load_cluster",
    "op_time_s",
    "parameter_bytes",
    "parse_quantity",
    "preset_names",
    "preset_path",
    "reduce_scatter_cost",
    "slowest_link",
]
