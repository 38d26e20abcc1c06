"""``shardplan describe``: one sharding's local shape, device index map and other notations."""

from __future__ import annotations

import argparse

from planner.cli.args import DTYPES, command_options, parse_dtype, parse_meshes, parse_shape
from planner.cli.output import json_document, write_text
from planner.text_table import table
from planner.ir.text import parse_sharding


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "describe",
        help="show a sharding's local shape, which device holds what, and its JAX/MindSpore/DTensor forms",
        description="Describe a sharding: canonical text, local shape, the index range every device "
        "holds, and the same sharding as a JAX PartitionSpec and type, a MindSpore layout and DTensor placements.",
    )
    p.add_argument("sharding", help='e.g. \'[{"x"}, {"z", "y"}]\' or \'sharding<@m, [{"x"}, {}]>\'')
    p.add_argument("--mesh", action="append", required=True, metavar="MESH",
                   help="x=2,y=4 or '@name = <[\"x\"=2, \"y\"=4]>'; repeat for several meshes (the first is the default)")
    p.add_argument("--shape", required=True, help="tensor shape, e.g. 4x8")
    p.add_argument("--dtype", default="f32", help=f"one of {', '.join(DTYPES)} (default f32)")
    p.add_argument("--format", choices=("table", "json", "svg"), default="table",
                   help="table (default), json, or svg: the device grid, which device holds which block")
    p.add_argument("--out", metavar="FILE", help="write the output to FILE (atomically) instead of stdout")
    command_options(p, run)


def _ranges(index: list[list[int]]) -> list[str]:
    return [f"[{a},{b})" for a, b in index]


def render_table(d: dict) -> str:
    layout = d["mindspore"]
    why = d["not_expressible"]
    rows = [
        ("sharding", d["sharding"]),
        ("mesh", d["mesh"]),
        ("shape", "x".join(map(str, d["shape"])) + f" {d['dtype']}"),
        ("local shape", "x".join(map(str, d["local_shape"])) or "scalar"),
        ("PartitionSpec", d["partition_spec"] or f"not expressible: {why.get('partition_spec')}"),
        ("JAX type", d["jax_type"]),
        ("MindSpore", f"device matrix {layout['device_matrix']}, tensor map {layout['tensor_map']}"
         if layout else f"not expressible: {why.get('mindspore')}"),
        ("DTensor", d["dtensor"] or f"not expressible: {why.get('dtensor')}"),
    ]
    rank = len(d["shape"])
    devices = table(
        ([e["device"], *_ranges(e["index"])] for e in d["devices"]),
        header=["device", *[f"dim {i}" for i in range(rank)]],
    )
    return table(rows) + "\n\n" + devices + "\n"


def run(args: argparse.Namespace) -> int:
    from planner.views.summary import describe  # imported here: shardplan --help stays fast

    meshes = parse_meshes(args.mesh)
    shape = parse_shape(args.shape)
    dtype = parse_dtype(args.dtype)
    sharding = parse_sharding(args.sharding, meshes)
    sharding.check_rank(shape)
    if args.format == "svg":
        from planner.views.svg_grid import device_grid_svg

        write_text(device_grid_svg(sharding, shape, dtype), args.out)
        return 0
    d = describe(sharding, shape, dtype)
    write_text(json_document("describe", d) if args.format == "json" else render_table(d), args.out)
    return 0
