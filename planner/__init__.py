"""shardplan: a cost-model, search-based auto-parallel planner (see README.md and docs/architecture.md).

The packages are layered the way the pipeline runs, and imports only go down
:data:`LAYERS` (a module may import its own layer and the layers before it;
``tests/test_imports.py`` holds this). ``planner.api`` holds the entry point
(``from planner.api import plan``, or ``import shardplan``) and ``planner.cli`` is a
thin command line over the library. This package imports only the bottom layers, so
``costmodels`` and ``graphs``, which build on ``planner.ir``, import in any order.
"""

LAYERS = (
    # what every layer uses: errors, input limits, files, YAML, caches, progress reports, plain-text tables
    ("planner.errors", "planner.limits", "planner.files", "planner.safe_yaml", "planner.caches", "planner.progress",
     "planner.text_table"),
    ("planner.ir",),  # the sharding representation (seed 000)
    ("planner.notations",),  # the same sharding in JAX, MindSpore and DTensor notation
    ("planner.collectives",),  # the one registry of collectives (seed 004)
    ("costmodels",),  # clusters, collective and compute costs
    ("graphs",),  # the model: ops, tensors, the YAML format, builders
    ("planner.rules",),  # per-op factor sharding rules
    ("planner.training", "planner.enumeration"),  # cotangent layouts; strategies per op
    ("planner.redistribution",),  # the cheapest collectives between two shardings (prices the tables)
    ("planner.model",),  # the planning model: problem, annotations, cost tables, decisions
    ("planner.searches",),  # bfs, ilp, explicit, propagate
    ("planner.partitioning",),  # the SPMD program, forward and backward
    ("planner.stages",),  # the pipeline level over per-stage SPMD programs: stages, schedules, recomputation, ZeRO
    ("planner.simulation",),  # the numpy device simulator
    ("planner.engines", "planner.frontends"),  # JAX/XLA; programs traced from JAX
    ("planner.report", "planner.export", "planner.views"),  # the plan users read, exports, pictures
    ("planner.api",),  # plan(), load()
    ("planner.compare", "planner.gate"),  # several plans: compare, the CI gate
    ("planner.cli", "planner.__main__"),  # the command line
)
"""The packages bottom to top; ``planner`` itself (this module) imports no layer above ``planner.ir``."""

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
    "LAYERS",
    "TensorSharding",
    "__version__",
    "clear_caches",
    "device_index_ranges",
    "parse_mesh",
    "parse_sharding",
    "same_layout",
]

