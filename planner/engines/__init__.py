"""Running plans on real engines: JAX/XLA.

* :mod:`planner.engines.jax_env`: finding JAX, giving it the host devices a plan needs, before it is imported;
* :mod:`planner.engines.jax_ops`: every catalogue op in ``jax.numpy``, with the numpy reference's semantics;
* :mod:`planner.engines.jax_spmd`: a plan's program as a JAX module, one ``shard_map`` whose collectives are the
  plan's (what ``run`` executes by default and ``export --to jax-module`` writes);
* :mod:`planner.engines.jax_run`: a plan run on XLA (as that module, or with every tensor constrained to its
  planned sharding) and checked against the numpy reference (and the gradients with training);
* :mod:`planner.engines.run_memory`: the memory a run needs, estimated from the plan before JAX starts (a run
  the machine cannot hold is refused);
* :mod:`planner.engines.xla_hlo`: the collectives of a compiled XLA program, with bytes per device counted
  by the convention of :mod:`costmodels.collectives`.

Nothing here is imported by ``import planner``; JAX itself is imported only when a plan is run.
"""
