"""``shardplan compare``: propagate, bfs and ilp on one model and cost model, side by side."""

from __future__ import annotations

import argparse
import warnings

from planner.cli.args import command_options, model_argument
from planner.cli.output import json_document, write_text
from planner.text_table import table
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
    planning_options(p, searched=False)
    p.add_argument("--format", choices=("table", "json", "svg", "html"), default="table",
                   help="table (default), json, svg (a chart: communication bytes, time and objective per search) "
                   "or html (a page with the chart and the table)")
    p.add_argument("--out", metavar="FILE", help="write the output to FILE (atomically) instead of stdout")
    command_options(p, run)


def render(c) -> str:
    from costmodels.units import format_bytes, format_seconds

    rows = []
    for e in c.entries:
        collectives = ", ".join(f"{k} {n}" for k, n in e.collectives.items()) or "none"
        gap = "n/a" if e.gap is None else f"{100 * e.gap:+.1f}%"
        rows.append((e.search, format_seconds(e.objective), format_seconds(e.step_time_s),
                     format_bytes(e.comm_bytes_per_device),
                     format_seconds(e.comm_time_s), collectives,
                     format_bytes(e.memory_bytes_per_device), format_seconds(e.plan_s), gap))
    out = [f"model {c.model}, mesh {c.mesh}{', training' if c.training else ''}", "",
           table(rows, header=("search", "objective", "step time", "comm/device", "comm time", "collectives",
                               "memory/device", "plan time", "vs ilp"))]
    out.append("")
    out.append(f"step time: the plan's step scheduled with overlap {c.overlap} (every search optimises the "
               "objective, the serial sum)")
    out.append("vs ilp: objective over the ILP optimum" if c.optimum is not None else
               "vs ilp: n/a, the ILP did not prove an optimum (see its warnings)")
    return "\n".join(out) + "\n"


def run(args: argparse.Namespace) -> int:
    from planner.compare import compare
    from planner.errors import PlanWarning

    c = compare(model_argument(args.model), propagation=args.propagation, **plan_arguments(args))
    for e in c.entries:  # on stderr with the other warnings (--quiet hides them); the JSON keeps them per search
        for w in e.warnings:
            warnings.warn(f"{e.search}: {w}", PlanWarning, stacklevel=1)
    if args.format in ("svg", "html"):
        from planner.views.charts import compare_chart, compare_page

        write_text(compare_chart(c) if args.format == "svg" else compare_page(c, render(c)), args.out,
                   protect=[args.model])
        return 0
    write_text(json_document("compare", c.to_dict()) if args.format == "json" else render(c), args.out, protect=[args.model])
    return 0
