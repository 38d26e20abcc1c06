"""shardplan: a cost-model, search-based auto-parallel planner (see README.md and SPEC §1).

The package is layered the way the pipeline runs: ``planner.ir`` (the sharding
representation) and ``planner.views`` (other notations for it) come first; the
rules, search, redistribution, partitioning and simulation layers build on them;
``planner.api`` holds the entry point ``planner.plan(...)`` and ``planner.cli`` is a
thin command line over the library. ``plan`` and ``Plan`` are imported on first
use, so that the lower layers (and ``costmodels``, ``graphs``) import without it.
"""

__version__ = "0.1.0"

from planner.caches import clear_caches  # noqa: E402
from planner.errors import ShardplanError  # noqa: E402
from planner.ir import (  # noqa: E402
    AxisRef,
    DimSharding,
    Mesh,
    TensorSharding,
    device_index_ranges,
    parse_mesh,
    parse_sharding,
    same_layout,
)

__all__ = [
    "AxisRef",
    "DimSharding",
    "Mesh",
    "Plan",
    "ShardplanError",
    "TensorSharding",
    "__version__",
    "clear_caches",
    "device_index_ranges",
    "parse_mesh",
    "parse_sharding",
    "plan",
    "same_layout",
]


def __getattr__(name: str):
    if name in ("plan", "Plan"):
        from planner import api

        return getattr(api, name)
    raise AttributeError(f"module 'planner' has no attribute {name!r}")
