"""shardplan: plan, explain and prove how a model is sharded over a device mesh.

The short import name for the public API, so that users need not know the package
directories (``planner``, ``graphs``, ``costmodels``)::

    import shardplan

    p = shardplan.plan("configs/ffn.yaml", search="ilp")   # a path, YAML text or a graph
    print(p.summary())                                      # the table `shardplan plan` prints
    p.table()                                               # the strategy table as plain data

    mesh = shardplan.parse_mesh('@mesh = <["x"=2, "y"=4]>')
    src = shardplan.parse_sharding('[{"x"}, {"y"}]', mesh)
    dst = shardplan.parse_sharding('[{"y"}, {"x"}]', mesh)
    shardplan.reshard((64, 32), "f32", src, dst).steps     # the cheapest collectives between the two

Errors the library raises are :class:`ShardplanError` (with the subclasses below); notes
it issues are :class:`ShardplanWarning`. Caches make repeated planning fast and never
change a result; :func:`clear_caches` starts cold.
"""

from planner import LAYERS, __version__
from planner.api import Plan, load, plan
from planner.caches import clear_caches
from planner.errors import (
    ClusterError,
    GateError,
    LimitError,
    MeshError,
    ModelError,
    ModelWarning,
    NotExpressibleError,
    ParseError,
    PlanningError,
    PlanWarning,
    ReshardError,
    RuleError,
    ShardingError,
    ShardplanError,
    ShardplanWarning,
    SolverFailed,
    VarianceError,
)
from planner.ir import Mesh, TensorSharding, parse_mesh, parse_sharding
from planner.redistribution import ReshardPlan, reshard

__all__ = [
    "ClusterError",
    "GateError",
    "LAYERS",
    "LimitError",
    "Mesh",
    "MeshError",
    "ModelError",
    "ModelWarning",
    "NotExpressibleError",
    "ParseError",
    "Plan",
    "PlanWarning",
    "PlanningError",
    "ReshardError",
    "ReshardPlan",
    "RuleError",
    "ShardingError",
    "ShardplanError",
    "ShardplanWarning",
    "SolverFailed",
    "TensorSharding",
    "VarianceError",
    "__version__",
    "clear_caches",
    "load",
    "parse_mesh",
    "parse_sharding",
    "plan",
    "reshard",
]
