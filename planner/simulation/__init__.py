"""The numpy device simulator: one array per device, real collectives, counted bytes."""
