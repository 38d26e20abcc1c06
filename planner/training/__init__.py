"""Training plans: gradients' layouts, backward costs and gradient reduction."""
