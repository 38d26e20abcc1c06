"""``shardplan reshard``: the cheapest collectives between two shardings, optionally verified."""

from __future__ import annotations

import argparse
import sys

from planner.cli.args import DTYPES, command_options, parse_dtype, parse_meshes, parse_shape
from planner.cli.output import json_document, write_text
from planner.text_table import table
from planner.cli.status import EXIT_INTERNAL_ERROR, EXIT_OK, internal_error
from planner.ir.text import parse_sharding

# The pipeline is imported by the functions that run it, so that ``shardplan --help`` stays fast.


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "reshard",
        help="plan the collectives that turn one sharding of a tensor into another",
        description="Plan the cheapest sequence of collectives (AllReduce, ReduceScatter, AllGather, "
        "AllToAll, CollectivePermute, Slice) from one sharding to another, with its cost and the lower "
        "bound it is scored against; --verify runs it on the numpy device simulator.",
    )
    p.add_argument("--mesh", action="append", required=True, metavar="MESH",
                   help="x=2,y=4 or '@name = <[\"x\"=2, \"y\"=4]>'; repeat for a second mesh over the same devices")
    p.add_argument("--shape", required=True, help="tensor shape, e.g. 64x32")
    p.add_argument("--dtype", default="f32", help=f"one of {', '.join(DTYPES)} (default f32)")
    p.add_argument("--from", dest="source", required=True, metavar="SHARDING", help="source sharding")
    p.add_argument("--to", dest="destination", required=True, metavar="SHARDING", help="destination sharding")
    p.add_argument("--cluster", default=None, metavar="PRESET|FILE", help="cluster preset or YAML file (default: default)")
    p.add_argument("--objective", choices=("bytes", "time"), default="bytes",
                   help="minimise bytes received per device (default) or time on the cluster")
    p.add_argument("--verify", action="store_true", help="execute the plan on the simulator and measure its bytes")
    p.add_argument("--format", choices=("table", "json"), default="table")
    command_options(p, run)


def run(args: argparse.Namespace) -> int:
    from costmodels import load_cluster
    from planner.progress import task
    from planner.redistribution import reshard

    meshes = parse_meshes(args.mesh)
    shape = parse_shape(args.shape)
    dtype = parse_dtype(args.dtype)
    src = parse_sharding(args.source, meshes, what="--from sharding")
    dst = parse_sharding(args.destination, meshes, what="--to sharding")
    src.check_rank(shape)
    dst.check_rank(shape)
    cluster = load_cluster(args.cluster)
    with task(args.progress, "searching the redistribution"):  # a spinner: the A* search has no step count
        plan = reshard(shape, dtype, src, dst, cluster, objective=args.objective)
    data = plan.to_dict()
    checked = None
    if args.verify:  # the simulator is imported only to run it
        from planner.simulation.reshard import verify

        with task(args.progress, "verifying on the simulator"):
            checked = verify(plan)
    if checked is not None:
        data["verified"] = checked.verified
        data["measured_bytes_per_device"] = checked.measured_bytes_per_device
    if args.format == "json":
        write_text(json_document("reshard", data), None)
    else:
        write_text(render(plan, checked), None)
    if checked is None or checked.verified:
        return EXIT_OK
    print(internal_error(f"the redistribution did not verify on the simulator: {checked.message}"), file=sys.stderr)
    return EXIT_INTERNAL_ERROR


def render(plan, checked) -> str:
    from costmodels.units import format_bytes, format_seconds

    rows = []
    for i, s in enumerate(plan.steps, 1):
        dims = " -> ".join(map(str, s.dims)) if s.kind == "AllToAll" else ", ".join(map(str, s.dims))
        rows.append((i, s.kind, ", ".join(map(str, s.axes)) or "-", dims or "-", format_bytes(s.bytes_per_device),
                     format_seconds(s.time_s), str(s.after)))
    head = table([
        ("from", str(plan.source)),
        ("to", str(plan.destination)),
        ("shape", "x".join(map(str, plan.shape)) + f" {plan.dtype}"),
    ])
    body = table(rows, header=("step", "kind", "axes", "dims", "bytes/device", "time", "after")) if rows else "no communication: the layouts already agree"
    lb = plan.lower_bound_bytes_per_device
    ratio = f"{plan.ratio:.2f}" if lb else ("1.00" if not plan.bytes_per_device else "n/a")
    total = (f"total: {format_bytes(plan.bytes_per_device)} per device in {format_seconds(plan.time_s)}; "
             f"lower bound {format_bytes(lb)} (ratio {ratio})")
    lines = [head, "", body, "", total]
    if not plan.exact:
        lines.append("search: ran out of its budget; this is the best plan it found (verifiable with --verify), "
                     "not proven the cheapest")
    if checked is not None:
        if checked.verified:
            lines.append(f"verified on the simulator: exact result, {format_bytes(checked.measured_bytes_per_device)} per device measured")
        else:
            lines.append(f"NOT verified on the simulator: {checked.message}")
    return "\n".join(lines) + "\n"
