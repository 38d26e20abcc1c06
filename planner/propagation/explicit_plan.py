"""A :class:`~planner.api.Plan` from explicit mode (seed 001): shardings flow forward by consensus."""

from __future__ import annotations

from costmodels import compute_time_s, load_cluster
from planner.propagation.explicit import explicit_shardings
from planner.redistribution import reshard_for_planning


def explicit_plan(graph, cluster=None):
    """Apply the consensus rule op by op and report it in the plan's format.

    Ops read their operands as they are; the only collectives are the AllReduces
    that sharded contracting factors insert (JAX's psum).
    """
    from planner.api import Plan

    clu = load_cluster(cluster if cluster is not None else graph.cluster)
    result = explicit_shardings(graph)
    tensors = {}
    for name, spec in graph.tensors.items():
        if spec.kind != "activation" and not graph.consumers(name):
            continue
        tensors[name] = {
            "shape": list(spec.shape),
            "dtype": spec.dtype,
            "sharding": str(result.sharding(name)),
            "source": "user" if spec.sharding is not None else "propagated",
            "reason": result.reason(name),
        }
    ops, reshards = [], []
    compute_total = comm_total = 0.0
    comm_bytes = 0
    for op in graph.ops:
        out = graph.tensor(op.output)
        operands = [result.sharding(t) for t in op.inputs]
        res = result.sharding(op.output)
        divisor = 1
        for s in operands + [res]:
            divisor = max(divisor, s.num_shards())
        compute = compute_time_s(graph.op_flops(op.name) / divisor, clu)
        comm = 0.0
        for ar in result.collectives.get(op.name, ()):
            pending = res.with_unreduced(ar.axes)
            p = reshard_for_planning(out.shape, out.dtype, pending, res, clu)
            comm += p.time_s
            comm_bytes += p.bytes_per_device
            reshards.append({
                "tensor": op.output, "producer": op.name, "consumer": None,
                "from": str(pending), "to": str(res), "steps": [s.to_dict() for s in p.steps],
                "bytes_per_device": p.bytes_per_device, "time_s": p.time_s,
            })
        compute_total += compute
        comm_total += comm
        ops.append({
            "name": op.name,
            "op": op.op,
            "strategy": "(" + ", ".join("(" + ", ".join(map(str, s.shard_counts())) + ("," if s.rank == 1 else "") + ")"
                                        for s in operands) + ("," if len(operands) == 1 else "") + ")",
            "operand_shardings": [str(s) for s in operands],
            "result_sharding": str(res),
            "source": "user" if op.out_sharding is not None else "propagated",
            "compute_time_s": compute,
            "comm_time_s": comm,
            "reason": result.reason(op.output),
        })
    totals = {
        "comm_bytes_per_device": int(comm_bytes),
        "comm_time_s": comm_total,
        "compute_time_s": compute_total,
        "memory_bytes_per_device": None,
        "objective": compute_total + comm_total,
    }
    return Plan(graph.name, "explicit", [str(m) for m in graph.meshes.values()], tensors, ops, reshards, totals)
