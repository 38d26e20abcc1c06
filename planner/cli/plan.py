"""``shardplan plan`` and ``shardplan explain``: plan a model, or say why a tensor is sharded as it is."""

from __future__ import annotations

import argparse

from planner.cli.args import OVERLAPS, PASSES, SEARCHES, command_options, model_argument, positive_seconds
from planner.cli.output import json_document, to_csv, write_text
from planner.text_table import table
from planner.errors import ParseError, quote

# The pipeline (planner.api, costmodels) is imported by the functions that run it, so that
# ``shardplan --help`` stays fast .

CSV_COLUMNS = ("name", "op", "strategy", "operand_shardings", "result_sharding", "source", "compute_time_s",
               "comm_time_s", "reason")


def plan_options(p: argparse.ArgumentParser) -> None:
    """``--search`` and the options of how to plan: what every command that plans a model takes."""
    p.add_argument("--search", choices=SEARCHES, default=SEARCHES[0],
                   help="auto (default): ilp's optimum where it comes within a time budget per phase, else bfs's plan "
                   "(the optimum comes in seconds on every shipped config and on GPT at 12-48 layers, and bfs's plans "
                   "cost up to several times more); bfs: seed 002's breadth-first propagation; ilp: the global "
                   "optimum, however long it takes; explicit: seed 001; propagate: Shardy's rule-based propagation "
                   "(seed 003)")
    planning_options(p)


def planning_options(p: argparse.ArgumentParser, *, searched: bool = True) -> None:
    """The options of how to plan, shared by plan, explain, simulate and compare (``searched=False``: the
    command has no --search, it runs every search)."""
    p.add_argument("--propagation", choices=PASSES, default="user-priority",
                   help=f"{'with --search propagate' if searched else 'for the propagate search'}: the pass, each "
                   "building on the previous: basic, aggressive, op-priority, user-priority (default)")
    p.add_argument("--mesh", help="plan on this mesh instead of the model's (same number of devices)")
    p.add_argument("--cluster", metavar="PRESET|FILE", help="cluster preset or YAML file (default: the model's, else default)")
    p.add_argument("--training", action="store_true",
                   help="plan a training step: backward communication and gradient reduction included")
    p.add_argument("--no-pbroadcast", dest="insert_pbroadcast", action="store_false",
                   help="with --training: switch off seed 004's device-variance types, so the backward psums "
                   "cotangents that are already whole (to see what the types save)")
    p.add_argument("--memory-budget", metavar="BYTES", help="per-device memory budget, e.g. 16GiB or 1e9 (ilp)")
    p.add_argument("--time-limit", type=positive_seconds, metavar="S",
                   help="bound the whole search in seconds: the ILP gets what is left (else falls back to bfs), "
                   "no axis phase starts after it (the plan so far is returned, with a warning)")
    p.add_argument("--axes-per-phase", default="auto", metavar="auto|all|N",
                   help="mesh pieces each search phase decides: auto (default) plans meshes of up to two pieces "
                   "whole and larger ones one more piece at a time; all: the whole problem at once")
    p.add_argument("--solver", choices=("auto", "elimination", "highs", "cbc"), default="auto",
                   help="how the ILP's model is solved: elimination (exact dynamic programming over its cost tables), "
                   "highs or cbc (a MIP solver); auto (default): elimination, or HiGHS (else CBC) where its tables "
                   "would be too large or a memory budget binds")
    p.add_argument("--overlap", choices=OVERLAPS, default="async",
                   help="how the step time is scheduled: async (default): collectives run on their link's stream "
                   "beside independent compute, gradient reductions overlap the rest of the backward; none: every "
                   "collective adds its full time (the objective every search optimises)")


def pipeline_options(p: argparse.ArgumentParser, *, devices: bool = True) -> None:
    """``--devices N`` (unless the command has its own) and ``--pipeline auto``: what asks for a pipelined plan."""
    if devices:
        p.add_argument("--devices", type=_device_count, metavar="N",
                       help="plan a pipelined training step on N devices of the cluster: the planner builds the mesh "
                       "(pipeline x data-parallel x tensor-parallel inside a node); implies --pipeline auto")
    p.add_argument("--pipeline", choices=("auto",),
                   help="auto: plan a pipelined training step (stages, microbatches, schedule, recomputation, ZeRO) "
                   "for a model without a pipeline: mapping; a model with one is planned that way without the flag")


def pipelined(args: argparse.Namespace, graph, *, devices: bool = True) -> bool:
    """Whether the command asks for a pipelined plan: ``--devices N`` (where :func:`pipeline_options` gave it),
    ``--pipeline auto``, or a model with a ``pipeline:`` mapping."""
    return (devices and args.devices is not None) or bool(args.pipeline) or graph.pipeline is not None


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="plan how to shard a model: a sharding per tensor, a strategy per op, the collectives and their cost",
        description="Plan a model: enumerate each op's strategies, cost every redistribution, and choose by "
        "the global optimum where it comes within a time budget, else breadth-first propagation (auto, the "
        "default), breadth-first propagation from the annotated ops (bfs), the global optimum (ilp), seed 001's "
        "consensus rule (explicit) or Shardy's rule-based propagation (propagate).",
    )
    p.add_argument("model", help="model YAML file (- for standard input)")
    plan_options(p)
    p.add_argument("--format", choices=("table", "json", "csv", "program", "html"), default="table",
                   help="table (default), json, csv (the strategy table), program (the per-device SPMD listing) "
                   "or html (one self-contained page: the graph coloured by sharding, the redistributions, "
                   "compute vs communication charts and the tables; use with --out plan.html)")
    p.add_argument("--phases", action="store_true",
                   help="with --search propagate: every tensor's sharding after each user priority and each "
                   "op-priority level (table and json)")
    p.add_argument("--out", metavar="FILE", help="write the output to FILE (atomically) instead of stdout")
    pipeline_options(p)
    command_options(p, run)

    e = sub.add_parser(
        "explain",
        help="say why a tensor is sharded the way it is, back to the user annotation that decided it",
        description="Plan the model and print the chain of decisions from TENSOR back to a user annotation.",
    )
    e.add_argument("model", help="model YAML file (- for standard input)")
    e.add_argument("tensor", help="tensor name")
    plan_options(e)
    e.add_argument("--format", choices=("table", "json"), default="table",
                   help="table (default): the chain as indented lines; json: the tensor's sharding, source and "
                   "reason, and the same chain as a list of lines")
    command_options(e, run_explain)


