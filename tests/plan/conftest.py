"""Shared pieces for plan tests: a bandwidth-bound cluster where bytes and FLOPs decide."""

# A V100-class node: 15 TFLOP/s per device, 100 GB/s links, per-hop latency small next to the
# messages these tests move, 1 us per collective call. Latency-dominated presets would turn
# every choice into "fewest collectives", which is not what these tests are about. Compute is
# FLOPs at 100% of the peak, no memory term and no kernel overhead (the roofline's first model):
# the plans these tests expect are those the balance of FLOPs and bytes moved decides.
BANDWIDTH_BOUND = (
    "{preset: default, device_peak_flops: 15e12, vector_flops: 15e12, matmul_efficiency: 1, "
    "memory_bandwidth_bytes_per_s: inf, kernel_overhead_s: 0, "
    "intra_node: {bandwidth_bytes_per_s: 100e9, latency_s: 1e-7, overhead_s: 1e-6}, "
    "inter_node: {bandwidth_bytes_per_s: 100e9, latency_s: 1e-7, overhead_s: 1e-6}}"
)


def collectives(plan, kinds=("AllReduce", "ReduceScatter", "AllGather", "AllToAll", "CollectivePermute")):
    """(tensor or param, phase, kind) of every communicating step of a plan."""
    out = []
    for r in plan.reshards:
        out += [(r.tensor, r.phase, s.kind) for s in r.steps if s.kind in kinds]
    for g in plan.gradient_syncs:
        out += [(g.tensor, "gradient", s.kind) for s in g.steps if s.kind in kinds]
    return out
