"""``shardplan check``: the communication-cost gate — fail when a plan communicates more than its baseline.

Exit status: 0 when no model got worse (or the baseline was updated), 1 when some model
got worse than the baseline, 2 on a user error (a missing model or baseline, another search).
"""

from __future__ import annotations

import argparse
import os
import warnings
from typing import TYPE_CHECKING

from planner.cli.args import SEARCHES, command_options
from planner.cli.output import json_document, write_text
from planner.text_table import table

# planner.gate imports the whole pipeline (planner.api): the functions that use it import it, so that
# ``shardplan --help`` stays fast.
if TYPE_CHECKING:
    from planner.gate import Baseline, Row

GATE = "communication-cost gate"
STDIN = "-"
"""The MODEL argument that reads a model from standard input; the baseline names that model ``-``."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="the CI gate: fail when a model's plan communicates more than its checked-in baseline",
        description="Plan each model and compare what its plan communicates (bytes per device, time, number "
        "of collectives) with the baseline file. Exits 1 when any model got worse by more than the tolerance, "
        "2 on a user error. --update rewrites the baseline with the measured values instead.",
    )
    p.add_argument("models", nargs="*", metavar="MODEL.yaml",
                   help="model files to check, - for one on standard input (default: every model the baseline "
                   "lists)")
    p.add_argument("--baseline", required=True, metavar="FILE", help="baseline JSON file, e.g. configs/baselines.json")
    p.add_argument("--search", choices=SEARCHES,
                   help="the search to plan with; must be the baseline's (default: the baseline's, or auto for a new "
                   "baseline)")
    p.add_argument("--training", action="store_true",
                   help="measure training plans (backward communication and gradient reductions); must match the baseline")
    p.add_argument("--tolerance", type=float, default=0.0, metavar="FRACTION",
                   help="allowed relative growth before a model counts as worse, e.g. 0.05 for 5%% (default 0)")
    p.add_argument("--update", action="store_true",
                   help="write the measured values to the baseline (the only way it is written) and exit 0")
    p.add_argument("--format", choices=("table", "json"), default="table")
    command_options(p, run)


def run(args: argparse.Namespace) -> int:
    from planner.gate import (
        GateError,
        Row,
        better_models,
        check_compatible,
        check_tolerance,
        compare,
        model_path,
        worse_models,
        write_baseline,
    )

    tolerance = check_tolerance(args.tolerance)
    baseline = _existing_baseline(args.baseline, args.update)
    if args.search is None:
        args.search = baseline.search if baseline is not None else SEARCHES[0]
    models, removed, given = _models(args, baseline)
    if baseline is not None and not args.update:
        check_compatible(baseline, args.search, args.training)
        unknown = [m for m in models if m not in baseline.models]
        if unknown:
            raise GateError(
                f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not in the baseline; run with --update "
                "to add " + ("it" if len(unknown) == 1 else "them"),
                where=args.baseline,
            )
    if baseline is not None and args.update and (baseline.search, baseline.training) != (args.search, args.training):
        left_out = [m for m in baseline.models if m not in models and m not in removed]
        if left_out:
            raise GateError(
                f"the baseline was measured with --search {baseline.search}"
                f"{' --training' if baseline.training else ''}; to switch it to --search {args.search}"
                f"{' --training' if args.training else ''}, update every model it lists (give no model arguments), "
                f"not only some of them ({len(left_out)} would keep the old measurements)",
                where=args.baseline,
            )

    measured = _measure_all(models, args.search, args.training, args.progress, given)
    known = {m: v for m, v in measured.items() if baseline is not None and m in baseline.models}
    added = [m for m in measured if m not in known]
    rows = compare(baseline, known, tolerance) if known else []
    rows += [Row(m, metric, None, v, None, False) for m in added for metric, v in _values(measured[m])]

    changed = False
    if args.update:
        entries = dict(baseline.models) if baseline is not None else {}
        for m in removed:
            entries.pop(m, None)
        entries.update(measured)
        changed = write_baseline(args.baseline, entries, args.search, args.training)

    worse = worse_models(rows)
    better = better_models(rows)
    if args.format == "json":
        text = json_document("check", {
            "baseline": model_path(args.baseline),
            "search": args.search,
            "training": args.training,
            "tolerance": tolerance,
            "status": ("updated" if changed else "unchanged") if args.update else ("failed" if worse else "ok"),
            "models": len(measured),
            "rows": [r.to_dict() for r in rows],
            "collectives": {m: {"old": baseline.models[m]["collectives"] if m not in added else None,
                                "new": measured[m]["collectives"]} for m in measured},
            "worse": worse,
            "better": better,
            "added": added,
            "removed": removed,
        })
    else:
        text = _render(args, baseline, measured, rows, tolerance, worse, better, added, removed, changed)
    write_text(text, None)
    return 1 if worse and not args.update else 0


def _existing_baseline(path: str, update: bool) -> Baseline | None:
    """The baseline, or None when it does not exist yet and --update will create it."""
    from planner.gate import load_baseline

    if update and not os.path.exists(path):
        return None
    return load_baseline(path)


def _models(args: argparse.Namespace, baseline: Baseline | None) -> tuple[list[str], list[str], dict]:
    """``(models to measure, baseline entries to drop, models already read)``; every model file must exist.

    ``-`` is the model on standard input, read once; the baseline knows it as ``-``."""
    from planner.cli.args import model_argument
    from planner.gate import GateError, model_path

    if args.models:
        models = list(dict.fromkeys(m if m == STDIN else model_path(m) for m in args.models))
        for m in models:
            if m != STDIN and not os.path.exists(m):
                raise GateError(f"model file {m} does not exist")
        from graphs import load_model

        given = {}
        for m in models:  # a folder or a broken model file is reported as such, before it is looked up in the baseline
            if m == STDIN:
                given[m] = model_argument(m)
            else:
                load_model(m)
        return models, [], given
    if baseline is None:
        raise GateError(f"no models to measure: give the model files, e.g. shardplan check configs/*.yaml "
                        f"--baseline {args.baseline} --update")
    models = list(baseline.models)
    gone = [m for m in models if not os.path.isfile(m)]
    if gone and not args.update:
        raise GateError(
            f"the baseline lists {', '.join(gone)}, which {'does' if len(gone) == 1 else 'do'} not exist; run with "
            "--update (and no model arguments) to drop " + ("it" if len(gone) == 1 else "them"),
            where=args.baseline,
        )
    return [m for m in models if m not in gone], gone, {}


def _measure_all(models: list[str], search: str, training: bool, progress, given: dict) -> dict[str, dict]:
    """What each model's plan communicates; ``given`` holds the models already read (standard input)."""
    from planner.errors import ShardplanWarning
    from planner.gate import measure
    from planner.progress import counted

    measured = {}
    for m in counted(progress, "planning models", models):
        progress.stage(f"planning {m}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ShardplanWarning)
            measured[m] = measure(given.get(m, m), search=search, training=training)
        for w in caught:  # said again with the model's name; the command's reporter prints them
            if issubclass(w.category, ShardplanWarning):
                warnings.warn(f"{m}: {w.message}", w.category)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return measured


def _values(metrics: dict) -> list[tuple[str, float]]:
    return [("comm_bytes_per_device", metrics["comm_bytes_per_device"]), ("comm_time_s", metrics["comm_time_s"]),
            ("collectives", sum(metrics["collectives"].values()))]


def _quantity(metric: str, value, other=None) -> str:
    """``value`` of ``metric`` in the reports' unit style; to the byte when ``other`` differs but rounds alike."""
    if value is None:
        return "-"
    from costmodels.units import format_bytes, format_seconds

    if metric == "comm_bytes_per_device":
        close = other is not None and other != value and format_bytes(other) == format_bytes(value)
        return format_bytes(value, exact=close)
    if metric == "comm_time_s":
        return format_seconds(value)
    return str(value)


def _change(r: Row) -> str:
    if r.old is None:
        return "added"
    if r.change is None:
        return "new"  # from zero
    if r.change == 0:
        return "0%"
    return f"{r.change * 100:+.1f}%" if abs(r.change) >= 0.001 else f"{r.change * 100:+.2g}%"


def _verdict(r: Row) -> str:
    if r.worse:
        return "WORSE"
    if r.better:
        return "better"
    if r.change:
        return "within tolerance"
    return ""


def _render(args, baseline, measured, rows, tolerance, worse, better, added, removed, changed) -> str:
    from planner.gate import collective_changes, model_path

    mode = f"search {args.search}" + (", training" if args.training else "")
    out = [f"{GATE}: {len(measured)} model{'s' if len(measured) != 1 else ''}, {mode}, "
           f"baseline {model_path(args.baseline)}, tolerance {tolerance * 100:g}%", ""]
    body = [(r.model, r.metric, _quantity(r.metric, r.old, r.new), _quantity(r.metric, r.new, r.old), _change(r), _verdict(r))
            for r in rows]
    if body:
        out.append(table(body, header=("model", "metric", "old", "new", "change", "")))
    kinds = []
    for m in measured:
        if baseline is not None and m in baseline.models:
            diff = collective_changes(baseline.models[m], measured[m])
            if diff:
                kinds.append(f"  {m}: " + ", ".join(f"{k} {a} -> {b}" for k, a, b in diff))
    if kinds:
        out += ["", "collectives by kind that changed:", *kinds]
    out.append("")
    n = len(measured)
    if args.update:
        for m in removed:
            out.append(f"removed {m} from the baseline: the file no longer exists")
        changed_models = list(dict.fromkeys(r.model for r in rows if r.old is not None and r.change))
        parts = [f"{len(changed_models)} changed", f"{len(added)} added"] + ([f"{len(removed)} removed"] if removed else [])
        if changed:
            line = f"baseline {model_path(args.baseline)} updated ({', '.join(parts)})"
            if worse:
                line += f"; {', '.join(worse)} got worse: say why in the commit message"
            out.append(line)
        else:
            out.append(f"baseline {model_path(args.baseline)} unchanged ({n} model{'s' if n != 1 else ''})")
        return "\n".join(out) + "\n"
    if better:
        out.append(f"{len(better)} model{'s' if len(better) != 1 else ''} improved: run with --update to lower the "
                   "baseline so that a later regression is caught")
    if worse:
        out.append("if the increase is intended, run the same command with --update and say why in the commit message")
        out.append(f"{GATE}: FAILED: {len(worse)} of {n} models got worse than the baseline: {', '.join(worse)}")
    else:
        out.append(f"{GATE}: OK ({n} model{'s' if n != 1 else ''})")
    return "\n".join(out) + "\n"
