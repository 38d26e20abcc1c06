"""``shardplan simulate``: run a plan on the numpy device simulator and check it against one device."""

from __future__ import annotations

import argparse
import sys

from planner.cli.args import add_seed_option, command_options
from planner.cli.output import json_document, write_text
from planner.text_table import table
from planner.cli.plan import plan_options, make_plan
from planner.cli.status import EXIT_INTERNAL_ERROR, EXIT_OK, internal_error

# The pipeline is imported by the functions that run it, so that ``shardplan --help`` stays fast.


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="run the plan on simulated devices, compare with the single-device result, measure the bytes",
        description="Plan the model, lower the plan to its SPMD program, run it on one numpy array per "
        "device with seeded random inputs and parameters, assemble the outputs and compare them with the "
        "unsharded numpy reference; report the bytes each device really received next to the prediction.",
    )
    p.add_argument("model", help="model YAML file (- for standard input)")
    plan_options(p)
    add_seed_option(p)
    p.add_argument("--dtype", choices=("f64", "f32"), default="f64",
                   help="what the devices and the reference compute floats in: f64 (default; exact to 1e-9) or "
                   "f32 (faster, about half the memory; compared to 1e-4)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    command_options(p, run)


def render(plan, r) -> str:
    from costmodels.units import format_bytes, format_seconds

    rows = [(name, "ok" if o["ok"] else "MISMATCH", f"{o['max_abs_error']:.3g}", f"{o['max_rel_error']:.3g}")
            for name, o in r.outputs.items()]
    lines = [
        f"model {plan.model}, search {plan.search}, {r.devices} simulated devices"
        + (", forward and backward" if r.training else "") + f", {r.dtype}",
        "",
        table(rows, header=("output", "result", "max abs error", "max rel error")),
    ]
    if r.training:
        grads = [(name, "ok" if g["ok"] else "MISMATCH", f"{g['max_abs_error']:.3g}", f"{g['max_rel_error']:.3g}")
                 for name, g in r.gradients.items()]
        lines += ["", table(grads, header=("gradient", "result", "max abs error", "max rel error"))]
    phases = []
    for name, ph in r.phases.items():
        measured, predicted = ph["measured_comm_bytes_per_device"], ph["predicted_comm_bytes_per_device"]
        counts = ", ".join(f"{k} x{v}" for k, v in ph["collectives"].items()) or "none"
        exact = measured != predicted  # two counts that differ are shown to the byte
        phases.append((name, format_bytes(measured, exact=exact), format_bytes(predicted, exact=exact), "equal" if measured == predicted else "DIFFERENT",
                       counts))
    lines += [
        "",
        table(phases, header=("phase", "measured/device", "predicted/device", "", "collectives")),
        "",
        f"communication: {format_bytes(r.measured_comm_bytes_per_device, exact=not _same_bytes(r))} per device "
        f"measured, {format_bytes(r.predicted_comm_bytes_per_device, exact=not _same_bytes(r))} predicted"
        + (" (equal)" if _same_bytes(r) else " (DIFFERENT)"),
    ]
    lines.append(f"{'OK' if r.ok else 'FAILED'}: simulated in {format_seconds(r.time_s)}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from planner.simulation.run import simulate

    p = make_plan(args)
    r = simulate(p, seed=args.seed, dtype=args.dtype, progress=args.progress)
    if args.format == "json":
        write_text(json_document("simulate", {"model": p.model, "search": p.search, "training": r.training,
                                              **r.to_dict()}), None)
    else:
        write_text(render(p, r), None)
    if r.ok and _same_bytes(r):
        return EXIT_OK
    # the planner's plan, its program or the simulator is wrong, never the user's model: a bug
    bad = [n for n, o in {**r.outputs, **r.gradients}.items() if not o["ok"]]
    differ = [n for n, ph in r.phases.items()
              if ph["measured_comm_bytes_per_device"] != ph["predicted_comm_bytes_per_device"]]
    what = "; ".join(([f"the simulated {', '.join(bad)} differ from the single-device result"] if bad else [])
                     + ([f"the bytes measured in {', '.join(differ)} differ from the plan's"] if differ else []))
    print(internal_error(what), file=sys.stderr)
    return EXIT_INTERNAL_ERROR


def _same_bytes(r) -> bool:
    """Measured bytes equal predicted bytes in every phase."""
    return all(ph["measured_comm_bytes_per_device"] == ph["predicted_comm_bytes_per_device"]
               for ph in r.phases.values())