def _budget(text: str | None) -> float | None:
    if text is None:
        return None
    from costmodels import parse_quantity

    try:
        value = parse_quantity(text, "bytes")
    except Exception:
        raise ParseError(f"cannot read --memory-budget {quote(text)}: give bytes, e.g. 16GiB or 1.5e9") from None
    if not 0 < value < float("inf"):
        raise ParseError(f"--memory-budget must be a positive, finite number of bytes, got {quote(text)}")
    return float(value)


def plan_arguments(args) -> dict:
    """The keyword arguments of ``planner.api.plan`` that :func:`planning_options` gave (not the search)."""
    return dict(mesh=args.mesh, cluster=args.cluster, training=args.training,
                memory_budget=_budget(args.memory_budget), time_limit=args.time_limit, solver=args.solver,
                progress=getattr(args, "progress", None), insert_pbroadcast=args.insert_pbroadcast,
                axes_per_phase=args.axes_per_phase, overlap=args.overlap)


def make_plan(args, graph=None):
    """The plan the flags ask for (of ``graph``, the model already loaded, if given); its warnings are printed by the
    command's reporter (``--quiet`` hides them)."""
    from planner.api import plan

    return plan(graph if graph is not None else model_argument(args.model), search=args.search, propagation=args.propagation, **plan_arguments(args))


def render_phases(p) -> str:
    """Every tensor's sharding after each propagation phase: one column per phase, a legend below."""
    phases = p.propagation.phases
    short = [f"{i + 1}" for i in range(len(phases))]
    rows = [(name, *(ph.shardings[name].dims_text() for ph in phases)) for name in p.tensors]
    out = ["phases (every tensor's sharding after each phase):",
           table(rows, header=("tensor", *short)), ""]
    out += [f"  {k}: {ph.label} ({ph.visits} visits)" for k, ph in zip(short, phases)]
    return "\n".join(out) + "\n"


def _device_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--devices takes a whole number of devices, got {text!r}") from None
    if not 1 <= n <= 1 << 24:
        raise argparse.ArgumentTypeError(f"--devices must be from 1 to {1 << 24}, got {n}")
    return n


def pipeline_arguments(args) -> dict:
    """The keyword arguments of ``planner.api.plan_pipeline`` the flags give (plan's and export's)."""
    return dict(devices=args.devices, cluster=args.cluster, memory_budget=_budget(args.memory_budget),
                search=args.search, progress=getattr(args, "progress", None))


def run_pipeline(args: argparse.Namespace, graph) -> int:
    """``plan`` of a pipelined training step (:func:`planner.api.plan_pipeline`)."""
    from planner.api import plan_pipeline

    if args.format not in ("table", "json"):
        raise ParseError(f"a pipelined plan prints as table or json, not {args.format}; drop --format {args.format}")
    p = plan_pipeline(graph, **pipeline_arguments(args))
    text = json_document("plan", p.to_dict()) if args.format == "json" else p.summary()
    write_text(text, args.out, protect=[args.model])
    return 0


def run(args: argparse.Namespace) -> int:
    graph = model_argument(args.model)
    if pipelined(args, graph):
        return run_pipeline(args, graph)
    if args.phases and args.search != "propagate":
        raise ParseError("--phases shows rule-based propagation's phases: use it with --search propagate")
    if args.phases and args.format not in ("table", "json"):
        raise ParseError("--phases is shown in the table and json formats; drop --format csv/program/html or --phases")
    p = make_plan(args, graph)
    if args.format == "json":
        text = json_document("plan", p.to_dict(phases=args.phases))
    elif args.format == "program":
        from planner.partitioning import render as render_program

        text = render_program(p.program)
    elif args.format == "html":
        from planner.views.html_page import plan_page

        text = plan_page(p)
    elif args.format == "csv":
        rows = [{**o.to_dict(), "strategy": o.strategy.text()} for o in p.ops]  # MindSpore's text in one cell
        text = to_csv(([r[c] if not isinstance(r[c], list) else "; ".join(r[c]) for c in CSV_COLUMNS] for r in rows),
                      CSV_COLUMNS)
    else:
        text = p.summary() + ("\n" + render_phases(p) if args.phases else "")
    write_text(text, args.out, protect=[args.model])
    return 0


def run_explain(args: argparse.Namespace) -> int:
    p = make_plan(args)
    chain = p.explain(args.tensor)
    if args.format == "json":
        t = p.tensor(args.tensor)
        write_text(json_document("explain", {"model": p.model, "search": p.search, "tensor": args.tensor,
                                             **t.to_dict(), "explanation": chain}), None)
    else:
        write_text("\n".join(chain) + "\n", None)
    return 0
