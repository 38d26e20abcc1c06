"""Predicted against measured step time: does the cost model order plans as the machine does?

Plans each (model, search, mode) of the grid below on one cluster description (``--cluster``: a preset, or
the file ``shardplan calibrate`` wrote on this machine), runs each plan on XLA with ``shardplan run``'s engine
(:func:`planner.engines.jax_run.run_on_jax`: checked against the numpy reference, then the compiled step
timed, the median of ``--repeat`` runs after a warm-up), and prints one row per plan: predicted step time
(:func:`planner.engines.jax_run.predicted_step_time_s`, the plan's report), measured step time, their ratio;
then Spearman's rank correlation of predicted against measured over the plans that ran, and the median
relative error ``|predicted - measured| / measured``.

The grid: every ``configs/*.yaml`` with ``bfs``, ``ilp`` and ``propagate``, forward and ``--training``, and
the ``gpt`` builder at a few small sizes on four meshes of the 8 devices (``gpt2_small.yaml`` only when
``--configs`` names it: its steps take minutes here). Every plan is costed on the one
``--cluster`` (a model's own ``cluster:`` is overridden), so predictions are comparable. A plan ``run``
refuses (a layout XLA cannot shard evenly, a run this machine's memory cannot hold) is skipped, with the
reason printed. All runs share one process and one JAX on 8 devices (host devices on a CPU-only machine).

    python benchmarks/cost_model.py [--cluster default|FILE] [--quick] [--repeat R] [--configs ffn moe]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.engines.jax_env import with_device_count  # noqa: E402 (after the checkout is on the path)

DEVICES = 8
SEARCHES = ("bfs", "ilp", "propagate")
MODES = ("forward", "training")

GPT = """
name: {name}
mesh: {mesh}
model: {{builder: gpt, layers: {layers}, hidden: {hidden}, heads: {heads}, seq: {seq}, batch: {batch}, vocab: {vocab}}}
"""

#: gpt builder sizes (name, mesh, layers, hidden, heads, seq, batch, vocab): each plans, compiles and runs in
#: seconds on 8 host devices, on meshes of one and two axes.
GPT_SIZES = (
    ("gpt-l1-h64", "{dp: 2, tp: 4}", 1, 64, 4, 32, 8, 512),
    ("gpt-l2-h128", "{dp: 2, tp: 4}", 2, 128, 4, 64, 8, 1024),
    ("gpt-l2-h128-dp8", "{dp: 8}", 2, 128, 4, 64, 8, 1024),
    ("gpt-l1-h256-tp8", "{tp: 8}", 1, 256, 8, 64, 8, 2048),
    ("gpt-l2-h128-dp4tp2", "{dp: 4, tp: 2}", 2, 128, 4, 64, 8, 1024),
)

#: Configs left out unless ``--configs`` names them: a training step of GPT-2 small's 50,257-word vocabulary takes
#: minutes to compile, run and check against the float64 reference on host devices.
SLOW_CONFIGS = ("gpt2_small.yaml",)

#: ``--quick``: five plans of different shapes, forward and training, one of each search.
QUICK = (("ffn.yaml", "bfs", "forward"), ("megatron_mlp.yaml", "ilp", "training"),
         ("transformer_block.yaml", "propagate", "forward"), ("gpt-l1-h64", "bfs", "training"),
         ("conv_net.yaml", "ilp", "forward"))


def models(configs: list[str] | None) -> dict[str, object]:
    """name -> what :func:`planner.api.plan` takes: every config's path (or those named), then the gpt sizes."""
    paths = sorted((ROOT / "configs").glob("*.yaml"))
    if configs:
        wanted = {c.removesuffix(".yaml") for c in configs}
        paths = [p for p in paths if p.stem in wanted]
    else:
        paths = [p for p in paths if p.name not in SLOW_CONFIGS]
    out: dict[str, object] = {p.name: p for p in paths}
    for name, mesh, layers, hidden, heads, seq, batch, vocab in GPT_SIZES:
        if not configs or name in configs:
            out[name] = GPT.format(name=name, mesh=mesh, layers=layers, hidden=hidden, heads=heads, seq=seq,
                                   batch=batch, vocab=vocab)
    return out


def grid(quick: bool, configs: list[str] | None) -> list[tuple[str, object, str, str]]:
    """(name, model, search, mode) of every plan to run, in table order."""
    found = models(None if quick else configs)
    if quick:
        return [(name, found[name], search, mode) for name, search, mode in QUICK]
    return [(name, model, search, mode) for name, model in found.items() for search in SEARCHES for mode in MODES]


def measure(model, search: str, mode: str, cluster: str, repeat: int) -> dict:
    """Plan and run one combination: predicted and measured step time, why it was skipped (a plan ``run``
    refuses), or the error of a run that failed (a bug: reported, counted against the exit status, and the
    grid goes on)."""
    from planner.api import plan
    from planner.engines.jax_run import run_on_jax
    from planner.errors import ShardplanError

    start = time.perf_counter()
    try:
        p = plan(model, search=search, cluster=cluster, training=mode == "training")
        r = run_on_jax(p, repeat=repeat)
    except ShardplanError as err:
        return {"skipped": str(err)}
    except Exception as err:  # noqa: BLE001 (one plan's failure must not hide the other plans' numbers)
        return {"failed": f"{type(err).__name__}: {err}"[:300], "ok": False}
    return {"ok": r.ok, "predicted": r.predicted_step_time_s, "measured": r.measured_step_time_s,
            "ratio": r.prediction_ratio, "spread": (max(r.step_times_s) - min(r.step_times_s)) / r.measured_step_time_s,
            "wall": time.perf_counter() - start}


