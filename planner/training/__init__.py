"""Training plans (SPEC §8): gradients' layouts, backward costs and gradient reduction."""
