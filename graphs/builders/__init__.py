"""Model builders: large models from a few numbers, from YAML (``model: {builder: gpt, ...}``) or Python.

Each builder module has a ``define(b, **args)`` that adds its tensors and ops to a
:class:`~graphs.graph_builder.GraphBuilder`; :data:`BUILDERS` is the one registry
(alphabetical). The public functions (:func:`conv`, :func:`gpt`, :func:`mlp`,
:func:`moe`, :func:`transformer`) take the builder's arguments plus ``mesh``,
``name``, ``shardings`` and ``strategies`` (name-pattern annotations, as in YAML)
and return a :class:`~graphs.graph.ComputationGraph`. Every size argument is a
positive integer; ``dtype`` is a dtype name. Tensor names are hierarchical and
stable (``layer0.attn.wq``, ``layer3.mlp.w1``, ``embed.table``, ``lm_head.w``).

>>> g = mlp(batch=8, hidden=16, layers=2, mesh={"dp": 2})
>>> [op.name for op in g.ops]
['layer0.matmul', 'layer0.relu', 'layer1.matmul', 'loss.square', 'loss.mean']
>>> mlp(batch=8, hidden=16, layer=2)
Traceback (most recent call last):
...
planner.errors.ModelError: builder mlp has no argument 'layer'; did you mean layers? (arguments: batch, hidden, layers, dtype)
"""

from __future__ import annotations

import inspect
from types import MappingProxyType
from typing import Any, Callable, Mapping

from graphs.builders import conv_model, gpt_model, mlp_model, moe_model, transformer_model
from graphs.dtypes import check_dtype
from graphs.graph import ComputationGraph
from graphs.graph_builder import GraphBuilder
from planner.errors import ModelError, did_you_mean, quote

BUILDERS: Mapping[str, Callable[..., None]] = MappingProxyType({
    "conv": conv_model.define,
    "gpt": gpt_model.define,
    "mlp": mlp_model.define,
    "moe": moe_model.define,
    "transformer": transformer_model.define,
})

_REQUIRED = inspect.Parameter.empty


def get_builder(name: Any) -> Callable[..., None]:
    """The ``define`` function of builder ``name``; ModelError listing the builders if unknown."""
    try:
        return BUILDERS[name]
    except (KeyError, TypeError):
        hint = did_you_mean(name, BUILDERS)
        raise ModelError(f"unknown builder {quote(name)}{hint} (builders: {', '.join(BUILDERS)})") from None


def builder_args(name: str) -> dict[str, Any]:
    """Argument name -> default (``inspect.Parameter.empty`` when required), in signature order."""
    params = list(inspect.signature(get_builder(name)).parameters.values())[1:]
    return {p.name: p.default for p in params}


def check_arg(builder: str, key: Any, value: Any) -> None:
    """ModelError unless ``key`` is an argument of ``builder`` and ``value`` suits it."""
    args = builder_args(builder)
    if key not in args:
        hint = did_you_mean(key, args)
        raise ModelError(f"builder {builder} has no argument {quote(key)}{hint} (arguments: {', '.join(args)})")
    if key == "dtype":
        check_dtype(value)
    elif isinstance(args[key], bool):
        if not isinstance(value, bool):
            raise ModelError(f"builder {builder} argument {key} must be true or false, got {quote(value)}")
    elif value is None and args[key] is None:
        return
    elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelError(f"builder {builder} argument {key} must be a positive integer, got {quote(value)}")


def define(b: GraphBuilder, builder: str, **args: Any) -> None:
    """Check ``args`` and add builder ``builder``'s model to ``b``."""
    fn = get_builder(builder)
    for key, value in args.items():
        check_arg(builder, key, value)
    missing = [k for k, d in builder_args(builder).items() if d is _REQUIRED and k not in args]
    if missing:
        raise ModelError(f"builder {builder} needs argument{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    fn(b, **args)


def build(
    builder: str,
    *,
    mesh: Any = None,
    name: str | None = None,
    shardings: Mapping[str, Any] | None = None,
    strategies: Mapping[str, Any] | None = None,
    **args: Any,
) -> ComputationGraph:
    """Build a model with builder ``builder`` (see the module docstring)."""
    b = GraphBuilder(name or builder, mesh)
    define(b, builder, **args)
    if shardings:
        b.annotate_shardings(shardings)
    if strategies:
        b.annotate_strategies(strategies)
    return b.build()


def _public(builder: str) -> Callable[..., ComputationGraph]:
    def public(**kwargs: Any) -> ComputationGraph:
        return build(builder, **kwargs)

    public.__name__ = public.__qualname__ = builder
    public.__doc__ = (
        f"Build the ``{builder}`` model: keyword arguments {', '.join(builder_args(builder))}, plus mesh, "
        f"name, shardings, strategies (see :func:`build`).\n\n" + (get_builder(builder).__doc__ or "")
    )
    return public


conv = _public("conv")
gpt = _public("gpt")
mlp = _public("mlp")
moe = _public("moe")
transformer = _public("transformer")

__all__ = ["BUILDERS", "build", "builder_args", "check_arg", "conv", "define", "get_builder", "gpt", "mlp", "moe",
           "transformer"]
