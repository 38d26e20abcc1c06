"""shardplan: a cost-model, search-based auto-parallel planner (see README.md and SPEC §1).

The package is layered the way the pipeline runs: ``planner.ir`` (the sharding
representation) and ``planner.views`` (other notations for it) come first; the
rules, search, redistribution, partitioning and simulation layers build on them;
``planner.cli`` is a thin command line over the library.
"""

__version__ = "0.1.0"

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

from planner.plan import Plan, plan  # noqa: E402  (planner.plan(...) is the API; the module stays importable)

__all__ = [
    "Plan",
    "plan",
    "AxisRef",
    "DimSharding",
    "Mesh",
    "ShardplanError",
    "TensorSharding",
    "__version__",
    "device_index_ranges",
    "parse_mesh",
    "parse_sharding",
    "same_layout",
]
