"""``shardplan simulate``: run a plan on the numpy device simulator and check it against one device."""

from __future__ import annotations

import argparse
import sys

from planner.cli.args import add_seed_option, command_options, model_argument
from planner.cli.output import json_document, write_text
from planner.text_table import table
from planner.cli.plan import make_plan, pipeline_arguments, pipeline_options, pipelined, plan_options
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
    pipeline_options(p)
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd",
                   help="pipelined step: the optimizer step after the gradients: sgd (learning rate 0.1, default) "
                   "or adam (learning rate 1e-3, betas 0.9 and 0.999, eps 1e-8, from zero moments)")
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

    graph = model_argument(args.model)
    if pipelined(args, graph):
        return run_pipeline(args, graph)
    p = make_plan(args, graph)
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


def run_pipeline(args: argparse.Namespace, graph) -> int:
    """``simulate`` of a pipelined training step: plan it (:func:`planner.api.plan_pipeline`), run it
    (:func:`planner.simulation.pipeline.simulate_pipeline`)."""
    from planner.api import cluster_of, plan_pipeline
    from planner.simulation.pipeline import simulate_pipeline

    p = plan_pipeline(graph, **pipeline_arguments(args))
    r = simulate_pipeline(graph, p, cluster_of(graph, args.cluster), search=args.search, seed=args.seed,
                          dtype=args.dtype, optimizer=args.optimizer, progress=args.progress)
    if args.format == "json":
        whole = p.to_dict()["pipeline"]
        pipeline = {k: whole[k] for k in ("degree", "data_parallel", "stage_mesh", "mesh", "schedule", "microbatches",
                                          "microbatch_size", "virtual_stages", "recompute", "zero_stage")}
        pipeline["stages"] = [{k: s[k] for k in ("index", "device_group", "layers")} for s in whole["stages"]]
        write_text(json_document("simulate", {"model": p.model, "search": args.search, "training": True,
                                              "pipeline": pipeline, **r.to_dict()}), None)
    else:
        write_text(render_pipeline(p, r), None)
    if r.ok and r.bytes_ok:
        return EXIT_OK
    bad = [n for group in (r.outputs, r.gradients, r.parameters) for n, o in group.items() if not o["ok"]]
    differ = [ph for ph, rows in r.phases.items()
              if any(x["measured_comm_bytes_per_device"] != x["predicted_comm_bytes_per_device"] for x in rows)]
    what = "; ".join(([f"the simulated {', '.join(bad[:5])} differ from the single-device result"] if bad else [])
                     + ([f"the bytes measured in {', '.join(differ)} differ from the plan's"] if differ else []))
    print(internal_error(what), file=sys.stderr)
    return EXIT_INTERNAL_ERROR


def render_pipeline(plan, r) -> str:
    """The pipelined simulation as tables: the checks, the bytes per phase and device group, the memory."""
    from costmodels.units import format_bytes, format_seconds

    c = plan.config

    def checks(title, entries):
        bad = [n for n, o in entries.items() if not o["ok"]]
        worst = max((o["max_rel_error"] for o in entries.values()), default=0.0)
        return (title, f"{len(entries) - len(bad)}/{len(entries)} ok" if not bad else f"MISMATCH: {', '.join(bad[:3])}",
                f"{worst:.3g}")

    lines = [f"model {plan.model}, pipelined training step on {r.devices} simulated devices (pp {c.pp} x dp {c.dp} x "
             f"stage mesh {' x '.join(f'{n}={s}' for n, s in c.stage_axes)}), {c.schedule}"
             + (f" with {c.virtual_stages} virtual stages" if c.virtual_stages > 1 else "")
             + f", {c.microbatches} microbatches of {c.microbatch}, recompute {c.recompute}, ZeRO {c.zero}, "
             f"{r.optimizer}, {r.dtype}", "",
             table([checks("outputs", r.outputs), checks("gradients", r.gradients),
                    checks("updated parameters", r.parameters)], header=("compared", "result", "max rel error"))]
    rows = []
    for phase, per_group in r.phases.items():
        for x in per_group:
            m, p = x["measured_comm_bytes_per_device"], x["predicted_comm_bytes_per_device"]
            if m or p:
                rows.append((phase, x["device_group"], format_bytes(m, exact=m != p), format_bytes(p, exact=m != p),
                             "equal" if m == p else "DIFFERENT"))
    lines += ["", table(rows, header=("phase", "group", "measured/device", "predicted/device", "")) if rows else
              "no communication: every phase moved 0 bytes, as predicted"]
    mem = []
    for x in r.memory:
        parts = ", ".join(f"{k.replace('_', ' ')} {format_bytes(v)}"
                          + ("" if v == x["predicted_parts"][k] else f" (predicted {format_bytes(x['predicted_parts'][k])})")
                          for k, v in x["measured_parts"].items())
        mem.append((x["device_group"], format_bytes(x["measured_peak_bytes_per_device"]),
                    format_bytes(x["predicted_bytes_per_device"]), "equal" if x["equal"] else "DIFFERENT", parts))
    lines += ["", table(mem, header=("group", "peak memory/device", "predicted", "", "measured at the peak"))]
    lines.append(f"{'OK' if r.ok and r.bytes_ok else 'FAILED'}: values exact, bytes "
                 f"{'equal' if r.bytes_ok else 'DIFFERENT'}, peak memory "
                 f"{'equal to' if r.memory_ok else 'different from'} the prediction; simulated in "
                 f"{format_seconds(r.time_s)}")
    return "\n".join(lines) + "\n"
