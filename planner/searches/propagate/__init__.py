"""Rule-based sharding propagation as Shardy does it (seed 003): its passes and the plan they give."""
