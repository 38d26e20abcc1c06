"""``shardplan compare``: propagate, bfs and ilp on one model and cost model, side by side."""

from __future__ import annotations

import argparse

from planner.cli.args import model_argument
from planner.cli.output import table, to_json, write_text
from planner.cli.plan import plan_arguments, planning_options


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="plan a model with propagate, bfs and ilp and compare the plans side by side",
        description="Plan the model with Shardy-style rule-based propagation (propagate), breadth-first search "
        "over the cost tables (bfs) and the ILP optimum (ilp), on the same mesh and cost model, and show each "
        "plan's objective, communication, collectives by kind, memory, time to plan and gap to the ILP optimum.",
    )
    p.add_argument("model", help="model YAML file (- for standard input)")
    planning_options(p)
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    p.add_argument("--out", metavar="FILE", help="write the output to FILE (atomically) instead of stdout")
    p.set_defaults(run=run)


def render(c) -> str:
    from costmodels import format_quantity

    rows = []
    for e in c.entries:
        collectives = ", ".join(f"{k} {n}" for k, n in e.collectives.items()) or "none"
        gap = "n/a" if e.gap is None else f"{100 * e.gap:+.1f}%"
        rows.append((e.search, format_quantity(e.objective, "s"), f"{e.comm_bytes_per_device:,}",
                     format_quantity(e.comm_time_s, "s"), collectives,
                     format_quantity(e.memory_bytes_per_device, "bytes"), f"{e.plan_s:.2f} s", gap))
    out = [f"model {c.model}, mesh {c.mesh}{', training' if c.training else ''}", "",
           table(rows, header=("search", "objective", "comm B/device", "comm time", "collectives",
                               "memory/device", "plan time", "vs ilp"))]
    out.append("")
    out.append("vs ilp: objective over the ILP optimum" if c.optimum is not None else
               "vs ilp: n/a, the ILP did not prove an optimum (see its warnings)")
    for e in c.entries:
        out += [f"{e.search}: warning: {w}" for w in e.warnings]
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    from planner.compare import compare

    c = compare(model_argument(args.model), propagation=args.propagation, **plan_arguments(args))
    write_text(to_json(c.to_dict()) if args.format == "json" else render(c), args.out, protect=[args.model])
    return 0
