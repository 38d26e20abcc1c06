"""``shardplan run``: run a plan on a real engine (JAX/XLA), check it against the reference, compare collectives."""

from __future__ import annotations

import argparse
import sys

from planner.cli.args import add_seed_option, command_options, device_count, model_argument, repeat_count
from planner.cli.export import PIPELINE_MODULE_REFUSAL
from planner.cli.status import EXIT_INTERNAL_ERROR, EXIT_OK, internal_error
from planner.cli.output import json_document, write_text
from planner.text_table import table
from planner.cli.plan import make_plan, pipeline_options, pipelined, plan_options
from planner.errors import EngineError

# JAX and the pipeline are imported by run(), so that ``shardplan --help`` stays fast.

ENGINES = ("jax",)
#: ``planner.engines.jax_run.REPEAT``, repeated so that building the parser does not import the engine.
REPEAT = 5


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run the plan on JAX/XLA, compare with the numpy reference and XLA's collectives with the plan's",
        description="Plan the model, give it to XLA (by default as one jax.shard_map of the plan's per-device "
        "program, whose collectives are the plan's: --lowering), jit and run it on a mesh of N devices, and compare "
        "the outputs (and with --training the gradients) with the numpy reference; then list the compiled program's "
        "collectives beside the plan's, bytes per device by the plan's convention, and time the compiled step (the "
        "checked run warms it up; the median of --repeat more runs) beside the step time the plan predicts. On a "
        "CPU-only machine --devices N sets XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX starts. A "
        "run the machine's memory cannot hold is refused before JAX starts. A pipelined plan (--pipeline auto or a "
        "model's pipeline: mapping) is refused with what to do instead (export --to jax). Needs the jax extra "
        '(pip install -e ".[jax]").',
    )
    p.add_argument("model", help="model YAML file")
    p.add_argument("--engine", choices=ENGINES, default="jax", help="the engine to run on (default jax)")
    p.add_argument("--devices", type=device_count, metavar="N",
                   help="devices to run on (default: the plan's mesh size; must equal it)")
    plan_options(p)
    pipeline_options(p, devices=False)
    add_seed_option(p)
    p.add_argument("--lowering", choices=("auto", "shard_map", "constraints"), default="auto",
                   help="how XLA is given the plan: shard_map (the per-device program of --format program as one "
                   "jax.shard_map, every collective as the plan lists it), constraints (every value constrained to "
                   "its layout, the collectives left to XLA; a pending sum cannot be said), or auto (default: "
                   "shard_map wherever the program can be one, i.e. its layouts divide evenly)")
    p.add_argument("--repeat", type=repeat_count, default=REPEAT, metavar="R",
                   help=f"timed runs of the compiled step (forward, or forward and backward with --training) after "
                   f"the checked run, which warms it up; the measured step time is their median (default {REPEAT})")
    p.add_argument("--format", choices=("table", "json"), default="table")
    command_options(p, run)


def run(args: argparse.Namespace) -> int:
    from planner.engines.jax_env import require_jax

    graph = model_argument(args.model)
    if pipelined(args, graph, devices=False):  # here --devices is the devices to run on, not a pipeline request
        raise EngineError(PIPELINE_MODULE_REFUSAL)
    require_jax()  # before planning: say how to install it at once
    from planner.engines.jax_run import run_on_jax

    p = make_plan(args, graph)
    r = run_on_jax(p, devices=args.devices, seed=args.seed, lowering=args.lowering, repeat=args.repeat)
    write_text(json_document("run", {"model": p.model, "search": p.search, "training": r.training, **r.to_dict()}) if args.format == "json"
               else render(p, r), None)
    if r.ok:
        return EXIT_OK
    # the plan compiled by XLA computes something else than the single-device reference: the plan,
    # its export or the engine's model is wrong, never the user's input (XLA's bytes are reported, not judged)
    bad = [n for n, o in {**r.outputs, **r.gradients}.items() if not o["ok"]]
    print(internal_error(f"on JAX, {', '.join(bad)} differ from the single-device result"), file=sys.stderr)
    return EXIT_INTERNAL_ERROR


def _b(count: int) -> str:
    """Bytes to the byte: the plan's and XLA's counts are compared side by side."""
    from costmodels.units import format_bytes

    return format_bytes(count, exact=True)


def _groups(groups) -> str:
    return ",".join("{" + ",".join(map(str, g)) + "}" for g in groups)


def _checks(title: str, entries: dict) -> str:
    rows = [(name, "ok" if e["ok"] else "MISMATCH", f"{e['max_abs_error']:.3g}", f"{e['max_rel_error']:.3g}")
            for name, e in entries.items()]
    return table(rows, header=(title, "result", "max abs error", "max rel error"))


def render(plan, r) -> str:
    from costmodels.units import format_seconds

    how = ("one shard_map of the plan's program" if r.lowering == "shard_map"
           else "sharding constraints" + (f" ({r.lowering_note})" if r.lowering_note else ""))
    lines = [f"model {plan.model}, search {plan.search}, engine jax: XLA on {r.devices} {r.platform} devices"
             + (", forward and backward" if r.training else ""), f"lowering: {how}", "",
             _checks("output", r.outputs)]
    if r.training:
        lines += ["", _checks("gradient", r.gradients)]
    planned = [(c.phase, c.tensor, c.kind, c.axes, _groups(c.replica_groups), _b(c.bytes_per_device))
               for c in r.planned]
    lines += ["", "the plan's collectives:",
              table(planned, header=("phase", "tensor", "kind", "axes", "replica groups", "bytes/device"))
              if planned else "none"]
    xla = [(c.name, c.kind, " ".join(c.arrays), _groups(c.replica_groups), _b(c.bytes_per_device), c.op_name)
           for c in r.xla]
    lines += ["", "XLA's collectives (compiled HLO):",
              table(xla, header=("instruction", "kind", "result", "replica groups", "bytes/device", "from"))
              if xla else "none"]
    kinds = [(kind, k["predicted_count"], _b(k['predicted_bytes_per_device']), k["xla_count"],
              _b(k['xla_bytes_per_device']), "-" if k["ratio"] is None else f"{k['ratio']:.2f}")
             for kind, k in r.by_kind().items()]
    kinds.append(("total", len(r.planned), _b(r.predicted_comm_bytes_per_device), len(r.xla),
                  _b(r.xla_comm_bytes_per_device), "-" if r.ratio is None else f"{r.ratio:.2f}"))
    lines += ["", table(kinds, header=("kind", "plan", "plan bytes/device", "XLA", "XLA bytes/device",
                                       "XLA / plan")), ""]
    lines += [f"verdict: {v}" for v in r.verdict()]
    if r.unconstrained:
        lines.append("left to XLA (a pending sum, or a size-1 dimension split past its size, has no "
                     "PartitionSpec): " + ", ".join(r.unconstrained))
    lines.append(step_time_line(r))
    what = "outputs and gradients" if r.training else "outputs"
    status = f"OK: {what} match the reference" if r.ok else f"FAILED: {what} differ from the reference"
    lines.append(f"{status} (planned, compiled and run in {format_seconds(r.time_s)})")
    return "\n".join(lines) + "\n"


def step_time_line(r) -> str:
    """``step time: predicted X, measured Y (median of R), ratio Y/X``."""
    from costmodels.units import format_seconds

    ratio = "-" if r.prediction_ratio is None else f"{r.prediction_ratio:.2f}"
    return (f"step time: predicted {format_seconds(r.predicted_step_time_s)}, measured "
            f"{format_seconds(r.measured_step_time_s)} (median of {len(r.step_times_s)}), ratio {ratio}")
