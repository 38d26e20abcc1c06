"""``shardplan calibrate``: measure the JAX devices present and write a cluster file fitted to them."""

from __future__ import annotations

import argparse
import os

from planner.cli.args import command_options
from planner.cli.status import EXIT_OK
from planner.errors import EngineError, OutputError
from planner.limits import MAX_MESH_DEVICES
from planner.text_table import table

# JAX, the engine and the cost models are imported by run(), so that ``shardplan --help`` stays fast.

ONLY = ("compute", "links")
"""``planner.engines.calibrate.ONLY``, repeated so that building the parser does not import the engine."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="measure the JAX devices present and write a cluster file fitted to them",
        description="Measure the devices JAX sees, all at once, each in a jax.shard_map over a mesh of them: matmul "
        "throughput over a grid of local shapes and dtypes, memory bandwidth (y = x * a + b on a large buffer), "
        "vector FLOPs (fused multiply-add chains), the per-op overhead, and every collective over every mesh axis "
        "at several message sizes. Fit the cluster file's numbers to them (the collectives by non-negative least "
        "squares to the planner's own alpha-beta formulas), print every measurement beside the fit's prediction, "
        "and write the file (docs/clusters.md). All devices form one node. On a CPU-only machine JAX starts with "
        "--devices host devices (XLA_FLAGS=--xla_force_host_platform_device_count=N; default 8, what shardplan "
        "run uses), which share the host's cores as in shardplan run. About a minute on a few cores; --quick in "
        'well under 20 s. Needs the jax extra (pip install "shardplan[jax]").',
    )
    p.add_argument("--devices", type=int, metavar="N",
                   help="devices to measure (default: all JAX sees; on a CPU-only machine 8 host devices)")
    p.add_argument("--only", choices=ONLY,
                   help="measure only the compute (no collectives: one device is enough) or only the links; "
                   "the rest comes from --preset")
    p.add_argument("--preset", default="default", metavar="NAME",
                   help="with --only, the preset the file takes what was not measured from (default: default)")
    p.add_argument("--quick", action="store_true", help="fewer shapes, sizes and runs (a rougher fit, in seconds)")
    p.add_argument("--name", help="the cluster's name in the file (default: the file's name without .yaml)")
    p.add_argument("--out", required=True, metavar="FILE", help="the cluster file to write (YAML)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="what is printed on stdout once the file is written: table (default) or json (the fitted "
                   "numbers, every measurement beside the fit's prediction)")
    command_options(p, run)


def _check_arguments(args: argparse.Namespace) -> None:
    """Every mistake an argument alone shows, before JAX starts (nothing is measured or written)."""
    if args.devices is not None and args.devices < 1:
        raise EngineError(f"--devices {args.devices}: give a number of devices >= 1")
    if args.devices is not None and args.devices > MAX_MESH_DEVICES:  # bounded before JAX starts that many
        raise EngineError(f"--devices {args.devices:,}: a mesh holds at most {MAX_MESH_DEVICES:,} devices; "
                          "give fewer")
    if args.devices == 1 and args.only != "compute":
        raise EngineError("collectives need >= 2 devices; --devices 1 measures none: add --only compute "
                          "(the links then come from --preset), or give --devices 2 or more")
    target = os.path.realpath(args.out)
    if os.path.isdir(target):
        raise OutputError("this is a folder; give the path of the cluster file to write", where=args.out)
    if not os.path.isdir(os.path.dirname(target)):
        raise OutputError(f"the folder {os.path.dirname(target)} does not exist; create it first, or write elsewhere",
                          where=args.out)
    if args.only:
        from costmodels.presets import preset_path

        preset_path(args.preset)  # a ClusterError naming the presets there are


def run(args: argparse.Namespace) -> int:
    _check_arguments(args)
    from planner.engines.calibrate import calibrate
    from planner.files import write_output, write_stdout

    c = calibrate(args.devices, only=args.only, quick=args.quick, progress=args.progress)
    name = args.name or os.path.splitext(os.path.basename(args.out))[0] or "calibrated"
    text = c.cluster_file(name, args.preset).text()
    write_output(args.out, text)
    if args.format == "json":
        from planner.cli.output import json_document

        write_stdout(json_document("calibrate", calibration_data(c, args.out)))
    else:
        write_stdout(render(c, args.out))
    return EXIT_OK


def calibration_data(c, out: str) -> dict:
    """The JSON form of :func:`render`: what was measured, the fitted numbers, every measurement beside the fit."""
    fitted: dict = {}
    if c.measures_compute:
        fitted["peak_flops_by_dtype"] = dict(c.matmul_fit.peak_flops_by_dtype)
        fitted.update(vector_flops=c.vector_flops, memory_bandwidth_bytes_per_s=c.memory_bandwidth_bytes_per_s,
                      kernel_overhead_s=c.kernel_overhead_s,
                      matmul_efficiency=[{"flops": f, "efficiency": e} for f, e in c.matmul_fit.curve])
    if c.measures_links:
        fitted["link"] = {"bandwidth_bytes_per_s": c.link.bandwidth_bytes_per_s, "latency_s": c.link.latency_s,
                          "overhead_s": c.link.overhead_s}
    fitted.update(device_memory_bytes=c.device_memory_bytes, memory_source=c.memory_source)
    residuals = c.residuals()
    return {"out": out, "devices": c.devices, "platform": c.platform, "device_kind": c.device_kind,
            "jax_version": c.jax_version, "quick": c.quick, "only": c.only, "elapsed_s": c.elapsed_s,
            "dispatch_s": c.dispatch_s, "fitted": fitted,
            "measurements": [{"family": r.family, "label": r.label, "measured_s": r.measured_s,
                              "fitted_s": r.fitted_s, "relative_error": r.relative_error} for r in residuals],
            "median_abs_relative_error": c.median_abs_relative_error()}


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def render(c, out: str) -> str:
    """The fitted numbers, then every measurement beside the fit's prediction, family by family."""
    from costmodels.units import format_seconds
    from costmodels.writer import format_number

    lines = [f"calibrated {c.devices} {c.platform} device{'s' if c.devices != 1 else ''} ({c.device_kind}), "
             f"jax {c.jax_version}, in {format_seconds(c.elapsed_s)}; wrote {out}",
             f"dispatch of one program (taken off every time below; step_overhead_s): {format_seconds(c.dispatch_s)}",
             ""]
    fitted = []
    if c.measures_compute:
        fitted += [(f"peak_flops_by_dtype.{d}", format_number(p, "FLOP/s"))
                   for d, p in c.matmul_fit.peak_flops_by_dtype]
        fitted += [("vector_flops", format_number(c.vector_flops, "FLOP/s")),
                   ("memory_bandwidth_bytes_per_s", format_number(c.memory_bandwidth_bytes_per_s, "B/s")),
                   ("kernel_overhead_s", format_number(c.kernel_overhead_s, "s"))]
        fitted += [("matmul_efficiency" if i == 0 else "", f"{format_number(f, 'FLOP')}: {e:.4g}")
                   for i, (f, e) in enumerate(c.matmul_fit.curve)]
    if c.measures_links:
        fitted += [("link.bandwidth_bytes_per_s", format_number(c.link.bandwidth_bytes_per_s, "B/s")),
                   ("link.latency_s", format_number(c.link.latency_s, "s")),
                   ("link.overhead_s", format_number(c.link.overhead_s, "s"))]
    fitted.append(("device_memory_bytes", f"{c.device_memory_bytes:,} ({c.memory_source})"))
    lines += [table(fitted, header=("fitted", "value")), ""]
    residuals = c.residuals()
    families: dict[str, list] = {}
    for r in residuals:
        families.setdefault(r.family, []).append(r)
    for family, rows in families.items():
        lines.append(table([(r.label, format_seconds(r.measured_s), format_seconds(r.fitted_s), _pct(r.relative_error))
                            for r in rows], header=(family, "measured", "fitted", "rel. error")))
        lines.append("")
    lines.append(f"median |relative error| over {len(residuals)} measurements: {c.median_abs_relative_error():.1%}")
    return "\n".join(lines) + "\n"
