"""The numpy device simulator (SPEC §7): one array per device, real collectives, counted bytes."""
