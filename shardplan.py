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

The names load on first use (PEP 562), so that ``import shardplan`` itself imports nothing: the
``shardplan`` program's entry point, :func:`console_main`, lives here and catches a Ctrl-C while
shardplan's own modules load, before their signal handling is installed.
"""

import sys

#: Each public name and the module it comes from.
_EXPORTS = {
    "LAYERS": "planner",
    "__version__": "planner",
    "Plan": "planner.api",
    "load": "planner.api",
    "plan": "planner.api",
    "clear_caches": "planner.caches",
    **{name: "planner.errors" for name in (
        "ClusterError", "GateError", "LimitError", "MeshError", "ModelError", "ModelWarning", "NotExpressibleError",
        "ParseError", "PlanningError", "PlanWarning", "ReshardError", "RuleError", "ShardingError", "ShardplanError",
        "ShardplanWarning", "SolverFailed", "VarianceError")},
    "Mesh": "planner.ir",
    "TensorSharding": "planner.ir",
    "parse_mesh": "planner.ir",
    "parse_sharding": "planner.ir",
    "ReshardPlan": "planner.redistribution",
    "reshard": "planner.redistribution",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'shardplan' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def console_main() -> None:
    """The ``shardplan`` program (setup.cfg's entry point): :func:`planner.cli.main.console_main`, which installs
    the signal handling first, imported in a guard: a Ctrl-C while shardplan's packages load ends the same way,
    with one line and status 130."""
    try:
        from planner.cli.main import console_main as run
    except KeyboardInterrupt:
        sys.stderr.write("shardplan: interrupted\n")
        sys.exit(130)  # EXIT_INTERRUPTED (planner.cli.status may be the module that was loading)
    run()
