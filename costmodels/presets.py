"""The documented cluster presets shipped in ``costmodels/presets/*.yaml``.

Each preset is a cluster file in the format of :mod:`costmodels.loader`, every
number commented with its source; ``docs/clusters.md`` lists them. Load one with
``load_cluster("nvlink-node")``.

================= ==================================================================================
preset            what it describes
================= ==================================================================================
``default``       a generic uniform cluster: 100 GB/s and 5 us everywhere, 100 TFLOP/s, 2 TB/s memory, 80 GiB
``nvlink-node``   one 8-GPU H100 SXM5 node: NVLink 450 GB/s per direction, 989 TFLOP/s bf16, 3.35 TB/s HBM3
``h100``          the same node as ``nvlink-node``, by its GPU's name
``h100-measured`` ``h100`` with its compute part measured on an H100 by ``shardplan calibrate``
``ib-cluster``    several ``nvlink-node`` nodes over InfiniBand NDR, 50 GB/s per GPU
``h200``          one 8-GPU H200 SXM node: the H100's compute, 141 GB of HBM3e at 4.8 TB/s
``h200-measured`` ``h200`` with its compute part measured on an H200 by ``shardplan calibrate``
``a100-node``     one 8-GPU A100 SXM4 80GB node: NVLink 300 GB/s, HDR 25 GB/s per GPU, 312 TFLOP/s, 2 TB/s
``a100``          the same node as ``a100-node``, by its GPU's name
``tpu-v4``        a TPU v4 pod slice: 275 TFLOP/s bf16, 1.2 TB/s HBM2, ICI 268 GB/s per chip
``tpu-v5p``       a TPU v5p slice: 459 TFLOP/s bf16, 2.77 TB/s HBM2e, ICI 600 GB/s per chip per direction
================= ==================================================================================

Each also has the compute keys of :mod:`costmodels.roofline` (per-dtype peaks, vector
rate, memory bandwidth, kernel overhead, matmul efficiency curve).

>>> preset_names()
('a100', 'a100-node', 'default', 'h100', 'h100-measured', 'h200', 'h200-measured', 'ib-cluster', 'nvlink-node', 'tpu-v4', 'tpu-v5p')
>>> preset_path("nvlink-node").name
'nvlink-node.yaml'
"""

from __future__ import annotations

from pathlib import Path

from planner.errors import ClusterError, quote

__all__ = ["DEFAULT_PRESET", "PRESETS_DIR", "preset_names", "preset_path"]

PRESETS_DIR = Path(__file__).with_name("presets")
"""Where the preset files live."""

DEFAULT_PRESET = "default"
"""The preset used when a model names no cluster."""


def preset_names() -> tuple[str, ...]:
    """The names of the shipped presets, sorted."""
    return tuple(sorted(path.stem for path in PRESETS_DIR.glob("*.yaml")))


def preset_path(name: str) -> Path:
    """The file of preset ``name``; a :class:`ClusterError` listing the presets if there is none.

    >>> preset_path("nvlink")
    Traceback (most recent call last):
    ...
    planner.errors.ClusterError: unknown cluster preset 'nvlink'; the presets are a100, a100-node, default, h100, h100-measured, h200, h200-measured, ib-cluster, nvlink-node, tpu-v4, tpu-v5p (or give the path of a cluster YAML file)
    """
    names = preset_names()
    if name not in names:
        raise ClusterError(
            f"unknown cluster preset {quote(name)}; the presets are {', '.join(names)} "
            "(or give the path of a cluster YAML file)"
        )
    return PRESETS_DIR / f"{name}.yaml"