def summary(rows: list[tuple[str, str, str, dict]]) -> list[str]:
    """Spearman's rank correlation and the median relative error over the rows that ran and matched."""
    from scipy.stats import spearmanr

    ran = [d for *_, d in rows if d.get("ok")]
    pairs = ordered = 0  # plans of one model and mode (the searches' choices), two by two: the choice that matters
    groups: dict[tuple[str, str], list[dict]] = {}
    for name, _, mode, d in rows:
        if d.get("ok"):
            groups.setdefault((name, mode), []).append(d)
    for plans in groups.values():
        for i, a in enumerate(plans):
            for b in plans[i + 1:]:
                if a["predicted"] != b["predicted"] and a["measured"] != b["measured"]:
                    pairs += 1
                    ordered += (a["predicted"] < b["predicted"]) == (a["measured"] < b["measured"])
    if len(ran) < 2:
        return [f"{len(ran)} plan(s) ran: too few to correlate"]
    predicted, measured = [d["predicted"] for d in ran], [d["measured"] for d in ran]
    rho = spearmanr(predicted, measured).statistic
    errors = [abs(p - m) / m for p, m in zip(predicted, measured)]
    return [f"plans run: {len(ran)} of {len(rows)}",
            f"Spearman rank correlation (predicted vs measured): {rho:.3f}",
            f"median relative error |predicted - measured| / measured: {statistics.median(errors):.1%}",
            f"pairs of differently predicted plans of one model and mode that the prediction orders as measured: "
            f"{ordered} of {pairs}",
            f"median spread of the repeats (max - min) / median: {statistics.median(d['spread'] for d in ran):.1%}"]


def table(rows: list[tuple[str, str, str, dict]]) -> str:
    from costmodels.units import format_seconds

    lines = [("config", "search", "mode", "predicted", "measured", "measured/predicted", "spread", "wall")]
    for name, search, mode, d in rows:
        if "skipped" in d or "failed" in d:
            lines.append((name, search, mode, "skipped" if "skipped" in d else "FAILED", "", "", "", ""))
            continue
        ratio = "-" if d["ratio"] is None else f"{d['ratio']:.3g}"
        lines.append((name, search, mode, format_seconds(d["predicted"]), format_seconds(d["measured"]),
                      ratio + ("" if d["ok"] else " (MISMATCH)"), f"{d['spread']:.0%}", f"{d['wall']:.1f} s"))
    widths = [max(len(r[i]) for r in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", default="default", metavar="PRESET|FILE",
                    help="cluster every plan is costed on: a preset or the file shardplan calibrate wrote "
                    "(default: default)")
    ap.add_argument("--quick", action="store_true", help=f"{len(QUICK)} plans only (a smoke run)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs of each step (default 5)")
    ap.add_argument("--configs", nargs="*", help="model names (configs/*.yaml stems, gpt sizes); default all")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: each step is timed at least once")
    from costmodels.loader import load_cluster
    from planner.errors import ShardplanError, ShardplanWarning

    # the configs' annotations some searches ignore (shard_like, barriers) are warned about by plan(): not news here
    warnings.filterwarnings("ignore", category=ShardplanWarning)

    try:
        load_cluster(args.cluster)  # a bad cluster file is one message, not one per plan
    except ShardplanError as err:
        ap.error(f"--cluster {args.cluster}: {err}")
    # every plan runs in this process: JAX starts once, with as many host devices as the largest mesh
    os.environ["XLA_FLAGS"] = with_device_count(os.environ.get("XLA_FLAGS", ""), DEVICES)
    rows, skipped = [], []
    if not args.quick and not args.configs:
        skipped += [f"{c}: left out (minutes per plan here); name it in --configs to include it" for c in SLOW_CONFIGS]
    for name, model, search, mode in grid(args.quick, args.configs):
        d = measure(model, search, mode, args.cluster, args.repeat)
        if "skipped" in d or "failed" in d:
            line = f"skipped ({d['skipped']})" if "skipped" in d else f"FAILED ({d['failed']})"
            skipped.append(f"{name} {search} {mode}: {line}")
        else:
            line = f"predicted {d['predicted']:.4g} s, measured {d['measured']:.4g} s, {d['wall']:.1f} s"
        print(f"{name} {search} {mode}: {line}", file=sys.stderr, flush=True)
        rows.append((name, search, mode, d))
    print(f"cluster: {args.cluster}; every step timed {args.repeat} times after a warm-up run\n")
    print(table(rows))
    print()
    print("\n".join(summary(rows)))
    if skipped:
        print("\nskipped or failed:\n" + "\n".join(skipped))
    return 0 if all(d.get("ok", True) for *_, d in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
