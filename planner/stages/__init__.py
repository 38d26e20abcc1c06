"""The pipeline level above the SPMD plan: stages, microbatch schedules, recomputation, ZeRO."""

from planner.stages.schedules import SCHEDULES, Action, Timeline, device_orders, peak_bytes, peak_in_flight, timeline

__all__ = ["SCHEDULES", "Action", "Timeline", "device_orders", "peak_bytes", "peak_in_flight", "timeline"]
