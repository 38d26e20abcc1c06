"""shardplan: a cost-model, search-based auto-parallel planner (see README.md).

The package is layered the way the pipeline runs: ``planner.ir`` (the sharding
representation) and ``planner.views`` (other notations for it) come first; the
rules, search, redistribution, partitioning and simulation layers build on them;
``planner.api`` holds the entry point (``from planner.api import plan``) and
``planner.cli`` is a thin command line over the library. This package imports
only the bottom layers, so ``costmodels`` and ``graphs``, which build on
``planner.ir``, import in any order.
"""

__version__ = "0.1.0"

from planner.caches import clear_caches  # noqa: E402
from planner.errors import ShardplanError, ShardplanWarning  # noqa: E402
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
from planner.progress import Progress  # noqa: E402

__all__ = [
    "AxisRef",
    "DimSharding",
    "Mesh",
    "Progress",
    "ShardplanError",
    "ShardplanWarning",
    "TensorSharding",
    "__version__",
    "clear_caches",
    "device_index_ranges",
    "parse_mesh",
    "parse_sharding",
    "same_layout",
]

