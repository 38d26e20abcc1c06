"""``shardplan export``: a plan in JAX, Shardy, DTensor or MindSpore notation, as JSON; or its SPMD program as a
JAX module (``--to jax-module``)."""

from __future__ import annotations

import argparse

from planner.cli.args import EXPORT_FORMATS, command_options, model_argument
from planner.cli.output import json_document, write_text
from planner.cli.plan import make_plan, pipeline_arguments, pipeline_options, pipelined, plan_options
from planner.errors import EngineError, NotExpressibleError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="plan a model and export the plan for JAX, Shardy, PyTorch DTensor or MindSpore (JSON)",
        description="Plan the model and write its shardings in another notation, keyed by tensor and op: "
        "jax (mesh and a PartitionSpec per tensor; sub-axes through a split mesh), shardy (sdy.mesh and "
        "#sdy.sharding attributes), dtensor (DeviceMesh and placements) or mindspore (strategies and "
        "tensor layouts). A sharding the notation cannot express is refused, naming the tensor. "
        "--to jax-module writes Python instead: a self-contained module (it imports only jax, jax.numpy and numpy) "
        "with the mesh, each input's and parameter's PartitionSpec, and the plan's per-device program as one "
        "jax.shard_map with the plan's collectives, one line per op; forward(params, inputs) and, with --training, "
        "step(params, inputs) returning the loss and the gradients. It is what shardplan run executes. "
        "A pipelined plan (--devices N, --pipeline auto or a model's pipeline: mapping) exports to jax: the mesh "
        "pp x dp x the stage axes, each stage's layers, ops, device group and chunk, each device group's schedule "
        "of forward and backward microbatches, and each stage's layouts on the stage mesh.",
    )
    p.add_argument("model", help="model YAML file (- for standard input)")
    p.add_argument("--to", required=True, choices=EXPORT_FORMATS, help="the notation to export to")
    plan_options(p)
    pipeline_options(p)
    p.add_argument("--format", choices=("json",),
                   help="json: the export as JSON (the default for the notations); with --to jax-module, the "
                   "module's source as the string \"module\" of a JSON object instead of the Python file")
    p.add_argument("--out", metavar="FILE", help="write the JSON (or the module) to FILE (atomically) instead of stdout")
    command_options(p, run)


def run(args: argparse.Namespace) -> int:
    graph = model_argument(args.model)
    if pipelined(args, graph):
        return run_pipeline(args, graph)
    plan = make_plan(args, graph)
    if args.to == "jax-module":
        from planner.engines.jax_spmd import module_source

        command = " ".join(["shardplan export", args.model, "--to jax-module"]
                           + (["--search", plan.search] if plan.search else [])
                           + (["--training"] if getattr(args, "training", False) else []))
        source = module_source(plan, command=command)
        if args.format == "json":
            source = json_document("export", {"format": args.to, "model": plan.model, "search": plan.search,
                                              "module": source})
        write_text(source, args.out, protect=[args.model])
        return 0
    write_text(json_document("export", plan.export(args.to)), args.out, protect=[args.model])
    return 0


def run_pipeline(args: argparse.Namespace, graph) -> int:
    """``export`` of a pipelined training step (:func:`planner.api.export_pipeline`)."""
    from planner.export import PIPELINE_FORMATS

    if args.to == "jax-module":
        raise EngineError(PIPELINE_MODULE_REFUSAL)
    if args.to not in PIPELINE_FORMATS:
        raise NotExpressibleError(f"a pipelined plan exports to {', '.join(PIPELINE_FORMATS)} only, not {args.to}: "
                                  "its stage assignment and schedule are written for JAX's shard_map; use --to jax")
    from planner.api import export_pipeline

    data = export_pipeline(graph, args.to, **pipeline_arguments(args))
    write_text(json_document("export", data), args.out, protect=[args.model])
    return 0


#: Why a pipelined plan is not written as a module nor run on JAX, and what to do instead (export and run say it).
PIPELINE_MODULE_REFUSAL = (
    "shardplan run and export --to jax-module do not support pipelined plans yet (the stages selected over pp, the "
    "sends between them and the microbatch schedule are not generated as JAX code); export the stage assignment and "
    "schedule with 'shardplan export MODEL --to jax', check the plan with 'shardplan simulate MODEL --training', or "
    "drop the pipeline (no --devices, --pipeline auto or pipeline:) to run an SPMD plan")
