"""Frontends: programs written in other frameworks turned into shardplan graphs.

:mod:`planner.frontends.jax` traces a JAX function (its jaxpr) into a
:class:`~graphs.graph.ComputationGraph` of catalogue ops and hands a plan's shardings back as
``NamedSharding``\\ s. The translation goes through a trace
(:mod:`planner.frontends.trace`): :mod:`planner.frontends.jaxpr` maps each primitive,
:mod:`planner.frontends.fusion` recognises the catalogue's composite ops (mean, softmax,
layernorm, rmsnorm, gelu) in the primitives and lowers what is left. Only :mod:`planner.frontends.jax`
and :mod:`planner.frontends.jaxpr` import ``jax`` (an optional dependency: ``pip install -e ".[jax]"``).
"""
