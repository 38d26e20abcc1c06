"""``shardplan graph``: a model's ops with shapes, FLOPs, bytes accessed and parameter bytes, and totals."""

from __future__ import annotations

import argparse
import warnings

from planner.cli.args import command_options, model_argument
from planner.cli.output import json_document, write_text
from planner.text_table import table


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "graph",
        help="list a model's ops with shapes, FLOPs, bytes accessed and parameter bytes",
        description="Load a YAML model and list its ops in execution order with result shape, dtype, "
        "FLOPs (a multiply-add counts 2), the bytes of device memory each op reads and writes (every operand "
        "and result element once; a gather only the rows it picks, a reshape none) and the bytes of the "
        "parameters each op reads; then totals.",
    )
    p.add_argument("model", help="model YAML file (- for standard input)")
    p.add_argument("--format", choices=("table", "json", "dot"), default="table")
    command_options(p, run)


def graph_data(graph) -> dict:
    """The ``graph`` command's JSON object for a loaded model."""
    ops = []
    for op in graph.ops:
        out = graph.tensor(op.output)
        params = {t for t in op.inputs if graph.tensor(t).kind == "param"}
        ops.append({
            "name": op.name,
            "op": op.op,
            "inputs": list(op.inputs),
            "output": op.output,
            "shape": list(out.shape),
            "dtype": out.dtype,
            "flops": graph.op_flops(op.name),
            "bytes_accessed": graph.op_bytes_accessed(op.name),
            "param_bytes": sum(graph.tensor(t).nbytes for t in sorted(params)),
        })
    return {
        "model": graph.name,
        "ops": ops,
        "totals": {"ops": len(ops), "flops": graph.total_flops(), "bytes_accessed": graph.total_bytes_accessed(),
                   "param_bytes": graph.param_bytes()},
    }


def render_table(data: dict) -> str:
    from costmodels.units import format_bytes

    rows = [
        (o["name"], o["op"], ", ".join(o["inputs"]), "x".join(map(str, o["shape"])) or "scalar", o["dtype"],
         f"{o['flops']:,}", format_bytes(o['bytes_accessed']), format_bytes(o['param_bytes']))
        for o in data["ops"]
    ]
    t = data["totals"]
    rows.append(("total", f"{t['ops']} ops", "", "", "", f"{t['flops']:,}", format_bytes(t['bytes_accessed']),
                 format_bytes(t['param_bytes'])))
    header = ("op", "kind", "inputs", "shape", "dtype", "flops", "bytes accessed", "param bytes")
    return f"model {data['model']}\n\n" + table(rows, header=header) + "\n"


def render_dot(graph) -> str:
    lines = [f'digraph "{graph.name}" {{', "  rankdir=TB;"]
    for name, attrs in graph.nx.nodes(data=True):
        if attrs["kind"] == "op":
            spec = attrs["spec"]
            lines.append(f'  "{name}" [shape=box, label="{name}\\n{spec.op}"];')
        else:
            spec = attrs["spec"]
            shape = "x".join(map(str, spec.shape)) or "scalar"
            style = "ellipse" if spec.kind == "activation" else "note"
            lines.append(f'  "{name}" [shape={style}, label="{name}\\n{spec.dtype}[{shape}]"];')
    for u, v in graph.nx.edges():
        lines.append(f'  "{u}" -> "{v}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from graphs.lint import model_warnings
    from planner.errors import ModelWarning

    graph = model_argument(args.model)
    for message in model_warnings(graph):
        warnings.warn(message, ModelWarning, stacklevel=1)
    if args.format == "dot":
        write_text(render_dot(graph), None)
    elif args.format == "json":
        write_text(json_document("graph", graph_data(graph)), None)
    else:
        write_text(render_table(graph_data(graph)), None)
    return 0
