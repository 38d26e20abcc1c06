"""``shardplan export``: a plan in JAX, Shardy, DTensor or MindSpore notation, as JSON."""

from __future__ import annotations

import argparse

from planner.cli.args import EXPORT_FORMATS, command_options
from planner.cli.output import to_json, write_text
from planner.cli.plan import plan_options, make_plan


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="plan a model and export the plan for JAX, Shardy, PyTorch DTensor or MindSpore (JSON)",
        description="Plan the model and write its shardings in another notation, keyed by tensor and op: "
        "jax (mesh and a PartitionSpec per tensor; sub-axes through a split mesh), shardy (sdy.mesh and "
        "#sdy.sharding attributes), dtensor (DeviceMesh and placements) or mindspore (strategies and "
        "tensor layouts). A sharding the notation cannot express is refused, naming the tensor.",
    )
    p.add_argument("model", help="model YAML file (- for standard input)")
    p.add_argument("--to", required=True, choices=EXPORT_FORMATS, help="the notation to export to")
    plan_options(p)
    p.add_argument("--out", metavar="FILE", help="write the JSON to FILE (atomically) instead of stdout")
    command_options(p, run)


def run(args: argparse.Namespace) -> int:
    write_text(to_json(make_plan(args).export(args.to)), args.out, protect=[args.model])
    return 0
